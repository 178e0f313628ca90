/* reduce.cu: the reduction and softmax kernels: a block per result or row
   (the grid strides over them), its threads striding over the slice, their
   partial results combined in shared memory; a reduction of few long slices
   (a full sum) in two passes, several blocks per slice, then a block per
   result combining their partial results (kernels/reduce.h's reduce_chunks). */
#include "launch.h"

using namespace ember_cuda;

namespace {

/* the block's THREADS values in part combined by op (every thread returns it) */
template <class Acc> __device__ Acc block_combine(Acc *part, int op)
{
    return block_fold(part, [op](Acc a, Acc b) { return reduce_combine(op, a, b); });
}

template <class Acc, class Index> __global__ void cuda_reduce(ecu_reduce r, int op)
{
    __shared__ Acc part[THREADS];
    for (int64_t o = blockIdx.x; o < r.outer.numel; o += gridDim.x) {
        part[threadIdx.x] = reduce_slice<Acc>(r, op, (Index)o, (Index)threadIdx.x, (Index)THREADS);
        Acc v = block_combine(part, op);
        if (threadIdx.x == 0) reduce_store(r, op, (Index)o, v);
    }
}

/* pass 1: block b reduces chunk b % chunks of result b / chunks into partial[b] */
template <class Acc, class Index> __global__ void cuda_reduce_chunks(ecu_reduce r, int op, int64_t chunks, Acc *partial)
{
    __shared__ Acc part[THREADS];
    Index step = (Index)(chunks * THREADS);
    for (int64_t b = blockIdx.x; b < r.outer.numel * chunks; b += gridDim.x) {
        Index o = (Index)(b / chunks), begin = (Index)((b % chunks) * THREADS + threadIdx.x);
        part[threadIdx.x] = reduce_slice<Acc>(r, op, o, begin, step);
        Acc v = block_combine(part, op);
        if (threadIdx.x == 0) partial[b] = v;
    }
}

/* pass 2: a block per result combines its chunks' partial results */
template <class Acc, class Index> __global__ void cuda_reduce_partials(ecu_reduce r, int op, int64_t chunks, const Acc *partial)
{
    __shared__ Acc part[THREADS];
    for (int64_t o = blockIdx.x; o < r.outer.numel; o += gridDim.x) {
        part[threadIdx.x] = combine_partials(op, partial, o, chunks, (int64_t)threadIdx.x, (int64_t)THREADS);
        Acc v = block_combine(part, op);
        if (threadIdx.x == 0) reduce_store(r, op, (Index)o, v);
    }
}

template <class Index> __global__ void cuda_softmax(ecu_reduce r, int op)
{
    __shared__ double part[THREADS];
    Index t = (Index)threadIdx.x, step = (Index)THREADS;
    for (int64_t o = blockIdx.x; o < r.outer.numel; o += gridDim.x) {
        Index row = (Index)o;
        part[threadIdx.x] = reduce_slice<double>(r, EMBER_OP_AMAX_ALL, row, t, step);
        double m = softmax_max(block_combine(part, EMBER_OP_AMAX_ALL));
        part[threadIdx.x] = softmax_sum(r, row, t, step, m);
        double s = block_combine(part, EMBER_OP_SUM);
        softmax_write(r, op, row, t, step, m, s);
    }
}

template <class Acc> cudaError_t reduce_as(const ecu_reduce *r, int op)
{
    int64_t n = r->outer.numel, chunks = reduce_chunks(n, r->len, THREADS);
    if (chunks == 1) {
        return by_index_width(*r, n, [&](auto index) {
            cuda_reduce<Acc, decltype(index)><<<blocks(n), THREADS>>>(*r, op);
        });
    }
    size_t bytes = (size_t)(n * chunks) * sizeof(Acc);
    auto *partial = (Acc *)ecu_alloc(bytes);
    if (!partial) return cudaErrorMemoryAllocation;
    cudaError_t err = by_index_width(*r, n, [&](auto index) {
        cuda_reduce_chunks<Acc, decltype(index)><<<blocks(n * chunks), THREADS>>>(*r, op, chunks, partial);
        cuda_reduce_partials<Acc, decltype(index)><<<blocks(n), THREADS>>>(*r, op, chunks, partial);
    });
    ecu_free(partial, bytes);   /* work queued later on the stream reuses it after these kernels */
    return err;
}

}   // namespace

extern "C" cudaError_t ecu_launch_reduce(const ecu_reduce *r, int op, int compute)
{
    return compute == ECU_INT64 ? reduce_as<int64_t>(r, op) : reduce_as<double>(r, op);
}

extern "C" cudaError_t ecu_launch_softmax(const ecu_reduce *r, int op)
{
    return by_index_width(*r, r->outer.numel, [&](auto index) {
        cuda_softmax<decltype(index)><<<blocks(r->outer.numel), THREADS>>>(*r, op);
    });
}

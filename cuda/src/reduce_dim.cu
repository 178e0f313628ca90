/* reduce_dim.cu: the kernels of var, logsumexp and norm, and of max/min
   along a dim, argmax and argmin (kernels/reduce_dim.h): a block per result
   (the grid strides over them), its threads striding over the slice, their
   partial results combined in shared memory, once per pass; few long slices
   take the two-pass form per pass (chunks, then their partials). */
#include "kernels/reduce_dim.h"
#include "launch.h"

using namespace ember_cuda;

namespace {

template <class Index> __global__ void cuda_stat(ecu_reduce r, ecu_stat s)
{
    __shared__ double part[THREADS];
    Index t = (Index)threadIdx.x, step = (Index)THREADS;
    for (int64_t o = blockIdx.x; o < r.outer.numel; o += gridDim.x) {
        double pass[2] = {0, 0}, c = 0;
        for (int k = 0; k < stat_passes(s); k++) {
            part[threadIdx.x] = stat_slice(r, s, k, c, (Index)o, t, step);
            pass[k] = block_fold(part, [&](double a, double b) { return stat_combine(s, k, a, b); });
            c = stat_center(s, pass[0], r.len);
        }
        if (threadIdx.x == 0) reduce_store(r, s.op, (Index)o, stat_finish(s, pass[0], pass[1], r.len));
    }
}

/* the two-pass form, one pass: each block reduces a chunk into partial[b] */
template <class Index>
__global__ void cuda_stat_chunks(ecu_reduce r, ecu_stat s, int pass, const double *first, int64_t chunks, double *partial)
{
    __shared__ double part[THREADS];
    for (int64_t b = blockIdx.x; b < r.outer.numel * chunks; b += gridDim.x) {
        part[threadIdx.x] = stat_chunk(r, s, pass, first, chunks, b, (Index)threadIdx.x, (Index)THREADS);
        double v = block_fold(part, [&](double x, double y) { return stat_combine(s, pass, x, y); });
        if (threadIdx.x == 0) partial[b] = v;
    }
}

/* then a block per result combines its chunks */
template <class Index>
__global__ void cuda_stat_partials(ecu_reduce r, ecu_stat s, int pass, int64_t chunks, const double *partial, double *first)
{
    __shared__ double part[THREADS];
    for (int64_t o = blockIdx.x; o < r.outer.numel; o += gridDim.x) {
        part[threadIdx.x] = stat_partials(s, pass, partial, o, chunks, (int64_t)threadIdx.x, (int64_t)THREADS);
        double v = block_fold(part, [&](double x, double y) { return stat_combine(s, pass, x, y); });
        if (threadIdx.x == 0) stat_pass_done(r, s, pass, first, (Index)o, v);
    }
}

template <class Acc, class Index> __global__ void cuda_arg_reduce(ecu_reduce r, int sign, char *values, int esize)
{
    __shared__ ecu_arg<Acc> part[THREADS];
    for (int64_t o = blockIdx.x; o < r.outer.numel; o += gridDim.x) {
        part[threadIdx.x] = arg_slice<Acc>(r, sign, (Index)o, (Index)threadIdx.x, (Index)THREADS);
        ecu_arg<Acc> best = block_fold(part, [sign](ecu_arg<Acc> a, ecu_arg<Acc> b) { return arg_combine(sign, a, b); });
        if (threadIdx.x == 0) arg_store(r, (Index)o, best.i, values, esize);
    }
}

template <class Acc> cudaError_t arg_reduce_as(const ecu_reduce *r, int sign, char *values, int esize)
{
    return by_index_width(*r, r->outer.numel, [&](auto index) {
        cuda_arg_reduce<Acc, decltype(index)><<<blocks(r->outer.numel), THREADS>>>(*r, sign, values, esize);
    });
}

}   // namespace

extern "C" cudaError_t ecu_launch_stat(const ecu_reduce *r, const ecu_stat *s)
{
    int64_t n = r->outer.numel, chunks = reduce_chunks(n, r->len, THREADS);
    if (chunks == 1) {
        return by_index_width(*r, n, [&](auto index) {
            cuda_stat<decltype(index)><<<blocks(n), THREADS>>>(*r, *s);
        });
    }
    size_t bytes = (size_t)(n * (chunks + 1)) * sizeof(double);   /* the partials, then first[] */
    auto *partial = (double *)ecu_alloc(bytes);
    if (!partial) return cudaErrorMemoryAllocation;
    double *first = partial + n * chunks;
    cudaError_t err = by_index_width(*r, n, [&](auto index) {
        for (int pass = 0; pass < stat_passes(*s); pass++) {
            cuda_stat_chunks<decltype(index)><<<blocks(n * chunks), THREADS>>>(*r, *s, pass, first, chunks, partial);
            cuda_stat_partials<decltype(index)><<<blocks(n), THREADS>>>(*r, *s, pass, chunks, partial, first);
        }
    });
    ecu_free(partial, bytes);   /* work queued later on the stream reuses it after these kernels */
    return err;
}

extern "C" cudaError_t ecu_launch_arg_reduce(const ecu_reduce *r, int sign, int compute, char *values, int esize)
{
    return compute == ECU_INT64 ? arg_reduce_as<int64_t>(r, sign, values, esize)
                                : arg_reduce_as<double>(r, sign, values, esize);
}

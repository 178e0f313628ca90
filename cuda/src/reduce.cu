/* reduce.cu: the reduction and softmax kernels: a block per result or row
   (the grid strides over them), its threads striding over the slice, their
   partial results combined in shared memory. */
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
    return by_index_width(*r, r->outer.numel, [&](auto index) {
        cuda_reduce<Acc, decltype(index)><<<blocks(r->outer.numel), THREADS>>>(*r, op);
    });
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

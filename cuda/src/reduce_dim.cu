/* reduce_dim.cu: the kernels of var, logsumexp and norm, and of max/min
   along a dim, argmax and argmin (kernels/reduce_dim.h): a block per result
   (the grid strides over them), its threads striding over the slice, their
   partial results combined in shared memory, once per pass. */
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
    return by_index_width(*r, r->outer.numel, [&](auto index) {
        cuda_stat<decltype(index)><<<blocks(r->outer.numel), THREADS>>>(*r, *s);
    });
}

extern "C" cudaError_t ecu_launch_arg_reduce(const ecu_reduce *r, int sign, int compute, char *values, int esize)
{
    return compute == ECU_INT64 ? arg_reduce_as<int64_t>(r, sign, values, esize)
                                : arg_reduce_as<double>(r, sign, values, esize);
}

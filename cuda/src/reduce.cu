/* reduce.cu: the reduction kernel: a block per result (the grid strides
   over results), its threads striding over the result's slice, their partial
   results combined in shared memory. */
#include "cuda_backend.h"
#include "kernels/reduce.h"

using namespace ember_cuda;

namespace {

constexpr int THREADS = 256;
constexpr int64_t MAX_BLOCKS = 65536;

template <class Acc, class Index> __global__ void cuda_reduce(ecu_reduce r, int op)
{
    __shared__ Acc part[THREADS];
    for (int64_t o = blockIdx.x; o < r.outer.numel; o += gridDim.x) {
        part[threadIdx.x] = reduce_slice<Acc>(r, op, (Index)o, (Index)threadIdx.x, (Index)THREADS);
        __syncthreads();
        for (int half = THREADS / 2; half > 0; half /= 2) {
            if ((int)threadIdx.x < half) part[threadIdx.x] = reduce_combine(op, part[threadIdx.x], part[threadIdx.x + half]);
            __syncthreads();
        }
        if (threadIdx.x == 0) reduce_store(r, op, (Index)o, part[0]);
        __syncthreads();
    }
}

template <class Acc> cudaError_t launch(const ecu_reduce *r, int op)
{
    dim3 grid((unsigned)(r->outer.numel < MAX_BLOCKS ? r->outer.numel : MAX_BLOCKS));
    if (r->outer.index32 && r->inner.index32) cuda_reduce<Acc, int32_t><<<grid, THREADS>>>(*r, op);
    else cuda_reduce<Acc, int64_t><<<grid, THREADS>>>(*r, op);
    return cudaGetLastError();
}

}   // namespace

extern "C" cudaError_t ecu_launch_reduce(const ecu_reduce *r, int op, int compute)
{
    return compute == ECU_INT64 ? launch<int64_t>(r, op) : launch<double>(r, op);
}

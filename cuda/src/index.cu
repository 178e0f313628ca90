/* index.cu: the index kernels (kernels/index.h): a thread per element of the
   walk, the grid striding past its cap; and the index check, which leaves the
   position of the first index out of range in *first (atomicMin), so the
   host can name it as the CPU does. */
#include "kernels/index.h"
#include "launch.h"

using namespace ember_cuda;

namespace {

template <class Index> __global__ void cuda_gather(ecu_index x)
{
    GRID_STRIDE(i, x.it.numel) gather_at(x, (Index)i);
}

template <class Index> __global__ void cuda_scatter_add(ecu_index x)
{
    GRID_STRIDE(i, x.it.numel) scatter_add_at(x, (Index)i);
}

template <class Index> __global__ void cuda_check_index(ecu_iter idx, int64_t size, unsigned long long *first)
{
    GRID_STRIDE(i, idx.numel)
    if (index_out_of_range(idx, (Index)i, size)) atomicMin(first, (unsigned long long)i);
}

}   // namespace

extern "C" cudaError_t ecu_launch_gather(const ecu_index *x)
{
    return by_index_width(x->it, x->it.numel, [&](auto index) {
        cuda_gather<decltype(index)><<<grid_for(x->it.numel), THREADS>>>(*x);
    });
}

extern "C" cudaError_t ecu_launch_scatter_add(const ecu_index *x)
{
    return by_index_width(x->it, x->it.numel, [&](auto index) {
        cuda_scatter_add<decltype(index)><<<grid_for(x->it.numel), THREADS>>>(*x);
    });
}

extern "C" cudaError_t ecu_launch_check_index(const ecu_iter *idx, int64_t size, unsigned long long *first)
{
    return by_index_width(*idx, idx->numel, [&](auto index) {
        cuda_check_index<decltype(index)><<<grid_for(idx->numel), THREADS>>>(*idx, size, first);
    });
}

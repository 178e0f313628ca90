/* index.cu: the index kernels (kernels/index.h): a thread per element of the
   walk, the grid striding past its cap; and the range check of an index (or
   an integer exponent), which leaves the position of the first element out
   of range in *first (atomicMin), so the host can name it as the CPU does. */
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

template <class Index> __global__ void cuda_find_outside(ecu_iter t, int64_t max, unsigned long long *first)
{
    GRID_STRIDE(i, t.numel)
    if (outside(t, (Index)i, max)) atomicMin(first, (unsigned long long)i);
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

extern "C" cudaError_t ecu_launch_find_outside(const ecu_iter *t, int64_t max, unsigned long long *first)
{
    return by_index_width(*t, t->numel, [&](auto index) {
        cuda_find_outside<decltype(index)><<<grid_for(t->numel), THREADS>>>(*t, max, first);
    });
}

/* launch.h: what the kernel files share about launching: the block size,
   the grid (capped: beyond it the kernels' loops stride), and the choice of
   the 32- or 64-bit index path. For the .cu files only. */
#ifndef EMBER_CUDA_LAUNCH_H
#define EMBER_CUDA_LAUNCH_H

#include "cuda_backend.h"
#include "kernels/reduce.h"

namespace ember_cuda {

constexpr int THREADS = 256;
constexpr int64_t MAX_BLOCKS = 65536;

/* i over [0, n) in a grid of any size (for a launch of grid_for(n) blocks) */
#define GRID_STRIDE(i, n) \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (int64_t)gridDim.x * blockDim.x)

/* n blocks, or the cap */
inline dim3 blocks(int64_t n) { return dim3((unsigned)(n < MAX_BLOCKS ? n : MAX_BLOCKS)); }
/* a thread per element */
inline dim3 grid_for(int64_t n) { return blocks((n + THREADS - 1) / THREADS); }

inline bool index32(const ecu_iter &it) { return it.index32; }
inline bool index32(const ecu_reduce &r) { return r.outer.index32 && r.inner.index32; }

/* Calls launch with an int32_t or an int64_t (the index type) as the
   description d allows, unless there are no elements; the launch's error. */
template <class D, class Launch> cudaError_t by_index_width(const D &d, int64_t n, Launch launch)
{
    if (n == 0) return cudaSuccess;
    if (index32(d)) launch(int32_t());
    else launch(int64_t());
    return cudaGetLastError();
}

}   // namespace ember_cuda

#endif

/* matmul_int.cu: integer matrix products (kernels/matmul_int.h), a thread per
   element of one batch matrix, the grid striding past its cap. cuBLAS has no
   wrapping int64 product, and the CPU's is what the device must match. */
#include "kernels/matmul_int.h"
#include "launch.h"

using namespace ember_cuda;

namespace {

__global__ void cuda_int_gemm(ecu_int_gemm g)
{
    GRID_STRIDE(e, g.M * g.N) int_gemm_at(g, e);
}

}   // namespace

extern "C" cudaError_t ecu_launch_int_gemm(const ecu_int_gemm *g)
{
    int64_t n = g->M * g->N;
    if (n == 0) return cudaSuccess;
    cuda_int_gemm<<<grid_for(n), THREADS>>>(*g);
    return cudaGetLastError();
}

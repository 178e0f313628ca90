/* pool.cu: the pooling kernels, a thread per output (or, for average
   pooling's adjoint, per input) element over a grid-stride loop; the
   arithmetic is kernels/pool.h's. max_pool2d_backward scatters with atomic
   adds, since its indices may send several gradients to one input element
   (overlapping windows): their order, so the last bits of such a sum, may
   differ from the CPU's. */
#include "kernels/pool.h"
#include "launch.h"

using namespace ember_cuda;

namespace {

__device__ int64_t first_index() { return (int64_t)blockIdx.x * blockDim.x + threadIdx.x; }
__device__ int64_t grid_step() { return (int64_t)blockDim.x * gridDim.x; }

template <class T> __global__ void cuda_max_pool(pool_args a, const char *x, char *y, int64_t *idx, int64_t n)
{
    for (int64_t o = first_index(); o < n; o += grid_step()) max_pool_at<T>(a, x, y, idx, o);
}

template <class T> __global__ void cuda_avg_pool(pool_args a, const char *x, char *y, int64_t n)
{
    for (int64_t o = first_index(); o < n; o += grid_step()) avg_pool_at<T>(a, x, y, o);
}

template <class T> __global__ void cuda_avg_pool_backward(pool_args a, const char *g, char *gx, int64_t n)
{
    for (int64_t i = first_index(); i < n; i += grid_step()) avg_pool_backward_at<T>(a, g, gx, i);
}

template <class T>
__global__ void cuda_max_pool_backward(pool_args a, const char *g, const int64_t *idx, T *gx, unsigned long long *bad,
                                       int64_t n)
{
    for (int64_t k = first_index(); k < n; k += grid_step()) {
        int64_t at;
        if (max_pool_backward_target(a.p, idx, k, &at)) atomicAdd(gx + at, load<T>(g + k * a.es, a.dt));
        else atomicMin(bad, (unsigned long long)k);
    }
}

template <class T> cudaError_t launch_pool(int op, const pool_args &a, const char *src, char *dst, int64_t *idx)
{
    const ember__pool_geom &p = a.p;
    int64_t n = p.N * p.C * (op == EMBER_OP_AVG_POOL2D_BACKWARD ? p.H * p.W : p.Ho * p.Wo);
    switch (op) {   /* max_pool2d_backward: ecu_launch_max_pool_backward */
    case EMBER_OP_MAX_POOL2D: if (n) cuda_max_pool<T><<<grid_for(n), THREADS>>>(a, src, dst, idx, n); break;
    case EMBER_OP_AVG_POOL2D: if (n) cuda_avg_pool<T><<<grid_for(n), THREADS>>>(a, src, dst, n); break;
    case EMBER_OP_AVG_POOL2D_BACKWARD:
        if (n) cuda_avg_pool_backward<T><<<grid_for(n), THREADS>>>(a, src, dst, n);
        break;
    default: return cudaErrorNotSupported;
    }
    return cudaGetLastError();
}

}   // namespace

extern "C" cudaError_t ecu_launch_pool(int op, const pool_args *a, const char *src, char *dst, int64_t *idx)
{
    if (a->dt == EMBER_FLOAT64) return launch_pool<double>(op, *a, src, dst, idx);
    return launch_pool<float>(op, *a, src, dst, idx);
}

extern "C" cudaError_t ecu_launch_max_pool_backward(const pool_args *a, const char *g, const int64_t *idx, void *gx,
                                                    unsigned long long *bad)
{
    const ember__pool_geom &p = a->p;
    int64_t n = p.N * p.C * p.Ho * p.Wo;
    if (n == 0) return cudaSuccess;
    if (a->dt == EMBER_FLOAT64)
        cuda_max_pool_backward<double><<<grid_for(n), THREADS>>>(*a, g, idx, (double *)gx, bad, n);
    else cuda_max_pool_backward<float><<<grid_for(n), THREADS>>>(*a, g, idx, (float *)gx, bad, n);
    return cudaGetLastError();
}

/* optim.cu: the fused SGD and Adam/AdamW steps on the device, one thread per
   element over kernels/optim.h (core/src/ops/optim.c's arithmetic; the core
   checked the operands: contiguous, one dtype, shape and device). Compiled
   without fma contraction, so each step rounds as the CPU's does. */
#include "launch.h"
#include "kernels/optim.h"

using namespace ember_cuda;

namespace {

template <class T> __global__ void cuda_sgd(ember__sgd_args a, T *p, T *buf, const T *g, int64_t n)
{
    GRID_STRIDE(i, n) sgd_at(a, p, buf, g, i);
}

template <class T>
__global__ void cuda_adam(ember__adam_args a, T *p, const T *g, T *m, T *v, T *vmax, int64_t n)
{
    GRID_STRIDE(i, n) adam_at(a, p, g, m, v, vmax, i);
}

/* t's first element (NULL for an absent state tensor) */
template <class T> T *elems(const ember_tensor *t)
{
    return t ? (T *)t->storage->data + t->offset : nullptr;
}

template <class T> int sgd_as(ember_tensor *p, const ember_tensor *g, ember_tensor *buf, const ember__sgd_args &a)
{
    cuda_sgd<T><<<grid_for(p->numel), THREADS>>>(a, elems<T>(p), elems<T>(buf), elems<T>(g), p->numel);
    return ecu_check(cudaGetLastError(), "sgd_step_");
}

template <class T>
int adam_as(ember_tensor *p, const ember_tensor *g, ember_tensor *m, ember_tensor *v, ember_tensor *vmax,
            const ember__adam_args &a)
{
    cuda_adam<T><<<grid_for(p->numel), THREADS>>>(a, elems<T>(p), elems<T>(g), elems<T>(m), elems<T>(v),
                                                  elems<T>(vmax), p->numel);
    return ecu_check(cudaGetLastError(), "adam_step_");
}

}   // namespace

int ecu_sgd_step(ember_tensor *p, const ember_tensor *g, ember_tensor *buf, const ember__sgd_args *a)
{
    if (p->numel == 0) return EMBER_OK;
    return p->dtype == EMBER_FLOAT64 ? sgd_as<double>(p, g, buf, *a) : sgd_as<float>(p, g, buf, *a);
}

int ecu_adam_step(ember_tensor *p, const ember_tensor *g, ember_tensor *m, ember_tensor *v, ember_tensor *vmax,
                  const ember__adam_args *a)
{
    if (p->numel == 0) return EMBER_OK;
    return p->dtype == EMBER_FLOAT64 ? adam_as<double>(p, g, m, v, vmax, *a) : adam_as<float>(p, g, m, v, vmax, *a);
}

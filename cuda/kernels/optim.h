/* optim.h: one element of the fused optimizer steps on the device: the
   core's core/src/optim_math.h (core/src/ops/optim.c runs the same
   functions on the CPU) in the parameter's dtype T, float or double.
   src/optim.cu compiles it without contracting a * b + c into fma, so the
   device rounds each step as the CPU does. */
#ifndef EMBER_CUDA_OPTIM_H
#define EMBER_CUDA_OPTIM_H

#include "hd.h"
#include "optim_math.h"

namespace ember_cuda {

/* element i of an SGD step (buf NULL: no momentum) */
template <class T> EMBER_HD void sgd_at(const ember__sgd_args &a, T *p, T *buf, const T *g, int64_t i)
{
    if constexpr (sizeof(T) == sizeof(float)) {
        const ember__sgd_consts_f32 k = ember__sgd_consts_of_f32(&a);
        p[i] = buf ? ember__sgd_momentum_f32(&k, a.first, p[i], g[i], &buf[i]) : ember__sgd_f32(&k, p[i], g[i]);
    } else {
        const ember__sgd_consts_f64 k = ember__sgd_consts_of_f64(&a);
        p[i] = buf ? ember__sgd_momentum_f64(&k, a.first, p[i], g[i], &buf[i]) : ember__sgd_f64(&k, p[i], g[i]);
    }
}

/* element i of an Adam or AdamW step (vmax NULL: no amsgrad) */
template <class T>
EMBER_HD void adam_at(const ember__adam_args &a, T *p, const T *g, T *m, T *v, T *vmax, int64_t i)
{
    if constexpr (sizeof(T) == sizeof(float)) {
        const ember__adam_consts_f32 k = ember__adam_consts_of_f32(&a);
        T pd = ember__adam_moments_f32(&k, p[i], g[i], &m[i], &v[i]), vi = v[i];
        if (vmax) vmax[i] = vi = ember__amsgrad_f32(vmax[i], vi);
        p[i] = ember__adam_weight_f32(&k, pd, m[i], vi);
    } else {
        const ember__adam_consts_f64 k = ember__adam_consts_of_f64(&a);
        T pd = ember__adam_moments_f64(&k, p[i], g[i], &m[i], &v[i]), vi = v[i];
        if (vmax) vmax[i] = vi = ember__amsgrad_f64(vmax[i], vi);
        p[i] = ember__adam_weight_f64(&k, pd, m[i], vi);
    }
}

}   // namespace ember_cuda

#endif

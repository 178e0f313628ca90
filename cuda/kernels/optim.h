/* optim.h: one element of the fused optimizer steps, the arithmetic of
   core/src/ops/optim.c (PyTorch's SGD, Adam and AdamW) in the parameter's
   dtype T, float or double, with its flush of subnormal state to zero; the
   constants (1 - beta1, 1 - beta2, ...) computed in double and rounded once.
   src/optim.cu compiles it without contracting a * b + c into fma, so the
   device rounds each step as the CPU does. */
#ifndef EMBER_CUDA_OPTIM_H
#define EMBER_CUDA_OPTIM_H

#include <float.h>
#include <math.h>

#include "hd.h"
#include "backend.h"

namespace ember_cuda {

/* x, or 0 where |x| is below the smallest normal number */
EMBER_HD float flush(float x) { return x > -FLT_MIN && x < FLT_MIN ? 0.0f : x; }
EMBER_HD double flush(double x) { return x > -DBL_MIN && x < DBL_MIN ? 0.0 : x; }
EMBER_HD float root(float x) { return sqrtf(x); }
EMBER_HD double root(double x) { return sqrt(x); }

/* d = g + wd p; b = d (first step) or mom b + (1 - damp) d;
   p -= lr (nesterov ? d + mom b : b); without a buffer p -= lr d */
template <class T> EMBER_HD void sgd_at(const ember__sgd_args &a, T *p, T *buf, const T *g, int64_t i)
{
    const T lr = (T)a.lr, mom = (T)a.momentum, damp1 = (T)(1 - a.dampening), wd = (T)a.weight_decay;
    const T sgn = a.maximize ? (T)-1 : (T)1;
    T d = sgn * g[i] + wd * p[i];
    if (!buf) {
        p[i] -= lr * d;
        return;
    }
    T v = a.first ? d : flush(mom * buf[i] + damp1 * d);
    buf[i] = v;
    p[i] -= lr * (a.nesterov ? d + mom * v : v);
}

/* Adam: g += wd p. AdamW: p *= 1 - lr wd. Then m = b1 m + (1 - b1) g;
   v = b2 v + (1 - b2) g^2 (amsgrad: vmax = max(vmax, v), used as v);
   p -= lr / bc1 * m / (sqrt(v) / sqrt(bc2) + eps) */
template <class T>
EMBER_HD void adam_at(const ember__adam_args &a, T *p, const T *g, T *m, T *v, T *vmax, int64_t i)
{
    const T b1 = (T)a.beta1, b2 = (T)a.beta2, eps = (T)a.eps, wd = (T)a.weight_decay;
    const T omb1 = (T)(1 - a.beta1), omb2 = (T)(1 - a.beta2);
    const T step = (T)(a.lr / a.bc1), inv_bc2 = (T)(1 / a.bc2_sqrt);
    const T decay = a.decoupled ? (T)(1 - a.lr * a.weight_decay) : (T)1;
    const T l2 = a.decoupled ? (T)0 : wd, sgn = a.maximize ? (T)-1 : (T)1;
    T pi = p[i] * decay;
    T gi = sgn * g[i] + l2 * p[i];
    T mi = flush(b1 * m[i] + omb1 * gi);
    T vi = flush(b2 * v[i] + omb2 * gi * gi);
    m[i] = mi;
    v[i] = vi;
    if (vmax) {
        vi = vmax[i] > vi ? vmax[i] : vi;
        vmax[i] = vi;
    }
    p[i] = pi - step * mi / (root(vi) * inv_bc2 + eps);
}

}   // namespace ember_cuda

#endif

/* optim_math.h: one element of the fused optimizer steps, PyTorch's SGD,
   Adam and AdamW, written once for the CPU (ops/optim.c) and the CUDA
   kernels (cuda/kernels/optim.h), in the parameter's dtype: the _f32
   functions in float, the _f64 ones in double.

   The scalars (1 - dampening, 1 - beta1, 1 - beta2, lr / (1 - beta1^t),
   1 - lr wd, ...) are computed in double and rounded to the dtype once, as
   PyTorch computes them in Python (the *_consts_* functions). State that
   decays geometrically is flushed to zero below the smallest normal number
   (optim.c says why). Neither device contracts a * b + c into an fma here
   (the CPU builds with -ffp-contract=off, cuda/src/optim.cu with
   --fmad=false), so both round each step alike, bit for bit.
   Needs backend.h (ember__sgd_args, ember__adam_args), <float.h> and
   <math.h>; EMBER_FORMULA as formulas.h's. Plain C that is also C++. */
#ifndef EMBER_OPTIM_MATH_H
#define EMBER_OPTIM_MATH_H

#include <float.h>
#include <math.h>

#include "backend.h"

#ifndef EMBER_FORMULA
#define EMBER_FORMULA static inline __attribute__((always_inline))
#endif

#define EMBER_OPTIM_MATH(T, SUF, SQRT, NORMAL_MIN)                                          \
    /* x, or 0 where |x| is below the smallest normal number (a compare and a select) */  \
    EMBER_FORMULA T ember__flush_##SUF(T x) { return x > -(T)NORMAL_MIN && x < (T)NORMAL_MIN ? (T)0 : x; } \
                                                                                           \
    typedef struct {                                                                       \
        T lr, mom, damp1, wd, sgn;                                                         \
        int nesterov;                                                                      \
    } ember__sgd_consts_##SUF;                                                             \
                                                                                           \
    EMBER_FORMULA ember__sgd_consts_##SUF ember__sgd_consts_of_##SUF(const ember__sgd_args *a) \
    {                                                                                      \
        ember__sgd_consts_##SUF k = {(T)a->lr, (T)a->momentum, (T)(1 - a->dampening), (T)a->weight_decay, \
                                     a->maximize ? (T)-1 : (T)1, a->nesterov};             \
        return k;                                                                          \
    }                                                                                      \
                                                                                           \
    /* without momentum: p - lr d, d = sgn g + wd p */                                     \
    EMBER_FORMULA T ember__sgd_##SUF(const ember__sgd_consts_##SUF *k, T p, T g)           \
    {                                                                                      \
        return p - k->lr * (k->sgn * g + k->wd * p);                                       \
    }                                                                                      \
                                                                                           \
    /* with momentum: b = d on the first step (first), else mom b + (1 - damp) d; the new  \
       weight p - lr (nesterov ? d + mom b : b), *buf the new b */                         \
    EMBER_FORMULA T ember__sgd_momentum_##SUF(const ember__sgd_consts_##SUF *k, int first, T p, T g, T *buf) \
    {                                                                                      \
        T d = k->sgn * g + k->wd * p;                                                      \
        T v = first ? d : ember__flush_##SUF(k->mom * *buf + k->damp1 * d);                \
        *buf = v;                                                                          \
        return p - k->lr * (k->nesterov ? d + k->mom * v : v);                             \
    }                                                                                      \
                                                                                           \
    typedef struct {                                                                       \
        T b1, b2, eps, omb1, omb2, step, inv_bc2, decay, l2, sgn;                          \
    } ember__adam_consts_##SUF;                                                            \
                                                                                           \
    EMBER_FORMULA ember__adam_consts_##SUF ember__adam_consts_of_##SUF(const ember__adam_args *a) \
    {                                                                                      \
        ember__adam_consts_##SUF k = {(T)a->beta1, (T)a->beta2, (T)a->eps, (T)(1 - a->beta1), (T)(1 - a->beta2), \
                                      (T)(a->lr / a->bc1), (T)(1 / a->bc2_sqrt),           \
                                      a->decoupled ? (T)(1 - a->lr * a->weight_decay) : (T)1, \
                                      a->decoupled ? (T)0 : (T)a->weight_decay, a->maximize ? (T)-1 : (T)1}; \
        return k;                                                                          \
    }                                                                                      \
                                                                                           \
    /* Adam: g += wd p (l2). AdamW: p *= 1 - lr wd (decay). Then                           \
       m = b1 m + (1 - b1) g and v = b2 v + (1 - b2) g^2, updated in place; the decayed    \
       weight is returned */                                                               \
    EMBER_FORMULA T ember__adam_moments_##SUF(const ember__adam_consts_##SUF *k, T p, T g, T *m, T *v) \
    {                                                                                      \
        T gi = k->sgn * g + k->l2 * p;                                                     \
        *m = ember__flush_##SUF(k->b1 * *m + k->omb1 * gi);                                \
        *v = ember__flush_##SUF(k->b2 * *v + k->omb2 * gi * gi);                           \
        return p * k->decay;                                                               \
    }                                                                                      \
                                                                                           \
    /* amsgrad: the running maximum of v, used as v */                                     \
    EMBER_FORMULA T ember__amsgrad_##SUF(T vmax, T v) { return vmax > v ? vmax : v; }      \
                                                                                           \
    /* the new weight from the decayed one pd: pd - lr / bc1 m / (sqrt(v) / sqrt(bc2) + eps) */ \
    EMBER_FORMULA T ember__adam_weight_##SUF(const ember__adam_consts_##SUF *k, T pd, T m, T v) \
    {                                                                                      \
        return pd - k->step * m / (SQRT(v) * k->inv_bc2 + k->eps);                         \
    }

EMBER_OPTIM_MATH(float, f32, sqrtf, FLT_MIN)
EMBER_OPTIM_MATH(double, f64, sqrt, DBL_MIN)

#endif

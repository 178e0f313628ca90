/* norm_act.h: the activations batch_norm_act (norm.c) and channel_affine
   (norm_affine.c) apply as they write their output: attrs i[0] the kind
   (0 none, BN_RELU, BN_HARDTANH), i[1] and i[2] the bits of hardtanh's
   bounds (an op's f holds only two doubles). */
#ifndef EMBER_NORM_ACT_H
#define EMBER_NORM_ACT_H

#include "ops.h"

enum { BN_RELU = 1, BN_HARDTANH = 2 };

double ember__act_bound(const ember_attrs *at, int k);
void ember__act_set_bounds(ember_attrs *at, double lo, double hi);
/* fails naming op unless the attrs name relu or hardtanh with lo <= hi (or, with none_ok, no activation) */
int ember__act_check(const char *op, const ember_attrs *at, bool none_ok);
/* the activation as ops, without recording, where the kernels do not run:
   of y into *out, or (g given) g through its mask of y */
int ember__act_composed(const ember_attrs *at, ember_tensor *y, ember_tensor *g, ember_tensor **out);

/* The activation in place on n values of y (relu keeps NaN and -0, as relu
   does; hardtanh as where(y <= lo, lo, where(y >= hi, hi, y))), and g
   through its mask into d: 0 where y <= 0 (relu) or y <= lo or y >= hi
   (hardtanh), else g (NaN y included), as relu_backward and hardtanh's
   composed gradient give. */
#define ACT_LOOPS(T)                                                                                   \
    EMBER_INLINE void act_##T(int act, double dlo, double dhi, T *restrict y, int64_t n)               \
    {                                                                                                  \
        if (act == BN_RELU)                                                                            \
            for (int64_t i = 0; i < n; i++) y[i] = y[i] < 0 ? 0 : y[i];                                \
        else if (act == BN_HARDTANH) {                                                                 \
            const T lo = (T)dlo, hi = (T)dhi;                                                          \
            for (int64_t i = 0; i < n; i++) y[i] = y[i] <= lo ? lo : y[i] >= hi ? hi : y[i];           \
        }                                                                                              \
    }                                                                                                  \
    EMBER_INLINE void act_mask_##T(int act, double dlo, double dhi, const T *restrict g,               \
                                   const T *restrict y, T *restrict d, int64_t n)                      \
    {                                                                                                  \
        if (act == BN_RELU)                                                                            \
            for (int64_t i = 0; i < n; i++) d[i] = y[i] <= 0 ? 0 : g[i];                               \
        else {                                                                                         \
            const T lo = (T)dlo, hi = (T)dhi;                                                          \
            for (int64_t i = 0; i < n; i++) d[i] = y[i] <= lo || y[i] >= hi ? 0 : g[i];                \
        }                                                                                              \
    }

#endif

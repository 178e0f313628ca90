/* reduce.h: the row kernels reduce.c's reductions share with softmax.c.
   x is a row of n elements in memory order; dt an ember dtype. */
#ifndef EMBER_OPS_REDUCE_H
#define EMBER_OPS_REDUCE_H

#include "ops.h"

#include <math.h>

/* Partial sums kept side by side: one 512-bit vector of float32 (of double
   for F64_LANES), two AVX2 and four SSE2 ones, so each width vectorises the
   loops below and all add in the order the source gives (docs/dtypes.md). */
#define F32_LANES 16
#define F64_LANES 8

/* acc[0] + ... + acc[n - 1] as a fixed tree of pairs; n a power of two */
EMBER_INLINE double fold_f64(double *acc, int n)
{
    for (int w = n / 2; w > 0; w /= 2)
        for (int k = 0; k < w; k++) acc[k] += acc[k + w];
    return acc[0];
}

EMBER_INLINE float fold_f32(float *acc, int n)
{
    for (int w = n / 2; w > 0; w /= 2)
        for (int k = 0; k < w; k++) acc[k] += acc[k + w];
    return acc[0];
}

/* element i of a row of dtype dt, as a double */
static inline double at(const char *p, int dt, int64_t i)
{
    switch (dt) {
    case EMBER_FLOAT32: return ((const float *)p)[i];
    case EMBER_FLOAT64: return ((const double *)p)[i];
    default: return ember__load(p + i * ember_dtype_size(dt), dt);
    }
}

/* A float32 as an unsigned key in the floats' order (-0 below +0): the bits
   with the sign flipped for positive floats, all flipped for negative ones.
   An unsigned max, unlike a float one that must mind NaN and -0, vectorises
   at every width and gives the same result in any order. */
EMBER_INLINE uint32_t order_key(float f)
{
    uint32_t b = ember__bits_of_float(f);
    return b ^ ((0u - (b >> 31)) | 0x80000000u);
}

EMBER_INLINE float from_order_key(uint32_t k)
{
    return ember__float_of_bits(k & 0x80000000u ? k ^ 0x80000000u : ~k);
}

/* The largest of sign x[i] over n > 0 floats (sign 1 for the maximum, -1
   for the minimum as -max(-x), negation being exact), NaN if any is NaN;
   +0 where the largest are -0 and +0. */
EMBER_INLINE float row_max_f32(const float *x, int64_t n, float sign)
{
    uint32_t best = 0;
    int nan = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = sign * x[i];
        uint32_t k = order_key(v);
        nan |= v != v;
        best = k > best ? k : best;
    }
    return nan ? NAN : from_order_key(best);
}

/* max (sign = 1) or min (sign = -1) of a row: a NaN wins; *idx (unless NULL)
   gets the first position */
double ember__row_extreme(const char *p, int dt, int64_t n, int sign, int64_t *idx);
/* A contiguous tensor whose last r dims are a's reduced dims (mask) and whose
   leading dims are the kept ones, in order; *rows and *len describe it. */
int ember__reduced_last(ember_tensor *a, unsigned mask, ember_tensor **out, int64_t *rows, int64_t *len);
/* Fails naming `name` unless dim is one of a's dims (or -1, all, where allow_all). */
int ember__reduce_check_dim(const char *name, const ember_tensor *a, int dim, bool allow_all);

#endif

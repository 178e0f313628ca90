/* reduce.h: the row kernels reduce.c's reductions share with softmax.c.
   x is a row of n elements in memory order; dt an ember dtype. */
#ifndef EMBER_OPS_REDUCE_H
#define EMBER_OPS_REDUCE_H

#include "ops.h"

#include <math.h>
#include <string.h>

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

/* The float32 sums of short rows (reduce.c's rows_sum_f32), in the order
   every float32 sum has: F32_LANES float lanes over the row, folded as a tree
   of pairs, the tail added in float. */
/* fold_f32's tree of pairs with constant bounds, so it stays in registers */
EMBER_INLINE float fold16_f32(float *acc)
{
    for (int k = 0; k < F32_LANES / 2; k++) acc[k] += acc[k + F32_LANES / 2];
    for (int k = 0; k < F32_LANES / 4; k++) acc[k] += acc[k + F32_LANES / 4];
    for (int k = 0; k < F32_LANES / 8; k++) acc[k] += acc[k + F32_LANES / 8];
    return acc[0] + acc[1];
}

/* the float sum of a row of n <= BLOCK: sum_f32's order */
EMBER_INLINE float short_row_f32(const float *p, int64_t n)
{
    float acc[F32_LANES] = {0};
    int64_t i = 0;
    for (; i + F32_LANES <= n; i += F32_LANES)
        for (int k = 0; k < F32_LANES; k++) acc[k] += p[i + k];
    float v = fold16_f32(acc);
    for (; i < n; i++) v += p[i];
    return v;
}

/* four consecutive rows' short_row_f32 at once: four independent chains of
   vector adds where one row's waits on each add (the same bits: lane k of a
   vector adds what acc[k] adds). Written with vector types, which the
   compiler keeps in registers where four arrays went to the stack. */
typedef float f32x16 __attribute__((vector_size(F32_LANES * sizeof(float))));
typedef float f32x16_u __attribute__((vector_size(F32_LANES * sizeof(float)), aligned(4), may_alias));
typedef float f32x8 __attribute__((vector_size(8 * sizeof(float))));
typedef float f32x4 __attribute__((vector_size(4 * sizeof(float))));
typedef float f32x2 __attribute__((vector_size(2 * sizeof(float))));
/* fold16_f32's tree of pairs on a vector, in registers: lanes k and k + 8 added, then k and k + 4, ... */
#define FOLD_F32X16(v)                                                                                      \
    __extension__({                                                                                         \
        f32x8 h8 = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +                                  \
                   __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);                             \
        f32x4 h4 = __builtin_shufflevector(h8, h8, 0, 1, 2, 3) + __builtin_shufflevector(h8, h8, 4, 5, 6, 7); \
        f32x2 h2 = __builtin_shufflevector(h4, h4, 0, 1) + __builtin_shufflevector(h4, h4, 2, 3);           \
        h2[0] + h2[1];                                                                                      \
    })
EMBER_INLINE void short_rows4_f32(const float *p, int64_t n, float *s)
{
    f32x16 a0 = {0}, a1 = {0}, a2 = {0}, a3 = {0};
    const float *p1 = p + n, *p2 = p + 2 * n, *p3 = p + 3 * n;
    int64_t i = 0;
    for (; i + F32_LANES <= n; i += F32_LANES) {
        a0 += *(const f32x16_u *)(p + i);
        a1 += *(const f32x16_u *)(p1 + i);
        a2 += *(const f32x16_u *)(p2 + i);
        a3 += *(const f32x16_u *)(p3 + i);
    }
    float v0 = FOLD_F32X16(a0), v1 = FOLD_F32X16(a1), v2 = FOLD_F32X16(a2), v3 = FOLD_F32X16(a3);
    for (int64_t t = i; t < n; t++) {
        v0 += p[t];
        v1 += p1[t];
        v2 += p2[t];
        v3 += p3[t];
    }
    s[0] = v0;
    s[1] = v1;
    s[2] = v2;
    s[3] = v3;
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

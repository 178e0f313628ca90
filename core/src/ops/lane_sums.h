/* lane_sums.h: sums in double over lanes, shared by norm.c (batch norm's
   per-channel sums and its adjoint's), layer_norm.c and softmax.c (their rows). */
#ifndef EMBER_OPS_LANE_SUMS_H
#define EMBER_OPS_LANE_SUMS_H

#include "ops.h"

/* LANE_SUMS(T, PFX, L, TAIL) defines, over n values p of type T,
     PFX_sum_T(p, n, acc):     acc[lane] += p[i]
     PFX_dev2_T(p, n, m, acc): acc[lane] += (p[i] - m)^2
   each value of the whole groups of L going to lane i % L, and each of the
   last n % L to lane TAIL (an expression of i). A kernel keeps its own
   lanes and tail, so its own order of additions and its own bits. */
#define LANE_SUMS(T, PFX, L, TAIL)                                                                   \
    EMBER_INLINE void PFX##_sum_##T(const T *restrict p, int64_t n, double *restrict acc)              \
    {                                                                                                \
        int64_t i = 0;                                                                               \
        for (; i + (L) <= n; i += (L))                                                               \
            for (int l = 0; l < (L); l++) acc[l] += (double)p[i + l];                                \
        for (; i < n; i++) acc[TAIL] += (double)p[i];                                                \
    }                                                                                                \
    EMBER_INLINE void PFX##_dev2_##T(const T *restrict p, int64_t n, double m, double *restrict acc)   \
    {                                                                                                \
        int64_t i = 0;                                                                               \
        for (; i + (L) <= n; i += (L))                                                               \
            for (int l = 0; l < (L); l++) {                                                          \
                double d = (double)p[i + l] - m;                                                     \
                acc[l] += d * d;                                                                     \
            }                                                                                        \
        for (; i < n; i++) {                                                                         \
            double d = (double)p[i] - m;                                                             \
            acc[TAIL] += d * d;                                                                      \
        }                                                                                            \
    }

/* LANE_SUM_AHEAD(T, PFX, L, TAIL) defines PFX_sum_ahead_T(p, n, acc, next):
   PFX_sum_T's sums, in its order, prefetching the n values at next (the
   block read after this one) line by line as it goes, so that a
   channel's blocks, far apart in memory, do not each wait for the
   hardware prefetcher to see a new stream */
#define LANE_SUM_AHEAD(T, PFX, L, TAIL)                                                              \
    EMBER_INLINE void PFX##_sum_ahead_##T(const T *restrict p, int64_t n, double *restrict acc,      \
                                          const T *next)                                             \
    {                                                                                                \
        int64_t i = 0;                                                                               \
        for (; i + (L) <= n; i += (L)) {                                                             \
            for (size_t b = 0; b < (L) * sizeof(T); b += 64)                                         \
                __builtin_prefetch((const char *)(next + i) + b);                                    \
            for (int l = 0; l < (L); l++) acc[l] += (double)p[i + l];                                \
        }                                                                                            \
        for (; i < n; i++) acc[TAIL] += (double)p[i];                                                \
    }

/* LANE_GDEV(T, PFX, L, TAIL) defines PFX_gdev_T(g, p, n, m, sg, sgx, ahead):
   sg[lane] += g[i] and sgx[lane] += g[i] (p[i] - m), on LANE_SUMS's lanes;
   with ahead > 0, the values that far on in g and p prefetched as it goes
   (as PFX_sum_ahead_T) */
#define LANE_GDEV(T, PFX, L, TAIL)                                                                   \
    EMBER_INLINE void PFX##_gdev_##T(const T *restrict g, const T *restrict p, int64_t n, double m,   \
                                     double *restrict sg, double *restrict sgx, int64_t ahead)       \
    {                                                                                                \
        int64_t i = 0;                                                                               \
        for (; i + (L) <= n; i += (L)) {                                                             \
            for (size_t b = 0; ahead && b < (L) * sizeof(T); b += 64) {                              \
                __builtin_prefetch((const char *)(g + i + ahead) + b);                               \
                __builtin_prefetch((const char *)(p + i + ahead) + b);                               \
            }                                                                                        \
            for (int l = 0; l < (L); l++) {                                                          \
                double gv = (double)g[i + l];                                                        \
                sg[l] += gv;                                                                         \
                sgx[l] += gv * ((double)p[i + l] - m);                                               \
            }                                                                                        \
        }                                                                                            \
        for (; i < n; i++) {                                                                         \
            double gv = (double)g[i];                                                                \
            sg[TAIL] += gv;                                                                          \
            sgx[TAIL] += gv * ((double)p[i] - m);                                                    \
        }                                                                                            \
    }

/* LANE_DOT(T, PFX, L, TAIL) defines PFX_dot_T(p, q, n, acc):
   acc[lane] += p[i] q[i] (the product in double), on LANE_SUMS's lanes */
#define LANE_DOT(T, PFX, L, TAIL)                                                                    \
    EMBER_INLINE void PFX##_dot_##T(const T *restrict p, const T *restrict q, int64_t n,             \
                                    double *restrict acc)                                            \
    {                                                                                                \
        int64_t i = 0;                                                                               \
        for (; i + (L) <= n; i += (L))                                                               \
            for (int l = 0; l < (L); l++) acc[l] += (double)p[i + l] * (double)q[i + l];             \
        for (; i < n; i++) acc[TAIL] += (double)p[i] * (double)q[i];                                 \
    }

/* 32 lanes: the loops over them compile to four vectors of 8 doubles where
   the CPU has them (four chains of adds, where 8 lanes gave one), some 4
   times faster on a row in cache */
#define ROW_LANES 32

#endif

/* norm.c: batch normalisation in training, as two ops.

   batch_norm(x, w, b) -> (y, stats): x is (N, C, ...), w and b (C). The
   statistics are over every dim but the channel dim 1: stats is (2, C), the
   mean in row 0 and the biased variance in row 1, and
   y = (x - mean) / sqrt(var + eps) * w + b, eps the attr f[0].
   batch_norm_backward(g, x, w, stats) -> (gx, gwb): with xhat the
   normalised x, M the values per channel and invstd = 1 / sqrt(var + eps),
   gwb is (2, C): sum(g xhat) (w's gradient) in row 0, sum(g) (b's) in row 1,
   and gx = w invstd (g - sum(g) / M - xhat sum(g xhat) / M).

   On the CPU, for float32 / float64 operands of one dtype (strided ones
   copied first), each reads x (and g) twice per channel: the sums, then
   the values, the channels spread over the pool (batch_norm's float32
   statistics in one pass over memory where they pass L2: moments_run).
   The sums run in double on 16 lanes added in a fixed order, so the
   vector width the CPU picks changes no bit. Where the operands pass the
   last-level cache (ember__stream_worth), a channel's first pass fetches
   each next sample's block ahead, and batch_norm streams y past the cache
   (bn_write): the same values.
   Anything else (other devices and dtypes, mixed dtypes) runs the same
   formulas as recorded ops would, without recording: bn_composed and
   bn_backward_composed, which grad_rules.c's rule also runs where a
   recording sees the backward (higher-order gradients).

   batch_norm_act(x, w, b) and batch_norm_act_backward(g, x, w, stats, y)
   are the same two ops with relu or hardtanh applied to y as each
   channel's values are written, and g passed through its mask of y into gx
   before the sums (ops.def). */
#include "lane_sums.h"
#include "nn.h"
#include "../arena.h"
#include "../autograd_ops.h"
#include "norm_act.h"

#include <string.h>

/* ------------------------------------------------------------------ checks */
/* x (N, C, ...) with values per channel, w (and b, where given) (C) */
static int bn_check(const char *op, const ember_tensor *x, const ember_tensor *w, const ember_tensor *b)
{
    char sx[200], sw[200], sb[200];
    if (x->ndim < 2)
        return ember__fail(EMBER_ERR_SHAPE, "%s: input must have at least 2 dims (N, C, ...), got %s", op,
                           ember__tshape(sx, x));
    int64_t C = x->shape[1];
    if (w->ndim != 1 || w->shape[0] != C || (b && (b->ndim != 1 || b->shape[0] != C)))
        return ember__fail(EMBER_ERR_SHAPE, "%s: weight %s%s%s must be {%lld} for input %s", op, ember__tshape(sw, w),
                           b ? " and bias " : "", b ? ember__tshape(sb, b) : "", (long long)C, ember__tshape(sx, x));
    if (!ember__is_float(x->dtype) || !ember__is_float(w->dtype) || (b && !ember__is_float(b->dtype)))
        return ember__fail(EMBER_ERR_DTYPE, "%s: expected floating tensors, got input %s, weight %s%s%s", op,
                           ember_dtype_name(x->dtype), ember_dtype_name(w->dtype), b ? " and bias " : "",
                           b ? ember_dtype_name(b->dtype) : "");
    if (x->numel == 0)
        return ember__fail(EMBER_ERR_SHAPE, "%s: input %s has no values per channel", op, ember__tshape(sx, x));
    return EMBER_OK;
}

/* the CPU kernels' operands: on the CPU, one float dtype (strided ones are
   copied first: one pass, where the composed ops would take ten) */
static bool bn_fast(ember_tensor *const *ts, int n)
{
    int dt = ts[0]->dtype;
    if (dt != EMBER_FLOAT32 && dt != EMBER_FLOAT64) return false;
    for (int i = 0; i < n; i++)
        if (ts[i]->storage->device != EMBER_CPU || ts[i]->dtype != dt) return false;
    return true;
}

/* contiguous copies of the operands that are not (the others retained);
   with nhwc, the 4-D ones channels_last (nhwc.c) instead */
static int bn_contiguous(ember_tensor *const *in, int n, bool nhwc, ember_tensor **c)
{
    for (int i = 0; i < n; i++) {
        int rc = ember__layout_as(in[i], in[i]->dtype, nhwc, &c[i]);
        if (rc < 0) {
            for (int k = 0; k < i; k++) ember_tensor_release(c[k]);
            return rc;
        }
    }
    return EMBER_OK;
}

static void bn_release(ember_tensor **c, int n)
{
    for (int i = 0; i < n; i++) ember_tensor_release(c[i]);
}

/* ------------------------------------------------------------------ CPU kernels */
#define LANES 16

/* The per-channel work of one op: x (and g) as N blocks of S values per
   channel, C channels apart. */
typedef struct {
    int dt;
    int64_t N, C, S;
    const char *x, *g, *w, *b;
    char *y;           /* y or gx */
    char *stats;       /* batch_norm: the (2, C) it writes; backward: the one it reads */
    char *gwb;         /* backward: (2, C) */
    double eps;
    double *ws;        /* the column kernels' 4 C S doubles */
    int act;           /* batch_norm_act: BN_RELU or BN_HARDTANH (lo, hi) on y; 0 none */
    double lo, hi;
    const char *ya;    /* batch_norm_act_backward: its output, whose mask g passes through */
    bool stream;       /* batch_norm: y streamed past the cache (bn_write) */
    bool far;          /* x (and g) pass the last-level cache: the first pass fetches ahead */
} bn_job;

/* the activation's loops: norm_act.h */
ACT_LOOPS(float)
ACT_LOOPS(double)

/* sums of a block into 16 lanes, the tail spread over them (lane_sums.h): of
   x, of (x - m)^2, and of g and g (x - m), the first pass of a channel
   fetching the next sample's block ahead where x passes the cache */
#define BN_SUMS(T)                                                                                     \
    LANE_SUMS(T, lanes, LANES, i % LANES)                                                              \
    LANE_SUM_AHEAD(T, lanes, LANES, i % LANES)                                                         \
    LANE_GDEV(T, lanes, LANES, i % LANES)
BN_SUMS(float)
BN_SUMS(double)
#undef BN_SUMS

static double lanes_total(const double *acc)
{
    double s = 0;
    for (int l = 0; l < LANES; l++) s += acc[l];
    return s;
}

/* A channel's count, mean and M2 (its sum of squared deviations), for the
   float32 kernels' statistics in one pass over memory: each run of about
   STAT_RUN values (a sample's S, cut, or several samples' S) is summed
   twice while it is in L1 (its sum, then its squared deviations from its
   own mean), and the runs are
   combined as Chan, Golub and LeVeque do, which is as stable as two passes
   over the whole channel: a different order of additions from those two
   passes (float64 keeps them, and its bits), within float32's rounding of
   them (spec/batch_norm_spec.lua). */
#define STAT_RUN 4096
/* the per-channel kernel's one pass, for channels of more values than this
   (512 KB of float32, past L2): a smaller channel's second pass reads L2
   or L1, and the two passes were as fast or faster there (MobileNet's
   planes, 32 x 64 x 56 x 56); 8 x 16 x 224 x 224 (1.6 MB a channel) took
   3.3-3.6 ms in one pass against 3.6-3.9 in two (one thread, loaded) */
#define ONE_PASS_MIN 131072
/* the column kernels' runs: rows of about 256 KB of float32 (L2), whose
   bookkeeping a row at a time (a pass over the task's columns) costs as
   much as a row's values: runs of a few rows were 1.5 times slower than
   two passes on a MobileNet's 4 x 4 planes, these are as fast */
#define COLS_RUN 65536

typedef struct {
    double n, mean, m2;
} moments;

EMBER_INLINE void moments_add(moments *a, double n, double mean, double m2)
{
    if (a->n == 0) {
        *a = (moments){n, mean, m2};
        return;
    }
    double tot = a->n + n, d = mean - a->mean;
    a->mean += d * (n / tot);
    a->m2 += m2 + d * d * (a->n * n / tot);
    a->n = tot;
}

#define BN_MOMENTS(T)                                                                            \
    EMBER_INLINE void moments_run_##T(moments *mo, const T *p, int64_t n)                        \
    {                                                                                            \
        for (int64_t i0 = 0; i0 < n; i0 += STAT_RUN) {                                           \
            int64_t k = n - i0 < STAT_RUN ? n - i0 : STAT_RUN;                                   \
            double acc[LANES] = {0};                                                             \
            lanes_sum_##T(p + i0, k, acc);                                                       \
            double mb = lanes_total(acc) / (double)k;                                            \
            memset(acc, 0, sizeof acc);                                                          \
            lanes_dev2_##T(p + i0, k, mb, acc);                                                  \
            moments_add(mo, (double)k, mb, lanes_total(acc));                                    \
        }                                                                                        \
    }                                                                                            \
    /* nb blocks of S values, stride apart: runs of whole blocks (S below STAT_RUN), each      \
       block's next fetched ahead where far (bn_job's far) */                                    \
    EMBER_INLINE void moments_blocks_##T(moments *mo, const T *p, int64_t stride, int64_t nb,     \
                                         int64_t S, bool far)                                    \
    {                                                                                            \
        if (S >= STAT_RUN) {                                                                     \
            for (int64_t n = 0; n < nb; n++) moments_run_##T(mo, p + n * stride, S);             \
            return;                                                                              \
        }                                                                                        \
        for (int64_t n0 = 0, per = STAT_RUN / S; n0 < nb; n0 += per) {                           \
            int64_t n1 = n0 + per < nb ? n0 + per : nb;                                          \
            double acc[LANES] = {0}, k = (double)((n1 - n0) * S);                                \
            for (int64_t n = n0; n < n1; n++)                                                    \
                if (far && n + 1 < nb) lanes_sum_ahead_##T(p + n * stride, S, acc, p + (n + 1) * stride); \
                else lanes_sum_##T(p + n * stride, S, acc);                                      \
            double mb = lanes_total(acc) / k;                                                    \
            memset(acc, 0, sizeof acc);                                                          \
            for (int64_t n = n0; n < n1; n++) lanes_dev2_##T(p + n * stride, S, mb, acc);        \
            moments_add(mo, k, mb, lanes_total(acc));                                            \
        }                                                                                        \
    }
BN_MOMENTS(float)
BN_MOMENTS(double)
#undef BN_MOMENTS

/* y = x sc + sh over n values (a plane's), then the activation; where the
   op streams (j->stream), a piece at a time into an L1 buffer and streamed
   from there past the cache (ember__stream_copy): the same values. Only
   the per-channel kernels stream: the column kernels' rows (channels_last)
   are too short a piece each, and streamed them 3-9% slower. */
#define BN_PIECE 1024
#define BN_WRITE(T)                                                                                     \
    EMBER_INLINE void bn_write_##T(const bn_job *j, T *restrict y, const T *restrict x, int64_t n, T sc, \
                                   T sh)                                                                \
    {                                                                                                   \
        if (!j->stream) {                                                                               \
            for (int64_t i = 0; i < n; i++) y[i] = x[i] * sc + sh;                                      \
            if (j->act) act_##T(j->act, j->lo, j->hi, y, n);                                            \
            return;                                                                                     \
        }                                                                                               \
        T buf[BN_PIECE];                                                                                \
        for (int64_t i0 = 0; i0 < n; i0 += BN_PIECE) {                                                  \
            int64_t k = n - i0 < BN_PIECE ? n - i0 : BN_PIECE;                                          \
            for (int64_t i = 0; i < k; i++) buf[i] = x[i0 + i] * sc + sh;                               \
            if (j->act) act_##T(j->act, j->lo, j->hi, buf, k);                                          \
            ember__stream_copy((char *)(y + i0), (const char *)buf, (size_t)k * sizeof(T));             \
        }                                                                                               \
    }
BN_WRITE(float)
BN_WRITE(double)
#undef BN_WRITE

/* y = x scale + shift per channel; stats from two passes over the channel
   (float64, and float32 channels of up to ONE_PASS_MIN values) or one
   (moments_blocks) */
#define BN_FWD(T)                                                                                          \
    EMBER_SIMD static void bn_fwd_##T(void *vctx, int64_t c0, int64_t c1)                                  \
    {                                                                                                      \
        const bn_job *j = vctx;                                                                            \
        const T *x = (const T *)j->x, *w = (const T *)j->w, *b = (const T *)j->b;                          \
        T *y = (T *)j->y, *st = (T *)j->stats;                                                             \
        double M = (double)(j->N * j->S);                                                                  \
        for (int64_t c = c0; c < c1; c++) {                                                                \
            double mean, var;                                                                              \
            if (j->dt == EMBER_FLOAT32 && j->N * j->S > ONE_PASS_MIN) {                                    \
                moments mo = {0};                                                                          \
                moments_blocks_##T(&mo, x + c * j->S, j->C * j->S, j->N, j->S, j->far);                    \
                mean = mo.mean, var = mo.m2 / M;                                                           \
            } else {                                                                                       \
                double acc[LANES] = {0};                                                                   \
                for (int64_t n = 0; n < j->N; n++) {   /* the next sample's block fetched meanwhile */    \
                    const T *xp = x + (n * j->C + c) * j->S;                                               \
                    if (j->far && n + 1 < j->N) lanes_sum_ahead_##T(xp, j->S, acc, xp + j->C * j->S);      \
                    else lanes_sum_##T(xp, j->S, acc);                                                     \
                }                                                                                          \
                mean = lanes_total(acc) / M;                                                               \
                memset(acc, 0, sizeof acc);                                                                \
                for (int64_t n = 0; n < j->N; n++)                                                         \
                    lanes_dev2_##T(x + (n * j->C + c) * j->S, j->S, mean, acc);                            \
                var = lanes_total(acc) / M;                                                                \
            }                                                                                              \
            double scale = (double)w[c] / sqrt(var + j->eps);                                              \
            T sc = (T)scale, sh = (T)((double)b[c] - mean * scale);                                        \
            for (int64_t n = 0; n < j->N; n++) {                                                           \
                const T *xp = x + (n * j->C + c) * j->S;                                                   \
                T *yp = y + (n * j->C + c) * j->S;                                                         \
                bn_write_##T(j, yp, xp, j->S, sc, sh);                                                     \
            }                                                                                              \
            st[c] = (T)mean;                                                                               \
            st[j->C + c] = (T)var;                                                                         \
        }                                                                                                  \
        if (j->stream) ember__stream_fence();                                                              \
    }
BN_FWD(float)
BN_FWD(double)
#undef BN_FWD

/* gx = g a + x k + k0 per channel, from sum(g) and sum(g (x - mean)) */
#define BN_BWD(T)                                                                                           \
    EMBER_SIMD static void bn_bwd_##T(void *vctx, int64_t c0, int64_t c1)                                   \
    {                                                                                                       \
        const bn_job *j = vctx;                                                                             \
        const T *x = (const T *)j->x, *g = (const T *)j->g, *w = (const T *)j->w, *st = (const T *)j->stats; \
        T *gx = (T *)j->y, *gwb = (T *)j->gwb;                                                              \
        double M = (double)(j->N * j->S);                                                                   \
        if (j->ya) g = gx;   /* the activation's gradient, written into gx a channel at a time */           \
        for (int64_t c = c0; c < c1; c++) {                                                                 \
            for (int64_t n = 0; n < j->N && j->ya; n++) {                                                   \
                int64_t o = (n * j->C + c) * j->S;                                                          \
                act_mask_##T(j->act, j->lo, j->hi, (const T *)j->g + o, (const T *)j->ya + o, gx + o, j->S);                   \
            }                                                                                               \
            double mean = (double)st[c], invstd = 1.0 / sqrt((double)st[j->C + c] + j->eps);                \
            double sg[LANES] = {0}, sgx[LANES] = {0};                                                       \
            for (int64_t n = 0; n < j->N; n++) {                                                            \
                int64_t o = (n * j->C + c) * j->S;                                                          \
                lanes_gdev_##T(g + o, x + o, j->S, mean, sg, sgx, j->far && n + 1 < j->N ? j->C * j->S : 0); \
            }                                                                                               \
            double sum_g = lanes_total(sg), sum_gx = lanes_total(sgx) * invstd; /* sum(g xhat) */           \
            double a = (double)w[c] * invstd, k = -a * invstd * sum_gx / M;                                 \
            T ta = (T)a, tk = (T)k, tk0 = (T)(-a * sum_g / M - k * mean);                                   \
            for (int64_t n = 0; n < j->N; n++) {                                                            \
                int64_t o = (n * j->C + c) * j->S;                                                          \
                for (int64_t i = 0; i < j->S; i++) gx[o + i] = g[o + i] * ta + x[o + i] * tk + tk0;         \
            }                                                                                               \
            gwb[c] = (T)sum_gx;                                                                             \
            gwb[j->C + c] = (T)sum_g;                                                                       \
        }                                                                                                   \
    }
BN_BWD(float)
BN_BWD(double)
#undef BN_BWD

/* channels per chunk: about 64K values of x each */
static int64_t channel_grain(int64_t per_channel)
{
    int64_t grain = 65536 / (per_channel > 0 ? per_channel : 1);
    return grain > 0 ? grain : 1;
}

/* Few values per channel in each sample (S below COLUMN_S: BatchNorm1d's
   (N, C), short sequences): a channel's values are too scattered for the
   loops above, so these go through x a row of C S values at a time, with a
   double per column (ws), the rows added in order, and then each channel's
   S columns in order. Values are computed as the kernels above compute them. */
#define COLUMN_S 32

/* The statistics of columns [k0, k1): each channel's mean into its S
   columns of m, its M2 spread over its S columns of a. Two passes over x
   (float64, its bits), the rows added in order; or (float32) one, in runs
   of rows of about COLS_RUN values each summed twice while in L2, the runs
   and then a channel's S columns combined as moments_add does (ws's last
   two C S doubles hold a run's means and each column's running M2).
   Inlined into the kernels, whose vector width they take (EMBER_SIMD). */
#define BN_COLS_STATS(T)                                                                                  \
    EMBER_INLINE void cols_two_pass_##T(const bn_job *j, int64_t k0, int64_t k1, double *a, double *m)   \
    {                                                                                                     \
        const T *x = (const T *)j->x;                                                                     \
        int64_t S = j->S, CS = j->C * S, c0 = k0 / S, c1 = k1 / S;                                        \
        double M = (double)(j->N * S);                                                                    \
        for (int64_t k = k0; k < k1; k++) a[k] = 0;                                                       \
        for (int64_t n = 0; n < j->N; n++)                                                                \
            for (int64_t k = k0; k < k1; k++) a[k] += (double)x[n * CS + k];                              \
        for (int64_t c = c0; c < c1; c++) {                                                               \
            double sum = 0;                                                                               \
            for (int64_t i = 0; i < S; i++) sum += a[c * S + i], a[c * S + i] = 0;                        \
            for (int64_t i = 0; i < S; i++) m[c * S + i] = sum / M;                                       \
        }                                                                                                 \
        for (int64_t n = 0; n < j->N; n++)                                                                \
            for (int64_t k = k0; k < k1; k++) {                                                           \
                double d = (double)x[n * CS + k] - m[k];                                                  \
                a[k] += d * d;                                                                            \
            }                                                                                             \
    }                                                                                                     \
    EMBER_INLINE void cols_moments_##T(const bn_job *j, int64_t k0, int64_t k1, double *a, double *m)    \
    {                                                                                                     \
        const T *x = (const T *)j->x;                                                                     \
        int64_t S = j->S, CS = j->C * S, c0 = k0 / S, c1 = k1 / S;                                        \
        double *bm = j->ws + 2 * CS, *q = j->ws + 3 * CS;                                                 \
        int64_t R = COLS_RUN / (k1 - k0) > 1 ? COLS_RUN / (k1 - k0) : 1;                                  \
        if (R >= j->N) {   /* one run: the two passes, over values in L2 */                               \
            cols_two_pass_##T(j, k0, k1, a, m);                                                           \
            return;                                                                                       \
        }                                                                                                 \
        for (int64_t k = k0; k < k1; k++) m[k] = q[k] = 0;                                                \
        for (int64_t n0 = 0; n0 < j->N; n0 += R) {                                                        \
            int64_t n1 = n0 + R < j->N ? n0 + R : j->N;                                                   \
            double r = (double)(n1 - n0), seen = (double)n0, tot = seen + r;                              \
            for (int64_t k = k0; k < k1; k++) a[k] = 0;                                                   \
            for (int64_t n = n0; n < n1; n++)                                                             \
                for (int64_t k = k0; k < k1; k++) a[k] += (double)x[n * CS + k];                          \
            for (int64_t k = k0; k < k1; k++) bm[k] = a[k] / r, a[k] = 0;                                 \
            for (int64_t n = n0; n < n1; n++)                                                             \
                for (int64_t k = k0; k < k1; k++) {                                                       \
                    double d = (double)x[n * CS + k] - bm[k];                                             \
                    a[k] += d * d;                                                                        \
                }                                                                                         \
            for (int64_t k = k0; k < k1; k++) {                                                           \
                double d = bm[k] - m[k];                                                                  \
                m[k] += d * (r / tot);                                                                    \
                q[k] += a[k] + d * d * (seen * r / tot);                                                  \
            }                                                                                             \
        }                                                                                                 \
        for (int64_t c = c0; c < c1; c++) {                                                               \
            moments mo = {0};                                                                             \
            for (int64_t i = 0; i < S; i++) moments_add(&mo, (double)j->N, m[c * S + i], q[c * S + i]);   \
            for (int64_t i = 0; i < S; i++) m[c * S + i] = mo.mean, a[c * S + i] = i ? 0 : mo.m2;         \
        }                                                                                                 \
    }
BN_COLS_STATS(float)
BN_COLS_STATS(double)
#undef BN_COLS_STATS

#define BN_FWD_COLUMNS(T)                                                                                     \
    EMBER_SIMD static void bn_fwd_cols_##T(void *vctx, int64_t c0, int64_t c1)                                \
    {                                                                                                         \
        const bn_job *j = vctx;                                                                               \
        const T *x = (const T *)j->x, *w = (const T *)j->w, *b = (const T *)j->b;                             \
        T *y = (T *)j->y, *st = (T *)j->stats;                                                                \
        int64_t S = j->S, CS = j->C * S, k0 = c0 * S, k1 = c1 * S;                                            \
        double *a = j->ws, *m = j->ws + CS, M = (double)(j->N * S);                                           \
        /* each channel's mean in its S columns of m, its M2 in the sum of its S columns of a */              \
        if (j->dt == EMBER_FLOAT32) cols_moments_##T(j, k0, k1, a, m);                                          \
        else cols_two_pass_##T(j, k0, k1, a, m);                                                              \
        /* scale and shift per column */                                                                      \
        for (int64_t c = c0; c < c1; c++) {                                                                   \
            double sum = 0, mean = m[c * S];                                                                  \
            for (int64_t i = 0; i < S; i++) sum += a[c * S + i];                                              \
            double var = sum / M, scale = (double)w[c] / sqrt(var + j->eps);                                  \
            for (int64_t i = 0; i < S; i++) a[c * S + i] = scale, m[c * S + i] = (double)b[c] - mean * scale; \
            st[c] = (T)mean;                                                                                  \
            st[j->C + c] = (T)var;                                                                            \
        }                                                                                                     \
        for (int64_t n = 0; n < j->N; n++) {                                                                  \
            for (int64_t k = k0; k < k1; k++) y[n * CS + k] = x[n * CS + k] * (T)a[k] + (T)m[k];              \
            if (j->act) act_##T(j->act, j->lo, j->hi, y + n * CS + k0, k1 - k0);                              \
        }                                                                                                     \
    }
BN_FWD_COLUMNS(float)
BN_FWD_COLUMNS(double)
#undef BN_FWD_COLUMNS

#define BN_BWD_COLUMNS(T)                                                                                    \
    EMBER_SIMD static void bn_bwd_cols_##T(void *vctx, int64_t c0, int64_t c1)                               \
    {                                                                                                        \
        const bn_job *j = vctx;                                                                              \
        const T *x = (const T *)j->x, *g = (const T *)j->g, *w = (const T *)j->w, *st = (const T *)j->stats; \
        T *gx = (T *)j->y, *gwb = (T *)j->gwb;                                                               \
        int64_t S = j->S, CS = j->C * S, k0 = c0 * S, k1 = c1 * S;                                           \
        double *sg = j->ws, *sgx = j->ws + CS, *m = j->ws + 2 * CS, M = (double)(j->N * S);                  \
        if (j->ya) {   /* the activation's gradient, written into gx first */                                \
            for (int64_t n = 0; n < j->N; n++)                                                               \
                act_mask_##T(j->act, j->lo, j->hi, g + n * CS + k0, (const T *)j->ya + n * CS + k0, gx + n * CS + k0, k1 - k0); \
            g = gx;                                                                                          \
        }                                                                                                    \
        /* the columns' sum(g) and sum(g (x - mean)) */                                                      \
        for (int64_t k = k0; k < k1; k++) sg[k] = sgx[k] = 0, m[k] = (double)st[k / S];                      \
        for (int64_t n = 0; n < j->N; n++)                                                                   \
            for (int64_t k = k0; k < k1; k++) {                                                              \
                double gv = (double)g[n * CS + k];                                                           \
                sg[k] += gv;                                                                                 \
                sgx[k] += gv * ((double)x[n * CS + k] - m[k]);                                               \
            }                                                                                                \
        /* each channel's sums, then its coefficients a, kx, k0 in its S columns */                          \
        for (int64_t c = c0; c < c1; c++) {                                                                  \
            double mean = (double)st[c], invstd = 1.0 / sqrt((double)st[j->C + c] + j->eps);                 \
            double sum_g = 0, sum_gx = 0;                                                                    \
            for (int64_t i = 0; i < S; i++) sum_g += sg[c * S + i], sum_gx += sgx[c * S + i];                \
            sum_gx *= invstd;                                                                                \
            double a = (double)w[c] * invstd, kx = -a * invstd * sum_gx / M;                                 \
            for (int64_t i = 0; i < S; i++)                                                                  \
                sg[c * S + i] = a, sgx[c * S + i] = kx, m[c * S + i] = -a * sum_g / M - kx * mean;           \
            gwb[c] = (T)sum_gx;                                                                              \
            gwb[j->C + c] = (T)sum_g;                                                                        \
        }                                                                                                    \
        for (int64_t n = 0; n < j->N; n++)                                                                   \
            for (int64_t k = k0; k < k1; k++)                                                                \
                gx[n * CS + k] = g[n * CS + k] * (T)sg[k] + x[n * CS + k] * (T)sgx[k] + (T)m[k];             \
    }
BN_BWD_COLUMNS(float)
BN_BWD_COLUMNS(double)
#undef BN_BWD_COLUMNS

/* the kernel for the job's shape and dtype, and its workspace */
static ember__range_fn bn_kernel(bn_job *j, bool backward)
{
    bool f32 = j->dt == EMBER_FLOAT32;
    if (j->S >= COLUMN_S) return backward ? (f32 ? bn_bwd_float : bn_bwd_double) : (f32 ? bn_fwd_float : bn_fwd_double);
    return backward ? (f32 ? bn_bwd_cols_float : bn_bwd_cols_double) : (f32 ? bn_fwd_cols_float : bn_fwd_cols_double);
}

static size_t ws_bytes(const bn_job *j) { return j->S >= COLUMN_S ? 0 : (size_t)(4 * j->C * j->S) * sizeof(double); }

static int bn_run(const char *op, bn_job *j, bool backward)
{
    size_t bytes = ws_bytes(j);
    if (bytes && !(j->ws = ember__alloc(bytes))) return ember__fail(EMBER_ERR_OOM, "%s: out of memory", op);
    /* a task's channels fill a cache line where they are adjacent (S = 1:
       BatchNorm1d, channels_last) */
    int64_t grain = channel_grain(j->N * j->S);
    if (j->S == 1 && grain < 16) grain = 16;
    ember__parallel_for(j->C, grain, bn_kernel(j, backward), j);
    ember__free(j->ws, bytes);
    return EMBER_OK;
}

/* ------------------------------------------------------------------ composed (no recording) */
/* ember's ops in a chain over an arena (arena.h) that owns each result */
#define CH_BIN(name)                                                                 \
    static ember_tensor *ch_##name(arena *ch, ember_tensor *a, ember_tensor *b)          \
    {                                                                                \
        ember_tensor *o = NULL;                                                      \
        if (ch->rc < 0 || !a || !b) return NULL;                                     \
        int rc = ember_##name(a, b, &o);                                             \
        return keep(ch, rc, &o);                                                      \
    }
CH_BIN(add) CH_BIN(sub) CH_BIN(mul)
#undef CH_BIN

/* the sum or mean over every dim but 1, kept as (1, C, 1, ...) */
static ember_tensor *ch_reduce(arena *ch, ember_tensor *a, bool mean)
{
    ember_tensor *o = NULL;
    if (ch->rc < 0 || !a) return NULL;
    int nd = ember_tensor_ndim(a), dims[EMBER_MAX_DIMS], k = 0;
    for (int d = 0; d < nd; d++)
        if (d != 1) dims[k++] = d;
    int rc = mean ? ember_mean(a, k, dims, 1, &o) : ember_sum(a, k, dims, 1, &o);
    return keep(ch, rc, &o);
}

static ember_tensor *ch_view(arena *ch, ember_tensor *a, int nd, const int64_t *shape)
{
    ember_tensor *o = NULL;
    if (ch->rc < 0 || !a) return NULL;
    int rc = ember_reshape(a, nd, shape, &o);
    return keep(ch, rc, &o);
}

/* a number, which promotes as Lua's numbers do (it keeps the other operand's dtype) */
static ember_tensor *ch_num(arena *ch, double v)
{
    ember_tensor *o = NULL;
    if (ch->rc < 0) return NULL;
    int rc = ember_scalar(v, EMBER_FLOAT64, 1, &o);
    return keep(ch, rc, &o);
}

static ember_tensor *ch_rsqrt(arena *ch, ember_tensor *a)
{
    ember_tensor *o = NULL;
    if (ch->rc < 0 || !a) return NULL;
    int rc = ember_rsqrt(a, &o);
    return keep(ch, rc, &o);
}

/* (1, C, 1, ...) for x's ndim: how a per-channel vector broadcasts */
static int channel_shape(const ember_tensor *x, int64_t *shape)
{
    int nd = ember_tensor_ndim(x);
    for (int d = 0; d < nd; d++) shape[d] = 1;
    shape[1] = ember_tensor_shape(x)[1];
    return nd;
}

/* rows r of a (2, C) tensor as (1, C, 1, ...) */
static ember_tensor *ch_row(arena *ch, ember_tensor *t2, int r, const ember_tensor *x)
{
    ember_tensor *o = NULL;
    if (ch->rc < 0 || !t2) return NULL;
    int rc = ember_narrow(t2, 0, r, 1, &o);
    ember_tensor *row = keep(ch, rc, &o);
    int64_t shape[EMBER_MAX_DIMS];
    return ch_view(ch, row, channel_shape(x, shape), shape);
}

/* (2, C) from two (1, C, 1, ...) */
static ember_tensor *ch_rows(arena *ch, ember_tensor *a, ember_tensor *b)
{
    if (ch->rc < 0 || !a || !b) return NULL;
    int64_t row[2] = {1, ember_tensor_shape(a)[1]};
    ember_tensor *parts[2] = {ch_view(ch, a, 2, row), ch_view(ch, b, 2, row)}, *o = NULL;
    if (ch->rc < 0) return NULL;
    int rc = ember_cat(2, parts, 0, &o);
    return keep(ch, rc, &o);
}

static int chain_result(arena *ch, ember_tensor *t, ember_tensor **out)
{
    if (ch->rc >= 0 && t) {
        ember_tensor_retain(t);
        *out = t;
    }
    return ch->rc;
}

/* batch_norm's formulas as ops, recorded where a recording sees them */
int ember__batch_norm_composed(ember_tensor *x, ember_tensor *w, ember_tensor *b, double eps, ember_tensor **y,
                               ember_tensor **stats)
{
    arena ch = {.who = "batch_norm", .rc = EMBER_OK};
    int64_t cs[EMBER_MAX_DIMS];
    int nd = channel_shape(x, cs);
    ember_tensor *mean = ch_reduce(&ch, x, true), *xc = ch_sub(&ch, x, mean);
    ember_tensor *var = ch_reduce(&ch, ch_mul(&ch, xc, xc), true);
    ember_tensor *invstd = ch_rsqrt(&ch, ch_add(&ch, var, ch_num(&ch, eps)));
    ember_tensor *out =
        ch_add(&ch, ch_mul(&ch, ch_mul(&ch, xc, invstd), ch_view(&ch, w, nd, cs)), ch_view(&ch, b, nd, cs));
    int rc = chain_result(&ch, out, y);
    if (rc >= 0) rc = chain_result(&ch, ch_rows(&ch, mean, var), stats);
    if (rc < 0 && *y) {
        ember_tensor_release(*y);
        *y = NULL;
    }
    arena_end(&ch);
    return rc;
}

int ember__batch_norm_backward_composed(ember_tensor *g, ember_tensor *x, ember_tensor *w, ember_tensor *stats,
                                        double eps, ember_tensor **gx, ember_tensor **gwb)
{
    arena ch = {.who = "batch_norm", .rc = EMBER_OK};
    int64_t cs[EMBER_MAX_DIMS];
    int nd = channel_shape(x, cs);
    double M = (double)ember_tensor_numel(x) / (double)cs[1];
    ember_tensor *mean = ch_row(&ch, stats, 0, x), *var = ch_row(&ch, stats, 1, x);
    ember_tensor *invstd = ch_rsqrt(&ch, ch_add(&ch, var, ch_num(&ch, eps)));
    ember_tensor *xhat = ch_mul(&ch, ch_sub(&ch, x, mean), invstd);
    ember_tensor *sum_g = ch_reduce(&ch, g, false), *sum_gx = ch_reduce(&ch, ch_mul(&ch, g, xhat), false);
    /* g - sum_g / M - xhat sum_gx / M */
    ember_tensor *inner = ch_sub(&ch, ch_sub(&ch, g, ch_mul(&ch, sum_g, ch_num(&ch, 1 / M))),
                                 ch_mul(&ch, xhat, ch_mul(&ch, sum_gx, ch_num(&ch, 1 / M))));
    ember_tensor *out = ch_mul(&ch, inner, ch_mul(&ch, ch_view(&ch, w, nd, cs), invstd));
    int rc = chain_result(&ch, out, gx);
    if (rc >= 0) rc = chain_result(&ch, ch_rows(&ch, sum_gx, sum_g), gwb);
    if (rc < 0 && *gx) {
        ember_tensor_release(*gx);
        *gx = NULL;
    }
    arena_end(&ch);
    return rc;
}

/* the composed forms inside an op's forward, where nothing is recorded (the
   op itself is, by dispatch): autograd_ops.h's pause */
static int no_recording(int (*fn)(ember_tensor *const *, double, ember_tensor **), ember_tensor *const *in,
                        double eps, ember_tensor **out)
{
    int paused = ember__ag_pause();
    int rc = fn(in, eps, out);
    ember__ag_resume(paused);
    return rc;
}

static int composed_fwd(ember_tensor *const *in, double eps, ember_tensor **out)
{
    return ember__batch_norm_composed(in[0], in[1], in[2], eps, &out[0], &out[1]);
}

static int composed_bwd(ember_tensor *const *in, double eps, ember_tensor **out)
{
    return ember__batch_norm_backward_composed(in[0], in[1], in[2], in[3], eps, &out[0], &out[1]);
}

/* ------------------------------------------------------------------ the ops */
/* batch_norm and batch_norm_act (the same, its activation applied to y as
   each channel's values are written) */
int fwd_batch_norm(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const char *name = ember__ops[op].name;
    const bool act = op == EMBER_OP_BATCH_NORM_ACT;
    ember_tensor *x = in[0], *w = in[1], *b = in[2];
    double eps = at ? at->f[0] : 1e-5;
    EMBER_TRY(bn_check(name, x, w, b));
    if (!(eps >= 0)) return ember__fail(EMBER_ERR_ARG, "%s: eps must be >= 0, got %g", name, eps);
    if (act) EMBER_TRY(ember__act_check(name, at, false));
    if (!bn_fast(in, 3) && act) {
        ember_tensor *y0[2] = {NULL, NULL};
        EMBER_TRY(no_recording(composed_fwd, in, eps, y0));
        int rc = ember__act_composed(at, y0[0], NULL, &out[0]);
        ember_tensor_release(y0[0]);
        if (rc < 0) ember_tensor_release(y0[1]);
        else out[1] = y0[1];
        return rc;
    }
    if (!bn_fast(in, 3)) return no_recording(composed_fwd, in, eps, out);
    int64_t C = x->shape[1], two_c[2] = {2, C};
    ember_tensor *c[3], *y = NULL, *st = NULL;
    const bool nhwc = ember__is_nhwc(x);
    EMBER_TRY(bn_contiguous(in, 3, nhwc, c));
    int rc = EMBER_OK;
    EMBER_CHECK(nhwc ? ember__new_nhwc(x->shape, x->dtype, &y) : ember__new(x->ndim, x->shape, x->dtype, EMBER_CPU, &y));
    EMBER_CHECK(ember__new(2, two_c, x->dtype, EMBER_CPU, &st));
    /* channels_last: N H W rows of C values, one column a channel */
    bn_job j = {.dt = x->dtype, .N = nhwc ? x->numel / C : x->shape[0], .C = C,
                .S = nhwc ? 1 : x->numel / (x->shape[0] * C),
                .x = ember__ptr(c[0]), .w = ember__ptr(c[1]), .b = ember__ptr(c[2]),
                .y = ember__ptr(y), .stats = ember__ptr(st), .eps = eps,
                .act = act ? (int)at->i[0] : 0, .lo = act ? ember__act_bound(at, 1) : 0, .hi = act ? ember__act_bound(at, 2) : 0};
    j.far = ember__stream_worth(2 * x->numel * ember_dtype_size(x->dtype));   /* x read, y written */
    j.stream = j.far && j.S >= COLUMN_S;
    EMBER_CHECK(bn_run(name, &j, false));
    out[0] = y;
    out[1] = st;
    y = st = NULL;
done:
    bn_release(c, 3);
    ember_tensor_release(y);
    ember_tensor_release(st);
    return rc;
}

/* batch_norm_backward, and batch_norm_act_backward(g, x, w, stats, y): g
   through the activation's mask of y (into gx, a channel at a time) first */
int fwd_batch_norm_backward(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const char *name = ember__ops[op].name;
    const bool act = op == EMBER_OP_BATCH_NORM_ACT_BACKWARD;
    ember_tensor *g = in[0], *x = in[1], *w = in[2], *st = in[3], *ya = act ? in[4] : NULL;
    double eps = at ? at->f[0] : 1e-5;
    char sg[200], sx[200], ss[200];
    EMBER_TRY(bn_check(name, x, w, NULL));
    int64_t C = x->shape[1];
    if (g->ndim != x->ndim || memcmp(g->shape, x->shape, (size_t)x->ndim * sizeof *x->shape) != 0 || st->ndim != 2 ||
        st->shape[0] != 2 || st->shape[1] != C ||
        (ya && (ya->ndim != x->ndim || memcmp(ya->shape, x->shape, (size_t)x->ndim * sizeof *x->shape) != 0)))
        return ember__fail(EMBER_ERR_SHAPE, "%s: gradient %s, input %s%s%s and stats %s do not match "
                           "(the gradient%s as the input, stats {2, %lld})", name, ember__tshape(sg, g),
                           ember__tshape(sx, x), ya ? ", output " : "", ya ? ember__tshape(ss, ya) : "",
                           ember__tshape(ss, st), ya ? " and output" : "", (long long)C);
    if (!(eps >= 0)) return ember__fail(EMBER_ERR_ARG, "%s: eps must be >= 0, got %g", name, eps);
    if (act) EMBER_TRY(ember__act_check(name, at, false));
    if (!bn_fast(in, act ? 5 : 4) && act) {
        ember_tensor *gz = NULL;
        EMBER_TRY(ember__act_composed(at, ya, g, &gz));
        ember_tensor *in4[4] = {gz, x, w, st};
        int rc = no_recording(composed_bwd, in4, eps, out);
        ember_tensor_release(gz);
        return rc;
    }
    if (!bn_fast(in, 4)) return no_recording(composed_bwd, in, eps, out);
    int64_t two_c[2] = {2, C};
    ember_tensor *c[5] = {NULL}, *gx = NULL, *gwb = NULL;
    const int nc = act ? 5 : 4;
    const bool nhwc = ember__is_nhwc(x) || ember__is_nhwc(g);
    EMBER_TRY(bn_contiguous(in, nc, nhwc, c));
    int rc = EMBER_OK;
    EMBER_CHECK(nhwc ? ember__new_nhwc(x->shape, x->dtype, &gx) : ember__new(x->ndim, x->shape, x->dtype, EMBER_CPU, &gx));
    EMBER_CHECK(ember__new(2, two_c, x->dtype, EMBER_CPU, &gwb));
    bn_job j = {.dt = x->dtype, .N = nhwc ? x->numel / C : x->shape[0], .C = C,
                .S = nhwc ? 1 : x->numel / (x->shape[0] * C),
                .x = ember__ptr(c[1]), .g = ember__ptr(c[0]), .w = ember__ptr(c[2]),
                .y = ember__ptr(gx), .stats = ember__ptr(c[3]), .gwb = ember__ptr(gwb), .eps = eps,
                .act = act ? (int)at->i[0] : 0, .lo = act ? ember__act_bound(at, 1) : 0, .hi = act ? ember__act_bound(at, 2) : 0,
                .ya = act ? ember__ptr(c[4]) : NULL};
    j.far = ember__stream_worth(3 * x->numel * ember_dtype_size(x->dtype));   /* x and g read, gx written */
    EMBER_CHECK(bn_run(name, &j, true));
    out[0] = gx;
    out[1] = gwb;
    gx = gwb = NULL;
done:
    bn_release(c, nc);
    ember_tensor_release(gx);
    ember_tensor_release(gwb);
    return rc;
}

int ember_batch_norm(ember_tensor *x, ember_tensor *w, ember_tensor *b, double eps, ember_tensor **y,
                     ember_tensor **stats)
{
    if (!y || !stats) return ember__fail(EMBER_ERR_ARG, "batch_norm: NULL argument");
    ember_tensor *in[3] = {x, w, b}, *out[2] = {NULL, NULL};
    ember_attrs at = {{0}, {eps, 0}};
    int rc = ember__dispatch(EMBER_OP_BATCH_NORM, 3, in, &at, out);
    *y = out[0];
    *stats = out[1];
    return rc;
}

int ember_batch_norm_backward(ember_tensor *g, ember_tensor *x, ember_tensor *w, ember_tensor *stats, double eps,
                              ember_tensor **gx, ember_tensor **gwb)
{
    if (!gx || !gwb) return ember__fail(EMBER_ERR_ARG, "batch_norm_backward: NULL argument");
    ember_tensor *in[4] = {g, x, w, stats}, *out[2] = {NULL, NULL};
    ember_attrs at = {{0}, {eps, 0}};
    int rc = ember__dispatch(EMBER_OP_BATCH_NORM_BACKWARD, 4, in, &at, out);
    *gx = out[0];
    *gwb = out[1];
    return rc;
}

int ember_batch_norm_act(ember_tensor *x, ember_tensor *w, ember_tensor *b, double eps, int activation, double lo,
                         double hi, ember_tensor **y, ember_tensor **stats)
{
    if (!y || !stats) return ember__fail(EMBER_ERR_ARG, "batch_norm_act: NULL argument");
    ember_tensor *in[3] = {x, w, b}, *out[2] = {NULL, NULL};
    ember_attrs at = {{activation}, {eps, 0}};
    ember__act_set_bounds(&at, lo, hi);
    int rc = ember__dispatch(EMBER_OP_BATCH_NORM_ACT, 3, in, &at, out);
    *y = out[0];
    *stats = out[1];
    return rc;
}

int ember_batch_norm_act_backward(ember_tensor *g, ember_tensor *x, ember_tensor *w, ember_tensor *stats,
                                  ember_tensor *y, double eps, int activation, double lo, double hi,
                                  ember_tensor **gx, ember_tensor **gwb)
{
    if (!gx || !gwb) return ember__fail(EMBER_ERR_ARG, "batch_norm_act_backward: NULL argument");
    ember_tensor *in[5] = {g, x, w, stats, y}, *out[2] = {NULL, NULL};
    ember_attrs at = {{activation}, {eps, 0}};
    ember__act_set_bounds(&at, lo, hi);
    int rc = ember__dispatch(EMBER_OP_BATCH_NORM_ACT_BACKWARD, 5, in, &at, out);
    *gx = out[0];
    *gwb = out[1];
    return rc;
}

/* pool.c: max and average pooling and their adjoints on the CPU.

   Pooling runs one (n, c) plane per task. max_pool2d returns the flat
   position h * W + w of each maximum within its plane (the first maximum in
   window order, or the last NaN: NaN wins, as in PyTorch); avg_pool2d
   counts padding as zeros. The 2x2 stride-2 float32 case, the common one,
   has SSE2 kernels both ways (four windows per step, the last step
   overlapping the one before instead of a scalar tail), so that the
   selects are vector masks, not mispredicted branches; every other max
   pooling, and average pooling both ways, go by rows and then columns at
   the vector width (pool_window.c), the window-at-a-time loops below kept
   for where its workspace is not to be had. The forward computes the
   positions only where they will be read (values_only_next).
   Dtypes: nn.h. */
#include "nn.h"
#include "../autograd.h"
#include "../dtr.h"
#include "../plan/plan.h"

#include <stdatomic.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>

/* NaN-aware x > y lane by lane (POOL_GT), and a select by mask */
static inline __m128 sse_gt_nan(__m128 x, __m128 y)
{
    return _mm_or_ps(_mm_cmpgt_ps(x, y), _mm_cmpunord_ps(x, x));
}
static inline __m128 sse_select(__m128 m, __m128 a, __m128 b) { return _mm_or_ps(_mm_and_ps(m, a), _mm_andnot_ps(m, b)); }
#endif

/* ------------------------------------------------------------------ pooling */

typedef ember__pool_geom pool_geom;   /* ops.h */

static int pool_geom_init(const char *op, const int64_t *xs, const int64_t *k, const int64_t *st,
                          const int64_t *pd, pool_geom *p)
{
    if (k[0] < 1 || k[1] < 1 || st[0] < 1 || st[1] < 1 || pd[0] < 0 || pd[1] < 0)
        return ember__fail(EMBER_ERR_ARG, "%s: kernel {%lld, %lld} and stride {%lld, %lld} must be positive and "
                           "padding {%lld, %lld} non-negative", op, (long long)k[0], (long long)k[1],
                           (long long)st[0], (long long)st[1], (long long)pd[0], (long long)pd[1]);
    if (!nn_attrs_in_range(2, k) || !nn_attrs_in_range(2, st) || !nn_attrs_in_range(2, pd))
        return ember__fail(EMBER_ERR_ARG, "%s: kernel {%lld, %lld}, stride {%lld, %lld} and padding {%lld, %lld} "
                           "must be below 2^31", op, (long long)k[0], (long long)k[1], (long long)st[0],
                           (long long)st[1], (long long)pd[0], (long long)pd[1]);
    if (2 * pd[0] > k[0] || 2 * pd[1] > k[1])
        return ember__fail(EMBER_ERR_ARG, "%s: padding {%lld, %lld} must be at most half the kernel {%lld, %lld}",
                           op, (long long)pd[0], (long long)pd[1], (long long)k[0], (long long)k[1]);
    /* padding gives an empty plane windows (Ho, Wo >= 1) that hold no element */
    if (xs[2] < 1 || xs[3] < 1)
        return ember__fail(EMBER_ERR_SHAPE, "%s: input {%lld, %lld, %lld, %lld} has an empty plane (H and W must be "
                           "at least 1)", op, (long long)xs[0], (long long)xs[1], (long long)xs[2],
                           (long long)xs[3]);
    p->N = xs[0], p->C = xs[1], p->H = xs[2], p->W = xs[3];
    p->kh = k[0], p->kw = k[1], p->sh = st[0], p->sw = st[1], p->ph = pd[0], p->pw = pd[1];
    p->Ho = nn_out_size(p->H, p->kh, p->sh, p->ph, 1);
    p->Wo = nn_out_size(p->W, p->kw, p->sw, p->pw, 1);
    if (p->Ho < 1 || p->Wo < 1)
        return ember__fail(EMBER_ERR_SHAPE, "%s: input {%lld, %lld, %lld, %lld} padded by {%lld, %lld} is smaller "
                           "than the kernel {%lld, %lld}", op, (long long)xs[0], (long long)xs[1],
                           (long long)xs[2], (long long)xs[3], (long long)p->ph, (long long)p->pw,
                           (long long)p->kh, (long long)p->kw);
    return EMBER_OK;
}

typedef struct {
    const pool_geom *p;
    int dt;
    const char *x;
    char *y;
    int64_t *idx;
} pool_ctx;

/* NaN-aware x > y: x > y, or x is NaN. Max pooling keeps the first maximum
   in window order, and the last NaN (a NaN wins over anything, an earlier
   NaN included), as PyTorch's max_pool2d does (its torch.max keeps the
   first NaN; before issue 26 ember's pooling kept the first NaN too). */
#define POOL_GT(x, y) ((x) > (y) || (x) != (x))

#ifdef __SSE2__
/* windows ow .. ow + 3 of one output row */
static inline void maxpool2_fwd4(const float *r0, const float *r1, int64_t W, int64_t at, int64_t ow, float *y,
                                 int64_t *ix)
{
    const __m128i one = _mm_set1_epi32(1), wv = _mm_set1_epi32((int)W), zero = _mm_setzero_si128();
    __m128i pos = _mm_add_epi32(_mm_set1_epi32((int)(at + 2 * ow)), _mm_setr_epi32(0, 2, 4, 6));
    __m128 p0 = _mm_loadu_ps(r0 + 2 * ow), p1 = _mm_loadu_ps(r0 + 2 * ow + 4);
    __m128 q0 = _mm_loadu_ps(r1 + 2 * ow), q1 = _mm_loadu_ps(r1 + 2 * ow + 4);
    __m128 a = _mm_shuffle_ps(p0, p1, _MM_SHUFFLE(2, 0, 2, 0)), b = _mm_shuffle_ps(p0, p1, _MM_SHUFFLE(3, 1, 3, 1));
    __m128 c = _mm_shuffle_ps(q0, q1, _MM_SHUFFLE(2, 0, 2, 0)), d = _mm_shuffle_ps(q0, q1, _MM_SHUFFLE(3, 1, 3, 1));
    __m128 t1 = sse_gt_nan(b, a), t2 = sse_gt_nan(d, c);
    __m128 m1 = sse_select(t1, b, a), m2 = sse_select(t2, d, c);
    __m128 t3 = sse_gt_nan(m2, m1);
    _mm_storeu_ps(y + ow, sse_select(t3, m2, m1));
    if (!ix) return;   /* the values only */
    /* offset in the window: t3 ? W + t2 : t1 */
    __m128i o1 = _mm_and_si128(_mm_castps_si128(t1), one);
    __m128i o2 = _mm_add_epi32(wv, _mm_and_si128(_mm_castps_si128(t2), one));
    __m128i m3 = _mm_castps_si128(t3);
    __m128i pk = _mm_add_epi32(pos, _mm_or_si128(_mm_and_si128(m3, o2), _mm_andnot_si128(m3, o1)));
    _mm_storeu_si128((__m128i *)(ix + ow), _mm_unpacklo_epi32(pk, zero));
    _mm_storeu_si128((__m128i *)(ix + ow + 2), _mm_unpackhi_epi32(pk, zero));
}
#endif

/* One output row of 2x2 stride-2 max pooling over input rows r0 and r1;
   `at` is the flat position of r0[0] in its plane. Each window is a
   tournament: (a, b) and (c, d), then the two winners, the earlier one
   kept on ties and the later one where it is NaN, which gives the first
   maximum in window order, or the last NaN. */
static void maxpool2_row_f32(const float *restrict r0, const float *restrict r1, int64_t W, int64_t Wo, int64_t at,
                             float *restrict y, int64_t *restrict ix)   /* ix NULL: the values only */
{
    int64_t ow = 0;
#ifdef __SSE2__
    /* four windows per step; compilers leave the scalar loop's selects as
       branches, which mispredict on real data (the comparisons are coin flips) */
    if (Wo >= 4 && at + 2 * Wo + W < INT32_MAX) {
        for (; ow + 4 <= Wo; ow += 4) maxpool2_fwd4(r0, r1, W, at, ow, y, ix);
        /* the last windows as one more step, overlapping the one before: no scalar tail */
        if (ow < Wo) maxpool2_fwd4(r0, r1, W, at, Wo - 4, y, ix);
        ow = Wo;
    }
#endif
    for (; ow < Wo; ow++) {
        float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
        int t1 = POOL_GT(b, a), t2 = POOL_GT(d, c);
        float m1 = t1 ? b : a, m2 = t2 ? d : c;
        int t3 = POOL_GT(m2, m1);
        y[ow] = t3 ? m2 : m1;
        if (ix) ix[ow] = at + 2 * ow + (t3 ? W + t2 : t1);
    }
}

/* rows [h0, h1) and columns [w0, w1) of output (oh, ow)'s window, clipped to the plane */
static inline void window_of(const pool_geom *p, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0,
                             int64_t *w1)
{
    int64_t h = oh * p->sh - p->ph, w = ow * p->sw - p->pw;
    *h1 = h + p->kh < p->H ? h + p->kh : p->H;
    *w1 = w + p->kw < p->W ? w + p->kw : p->W;
    *h0 = h < 0 ? 0 : h;
    *w0 = w < 0 ? 0 : w;
}

#define DEFINE_POOL(T, SUFFIX)                                                                 \
    static void maxpool_##SUFFIX(const pool_ctx *c, int64_t q0, int64_t q1)                    \
    {                                                                                          \
        const pool_geom *p = c->p;                                                             \
        for (int64_t q = q0; q < q1; q++) {                                                    \
            const T *x = (const T *)c->x + q * p->H * p->W;                                    \
            T *y = (T *)c->y + q * p->Ho * p->Wo;                                              \
            int64_t *ix = c->idx ? c->idx + q * p->Ho * p->Wo : NULL;                          \
            for (int64_t oh = 0; oh < p->Ho; oh++)                                             \
                for (int64_t ow = 0; ow < p->Wo; ow++) {                                       \
                    int64_t h0, h1, w0, w1;                                                    \
                    window_of(p, oh, ow, &h0, &h1, &w0, &w1);                                  \
                    T best = x[h0 * p->W + w0];                                                \
                    int64_t at = h0 * p->W + w0;                                               \
                    for (int64_t h = h0; h < h1; h++)                                          \
                        for (int64_t w = w0; w < w1; w++) {                                    \
                            T v = x[h * p->W + w];                                             \
                            if (POOL_GT(v, best)) {                                            \
                                best = v;                                                      \
                                at = h * p->W + w;                                             \
                            }                                                                  \
                        }                                                                      \
                    y[oh * p->Wo + ow] = best;                                                 \
                    if (ix) ix[oh * p->Wo + ow] = at;                                          \
                }                                                                              \
        }                                                                                      \
    }                                                                                          \
    /* average pooling, or with bwd its adjoint: each window's g spread over it */             \
    static void avgpool_##SUFFIX(const pool_ctx *c, int64_t q0, int64_t q1, bool bwd)          \
    {                                                                                          \
        const pool_geom *p = c->p;                                                             \
        const T inv = (T)1 / (T)(p->kh * p->kw);                                               \
        const int64_t in = p->H * p->W, out = p->Ho * p->Wo;                                   \
        for (int64_t q = q0; q < q1; q++) {                                                    \
            const T *src = (const T *)c->x + q * (bwd ? out : in);                             \
            T *dst = (T *)c->y + q * (bwd ? in : out);                                         \
            for (int64_t oh = 0; oh < p->Ho; oh++)                                             \
                for (int64_t ow = 0; ow < p->Wo; ow++) {                                       \
                    int64_t h0, h1, w0, w1, o = oh * p->Wo + ow;                               \
                    window_of(p, oh, ow, &h0, &h1, &w0, &w1);                                  \
                    if (bwd) {                                                                 \
                        T v = src[o] * inv;                                                    \
                        for (int64_t h = h0; h < h1; h++)                                      \
                            for (int64_t w = w0; w < w1; w++) dst[h * p->W + w] += v;          \
                        continue;                                                              \
                    }                                                                          \
                    T sum = 0;                                                                 \
                    for (int64_t h = h0; h < h1; h++)                                          \
                        for (int64_t w = w0; w < w1; w++) sum += src[h * p->W + w];            \
                    dst[o] = sum * inv;                                                        \
                }                                                                              \
        }                                                                                      \
    }

DEFINE_POOL(float, f32)
DEFINE_POOL(double, f64)

enum { POOL_MAX, POOL_AVG, POOL_AVG_BWD };

typedef struct {
    pool_ctx c;
    int kind;
} pool_task;

/* 2x2 windows, stride 2, no padding (the layer every small CNN uses), float32 */
static bool is_maxpool2(const pool_ctx *c)
{
    const pool_geom *p = c->p;
    return c->dt == EMBER_FLOAT32 && p->kh == 2 && p->kw == 2 && p->sh == 2 && p->sw == 2 && p->ph == 0 &&
           p->pw == 0;
}

static void maxpool2_f32(const pool_ctx *c, int64_t q0, int64_t q1)
{
    const pool_geom *p = c->p;
    for (int64_t q = q0; q < q1; q++) {
        const float *x = (const float *)c->x + q * p->H * p->W;
        float *y = (float *)c->y + q * p->Ho * p->Wo;
        int64_t *ix = c->idx ? c->idx + q * p->Ho * p->Wo : NULL;
        for (int64_t oh = 0; oh < p->Ho; oh++)
            maxpool2_row_f32(x + 2 * oh * p->W, x + (2 * oh + 1) * p->W, p->W, p->Wo, 2 * oh * p->W,
                             y + oh * p->Wo, ix ? ix + oh * p->Wo : NULL);
    }
}

static void pool_range(void *ctx, int64_t q0, int64_t q1)
{
    const pool_task *t = ctx;
    bool f = t->c.dt == EMBER_FLOAT32;
    switch (t->kind) {
    case POOL_MAX:
        if (is_maxpool2(&t->c)) maxpool2_f32(&t->c, q0, q1);
        else if (ember__maxpool_sweeps(t->c.p, t->c.dt, t->c.x, t->c.y, t->c.idx, q0, q1)) break;
        else if (f) maxpool_f32(&t->c, q0, q1);
        else maxpool_f64(&t->c, q0, q1);
        break;
    default: {
        bool bwd = t->kind == POOL_AVG_BWD;
        if (ember__avgpool_sweeps(t->c.p, t->c.dt, t->c.x, t->c.y, q0, q1, bwd)) break;
        f ? avgpool_f32(&t->c, q0, q1, bwd) : avgpool_f64(&t->c, q0, q1, bwd);
        break;
    }
    }
}

static void pool_launch(pool_task *t)
{
    const pool_geom *p = t->c.p;
    ember__parallel_for(p->N * p->C, ember__nn_rows_grain(p->H * p->W), pool_range, t);
}

/* Set by ember_max_pool2d around its dispatch, read and cleared by the
   forward: true when the caller wants no positions and nothing will keep
   them (values_only_ok), so out[1] stays NULL and no position is computed.
   A thread-local word, not an attr, so that no op a plan file holds can
   ask for it. */
static EMBER_TLS bool values_only_next;

/* attr i[6] of max_pool2d: 1 when the caller asked for no positions, so
   those a recording saves for the backward are int32 (the public
   return_indices result stays int64, as PyTorch's) */
#define POSITIONS_32 6

/* *ix (int64 positions in planes of H x W) as int32, in the same layout */
static int narrow_positions(const pool_geom *p, ember_tensor **ix)
{
    if (!*ix || p->H * p->W > INT32_MAX) return EMBER_OK;   /* int64 stays: backward reads both */
    ember_tensor *n = NULL;
    bool nhwc = ember__is_nhwc(*ix);
    EMBER_TRY(nhwc ? ember__layout_as(*ix, EMBER_INT32, true, &n) : ember__contiguous_as(*ix, EMBER_INT32, &n));
    ember_tensor_release(*ix);
    *ix = n;
    return EMBER_OK;
}

int fwd_max_pool2d(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    ember_tensor *x = in[0];
    pool_geom p;
    int64_t ys[4];
    EMBER_TRY(ember__pool_plan_make(op, in, at, &p, ys));
    const bool values_only = values_only_next;   /* ember_max_pool2d's word for this call */
    values_only_next = false;
    if (ember__is_nhwc(x)) {
        EMBER_TRY(ember__max_pool2d_nhwc(&p, x, ys, values_only, out));   /* pool_nhwc.c */
        return at->i[POSITIONS_32] ? narrow_positions(&p, &out[1]) : EMBER_OK;
    }
    int dt = x->dtype, cdt = nn_compute_dtype(dt), rc = EMBER_OK;
    ember_tensor *cx = NULL, *y = NULL, *ix = NULL;
    EMBER_CHECK(ember__new(4, ys, cdt, EMBER_CPU, &y));
    if (!values_only) EMBER_CHECK(ember__new(4, ys, EMBER_INT64, EMBER_CPU, &ix));
    if (y->numel > 0) {
        EMBER_CHECK(ember__contiguous_as(x, cdt, &cx));
        pool_task t = {{&p, cdt, ember__ptr(cx), ember__ptr(y), ix ? (int64_t *)ember__ptr(ix) : NULL}, POOL_MAX};
        pool_launch(&t);
    }
    if (at->i[POSITIONS_32]) EMBER_CHECK(narrow_positions(&p, &ix));
    rc = ember__nn_finish(y, dt, &out[0]);
    y = NULL;
    EMBER_CHECK(rc);
    out[1] = ember__take(&ix);
done:
    EMBER_RELEASE(cx, y, ix);
    return rc;
}

/* ------------------------------------------------------------------ 2x2 max-pool backward
   When every index of a plane lies in its own 2x2 window (what max_pool2d
   gives for kernel 2, stride 2, on a float32 plane), each window of gx is
   written whole in one pass: g at the index, 0 at the other three; no zero
   fill, no scatter. A plane with any other index is redone the general way
   (zero, then gx[ix] += g), which also finds indices outside the plane. */
typedef struct {
    const pool_geom *p;
    const void *g;
    const void *idx;   /* int64, or int32 (i32) */
    void *gx;
    int dt;
    bool i32;
    atomic_int bad_index;
} pool2_bwd_ctx;

/* index k of plane q's positions (int32 or int64) */
#define POS_AT(c, q, n, k) \
    ((c)->i32 ? (int64_t)((const int32_t *)(c)->idx)[(q) * (n) + (k)] : ((const int64_t *)(c)->idx)[(q) * (n) + (k)])

/* plane q the general way, in one pass over its part of gx while it is in
   the cache: zeroed, then gx[ix] += g in output order, each index checked
   against the plane (before, the whole of gx was zeroed, then every index
   checked on one thread, then scattered: three passes over memory) */
#define BWD_PLANE(T)                                                                       \
    do {                                                                                   \
        const T *g = (const T *)c->g + q * n;                                              \
        T *gx = (T *)c->gx + q * HW;                                                       \
        memset(gx, 0, sizeof(T) * (size_t)HW);                                             \
        for (int64_t k = 0; k < n; k++) {                                                  \
            int64_t at = POS_AT(c, q, n, k);                                               \
            if ((uint64_t)at >= (uint64_t)HW) {                                            \
                atomic_store_explicit(&c->bad_index, 1, memory_order_relaxed);             \
                break;                                                                     \
            }                                                                              \
            gx[at] += g[k];                                                                \
        }                                                                                  \
    } while (0)

static void maxpool_bwd_plane(pool2_bwd_ctx *c, int64_t q)
{
    const int64_t HW = c->p->H * c->p->W, n = c->p->Ho * c->p->Wo;
    if (c->dt == EMBER_FLOAT32) BWD_PLANE(float);
    else BWD_PLANE(double);
}

static void maxpool_bwd_range(void *vctx, int64_t q0, int64_t q1)
{
    for (int64_t q = q0; q < q1; q++) maxpool_bwd_plane(vctx, q);
}

#ifdef __SSE2__
/* windows ow .. ow + 3 of one row: false when an index is not in its window */
static inline bool maxpool2_bwd4(const float *gr, const void *ir, bool i32, float *r0, float *r1, int64_t W,
                                 int64_t at, int64_t ow)
{
    const __m128i zero = _mm_setzero_si128(), one = _mm_set1_epi32(1);
    const __m128i wv = _mm_set1_epi32((int)W), w1 = _mm_set1_epi32((int)W + 1);
    __m128i pos = _mm_add_epi32(_mm_set1_epi32((int)(at + 2 * ow)), _mm_setr_epi32(0, 2, 4, 6));
    __m128i lo, hi = zero;   /* low and high halves of the four indices */
    if (i32) {
        lo = _mm_loadu_si128((const __m128i *)((const int32_t *)ir + ow));
    } else {
        const int64_t *i64 = ir;
        __m128i i01 = _mm_loadu_si128((const __m128i *)(i64 + ow));
        __m128i i23 = _mm_loadu_si128((const __m128i *)(i64 + ow + 2));
        lo = _mm_unpacklo_epi64(_mm_shuffle_epi32(i01, _MM_SHUFFLE(2, 0, 2, 0)),
                                _mm_shuffle_epi32(i23, _MM_SHUFFLE(2, 0, 2, 0)));
        hi = _mm_unpacklo_epi64(_mm_shuffle_epi32(i01, _MM_SHUFFLE(3, 1, 3, 1)),
                                _mm_shuffle_epi32(i23, _MM_SHUFFLE(3, 1, 3, 1)));
    }
    __m128i r = _mm_sub_epi32(lo, pos);
    __m128i ma = _mm_cmpeq_epi32(r, zero), mb = _mm_cmpeq_epi32(r, one);
    __m128i mc = _mm_cmpeq_epi32(r, wv), md = _mm_cmpeq_epi32(r, w1);
    __m128i ok = _mm_and_si128(_mm_or_si128(_mm_or_si128(ma, mb), _mm_or_si128(mc, md)), _mm_cmpeq_epi32(hi, zero));
    if (_mm_movemask_epi8(ok) != 0xFFFF) return false;
    __m128 v = _mm_loadu_ps(gr + ow);
    __m128 va = _mm_and_ps(_mm_castsi128_ps(ma), v), vb = _mm_and_ps(_mm_castsi128_ps(mb), v);
    __m128 vc = _mm_and_ps(_mm_castsi128_ps(mc), v), vd = _mm_and_ps(_mm_castsi128_ps(md), v);
    _mm_storeu_ps(r0 + 2 * ow, _mm_unpacklo_ps(va, vb));
    _mm_storeu_ps(r0 + 2 * ow + 4, _mm_unpackhi_ps(va, vb));
    _mm_storeu_ps(r1 + 2 * ow, _mm_unpacklo_ps(vc, vd));
    _mm_storeu_ps(r1 + 2 * ow + 4, _mm_unpackhi_ps(vc, vd));
    return true;
}
#endif

/* one plane pooled 2x2 without remainder rows or columns beyond the last window;
   false when some index is not in its window */
static bool maxpool2_bwd_plane(const pool2_bwd_ctx *c, int64_t q, const float *g, float *gx)
{
    const pool_geom *p = c->p;
    const int64_t W = p->W, Ho = p->Ho, Wo = p->Wo, n = Ho * Wo;
    for (int64_t oh = 0; oh < Ho; oh++) {
        float *r0 = gx + 2 * oh * W, *r1 = r0 + W;
        const float *gr = g + oh * Wo;
        const int64_t at = 2 * oh * W;
        int64_t ow = 0;
#ifdef __SSE2__
        if (Wo >= 4 && at + 2 * Wo + W < INT32_MAX) {
            const bool i32 = c->i32;
            const int64_t row = q * n + oh * Wo;
            const void *ir = i32 ? (const void *)((const int32_t *)c->idx + row)
                                 : (const void *)((const int64_t *)c->idx + row);
            for (; ow + 4 <= Wo; ow += 4)
                if (!maxpool2_bwd4(gr, ir, i32, r0, r1, W, at, ow)) return false;
            /* the last windows as one more step of four, overlapping the one before
               (rewriting a window gives the same values): no scalar tail */
            if (ow < Wo && !maxpool2_bwd4(gr, ir, i32, r0, r1, W, at, Wo - 4)) return false;
            ow = Wo;
        }
#endif
        for (; ow < Wo; ow++) {
            int64_t k = POS_AT(c, q, n, oh * Wo + ow) - (at + 2 * ow);
            if (k != 0 && k != 1 && k != W && k != W + 1) return false;
            float v = gr[ow];
            r0[2 * ow] = k == 0 ? v : 0.0f;
            r0[2 * ow + 1] = k == 1 ? v : 0.0f;
            r1[2 * ow] = k == W ? v : 0.0f;
            r1[2 * ow + 1] = k == W + 1 ? v : 0.0f;
        }
    }
    return true;
}

static void maxpool2_bwd_range(void *vctx, int64_t q0, int64_t q1)
{
    pool2_bwd_ctx *c = vctx;
    const pool_geom *p = c->p;
    const int64_t HW = p->H * p->W, n = p->Ho * p->Wo;
    for (int64_t q = q0; q < q1; q++)
        if (!maxpool2_bwd_plane(c, q, (const float *)c->g + q * n, (float *)c->gx + q * HW))
            maxpool_bwd_plane(c, q);
}

/* indices may come from anywhere: fails naming the first one outside its plane */
static int check_pool_indices(const char *name, const pool2_bwd_ctx *c, int64_t n)
{
    for (int64_t k = 0; k < n; k++) {
        int64_t at = POS_AT(c, 0, 0, k);
        if (at < 0 || at >= c->p->H * c->p->W)
            return ember__fail(EMBER_ERR_ARG, "%s: index %lld is outside a %lld x %lld plane", name, (long long)at,
                               (long long)c->p->H, (long long)c->p->W);
    }
    return EMBER_OK;
}

/* shared by the two pooling forwards: checks x and sweeps the window over it */
static int pool_fwd_geom(const char *name, const ember_tensor *x, const ember_attrs *at, pool_geom *p)
{
    EMBER_TRY(ember__nn_need_4d(name, "input", x));
    EMBER_TRY(ember__nn_need_float(name, "input", x));
    return pool_geom_init(name, x->shape, &at->i[0], &at->i[2], &at->i[4], p);
}

/* shared by the two pool adjoints: checks g against the pooled shape of x_shape */
static int pool_bwd_geom(const char *name, ember_tensor *g, const ember_attrs *at, int64_t *xs, pool_geom *p)
{
    EMBER_TRY(ember__nn_need_4d(name, "grad_output", g));
    EMBER_TRY(ember__nn_need_float(name, "grad_output", g));
    EMBER_TRY(ember__nn_attr_shape(name, at, xs));
    EMBER_TRY(pool_geom_init(name, xs, &at->i[0], &at->i[2], &at->i[4], p));
    int64_t ys[4] = {p->N, p->C, p->Ho, p->Wo};
    if (memcmp(g->shape, ys, sizeof ys) != 0) {
        char s[200];
        return ember__fail(EMBER_ERR_SHAPE, "%s: grad_output has shape %s but pooling gives {%lld, %lld, %lld, %lld}",
                           name, ember__tshape(s, g), (long long)ys[0], (long long)ys[1], (long long)ys[2],
                           (long long)ys[3]);
    }
    return EMBER_OK;
}

/* max_pool2d_backward: g and the indices against the input's shape; each
   index names its input position, so no window geometry is needed */
static int max_pool_bwd_geom(const char *name, ember_tensor *g, ember_tensor *idx, const ember_attrs *at,
                             int64_t *xs, pool_geom *p)
{
    char s1[200], s2[200];
    EMBER_TRY(ember__nn_need_4d(name, "grad_output", g));
    EMBER_TRY(ember__nn_need_float(name, "grad_output", g));
    EMBER_TRY(ember__nn_attr_shape(name, at, xs));
    /* int32: the positions a recording saves for max_pool2d's backward (host only) */
    bool i32 = idx->dtype == EMBER_INT32 && idx->storage->device == EMBER_CPU;
    if ((idx->dtype != EMBER_INT64 && !i32) || idx->ndim != 4 || memcmp(idx->shape, g->shape, sizeof(int64_t) * 4) != 0)
        return ember__fail(EMBER_ERR_SHAPE,
                           "%s: indices must be int64 (or int32 on the CPU) of the grad_output's shape %s, got %s %s",
                           name, ember__tshape(s1, g), ember_dtype_name(idx->dtype), ember__tshape(s2, idx));
    if (g->shape[0] != xs[0] || g->shape[1] != xs[1])
        return ember__fail(EMBER_ERR_SHAPE, "%s: grad_output %s and input {%lld, %lld, %lld, %lld} differ in N or C",
                           name, ember__tshape(s1, g), (long long)xs[0], (long long)xs[1], (long long)xs[2],
                           (long long)xs[3]);
    *p = (pool_geom){.N = xs[0], .C = xs[1], .H = xs[2], .W = xs[3], .Ho = g->shape[2], .Wo = g->shape[3]};
    return EMBER_OK;
}

int ember__pool_plan_make(int op, ember_tensor *const *in, const ember_attrs *at, pool_geom *p, int64_t *rs)
{
    const char *name = ember__ops[op].name;
    switch (op) {
    case EMBER_OP_MAX_POOL2D_BACKWARD: return max_pool_bwd_geom(name, in[0], in[1], at, rs, p);
    case EMBER_OP_AVG_POOL2D_BACKWARD: return pool_bwd_geom(name, in[0], at, rs, p);
    case EMBER_OP_MAX_POOL2D: case EMBER_OP_AVG_POOL2D:
        EMBER_TRY(pool_fwd_geom(name, in[0], at, p));
        rs[0] = p->N, rs[1] = p->C, rs[2] = p->Ho, rs[3] = p->Wo;
        return EMBER_OK;
    default: return ember__fail(EMBER_ERR_UNSUPPORTED, "%s: not a pooling op", name);
    }
}

int fwd_max_pool2d_backward(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const char *name = ember__ops[op].name;
    ember_tensor *g = in[0], *idx = in[1];
    pool_geom p;
    int64_t xs[4];
    EMBER_TRY(ember__pool_plan_make(op, in, at, &p, xs));
    if (ember__is_nhwc(g)) return ember__max_pool2d_backward_nhwc(&p, g, idx, xs, out);   /* pool_nhwc.c */
    int dt = g->dtype, cdt = nn_compute_dtype(dt), rc = EMBER_OK;
    ember_tensor *cg = NULL, *ci = NULL, *gx = NULL;
    EMBER_CHECK(ember__new(4, xs, cdt, EMBER_CPU, &gx));
    if (g->numel == 0) {
        EMBER_CHECK(ember__fill_raw(gx, 0));
    } else {
        EMBER_CHECK(ember__contiguous_as(g, cdt, &cg));
        EMBER_CHECK(ember__contiguous_as(idx, idx->dtype, &ci));   /* int32 or int64, read as they are */
        /* the indices are checked on the way; planes tiled by 2x2 windows exactly
           (float32) first try each window written whole */
        pool2_bwd_ctx c = {&p, ember__ptr(cg), ember__ptr(ci), ember__ptr(gx), cdt, ci->dtype == EMBER_INT32, 0};
        bool two = cdt == EMBER_FLOAT32 && 2 * p.Ho == p.H && 2 * p.Wo == p.W;
        ember__parallel_for(p.N * p.C, ember__nn_rows_grain(p.H * p.W), two ? maxpool2_bwd_range : maxpool_bwd_range,
                            &c);
        if (atomic_load(&c.bad_index)) EMBER_CHECK(check_pool_indices(name, &c, ci->numel));
    }
    rc = ember__nn_finish(ember__take(&gx), dt, out);
done:
    EMBER_RELEASE(cg, ci, gx);
    return rc;
}

/* average pooling (kind POOL_AVG) or its adjoint (POOL_AVG_BWD, which adds
   into a zeroed result) over src, into a new tensor of `shape` in src's dtype */
static int avg_pool_run(const pool_geom *p, int kind, ember_tensor *src, const int64_t *shape, ember_tensor **out)
{
    if (ember__is_nhwc(src)) return ember__avg_pool2d_nhwc(p, kind == POOL_AVG_BWD, src, shape, out);   /* pool_nhwc.c */
    int dt = src->dtype, cdt = nn_compute_dtype(dt), rc = EMBER_OK;
    ember_tensor *cs = NULL, *r = NULL;
    EMBER_CHECK(ember__new(4, shape, cdt, EMBER_CPU, &r));
    if (kind == POOL_AVG_BWD) EMBER_CHECK(ember__fill_raw(r, 0));
    if (r->numel > 0 && (kind == POOL_AVG || src->numel > 0)) {
        EMBER_CHECK(ember__contiguous_as(src, cdt, &cs));
        pool_task t = {{p, cdt, ember__ptr(cs), ember__ptr(r), NULL}, kind};
        pool_launch(&t);
    }
    rc = ember__nn_finish(ember__take(&r), dt, out);
done:
    EMBER_RELEASE(cs, r);
    return rc;
}

/* AVG_POOL2D, and its adjoint AVG_POOL2D_BACKWARD (in[0] the gradient) */
int fwd_avg_pool2d(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    pool_geom p;
    int64_t shape[4];   /* the result's: pooled, or x's for the adjoint */
    EMBER_TRY(ember__pool_plan_make(op, in, at, &p, shape));
    return avg_pool_run(&p, op == EMBER_OP_AVG_POOL2D ? POOL_AVG : POOL_AVG_BWD, in[0], shape, out);
}

int fwd_avg_pool2d_backward(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    return fwd_avg_pool2d(op, nin, in, at, out);
}

/* ------------------------------------------------------------------ public entry points */
/* Whether max_pool2d of x may skip its positions when the caller wants none:
   no recording will keep them for the gradient (dispatch records an op only
   while a recording is active and an input is tracked), and neither a trace
   (a plan replays the op with both results) nor DTR (which may remake them)
   sees the op. PyTorch's forward without grad likewise writes no indices. */
static bool values_only_ok(const ember_tensor *x)
{
    if (!x || x->refcount <= 0 || ember__trace_on || ember__dtr_on) return false;
    return !ember__ag_active || !ember__ag_involved(x);
}

int ember_max_pool2d(ember_tensor *x, const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                     ember_tensor **values, ember_tensor **indices)
{
    NEED_ARGS("max_pool2d", values, kernel, stride, padding);
    ember_attrs at;
    ember__nn_set_pairs(&at, kernel, stride, padding);
    at.i[POSITIONS_32] = indices == NULL;   /* what a recording saves need not be int64 */
    ember_tensor *in[1] = {x}, *res[2] = {NULL, NULL};
    values_only_next = !indices && values_only_ok(x);
    int rc = ember__dispatch(EMBER_OP_MAX_POOL2D, 1, in, &at, res);
    values_only_next = false;   /* where no CPU forward took it (another device, a failed check) */
    *values = res[0];
    if (indices) *indices = res[1];
    else ember_tensor_release(res[1]);
    return rc;
}

int ember_max_pool2d_backward(ember_tensor *g, ember_tensor *indices, const int64_t *x_shape, ember_tensor **out)
{
    NEED_ARGS("max_pool2d_backward", out);
    ember_attrs at;
    memset(&at, 0, sizeof at);
    EMBER_TRY(ember__nn_set_shape(&at, "max_pool2d_backward", x_shape));
    ember_tensor *in[2] = {g, indices};
    return ember__dispatch(EMBER_OP_MAX_POOL2D_BACKWARD, 2, in, &at, out);
}

int ember_avg_pool2d(ember_tensor *x, const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                     ember_tensor **out)
{
    NEED_ARGS("avg_pool2d", out, kernel, stride, padding);
    ember_attrs at;
    ember__nn_set_pairs(&at, kernel, stride, padding);
    ember_tensor *in[1] = {x};
    return ember__dispatch(EMBER_OP_AVG_POOL2D, 1, in, &at, out);
}

int ember_avg_pool2d_backward(ember_tensor *g, const int64_t *x_shape, const int64_t *kernel, const int64_t *stride,
                              const int64_t *padding, ember_tensor **out)
{
    NEED_ARGS("avg_pool2d_backward", out, kernel, stride, padding);
    ember_attrs at;
    ember__nn_set_pairs(&at, kernel, stride, padding);
    EMBER_TRY(ember__nn_set_shape(&at, "avg_pool2d_backward", x_shape));
    ember_tensor *in[1] = {g};
    return ember__dispatch(EMBER_OP_AVG_POOL2D_BACKWARD, 1, in, &at, out);
}

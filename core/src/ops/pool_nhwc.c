/* pool_nhwc.c: max and average pooling and their adjoints on channels_last
   tensors (nhwc.c), without reordering: a pixel's C channels are adjacent,
   so each window is swept once for all channels, the loops over C at the
   vector width. The same values as pool.c's planes: max pooling keeps the
   first maximum in window order or the last NaN (POOL_GT) and returns the
   flat position h W + w in the plane, the indices channels_last too;
   average pooling counts padding as zeros. Float16 and bfloat16 compute in
   float32 (nn.h). pool.c and pool_window.c hand these over where the input
   (or the gradient) is channels_last.
   N batch, C channels, H x W spatial. */
#include "nn.h"

#include <stdatomic.h>
#include <string.h>

typedef ember__pool_geom pool_geom;   /* ops.h */

#define POOL_GT(x, y) ((x) > (y) || (x) != (x))

typedef struct {
    const pool_geom *p;
    const char *src;
    char *dst;
    const int64_t *cix;   /* max backward: the indices read */
    int64_t *ix;          /* max forward: the indices written */
    atomic_int bad;       /* max backward: an index outside the plane */
} nhwc_job;

/* rows [h0, h1) and columns [w0, w1) of output (oh, ow)'s window, clipped to the plane */
static void window(const pool_geom *p, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0, int64_t *w1)
{
    int64_t h = oh * p->sh - p->ph, w = ow * p->sw - p->pw;
    *h1 = h + p->kh < p->H ? h + p->kh : p->H;
    *w1 = w + p->kw < p->W ? w + p->kw : p->W;
    *h0 = h < 0 ? 0 : h;
    *w0 = w < 0 ? 0 : w;
}

/* max pooling of output rows r = n Ho + oh in [r0, r1); average pooling
   likewise (the window summed in window order, then scaled); their
   adjoints per sample n in [r0, r1), each of which owns its part of gx */
#define DEFINE_NHWC(T)                                                                                  \
    EMBER_SIMD static void max_fwd_##T(void *vctx, int64_t r0, int64_t r1)                              \
    {                                                                                                   \
        nhwc_job *j = vctx;                                                                             \
        const pool_geom *p = j->p;                                                                      \
        const int64_t C = p->C;                                                                         \
        for (int64_t r = r0; r < r1; r++) {                                                             \
            const int64_t n = r / p->Ho, oh = r % p->Ho;                                                \
            const T *x = (const T *)j->src + n * p->H * p->W * C;                                       \
            for (int64_t ow = 0; ow < p->Wo; ow++) {                                                    \
                T *restrict y = (T *)j->dst + (r * p->Wo + ow) * C;                                     \
                int64_t *restrict ix = j->ix ? j->ix + (r * p->Wo + ow) * C : NULL;                     \
                int64_t h0, h1, w0, w1;                                                                 \
                window(p, oh, ow, &h0, &h1, &w0, &w1);                                                  \
                const T *restrict first = x + (h0 * p->W + w0) * C;                                     \
                for (int64_t c = 0; c < C; c++) y[c] = first[c];                                        \
                if (ix)                                                                                 \
                    for (int64_t c = 0; c < C; c++) ix[c] = h0 * p->W + w0;                             \
                for (int64_t h = h0; h < h1; h++)                                                       \
                    for (int64_t w = w0; w < w1; w++) {                                                 \
                        const T *restrict v = x + (h * p->W + w) * C;                                   \
                        const int64_t at = h * p->W + w;                                                \
                        if (!ix) { /* the values only (no gradient wants the positions) */              \
                            for (int64_t c = 0; c < C; c++) {                                           \
                                bool gt = (v[c] > y[c]) | (v[c] != v[c]);                               \
                                y[c] = gt ? v[c] : y[c];                                                \
                            }                                                                           \
                            continue;                                                                   \
                        }                                                                               \
                        for (int64_t c = 0; c < C; c++) {                                               \
                            bool gt = POOL_GT(v[c], y[c]);                                              \
                            y[c] = gt ? v[c] : y[c];                                                    \
                            ix[c] = gt ? at : ix[c];                                                    \
                        }                                                                               \
                    }                                                                                   \
            }                                                                                           \
        }                                                                                               \
    }                                                                                                   \
    EMBER_SIMD static void max_bwd_##T(void *vctx, int64_t n0, int64_t n1)                              \
    {                                                                                                   \
        nhwc_job *j = vctx;                                                                             \
        const pool_geom *p = j->p;                                                                      \
        const int64_t C = p->C, HW = p->H * p->W, out = p->Ho * p->Wo;                                  \
        for (int64_t n = n0; n < n1; n++) {                                                             \
            T *restrict gx = (T *)j->dst + n * HW * C;                                                  \
            const T *restrict g = (const T *)j->src + n * out * C;                                      \
            const int64_t *restrict ix = j->cix + n * out * C;                                          \
            for (int64_t o = 0; o < out; o++)                                                           \
                for (int64_t c = 0; c < C; c++) {                                                       \
                    int64_t at = ix[o * C + c];                                                         \
                    if (at < 0 || at >= HW) {                                                           \
                        atomic_store_explicit(&j->bad, 1, memory_order_relaxed);                        \
                        continue;                                                                       \
                    }                                                                                   \
                    gx[at * C + c] += g[o * C + c];                                                     \
                }                                                                                       \
        }                                                                                               \
    }                                                                                                   \
    EMBER_SIMD static void avg_fwd_##T(void *vctx, int64_t r0, int64_t r1)                              \
    {                                                                                                   \
        nhwc_job *j = vctx;                                                                             \
        const pool_geom *p = j->p;                                                                      \
        const int64_t C = p->C;                                                                         \
        const T inv = (T)1 / (T)(p->kh * p->kw);                                                        \
        for (int64_t r = r0; r < r1; r++) {                                                             \
            const int64_t n = r / p->Ho, oh = r % p->Ho;                                                \
            const T *x = (const T *)j->src + n * p->H * p->W * C;                                       \
            for (int64_t ow = 0; ow < p->Wo; ow++) {                                                    \
                T *restrict y = (T *)j->dst + (r * p->Wo + ow) * C;                                     \
                int64_t h0, h1, w0, w1;                                                                 \
                window(p, oh, ow, &h0, &h1, &w0, &w1);                                                  \
                for (int64_t c = 0; c < C; c++) y[c] = 0;                                               \
                for (int64_t h = h0; h < h1; h++)                                                       \
                    for (int64_t w = w0; w < w1; w++) {                                                 \
                        const T *restrict v = x + (h * p->W + w) * C;                                   \
                        for (int64_t c = 0; c < C; c++) y[c] += v[c];                                   \
                    }                                                                                   \
                for (int64_t c = 0; c < C; c++) y[c] *= inv;                                            \
            }                                                                                           \
        }                                                                                               \
    }                                                                                                   \
    EMBER_SIMD static void avg_bwd_##T(void *vctx, int64_t n0, int64_t n1)                              \
    {                                                                                                   \
        nhwc_job *j = vctx;                                                                             \
        const pool_geom *p = j->p;                                                                      \
        const int64_t C = p->C;                                                                         \
        const T inv = (T)1 / (T)(p->kh * p->kw);                                                        \
        for (int64_t n = n0; n < n1; n++) {                                                             \
            T *gx = (T *)j->dst + n * p->H * p->W * C;                                                  \
            for (int64_t oh = 0; oh < p->Ho; oh++)                                                      \
                for (int64_t ow = 0; ow < p->Wo; ow++) {                                                \
                    const T *restrict g = (const T *)j->src + ((n * p->Ho + oh) * p->Wo + ow) * C;      \
                    int64_t h0, h1, w0, w1;                                                             \
                    window(p, oh, ow, &h0, &h1, &w0, &w1);                                              \
                    for (int64_t h = h0; h < h1; h++)                                                   \
                        for (int64_t w = w0; w < w1; w++) {                                             \
                            T *restrict d = gx + (h * p->W + w) * C;                                    \
                            for (int64_t c = 0; c < C; c++) d[c] += g[c] * inv;                         \
                        }                                                                               \
                }                                                                                       \
        }                                                                                               \
    }
DEFINE_NHWC(float)
DEFINE_NHWC(double)

enum { KIND_MAX, KIND_MAX_BWD, KIND_AVG, KIND_AVG_BWD };

static ember__range_fn kernel_of(int kind, int cdt)
{
    static const ember__range_fn k[4][2] = {{max_fwd_float, max_fwd_double}, {max_bwd_float, max_bwd_double},
                                            {avg_fwd_float, avg_fwd_double}, {avg_bwd_float, avg_bwd_double}};
    return k[kind][cdt == EMBER_FLOAT64];
}

/* one job: src (channels_last, in cdt) into a new channels_last result of
   shape rs; the adjoints (per sample, into a zeroed result) or the forwards
   (per output row) */
static int run(const char *name, int kind, const pool_geom *p, ember_tensor *src, const ember_tensor *idx,
               const int64_t *rs, ember_tensor **res, ember_tensor **ix)
{
    int dt = src->dtype, cdt = nn_compute_dtype(dt), rc = EMBER_OK;
    const bool bwd = kind == KIND_MAX_BWD || kind == KIND_AVG_BWD;
    ember_tensor *cs = NULL, *ci = NULL, *r = NULL;
    EMBER_CHECK(ember__new_nhwc(rs, cdt, &r));
    if (ix) EMBER_CHECK(ember__new_nhwc(rs, EMBER_INT64, ix));
    if (bwd) EMBER_CHECK(ember__fill_raw(r, 0));
    if (r->numel > 0 && src->numel > 0) {
        EMBER_CHECK(ember__layout_as(src, cdt, true, &cs));
        if (idx) EMBER_CHECK(ember__layout_as((ember_tensor *)idx, EMBER_INT64, true, &ci));
        nhwc_job j = {p, ember__ptr(cs), ember__ptr(r), ci ? (const int64_t *)ember__ptr(ci) : NULL,
                      ix ? (int64_t *)ember__ptr(*ix) : NULL, 0};
        const int64_t per_row = p->Wo * p->C * (bwd ? p->Ho : 1);
        ember__parallel_for(bwd ? p->N : p->N * p->Ho, ember__nn_rows_grain(per_row * (bwd ? 1 : p->kh * p->kw)),
                            kernel_of(kind, cdt), &j);
        if (atomic_load(&j.bad))
            EMBER_CHECK(ember__fail(EMBER_ERR_ARG, "%s: an index is outside a %lld x %lld plane", name,
                                    (long long)p->H, (long long)p->W));
    }
    rc = ember__nn_finish_layout(r, dt, true, res);
    r = NULL;
done:
    if (rc < 0 && ix) {
        ember_tensor_release(*ix);
        *ix = NULL;
    }
    ember_tensor_release(cs);
    ember_tensor_release(ci);
    ember_tensor_release(r);
    return rc;
}

/* nn.h */
int ember__max_pool2d_nhwc(const pool_geom *p, ember_tensor *x, const int64_t *ys, bool values_only,
                           ember_tensor **out)
{
    return run("max_pool2d", KIND_MAX, p, x, NULL, ys, &out[0], values_only ? NULL : &out[1]);
}

/* nn.h */
int ember__max_pool2d_backward_nhwc(const pool_geom *p, ember_tensor *g, ember_tensor *idx, const int64_t *xs,
                                    ember_tensor **out)
{
    return run("max_pool2d_backward", KIND_MAX_BWD, p, g, idx, xs, out, NULL);
}

/* nn.h */
int ember__avg_pool2d_nhwc(const pool_geom *p, bool bwd, ember_tensor *src, const int64_t *shape, ember_tensor **out)
{
    return run(bwd ? "avg_pool2d_backward" : "avg_pool2d", bwd ? KIND_AVG_BWD : KIND_AVG, p, src, NULL, shape, out,
               NULL);
}

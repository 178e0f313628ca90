/* norm_affine.c: channel_affine(x, scale, shift) -> y = act(x scale[c] +
   shift[c]) over x (N, C, ...), scale and shift (C): batch normalisation in
   eval mode as one op (F.batch_norm with running statistics, scale = w /
   sqrt(var + eps) and shift = b - mean scale computed by the caller on the
   C values), with batch_norm_act's optional activation (norm_act.h) applied
   as y is written. One pass over x a plane at a time on the CPU (float32,
   float64, one dtype, contiguous after a copy), elsewhere the same formula
   as ops. Its rule: gz = g through the activation's mask of y, gx = gz
   scale, gscale = sum(gz x), gshift = sum(gz) over every dim but 1. */
#include "nn.h"
#include "norm_act.h"

#include "../autograd_ops.h"

typedef struct {
    int64_t C, S;
    const char *x, *scale, *shift;
    char *y;
    int act;
    double lo, hi;
} affine_job;

ACT_LOOPS(float)
ACT_LOOPS(double)

/* The activation runs over runs of whole planes of at least ACT_RUN values
   (y is contiguous across planes): on small planes (MobileNet's 1x1 to 4x4
   late layers) one vector loop rather than a scalar tail per plane. */
enum { ACT_RUN = 1024 };
#define AFFINE(T)                                                                              \
    EMBER_SIMD static void affine_##T(void *ctx, int64_t p0, int64_t p1)                       \
    {                                                                                          \
        const affine_job *j = ctx;                                                             \
        int64_t q = p0;   /* the first plane whose activation is still to run */              \
        for (int64_t p = p0; p < p1; p++) {   /* p = n C + c */                                \
            const T *restrict x = (const T *)j->x + p * j->S;                                  \
            T *restrict y = (T *)j->y + p * j->S;                                              \
            const T sc = ((const T *)j->scale)[p % j->C], sh = ((const T *)j->shift)[p % j->C]; \
            for (int64_t i = 0; i < j->S; i++) y[i] = x[i] * sc + sh;                          \
            if ((p + 1 - q) * j->S >= ACT_RUN || p + 1 == p1) {                                \
                act_##T(j->act, j->lo, j->hi, (T *)j->y + q * j->S, (p + 1 - q) * j->S);       \
                q = p + 1;                                                                     \
            }                                                                                  \
        }                                                                                      \
    }
AFFINE(float)
AFFINE(double)

/* channels_last: rows r = (n, h, w) of C values, the channel innermost */
#define AFFINE_NHWC(T)                                                                         \
    EMBER_SIMD static void affine_nhwc_##T(void *ctx, int64_t r0, int64_t r1)                  \
    {                                                                                          \
        const affine_job *j = ctx;                                                             \
        const T *restrict sc = (const T *)j->scale, *restrict sh = (const T *)j->shift;        \
        for (int64_t r = r0; r < r1; r++) {                                                    \
            const T *restrict x = (const T *)j->x + r * j->C;                                  \
            T *restrict y = (T *)j->y + r * j->C;                                              \
            for (int64_t c = 0; c < j->C; c++) y[c] = x[c] * sc[c] + sh[c];                    \
            act_##T(j->act, j->lo, j->hi, y, j->C);                                            \
        }                                                                                      \
    }
AFFINE_NHWC(float)
AFFINE_NHWC(double)

/* x scale + shift, the vectors viewed as (1, C, 1, ...), then the activation, as ops */
static int affine_composed(ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    ember_tensor *x = in[0], *sv = NULL, *hv = NULL, *m = NULL, *a = NULL;
    int64_t cs[EMBER_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) cs[d] = d == 1 ? x->shape[1] : 1;
    int paused = ember__ag_pause(), rc = EMBER_OK;
    EMBER_CHECK(ember_view(in[1], x->ndim, cs, &sv));
    EMBER_CHECK(ember_view(in[2], x->ndim, cs, &hv));
    EMBER_CHECK(ember_mul(x, sv, &m));
    EMBER_CHECK(ember_add(m, hv, &a));
    rc = ember__act_composed(at, a, NULL, out);
done:
    ember__ag_resume(paused);
    ember_tensor *all[4] = {sv, hv, m, a};
    for (int i = 0; i < 4; i++) ember_tensor_release(all[i]);
    return rc;
}

int fwd_channel_affine(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op), EMBER_UNUSED(nin);
    ember_tensor *x = in[0], *sc = in[1], *sh = in[2];
    char sx[200], ss[200], sb[200];
    EMBER_TRY(ember__act_check("channel_affine", at, true));
    if (x->ndim < 2 || sc->ndim != 1 || sh->ndim != 1 || sc->shape[0] != x->shape[1] || sh->shape[0] != x->shape[1])
        return ember__fail(EMBER_ERR_SHAPE, "channel_affine: input %s must be (N, C, ...) and scale %s and shift %s "
                           "(C)", ember__tshape(sx, x), ember__tshape(ss, sc), ember__tshape(sb, sh));
    if (!ember__is_float(x->dtype) || !ember__is_float(sc->dtype) || !ember__is_float(sh->dtype))
        return ember__fail(EMBER_ERR_DTYPE, "channel_affine: expected floating tensors, got input %s, scale %s and "
                           "shift %s", ember_dtype_name(x->dtype), ember_dtype_name(sc->dtype),
                           ember_dtype_name(sh->dtype));
    const int dt = x->dtype;
    bool fast = dt == EMBER_FLOAT32 || dt == EMBER_FLOAT64;
    for (int i = 0; i < 3; i++) fast = fast && in[i]->dtype == dt && in[i]->storage->device == EMBER_CPU;
    if (!fast) return affine_composed(in, at, out);
    ember_tensor *c[3] = {NULL, NULL, NULL}, *y = NULL;
    int rc = EMBER_OK;
    const bool nhwc = ember__is_nhwc(x);   /* kept channels_last (nhwc.c) */
    for (int i = 0; i < 3; i++) EMBER_CHECK(ember__layout_as(in[i], dt, nhwc, &c[i]));
    EMBER_CHECK(nhwc ? ember__new_nhwc(x->shape, dt, &y) : ember__new(x->ndim, x->shape, dt, EMBER_CPU, &y));
    const int64_t C = x->shape[1], planes = x->shape[0] * C;   /* (n, c) planes of S values */
    affine_job j = {C, planes ? x->numel / planes : 0, ember__ptr(c[0]), ember__ptr(c[1]), ember__ptr(c[2]),
                    ember__ptr(y), (int)at->i[0], ember__act_bound(at, 1), ember__act_bound(at, 2)};
    if (x->numel && nhwc)
        ember__parallel_for(x->numel / C, ember__nn_rows_grain(C), dt == EMBER_FLOAT32 ? affine_nhwc_float
                                                                                       : affine_nhwc_double, &j);
    else if (x->numel)
        ember__parallel_for(planes, ember__nn_rows_grain(j.S), dt == EMBER_FLOAT32 ? affine_float : affine_double, &j);
    out[0] = y;
    y = NULL;
done:
    for (int i = 0; i < 3; i++) ember_tensor_release(c[i]);
    ember_tensor_release(y);
    return rc;
}

int ember_channel_affine(ember_tensor *x, ember_tensor *scale, ember_tensor *shift, int activation, double lo,
                         double hi, ember_tensor **out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "channel_affine: NULL argument");
    ember_tensor *in[3] = {x, scale, shift};
    ember_attrs at = {{activation}, {0, 0}};
    ember__act_set_bounds(&at, lo, hi);
    return ember__dispatch(EMBER_OP_CHANNEL_AFFINE, 3, in, &at, out);
}

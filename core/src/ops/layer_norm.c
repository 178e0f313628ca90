/* layer_norm.c: layer normalisation (and RMS normalisation) as two ops.

   layer_norm(x, w, b) -> (y, stats): x is (..., D...) whose last k dims (the
   attr i[0]) are normalised, w and b have those k dims' shape. With R rows
   of D values, stats is (2, R): each row's mean in row 0 and its rstd =
   1 / sqrt(var + eps) in row 1 (var biased, eps the attr f[0]), and
   y = (x - mean) rstd w + b. With i[1] set (RMS norm) the mean is not
   subtracted: row 0 of stats holds zeros and var is the mean of x^2.
   layer_norm_backward(g, x, w, stats) -> (gx, gwb): with xhat = (x - mean)
   rstd and gxhat = g w, gx = rstd (gxhat - mean(gxhat) - xhat mean(gxhat
   xhat)) (RMS: without mean(gxhat)); gwb is (2, w's shape): sum(g xhat) over
   the rows (w's gradient) and sum(g) (b's), computed where i[2] is set
   (zeros where it is not).

   On the CPU, for float32 / float64 operands of one dtype (strided ones
   copied first; the backward reads g in place where its rows are
   contiguous or each one value, as a sum's expanded gradient is), each row
   is two passes over x (three with g): the sums in double on ROW_LANES (32)
   lanes added in a fixed order (lane_sums.h), then the values at the vector
   width; the forward saves each row's mean and rstd for the backward; the
   rows are spread over the pool. w's and b's gradients add
   up in double per block of rows (the blocks fixed by D alone), then the
   blocks in order, so neither the vector width nor the thread count changes
   a bit. On other devices both ops run on the host (ember__on_host); the
   autograd rule (grad_rules_nn.c) composes public ops where a recording sees
   the backward, so gradients of any order come out. */
#include "grad_rows.h"
#include "lane_sums.h"
#include "nn.h"
#include "reduce.h"

#include <string.h>

/* ------------------------------------------------------------------ checks */
/* x (..., D...), w and b of its last k dims' shape, one float dtype */
static int ln_check(const char *op, const ember_tensor *x, const ember_tensor *w, const ember_tensor *b, int k,
                    double eps)
{
    char sx[200], sw[200], sb[200];
    if (k < 1 || k > x->ndim)
        return ember__fail(EMBER_ERR_ARG, "%s: %d normalised dims for input %s (expected 1 to %d)", op, k,
                           ember__tshape(sx, x), x->ndim);
    int lead = x->ndim - k;
    bool fits = w->ndim == k && memcmp(w->shape, x->shape + lead, (size_t)k * sizeof *x->shape) == 0;
    if (b) fits = fits && b->ndim == k && memcmp(b->shape, x->shape + lead, (size_t)k * sizeof *x->shape) == 0;
    if (!fits)
        return ember__fail(EMBER_ERR_SHAPE, "%s: weight %s%s%s must have the shape of input %s's last %d dims", op,
                           ember__tshape(sw, w), b ? " and bias " : "", b ? ember__tshape(sb, b) : "",
                           ember__tshape(sx, x), k);
    int dt = x->dtype;
    if ((dt != EMBER_FLOAT32 && dt != EMBER_FLOAT64) || w->dtype != dt || (b && b->dtype != dt))
        return ember__fail(EMBER_ERR_DTYPE, "%s: expected float32 or float64 tensors of one dtype, got input %s, "
                           "weight %s%s%s", op, ember_dtype_name(dt), ember_dtype_name(w->dtype),
                           b ? " and bias " : "", b ? ember_dtype_name(b->dtype) : "");
    if (!(eps >= 0)) return ember__fail(EMBER_ERR_ARG, "%s: eps must be >= 0, got %g", op, eps);
    return EMBER_OK;
}

/* ------------------------------------------------------------------ CPU kernels */
typedef struct {
    int64_t R, D;      /* R rows of D values */
    int64_t block;     /* rows per block of w's and b's partial sums */
    int rms, want_gwb;
    double eps;
    const char *x, *g, *w, *b, *st;
    char *y, *stats;   /* y or gx; the stats the forward writes */
    double *ws;        /* backward: 2 D doubles per block */
    grad_rows gr;      /* backward: where g's rows are (grad_rows.h) */
} ln_job;

/* rows per block: about 64K values each, fixed by D alone */
static int64_t row_block(int64_t D)
{
    int64_t r = 65536 / (D > 0 ? D : 1);
    return r > 0 ? r : 1;
}

/* sum of x, of (x - m)^2, and of gw and gw (x - m) (the backward's two
   sums) over a row, on ROW_LANES lanes, the tail in lane 0 (lane_sums.h) */
#define LN_SUMS(T)                                                                                           \
    LANE_SUMS(T, ln_lanes, ROW_LANES, 0)                                                                     \
    EMBER_INLINE double ln_sum_##T(const T *restrict x, int64_t n)                                           \
    {                                                                                                        \
        double acc[ROW_LANES] = {0};                                                                         \
        ln_lanes_sum_##T(x, n, acc);                                                                         \
        return fold_f64(acc, ROW_LANES);                                                                     \
    }                                                                                                        \
    EMBER_INLINE double ln_dev2_##T(const T *restrict x, int64_t n, double m)                                \
    {                                                                                                        \
        double acc[ROW_LANES] = {0};                                                                         \
        ln_lanes_dev2_##T(x, n, m, acc);                                                                     \
        return fold_f64(acc, ROW_LANES);                                                                     \
    }
LN_SUMS(float)
LN_SUMS(double)
#undef LN_SUMS

/* y = (x - mean) rstd w + b per row */
#define LN_FWD(T)                                                                   \
    EMBER_SIMD static void ln_fwd_##T(void *vctx, int64_t r0, int64_t r1)           \
    {                                                                               \
        const ln_job *j = vctx;                                                     \
        const int64_t D = j->D;                                                     \
        const T *w = (const T *)j->w, *b = (const T *)j->b;                         \
        T *st = (T *)j->stats;                                                      \
        for (int64_t r = r0; r < r1; r++) {                                         \
            const T *x = (const T *)j->x + r * D;                                   \
            T *y = (T *)j->y + r * D;                                               \
            double mean = j->rms ? 0.0 : ln_sum_##T(x, D) / (double)D;              \
            double rstd = 1.0 / sqrt(ln_dev2_##T(x, D, mean) / (double)D + j->eps); \
            T tm = (T)mean, tr = (T)rstd;                                           \
            for (int64_t i = 0; i < D; i++) y[i] = (x[i] - tm) * tr * w[i] + b[i];  \
            st[r] = tm;                                                             \
            st[j->R + r] = tr;                                                      \
        }                                                                           \
    }
LN_FWD(float)
LN_FWD(double)
#undef LN_FWD

/* gx per row for a block of rows, and that block's sums of g xhat and g.
   A row's g is its D values or (bcast, a sum's gradient) one value read
   as a scalar, where it was written out to a row buffer first (13% of the
   backward's samples on the sweep's case, one thread): the same products,
   so the same bits. gx is not streamed past the cache (ember__stream_copy):
   on the sweep's 32x128x768 that was 10-20% slower (one thread and two,
   a loaded machine). */
#define LN_BWD_ROW(T, NAME, G)                                                                            \
    EMBER_INLINE void NAME(const ln_job *j, const T *restrict g, const T *restrict x, T *restrict gx, double mean, \
                           double rstd, double *restrict pw, double *restrict pb)                         \
    {                                                                                                     \
        const int64_t D = j->D;                                                                           \
        const T *restrict w = (const T *)j->w;                                                            \
        double a[ROW_LANES] = {0}, c[ROW_LANES] = {0};                                                    \
        int64_t i = 0;                                                                                    \
        for (; i + ROW_LANES <= D; i += ROW_LANES)                                                        \
            for (int l = 0; l < ROW_LANES; l++) {                                                         \
                double gw = (double)G(i + l) * (double)w[i + l];                                          \
                a[l] += gw;                                                                               \
                c[l] += gw * ((double)x[i + l] - mean);                                                   \
            }                                                                                             \
        for (; i < D; i++) {                                                                              \
            double gw = (double)G(i) * (double)w[i];                                                      \
            a[0] += gw;                                                                                   \
            c[0] += gw * ((double)x[i] - mean);                                                           \
        }                                                                                                 \
        double sgw = fold_f64(a, ROW_LANES), sgwx = fold_f64(c, ROW_LANES);                               \
        T tm = (T)mean, tr = (T)rstd, ta = j->rms ? (T)0 : (T)(sgw / (double)D);                          \
        T tc = (T)(sgwx * rstd / (double)D);                                                              \
        for (int64_t k = 0; k < D; k++) {                                                                 \
            T xh = (x[k] - tm) * tr;                                                                      \
            gx[k] = tr * (G(k) * w[k] - ta - xh * tc);                                                    \
        }                                                                                                 \
        if (pw)                                                                                           \
            for (int64_t k = 0; k < D; k++) {                                                             \
                double gv = (double)G(k);                                                                 \
                pw[k] += gv * (((double)x[k] - mean) * rstd);                                             \
                pb[k] += gv;                                                                              \
            }                                                                                             \
    }
#define G_EACH(i) g[i]
#define G_ONE(i) g[0]
#define LN_BWD(T)                                                                                 \
    LN_BWD_ROW(T, ln_bwd_row_##T, G_EACH)                                                         \
    LN_BWD_ROW(T, ln_bwd_row1_##T, G_ONE)                                                         \
    EMBER_SIMD static void ln_bwd_##T(void *vctx, int64_t k0, int64_t k1)                         \
    {                                                                                             \
        const ln_job *j = vctx;                                                                   \
        const int64_t D = j->D;                                                                   \
        const T *st = (const T *)j->st;                                                           \
        for (int64_t k = k0; k < k1; k++) {                                                       \
            int64_t r0 = k * j->block, r1 = r0 + j->block < j->R ? r0 + j->block : j->R;          \
            double *pw = j->want_gwb ? j->ws + k * 2 * D : NULL, *pb = pw ? pw + D : NULL;        \
            if (pw)                                                                               \
                for (int64_t i = 0; i < 2 * D; i++) pw[i] = 0;                                    \
            for (int64_t r = r0; r < r1; r++) {                                                   \
                const T *x = (const T *)j->x + r * D, *g = (const T *)j->g + grad_row(&j->gr, r); \
                T *gx = (T *)j->y + r * D;                                                        \
                double mean = (double)st[r], rstd = (double)st[j->R + r];                         \
                if (j->gr.bcast) ln_bwd_row1_##T(j, g, x, gx, mean, rstd, pw, pb);                \
                else ln_bwd_row_##T(j, g, x, gx, mean, rstd, pw, pb);                             \
            }                                                                                     \
        }                                                                                         \
    }
LN_BWD(float)
LN_BWD(double)
#undef LN_BWD
#undef LN_BWD_ROW
#undef G_EACH
#undef G_ONE

/* the blocks' partial sums, added in block order, into gwb (2, D) */
typedef struct {
    const double *ws;
    int64_t blocks, D;
    char *gwb;
    int dt;
} ln_fold;

EMBER_SIMD static void ln_fold_cols(void *vctx, int64_t c0, int64_t c1)
{
    const ln_fold *f = vctx;
    for (int h = 0; h < 2; h++) {
        int64_t off = h * f->D;
        for (int64_t c = c0; c < c1; c++) {
            double s = 0;
            for (int64_t k = 0; k < f->blocks; k++) s += f->ws[k * 2 * f->D + off + c];
            if (f->dt == EMBER_FLOAT32) ((float *)f->gwb)[off + c] = (float)s;
            else ((double *)f->gwb)[off + c] = s;
        }
    }
}

/* ------------------------------------------------------------------ the ops */
/* R rows of D values for x with its last k dims normalised */
static void rows_of(const ember_tensor *x, int k, int64_t *R, int64_t *D)
{
    *R = *D = 1;
    for (int d = 0; d < x->ndim; d++) *(d < x->ndim - k ? R : D) *= x->shape[d];
}

int fwd_layer_norm(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    ember_tensor *x = in[0];
    int k = (int)at->i[0];
    EMBER_TRY(ln_check("layer_norm", x, in[1], in[2], k, at->f[0]));
    if (!ember__nn_on_cpu(3, in)) return ember__on_host(op, nin, in, at, 2, out);
    int64_t R, D;
    rows_of(x, k, &R, &D);
    int64_t two_r[2] = {2, R};
    ember_tensor *c[3], *y = NULL, *st = NULL;
    EMBER_TRY(ember__nn_contiguous(in, 3, c));
    int rc = EMBER_OK;
    EMBER_CHECK(ember__new(x->ndim, x->shape, x->dtype, EMBER_CPU, &y));
    EMBER_CHECK(ember__new(2, two_r, x->dtype, EMBER_CPU, &st));
    ln_job j = {.R = R, .D = D, .rms = at->i[1] != 0, .eps = at->f[0], .x = ember__ptr(c[0]),
                .w = ember__ptr(c[1]), .b = ember__ptr(c[2]), .y = ember__ptr(y), .stats = ember__ptr(st)};
    ember__parallel_for(R, row_block(D), x->dtype == EMBER_FLOAT32 ? ln_fwd_float : ln_fwd_double, &j);
    out[0] = y;
    out[1] = st;
    y = st = NULL;
done:
    ember__nn_release(c, 3);
    ember_tensor_release(y);
    ember_tensor_release(st);
    return rc;
}

int fwd_layer_norm_backward(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    ember_tensor *g = in[0], *x = in[1], *w = in[2], *st = in[3];
    int k = (int)at->i[0];
    char sg[200], sx[200], ss[200];
    EMBER_TRY(ln_check("layer_norm_backward", x, w, NULL, k, at->f[0]));
    int64_t R, D;
    rows_of(x, k, &R, &D);
    if (g->ndim != x->ndim || memcmp(g->shape, x->shape, (size_t)x->ndim * sizeof *x->shape) != 0 || st->ndim != 2 ||
        st->shape[0] != 2 || st->shape[1] != R)
        return ember__fail(EMBER_ERR_SHAPE, "layer_norm_backward: gradient %s, input %s and stats %s do not match "
                           "(the gradient as the input, stats {2, %lld})", ember__tshape(sg, g), ember__tshape(sx, x),
                           ember__tshape(ss, st), (long long)R);
    if (g->dtype != x->dtype || st->dtype != x->dtype)
        return ember__fail(EMBER_ERR_DTYPE, "layer_norm_backward: gradient %s and stats %s for input %s (expected one "
                           "dtype)", ember_dtype_name(g->dtype), ember_dtype_name(st->dtype),
                           ember_dtype_name(x->dtype));
    if (!ember__nn_on_cpu(4, in)) return ember__on_host(op, nin, in, at, 2, out);
    bool want = at->i[2] != 0;
    int64_t gs[EMBER_MAX_DIMS + 1];
    gs[0] = 2;
    memcpy(gs + 1, w->shape, (size_t)w->ndim * sizeof *gs);
    ember_tensor *c[4], *gx = NULL, *gwb = NULL;
    ln_job j = {.R = R, .D = D, .block = row_block(D), .rms = at->i[1] != 0, .want_gwb = want, .eps = at->f[0]};
    if (grad_rows_of(g, k, D, &j.gr)) {
        c[0] = g;
        ember_tensor_retain(g);
    } else {
        EMBER_TRY(ember__contiguous_as(g, g->dtype, &c[0]));
        grad_rows_dense(R, D, &j.gr);
    }
    int rc = ember__nn_contiguous(in + 1, 3, c + 1);
    if (rc < 0) {
        ember_tensor_release(c[0]);
        return rc;
    }
    j.x = ember__ptr(c[1]), j.g = ember__ptr(c[0]), j.w = ember__ptr(c[2]), j.st = ember__ptr(c[3]);
    int64_t blocks = (R + j.block - 1) / j.block;
    size_t bytes = want ? (size_t)(blocks * 2 * D) * sizeof(double) : 0;
    EMBER_CHECK(ember__new(x->ndim, x->shape, x->dtype, EMBER_CPU, &gx));
    EMBER_CHECK(ember__new(w->ndim + 1, gs, x->dtype, EMBER_CPU, &gwb));   /* zeros when not wanted */
    if (bytes && !(j.ws = ember__alloc(bytes)))
        EMBER_CHECK(ember__fail(EMBER_ERR_OOM, "layer_norm_backward: out of memory (%zu bytes)", bytes));
    j.y = ember__ptr(gx);
    ember__parallel_for(blocks, 1, x->dtype == EMBER_FLOAT32 ? ln_bwd_float : ln_bwd_double, &j);
    if (want) {
        ln_fold f = {j.ws, blocks, D, ember__ptr(gwb), x->dtype};
        ember__parallel_for(D, 1 + 65536 / (blocks > 0 ? blocks : 1), ln_fold_cols, &f);
    } else {
        memset(ember__ptr(gwb), 0, (size_t)(2 * D) * (size_t)ember_dtype_size(x->dtype));
    }
    ember__free(j.ws, bytes);
    out[0] = gx;
    out[1] = gwb;
    gx = gwb = NULL;
done:
    ember__nn_release(c, 4);
    ember_tensor_release(gx);
    ember_tensor_release(gwb);
    return rc;
}

int ember_layer_norm(ember_tensor *x, ember_tensor *w, ember_tensor *b, int normalized_dims, int rms, double eps,
                     ember_tensor **y, ember_tensor **stats)
{
    if (!y || !stats) return ember__fail(EMBER_ERR_ARG, "layer_norm: NULL argument");
    ember_tensor *in[3] = {x, w, b}, *out[2] = {NULL, NULL};
    ember_attrs at = {{normalized_dims, rms != 0}, {eps, 0}};
    int rc = ember__dispatch(EMBER_OP_LAYER_NORM, 3, in, &at, out);
    *y = out[0];
    *stats = out[1];
    return rc;
}

int ember_layer_norm_backward(ember_tensor *g, ember_tensor *x, ember_tensor *w, ember_tensor *stats,
                              int normalized_dims, int rms, double eps, ember_tensor **gx, ember_tensor **gwb)
{
    if (!gx) return ember__fail(EMBER_ERR_ARG, "layer_norm_backward: NULL argument");
    ember_tensor *in[4] = {g, x, w, stats}, *out[2] = {NULL, NULL};
    ember_attrs at = {{normalized_dims, rms != 0, gwb != NULL}, {eps, 0}};
    int rc = ember__dispatch(EMBER_OP_LAYER_NORM_BACKWARD, 4, in, &at, out);
    *gx = out[0];
    if (gwb) *gwb = out[1];
    else ember_tensor_release(out[1]);
    return rc;
}

/* softmax.c: softmax and log_softmax along a dim, with reduce.c's row
   kernels (reduce.h). The dim is moved last and made contiguous; each row
   takes its maximum, exp(x - max), their sum and then the scaling (or the
   log's shift), and the result is viewed back in the input's order. float32
   rows run typed loops without a serial dependence (they vectorise), the
   sum in double over ROW_LANES (32) running sums (lane_sums.h); other float
   dtypes go through double; integers compute in float32. Rows are spread
   over the pool in tasks of an eighth of the elementwise grain (sm_grain).

   Their adjoints are ops too, each differentiable (grad_rules.c):
   softmax_backward(g, y) = y (g - sum(g y)) and log_softmax_backward(g, y)
   = g - exp(y) sum(g), sums along the dim, y the forward's output. On the
   CPU, for float32 / float64 operands of one dtype (strided ones copied
   first; g read in place where its rows are contiguous or one value each,
   as a sum's gradient is: grad_rows.h), one pass for the sum and one for
   the values over each row, or, where the dim is not the last, over each
   block of columns of the (outer, n, inner) layout, the sums in double (on
   ROW_LANES lanes added in a fixed order along a row; log_softmax's rows of
   y all <= 0 take the exp without the steps for large values, the same
   bits); elsewhere the same formulas as ember's ops, unrecorded. */
#include "grad_rows.h"
#include "lane_sums.h"
#include "reduce.h"
#include "../autograd_ops.h"

#include <string.h>

typedef struct {
    const char *src;
    char *dst;
    int64_t len;
    int dt, log;
} sm_ctx;

/* ember__expf(x) for x <= 0 or NaN, the same bits with the steps that only
   larger x need left out (the clamp and the inf above 88.7, the 2^128 split:
   n <= 0 here, so y (n - e + 1) 2^e is y 2^n): x - max in a row is never
   above 0, and the exp pass is most of softmax's forward */
EMBER_INLINE float expf_nonpos(float x)
{
    float c = x < EMBER_EXPF_LO ? EMBER_EXPF_LO : x;
    c = x != x ? 0.0f : c;
    float n, y = ember__expf_reduced(c, &n);
    uint32_t bits = (uint32_t)((int32_t)n + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    float v = y * scale;
    v = x < EMBER_EXPF_LO ? 0.0f : v;
    return x != x ? x : v;
}

/* The sum of n floats in double, on ROW_LANES lanes (lane_sums.h) */
LANE_SUMS(float, sm_lanes, ROW_LANES, 0)
EMBER_INLINE double row_sum_f32(const float *x, int64_t n)
{
    double acc[ROW_LANES] = {0};
    sm_lanes_sum_float(x, n, acc);
    return fold_f64(acc, ROW_LANES);
}

/* tasks of `per` values each worth a thread: an exp per value costs some
   ten adds, so an eighth of the elementwise grain (256 rows of 1000, 0.1 ms
   on one thread, split across two where the whole grain kept them on one) */
static int64_t sm_grain(int64_t per)
{
    const int64_t grain = EMBER_PARALLEL_GRAIN / 8;
    return per >= grain ? 1 : grain / (per > 0 ? per : 1) + 1;
}

EMBER_SIMD static void sm_range(void *vctx, int64_t b, int64_t e)
{
    const sm_ctx *c = vctx;
    int es = ember_dtype_size(c->dt);
    for (int64_t r = b; r < e; r++) {
        const char *x = c->src + r * c->len * es;
        char *y = c->dst + r * c->len * es;
        if (c->dt == EMBER_FLOAT32) {   /* loops without a serial dependence, so they vectorise */
            const float *xf = (const float *)x;
            float *yf = (float *)y;
            float mf = row_max_f32(xf, c->len, 1.0f);
            if (isinf(mf) && mf < 0) mf = 0;   /* a row of -inf: exp(-inf - 0) = 0 */
            for (int64_t i = 0; i < c->len; i++) yf[i] = expf_nonpos(xf[i] - mf);
            double sum = row_sum_f32(yf, c->len);
            if (c->log) {
                float ls = (float)log(sum);
                for (int64_t i = 0; i < c->len; i++) yf[i] = xf[i] - mf - ls;
            } else {
                float inv = (float)(1.0 / sum);
                for (int64_t i = 0; i < c->len; i++) yf[i] *= inv;
            }
            continue;
        }
        double m = ember__row_extreme(x, c->dt, c->len, 1, NULL), s = 0;
        if (isinf(m) && m < 0) m = 0;   /* a row of -inf: exp(-inf - 0) = 0 */
        for (int64_t i = 0; i < c->len; i++) s += exp(at(x, c->dt, i) - m);
        double ls = log(s);
        for (int64_t i = 0; i < c->len; i++) {
            double v = at(x, c->dt, i) - m;
            ember__store(y + i * es, c->dt, c->log ? v - ls : exp(v) / s);
        }
    }
}

/* SOFTMAX, LOG_SOFTMAX: i[0] dim */
int fwd_softmax(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    int dim = (int)at->i[0], rc = EMBER_OK;
    ember_tensor *a = NULL, *r = NULL, *tmp = NULL, *back = NULL;
    int dt = ember__is_float(in[0]->dtype) ? in[0]->dtype : EMBER_FLOAT32;
    EMBER_TRY(ember__as_dtype(in[0], dt, &a));
    if (a->ndim == 0) {   /* a single element: softmax 1, log_softmax 0 */
        EMBER_CHECK(ember_full(0, NULL, op == EMBER_OP_SOFTMAX ? 1 : 0, dt, EMBER_CPU, out));
        goto done;
    }
    int64_t rows, len;
    EMBER_CHECK(ember__reduced_last(a, 1u << dim, &r, &rows, &len));
    EMBER_CHECK(ember__new(r->ndim, r->shape, dt, EMBER_CPU, &tmp));
    sm_ctx c = {ember__ptr(r), ember__ptr(tmp), len, dt, op == EMBER_OP_LOG_SOFTMAX};
    if (len > 0) ember__parallel_for(rows, sm_grain(len), sm_range, &c);
    if (dim == a->ndim - 1) {   /* already in the input's layout */
        *out = tmp;
        tmp = NULL;
        goto done;
    }
    /* tmp has dim last: view it back in the input's order, then make it contiguous */
    int64_t shape[EMBER_MAX_DIMS], strides[EMBER_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < a->ndim; d++) {
        int src = d < dim ? d : d == dim ? a->ndim - 1 : d - 1;
        shape[k] = tmp->shape[src];
        strides[k++] = tmp->strides[src];
    }
    EMBER_CHECK(ember__make_view(tmp, a->ndim, shape, strides, 0, &back));
    EMBER_CHECK(ember__new(a->ndim, a->shape, dt, EMBER_CPU, out));
    ember__copy_kernel(*out, back);
done:
    ember_tensor_release(a);
    ember_tensor_release(r);
    ember_tensor_release(tmp);
    ember_tensor_release(back);
    return rc;
}

int ember_softmax(ember_tensor *a, int dim, ember_tensor **out)
{
    if (!a || a->ndim > 0) EMBER_TRY(ember__reduce_check_dim("softmax", a, dim, false));
    ember_attrs at = {{dim}, {0}};
    return ember__dispatch(EMBER_OP_SOFTMAX, 1, &a, &at, out);
}

int ember_log_softmax(ember_tensor *a, int dim, ember_tensor **out)
{
    if (!a || a->ndim > 0) EMBER_TRY(ember__reduce_check_dim("log_softmax", a, dim, false));
    ember_attrs at = {{dim}, {0}};
    return ember__dispatch(EMBER_OP_LOG_SOFTMAX, 1, &a, &at, out);
}

/* ------------------------------------------------------------------ adjoints */
/* g and y as outer blocks of n x inner values; a task is one block's
   columns [c0, c0 + COLS) (a row when inner is 1) */
#define COLS 256

typedef struct {
    const char *g, *y;
    char *gx;
    int64_t outer, n, inner, col_tasks;
    int log;
    grad_rows gr;   /* where inner is 1: g's rows, read in place (grad_rows.h) */
} smb_ctx;

/* sum of g y (softmax) or of g (log_softmax) along one row */
/* whether a row of y is all <= 0 (a log_softmax's output is), so that its
   exp can leave out the steps larger values need (the same bits) */
EMBER_INLINE bool nonpos_float(const float *y, int64_t n) { return n > 0 && row_max_f32(y, n, 1.0f) <= 0; }
EMBER_INLINE bool nonpos_double(const double *y, int64_t n) { EMBER_UNUSED(y), EMBER_UNUSED(n); return false; }

#define SMB_ROW(T, EXP, EXP_NONPOS)                                                                            \
    LANE_SUMS(T, smb_lanes, ROW_LANES, 0)                                                                      \
    LANE_DOT(T, smb_lanes, ROW_LANES, 0)                                                                       \
    EMBER_INLINE void smb_row_##T(const T *restrict g, const T *restrict y, T *restrict gx, int64_t n, int log) \
    {                                                                                                          \
        double acc[ROW_LANES] = {0};                                                                           \
        if (log) {                                                                                             \
            smb_lanes_sum_##T(g, n, acc);                                                                      \
            T s = (T)fold_f64(acc, ROW_LANES);                                                                 \
            if (nonpos_##T(y, n))                                                                              \
                for (int64_t i = 0; i < n; i++) gx[i] = g[i] - EXP_NONPOS(y[i]) * s;                           \
            else                                                                                               \
                for (int64_t i = 0; i < n; i++) gx[i] = g[i] - EXP(y[i]) * s;                                  \
            return;                                                                                            \
        }                                                                                                      \
        smb_lanes_dot_##T(g, y, n, acc);                                                                       \
        T s = (T)fold_f64(acc, ROW_LANES);                                                                     \
        for (int64_t i = 0; i < n; i++) gx[i] = y[i] * (g[i] - s);                                             \
    }
SMB_ROW(float, ember__expf, expf_nonpos)
SMB_ROW(double, exp, exp)
#undef SMB_ROW

/* the same along the middle dim of a block, for columns [c0, c1) */
#define SMB_COLS(T, EXP)                                                                                       \
    EMBER_INLINE void smb_cols_##T(const T *restrict g, const T *restrict y, T *restrict gx, int64_t n,         \
                                   int64_t inner, int64_t c0, int64_t c1, int log)                              \
    {                                                                                                          \
        double acc[COLS];                                                                                      \
        T s[COLS];                                                                                             \
        int64_t w = c1 - c0;                                                                                   \
        for (int64_t c = 0; c < w; c++) acc[c] = 0;                                                            \
        for (int64_t k = 0; k < n; k++) {                                                                      \
            const T *gk = g + k * inner + c0, *yk = y + k * inner + c0;                                        \
            if (log)                                                                                           \
                for (int64_t c = 0; c < w; c++) acc[c] += (double)gk[c];                                       \
            else                                                                                               \
                for (int64_t c = 0; c < w; c++) acc[c] += (double)gk[c] * (double)yk[c];                       \
        }                                                                                                      \
        for (int64_t c = 0; c < w; c++) s[c] = (T)acc[c];                                                      \
        for (int64_t k = 0; k < n; k++) {                                                                      \
            const T *gk = g + k * inner + c0, *yk = y + k * inner + c0;                                        \
            T *ok = gx + k * inner + c0;                                                                       \
            if (log)                                                                                           \
                for (int64_t c = 0; c < w; c++) ok[c] = gk[c] - EXP(yk[c]) * s[c];                             \
            else                                                                                               \
                for (int64_t c = 0; c < w; c++) ok[c] = yk[c] * (gk[c] - s[c]);                                \
        }                                                                                                      \
    }
SMB_COLS(float, ember__expf)
SMB_COLS(double, exp)
#undef SMB_COLS

#define SMB_RANGE(T)                                                                                           \
    EMBER_SIMD static void smb_range_##T(void *vctx, int64_t t0, int64_t t1)                                  \
    {                                                                                                          \
        const smb_ctx *c = vctx;                                                                               \
        const T *g = (const T *)c->g, *y = (const T *)c->y;                                                    \
        T *gx = (T *)c->gx;                                                                                    \
        T buf[GRAD_ROWS_BCAST_MAX];                                                                            \
        int64_t block = c->n * c->inner;                                                                       \
        for (int64_t t = t0; t < t1; t++) {                                                                    \
            int64_t o = t / c->col_tasks, c0 = (t % c->col_tasks) * COLS;                                      \
            int64_t c1 = c0 + COLS < c->inner ? c0 + COLS : c->inner;                                          \
            if (c->inner == 1) {                                                                               \
                const T *gr = g + grad_row(&c->gr, o);                                                         \
                if (c->gr.bcast) {                                                                             \
                    for (int64_t i = 0; i < c->n; i++) buf[i] = gr[0];                                         \
                    gr = buf;                                                                                  \
                }                                                                                              \
                smb_row_##T(gr, y + o * block, gx + o * block, c->n, c->log);                                  \
            } else                                                                                             \
                smb_cols_##T(g + o * block, y + o * block, gx + o * block, c->n, c->inner, c0, c1, c->log);    \
        }                                                                                                      \
    }
SMB_RANGE(float)
SMB_RANGE(double)
#undef SMB_RANGE

/* the formulas as ember's ops, unrecorded (the op itself is, by dispatch) */
static int smb_composed(ember_tensor *g, ember_tensor *y, int dim, int log, ember_tensor **out)
{
    ember_tensor *t[4] = {NULL, NULL, NULL, NULL};
    int paused = ember__ag_pause(), nd = y->ndim > 0, rc = EMBER_OK;
    if (log) {
        EMBER_CHECK(ember_sum(g, nd, &dim, 1, &t[0]));
        EMBER_CHECK(ember_exp(y, &t[1]));
        EMBER_CHECK(ember_mul(t[1], t[0], &t[2]));
        EMBER_CHECK(ember_sub(g, t[2], out));
    } else {
        EMBER_CHECK(ember_mul(g, y, &t[0]));
        EMBER_CHECK(ember_sum(t[0], nd, &dim, 1, &t[1]));
        EMBER_CHECK(ember_sub(g, t[1], &t[2]));
        EMBER_CHECK(ember_mul(y, t[2], out));
    }
done:
    for (int i = 0; i < 4; i++) ember_tensor_release(t[i]);
    ember__ag_resume(paused);
    return rc;
}

/* SOFTMAX_BACKWARD, LOG_SOFTMAX_BACKWARD (g, y): i[0] dim */
int fwd_softmax_backward(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    ember_tensor *g = in[0], *y = in[1];
    int dim = (int)at->i[0], log = op == EMBER_OP_LOG_SOFTMAX_BACKWARD, dt = y->dtype;
    const char *name = ember__ops[op].name;
    char sg[200], sy[200];
    if (g->ndim != y->ndim || memcmp(g->shape, y->shape, (size_t)y->ndim * sizeof *y->shape) != 0)
        return ember__fail(EMBER_ERR_SHAPE, "%s: gradient %s and output %s differ in shape", name,
                           ember__tshape(sg, g), ember__tshape(sy, y));
    if (!ember__is_float(g->dtype) || !ember__is_float(dt))
        return ember__fail(EMBER_ERR_DTYPE, "%s: expected floating tensors, got gradient %s and output %s", name,
                           ember_dtype_name(g->dtype), ember_dtype_name(dt));
    if (g->storage->device != EMBER_CPU || y->storage->device != EMBER_CPU || g->dtype != dt ||
        (dt != EMBER_FLOAT32 && dt != EMBER_FLOAT64))
        return smb_composed(g, y, dim, log, out);
    ember_tensor *gc = NULL, *yc = NULL, *o = NULL;
    int rc = EMBER_OK;
    smb_ctx c = {NULL, NULL, NULL, 1, y->ndim ? y->shape[dim] : 1, 1, 1, log, {0}};
    for (int d = 0; d < y->ndim; d++)
        if (d != dim) *(d < dim ? &c.outer : &c.inner) *= y->shape[d];
    /* g read in place where each row along the dim is contiguous or one value */
    if (c.inner == 1 && y->ndim > 0 && grad_rows_of(g, y->ndim - dim, c.n, &c.gr)) {
        gc = g;
        ember_tensor_retain(g);
    } else {
        EMBER_CHECK(ember__contiguous_as(g, dt, &gc));
        grad_rows_dense(c.outer, c.n, &c.gr);
    }
    EMBER_CHECK(ember__contiguous_as(y, dt, &yc));
    EMBER_CHECK(ember__new(y->ndim, y->shape, dt, EMBER_CPU, &o));
    c.g = ember__ptr(gc), c.y = ember__ptr(yc), c.gx = ember__ptr(o);
    c.col_tasks = (c.inner + COLS - 1) / COLS;
    int64_t tasks = c.outer * c.col_tasks, per = c.n * (c.inner < COLS ? c.inner : COLS);
    if (y->numel > 0)
        ember__parallel_for(tasks, sm_grain(per),
                            dt == EMBER_FLOAT32 ? smb_range_float : smb_range_double, &c);
    *out = ember__take(&o);
done:
    EMBER_RELEASE(gc, yc, o);
    return rc;
}

static int smb_api(int op, ember_tensor *g, ember_tensor *y, int dim, ember_tensor **out)
{
    if (!g || !y || y->ndim > 0) EMBER_TRY(ember__reduce_check_dim(ember__ops[op].name, y, dim, false));
    ember_tensor *in[2] = {g, y};
    ember_attrs at = {{dim}, {0}};
    return ember__dispatch(op, 2, in, &at, out);
}

int ember_softmax_backward(ember_tensor *g, ember_tensor *y, int dim, ember_tensor **out)
{
    return smb_api(EMBER_OP_SOFTMAX_BACKWARD, g, y, dim, out);
}

int ember_log_softmax_backward(ember_tensor *g, ember_tensor *y, int dim, ember_tensor **out)
{
    return smb_api(EMBER_OP_LOG_SOFTMAX_BACKWARD, g, y, dim, out);
}

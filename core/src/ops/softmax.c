/* softmax.c: softmax and log_softmax along a dim, with reduce.c's row
   kernels (reduce.h). The dim is moved last and made contiguous; each row
   takes its maximum, exp(x - max), their sum and then the scaling (or the
   log's shift), and the result is viewed back in the input's order. float32
   rows run typed loops without a serial dependence (they vectorise), the
   sum in double over F64_LANES running sums; other float dtypes go through
   double; integers compute in float32. */
#include "reduce.h"

typedef struct {
    const char *src;
    char *dst;
    int64_t len;
    int dt, log;
} sm_ctx;

/* The sum of n floats in double, over F64_LANES running sums. */
EMBER_INLINE double row_sum_f32(const float *x, int64_t n)
{
    double acc[F64_LANES] = {0};
    int64_t i = 0;
    for (; i + F64_LANES <= n; i += F64_LANES)
        for (int k = 0; k < F64_LANES; k++) acc[k] += x[i + k];
    for (; i < n; i++) acc[0] += x[i];
    return fold_f64(acc, F64_LANES);
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
            for (int64_t i = 0; i < c->len; i++) yf[i] = ember__expf(xf[i] - mf);
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
    if (len > 0) ember__parallel_for(rows, len >= EMBER_PARALLEL_GRAIN ? 1 : EMBER_PARALLEL_GRAIN / len + 1, sm_range, &c);
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

/* scan_sort.c: the scans cumsum and cumprod and the stable sort along a dim
   (ops.def's CUMSUM, CUMPROD, SORT). Each runs on the CPU; on another device
   the op copies its input to the host, runs there and copies the results back
   (ember__on_host), so the table needs no device kernel for them. Integer and
   bool inputs scan in int64 (PyTorch's result dtype); float16 and bfloat16
   scan in float32 and are rounded once. */
#include "ops.h"
#include "../backend.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int ember__on_host(int op, int nin, ember_tensor *const *in, const ember_attrs *at, int nout, ember_tensor **out)
{
    ember_tensor *h[4] = {NULL, NULL, NULL, NULL}, *ho[4] = {NULL, NULL, NULL, NULL};
    int dev = in[0]->storage->device, rc = EMBER_OK, was = ember_is_grad_enabled();
    ember_set_grad_enabled(0);
    for (int i = 0; i < nin; i++) EMBER_CHECK(ember_to_device(in[i], EMBER_CPU, &h[i]));
    EMBER_CHECK(ember__run_nograd(op, nin, h, at, ho));
    for (int k = 0; k < nout; k++) EMBER_CHECK(ember_to_device(ho[k], dev, &out[k]));
done:
    ember_set_grad_enabled(was);
    for (int i = 0; i < 4; i++) {
        ember_tensor_release(h[i]);
        ember_tensor_release(ho[i]);
    }
    if (rc < 0)
        for (int k = 0; k < nout; k++) {
            ember_tensor_release(out[k]);
            out[k] = NULL;
        }
    return rc;
}

static bool on_cpu(int nin, ember_tensor *const *in)
{
    for (int i = 0; i < nin; i++)
        if (in[i]->storage->device != EMBER_CPU) return false;
    return true;
}

/* the dtype a scan computes in, and the dtype of its result */
static int scan_compute(int dt) { return dt == EMBER_FLOAT64 ? dt : dt == EMBER_INT32 || dt == EMBER_INT64 || dt == EMBER_UINT8 || dt == EMBER_BOOL ? EMBER_INT64 : EMBER_FLOAT32; }
static int scan_result(int dt) { return dt == EMBER_INT32 || dt == EMBER_UINT8 || dt == EMBER_BOOL ? EMBER_INT64 : dt; }

/* outer x n x inner, the scanned dim in the middle */
static void split_dims(const ember_tensor *a, int dim, int64_t *outer, int64_t *n, int64_t *inner)
{
    *outer = *inner = 1;
    for (int d = 0; d < dim; d++) *outer *= a->shape[d];
    for (int d = dim + 1; d < a->ndim; d++) *inner *= a->shape[d];
    *n = a->shape[dim];
}

#define SCAN(T, OPR, INIT)                                                                           \
    do {                                                                                            \
        T *p = (T *)ember__ptr(c);                                                                  \
        for (int64_t o = 0; o < outer; o++)                                                         \
            for (int64_t j = 0; j < inner; j++) {                                                   \
                T acc = INIT;                                                                       \
                for (int64_t k = 0; k < n; k++) {                                                   \
                    int64_t kk = reverse ? n - 1 - k : k;                                           \
                    T *e = p + (o * n + kk) * inner + j;                                            \
                    acc = OPR;                                                                      \
                    *e = acc;                                                                       \
                }                                                                                   \
            }                                                                                       \
    } while (0)

/* CUMSUM (i[0] dim, i[1] reverse: the sums from the end) and CUMPROD (i[0] dim) */
int fwd_scan(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 1, out);
    ember_tensor *a = in[0], *c = NULL;
    int dim = (int)at->i[0], reverse = (int)at->i[1], cdt = scan_compute(a->dtype), rdt = scan_result(a->dtype);
    int rc = EMBER_OK;
    bool prod = op == EMBER_OP_CUMPROD;
    int64_t outer, n, inner;
    split_dims(a, dim, &outer, &n, &inner);
    /* a fresh contiguous copy in the compute dtype, scanned in place */
    EMBER_CHECK(ember__new(a->ndim, a->shape, cdt, EMBER_CPU, &c));
    EMBER_CHECK(ember__copy_into(c, a));
    if (cdt == EMBER_FLOAT32) {
        if (prod) SCAN(float, acc * *e, 1.0f);
        else SCAN(float, acc + *e, 0.0f);
    } else if (cdt == EMBER_FLOAT64) {
        if (prod) SCAN(double, acc * *e, 1.0);
        else SCAN(double, acc + *e, 0.0);
    } else {   /* int64, wrapping as PyTorch's does */
        if (prod) SCAN(int64_t, (int64_t)((uint64_t)acc * (uint64_t)*e), 1);
        else SCAN(int64_t, (int64_t)((uint64_t)acc + (uint64_t)*e), 0);
    }
    if (rdt == cdt) {
        out[0] = c;
        c = NULL;
    } else {
        EMBER_CHECK(ember__new(a->ndim, a->shape, rdt, EMBER_CPU, &out[0]));
        EMBER_CHECK(ember__copy_into(out[0], c));
    }
done:
    ember_tensor_release(c);
    return rc;
}
#undef SCAN

/* ------------------------------------------------------------------ sort */
/* The keys of one row as doubles (every dtype but int64, exactly) or int64;
   NaN sorts as the largest value, as in PyTorch. Stable: equal keys keep
   their order (the index breaks ties). */
typedef struct {
    const double *kd;
    const int64_t *ki;
    int desc;
} sort_keys;

static inline bool before(const sort_keys *s, int64_t x, int64_t y)
{
    int c;
    if (s->ki) {
        c = s->ki[x] < s->ki[y] ? -1 : s->ki[x] > s->ki[y];
    } else {
        double a = s->kd[x], b = s->kd[y];
        bool an = a != a, bn = b != b;
        c = an || bn ? (an && bn ? 0 : an ? 1 : -1) : (a < b ? -1 : a > b);
    }
    if (s->desc) c = -c;
    return c < 0 || (c == 0 && x < y);
}

/* merge sort of the positions idx[0..n) by key, with tmp of n */
static void merge_sort(const sort_keys *s, int64_t *idx, int64_t *tmp, int64_t n)
{
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t i = lo, j = mid, k = lo;
            while (i < mid && j < hi) tmp[k++] = before(s, idx[j], idx[i]) ? idx[j++] : idx[i++];
            while (i < mid) tmp[k++] = idx[i++];
            while (j < hi) tmp[k++] = idx[j++];
        }
        memcpy(idx, tmp, (size_t)n * sizeof *idx);
    }
}

/* SORT: i[0] dim, i[1] descending -> values (a's dtype) and int64 0-based indices */
int fwd_sort(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 2, out);
    ember_tensor *a = in[0], *c = NULL, *v = NULL, *ix = NULL;
    int dim = (int)at->i[0], rc = EMBER_OK;
    bool i64 = a->dtype == EMBER_INT64;
    int64_t outer, n, inner;
    split_dims(a, dim, &outer, &n, &inner);
    int64_t *idx = NULL, *tmp = NULL;
    void *row = NULL;
    EMBER_CHECK(ember__contiguous_as(a, i64 ? EMBER_INT64 : EMBER_FLOAT64, &c));
    EMBER_CHECK(ember__new(a->ndim, a->shape, a->dtype, EMBER_CPU, &v));
    EMBER_CHECK(ember__new(a->ndim, a->shape, EMBER_INT64, EMBER_CPU, &ix));
    idx = malloc((size_t)(n ? n : 1) * sizeof *idx);
    tmp = malloc((size_t)(n ? n : 1) * sizeof *tmp);
    row = malloc((size_t)(n ? n : 1) * 8);
    if (!idx || !tmp || !row) EMBER_CHECK(ember__fail(EMBER_ERR_OOM, "sort: out of memory for a row of %lld", (long long)n));
    {
        int es = ember_dtype_size(a->dtype);
        const char *src = ember__ptr(c);
        char *vs = ember__ptr(v), *as = NULL;
        int64_t *is = (int64_t *)ember__ptr(ix);
        ember_tensor *ac = NULL;
        /* the values are copied from a contiguous copy in a's own dtype (exact for every dtype) */
        EMBER_CHECK(ember__contiguous_as(a, a->dtype, &ac));
        as = ember__ptr(ac);
        sort_keys s = {i64 ? NULL : (const double *)row, i64 ? (const int64_t *)row : NULL, (int)at->i[1]};
        for (int64_t o = 0; o < outer; o++)
            for (int64_t j = 0; j < inner; j++) {
                for (int64_t k = 0; k < n; k++) {
                    memcpy((char *)row + k * 8, src + ((o * n + k) * inner + j) * 8, 8);
                    idx[k] = k;
                }
                merge_sort(&s, idx, tmp, n);
                for (int64_t k = 0; k < n; k++) {
                    int64_t at_out = (o * n + k) * inner + j;
                    is[at_out] = idx[k];
                    memcpy(vs + at_out * es, as + ((o * n + idx[k]) * inner + j) * es, (size_t)es);
                }
            }
        ember_tensor_release(ac);
    }
    out[0] = v;
    out[1] = ix;
    v = ix = NULL;
done:
    free(idx);
    free(tmp);
    free(row);
    ember_tensor_release(c);
    ember_tensor_release(v);
    ember_tensor_release(ix);
    return rc;
}

/* ------------------------------------------------------------------ the C API */
static int dim_ok(const char *op, const ember_tensor *a, int dim)
{
    char sa[200];
    if (!a) return ember__fail(EMBER_ERR_ARG, "%s: argument is NULL", op);
    if (a->ndim == 0) return ember__fail(EMBER_ERR_SHAPE, "%s: expects a tensor with at least 1 dim, got a 0-d tensor", op);
    if (dim < 0 || dim >= a->ndim)
        return ember__fail(EMBER_ERR_ARG, "%s: dim %d out of range for shape %s", op, dim + 1, ember__tshape(sa, a));
    return EMBER_OK;
}

int ember_cumsum(ember_tensor *a, int dim, int reverse, ember_tensor **out)
{
    EMBER_TRY(dim_ok("cumsum", a, dim));
    ember_attrs at = {{dim, reverse != 0}, {0}};
    return ember__dispatch(EMBER_OP_CUMSUM, 1, &a, &at, out);
}

int ember_cumprod(ember_tensor *a, int dim, ember_tensor **out)
{
    EMBER_TRY(dim_ok("cumprod", a, dim));
    ember_attrs at = {{dim, 0}, {0}};
    return ember__dispatch(EMBER_OP_CUMPROD, 1, &a, &at, out);
}

int ember_sort(ember_tensor *a, int dim, int descending, ember_tensor **values, ember_tensor **indices)
{
    EMBER_TRY(dim_ok("sort", a, dim));
    if (!values || !indices) return ember__fail(EMBER_ERR_ARG, "sort: NULL output");
    ember_attrs at = {{dim, descending != 0}, {0}};
    ember_tensor *o[2];
    int rc = ember__dispatch(EMBER_OP_SORT, 1, &a, &at, o);
    *values = rc < 0 ? NULL : o[0];
    *indices = rc < 0 ? NULL : o[1];
    return rc;
}

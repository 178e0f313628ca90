/* scan_sort.c: the scans cumsum and cumprod, the stable sort and topk along
   a dim, and searchsorted (ops.def's CUMSUM, CUMPROD, SORT, TOPK,
   SEARCHSORTED). Each runs on the CPU; on another device
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
        EMBER_RELEASE(h[i], ho[i]);
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

/* row blocks [begin, end) of a scan in place: row k becomes row k-1 OP row k
   (from the end when reverse), `inner` contiguous elements at a time */
typedef struct {
    char *p;
    int dt;
    bool prod, reverse;
    int64_t n, inner;
} scan_job;

#define SUM_OF(T, x, y) ((x) + (y))
#define PROD_OF(T, x, y) ((x) * (y))
#define ISUM_OF(T, x, y) ((T)((uint64_t)(x) + (uint64_t)(y)))
#define IPROD_OF(T, x, y) ((T)((uint64_t)(x) * (uint64_t)(y)))
/* blocks [begin, end): row k of a block becomes row k-1 OP row k (from the
   end when reverse), `inner` contiguous elements at a time; with inner = 1
   (the last dim) eight blocks go side by side, eight independent chains */
#define SCAN_ROWS(T, OP)                                                                             \
    {                                                                                                \
        int64_t o = begin;                                                                           \
        if (inner == 1)                                                                              \
            for (; o + 8 <= end; o += 8) {                                                           \
                T *b = (T *)j->p + o * n;                                                            \
                for (int64_t k = 1; k < n; k++) {                                                    \
                    int64_t kc = j->reverse ? n - 1 - k : k, kp = j->reverse ? n - k : k - 1;         \
                    for (int r = 0; r < 8; r++) b[r * n + kc] = OP(T, b[r * n + kp], b[r * n + kc]);  \
                }                                                                                    \
            }                                                                                        \
        for (; o < end; o++) {                                                                       \
            T *base = (T *)j->p + o * n * inner;                                                     \
            for (int64_t k = 1; k < n; k++) {                                                        \
                const T *prev = base + (j->reverse ? n - k : k - 1) * inner;                         \
                T *cur = base + (j->reverse ? n - 1 - k : k) * inner;                                \
                for (int64_t e = 0; e < inner; e++) cur[e] = OP(T, prev[e], cur[e]);                 \
            }                                                                                        \
        }                                                                                            \
    }

static void scan_range(void *ctx, int64_t begin, int64_t end)
{
    const scan_job *j = ctx;
    int64_t n = j->n, inner = j->inner;
    if (j->dt == EMBER_FLOAT32) {
        if (j->prod) SCAN_ROWS(float, PROD_OF)
        else SCAN_ROWS(float, SUM_OF)
    } else if (j->dt == EMBER_FLOAT64) {
        if (j->prod) SCAN_ROWS(double, PROD_OF)
        else SCAN_ROWS(double, SUM_OF)
    } else {   /* int64, wrapping as PyTorch's does */
        if (j->prod) SCAN_ROWS(int64_t, IPROD_OF)
        else SCAN_ROWS(int64_t, ISUM_OF)
    }
}
#undef SCAN_ROWS
#undef SUM_OF
#undef PROD_OF
#undef ISUM_OF
#undef IPROD_OF

/* CUMSUM (i[0] dim, i[1] reverse: the sums from the end) and CUMPROD (i[0] dim) */
int fwd_scan(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 1, out);
    ember_tensor *a = in[0], *c = NULL;
    int dim = (int)at->i[0], cdt = scan_compute(a->dtype), rdt = scan_result(a->dtype);
    int rc = EMBER_OK;
    int64_t outer, n, inner;
    split_dims(a, dim, &outer, &n, &inner);
    /* a fresh contiguous copy in the compute dtype, scanned in place, the
       blocks of n x inner in parallel */
    EMBER_CHECK(ember__new(a->ndim, a->shape, cdt, EMBER_CPU, &c));
    EMBER_CHECK(ember__copy_into(c, a));
    {
        scan_job j = {ember__ptr(c), cdt, op == EMBER_OP_CUMPROD, at->i[1] != 0, n, inner};
        int64_t per = n * inner > 0 ? n * inner : 1;
        ember__parallel_for(outer, EMBER_PARALLEL_GRAIN / per + 1, scan_range, &j);
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

/* TOPK's heap: the k best so far (its root the worst of them) under sort's
   total order (ties by position) */
static inline void sift_down(const sort_keys *s, int64_t *h, int64_t k, int64_t i)
{
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < k && before(s, h[w], h[l])) w = l;   /* the later in order is the worse */
        if (r < k && before(s, h[w], h[r])) w = r;
        if (w == i) return;
        int64_t t = h[i];
        h[i] = h[w];
        h[w] = t;
        i = w;
    }
}

/* rows [begin, end) of a sort or topk (row r: o = r / inner, j = r % inner):
   the first k of the row's order (all n for a sort; for k < n, per row a
   heap of the k best, then those k sorted), each thread with its own
   buffers; a failed allocation is recorded, not raised */
typedef struct {
    const char *keys, *vals;   /* contiguous: keys as double or int64, values in the input's dtype */
    char *vs;
    int64_t *is;
    int64_t n, inner, k;
    int es, desc;
    bool i64;
    int failed;
} sort_job;

static void sort_range(void *ctx, int64_t begin, int64_t end)
{
    sort_job *jb = ctx;
    int64_t n = jb->n, inner = jb->inner, k = jb->k;
    size_t cnt = (size_t)(n ? n : 1);
    int64_t *idx = malloc(cnt * sizeof *idx), *tmp = malloc(cnt * sizeof *tmp);
    char *row = malloc(cnt * 8);
    if (!idx || !tmp || !row) {
        __atomic_store_n(&jb->failed, 1, __ATOMIC_RELAXED);
        goto out;
    }
    sort_keys s = {jb->i64 ? NULL : (const double *)(void *)row, jb->i64 ? (const int64_t *)(void *)row : NULL, jb->desc};
    for (int64_t r = begin; r < end; r++) {
        int64_t o = r / inner, j = r % inner;
        for (int64_t q = 0; q < n; q++) memcpy(row + q * 8, jb->keys + ((o * n + q) * inner + j) * 8, 8);
        for (int64_t q = 0; q < k; q++) idx[q] = q;
        if (k < n) {
            for (int64_t q = k / 2 - 1; q >= 0; q--) sift_down(&s, idx, k, q);
            for (int64_t q = k; q < n; q++)
                if (k > 0 && before(&s, q, idx[0])) {
                    idx[0] = q;
                    sift_down(&s, idx, k, 0);
                }
        }
        merge_sort(&s, idx, tmp, k);
        for (int64_t q = 0; q < k; q++) {
            int64_t at_out = (o * k + q) * inner + j;
            jb->is[at_out] = idx[q];
            memcpy(jb->vs + at_out * jb->es, jb->vals + ((o * n + idx[q]) * inner + j) * jb->es, (size_t)jb->es);
        }
    }
out:
    free(idx);
    free(tmp);
    free(row);
}

/* the first k along dim of a's order (descending when desc): values (a's
   dtype) and int64 0-based indices; rows in parallel, a row costing about
   n * cost */
static int sort_rows(const char *name, ember_tensor *a, int dim, int64_t k, int desc, int64_t cost, ember_tensor **out)
{
    ember_tensor *c = NULL, *ac = NULL, *v = NULL, *ix = NULL;
    int rc = EMBER_OK;
    bool i64 = a->dtype == EMBER_INT64;
    int64_t outer, n, inner, shape[EMBER_MAX_DIMS];
    split_dims(a, dim, &outer, &n, &inner);
    memcpy(shape, a->shape, sizeof shape);
    shape[dim] = k;
    EMBER_CHECK(ember__contiguous_as(a, i64 ? EMBER_INT64 : EMBER_FLOAT64, &c));
    EMBER_CHECK(ember__contiguous_as(a, a->dtype, &ac));
    EMBER_CHECK(ember__new(a->ndim, shape, a->dtype, EMBER_CPU, &v));
    EMBER_CHECK(ember__new(a->ndim, shape, EMBER_INT64, EMBER_CPU, &ix));
    {
        sort_job jb = {ember__ptr(c), ember__ptr(ac), ember__ptr(v), (int64_t *)ember__ptr(ix), n, inner, k,
                       ember_dtype_size(a->dtype), desc, i64, 0};
        int64_t per = n > 0 ? n * cost : 1;
        ember__parallel_for(outer * inner, EMBER_PARALLEL_GRAIN / per + 1, sort_range, &jb);
        if (jb.failed) EMBER_CHECK(ember__fail(EMBER_ERR_OOM, "%s: out of memory for rows of %lld", name, (long long)n));
    }
    out[0] = ember__take(&v);
    out[1] = ember__take(&ix);
done:
    EMBER_RELEASE(c, ac, v, ix);
    return rc;
}

/* SORT: i[0] dim, i[1] descending -> values (a's dtype) and int64 0-based
   indices */
int fwd_sort(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 2, out);
    int dim = (int)at->i[0];
    return sort_rows("sort", in[0], dim, in[0]->shape[dim], (int)at->i[1], 16, out);   /* a row costs about n log n */
}

/* TOPK: i[0] dim, i[1] k, i[2] largest -> the first k of sort's order
   (descending when largest) and their int64 0-based indices */
int fwd_topk(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 2, out);
    return sort_rows("topk", in[0], (int)at->i[0], at->i[1], (int)at->i[2], 4, out);
}

/* the insertion point of x in the sorted sp[0..n): the count of elements < x
   (right: <= x), by binary search */
#define BISECT(T)                                                                  \
    static int64_t bisect_##T(const T *sp, int64_t n, T x, bool right)            \
    {                                                                              \
        int64_t lo = 0, hi = n;                                                    \
        while (lo < hi) {                                                          \
            int64_t mid = lo + (hi - lo) / 2;                                      \
            if (right ? sp[mid] <= x : sp[mid] < x) lo = mid + 1;                  \
            else hi = mid;                                                         \
        }                                                                          \
        return lo;                                                                 \
    }
BISECT(int64_t)
BISECT(double)
#undef BISECT

/* SEARCHSORTED: (sorted (..., n) or (n), values) -> int64 0-based insertion
   points of values in their row of sorted: the count of elements < v (i[0]
   right: <= v), by binary search; compared as int64 when both are int64,
   else as double */
int fwd_searchsorted(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 1, out);
    ember_tensor *seq = in[0], *v = in[1], *cs = NULL, *cv = NULL, *r = NULL;
    bool i64 = seq->dtype == EMBER_INT64 && v->dtype == EMBER_INT64, right = at->i[0] != 0;
    int rc = EMBER_OK, kd = i64 ? EMBER_INT64 : EMBER_FLOAT64;
    int64_t n = seq->shape[seq->ndim - 1];
    int64_t m = seq->ndim == 1 ? v->numel : (v->ndim ? v->shape[v->ndim - 1] : 1);
    EMBER_CHECK(ember__contiguous_as(seq, kd, &cs));
    EMBER_CHECK(ember__contiguous_as(v, kd, &cv));
    EMBER_CHECK(ember__new(v->ndim, v->shape, EMBER_INT64, EMBER_CPU, &r));
    {
        int64_t *o = (int64_t *)ember__ptr(r), total = v->numel;
        for (int64_t q = 0; q < total; q++) {
            int64_t row = seq->ndim == 1 ? 0 : q / (m ? m : 1);
            if (i64)
                o[q] = bisect_int64_t((const int64_t *)ember__ptr(cs) + row * n, n,
                                      ((const int64_t *)ember__ptr(cv))[q], right);
            else
                o[q] = bisect_double((const double *)ember__ptr(cs) + row * n, n, ((const double *)ember__ptr(cv))[q],
                                     right);
        }
    }
    out[0] = ember__take(&r);
done:
    EMBER_RELEASE(cs, cv, r);
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

int ember_topk(ember_tensor *a, int64_t k, int dim, int largest, ember_tensor **values, ember_tensor **indices)
{
    char sa[200];
    EMBER_TRY(dim_ok("topk", a, dim));
    if (!values || !indices) return ember__fail(EMBER_ERR_ARG, "topk: NULL output");
    if (k < 0 || k > a->shape[dim])
        return ember__fail(EMBER_ERR_ARG, "topk: k = %lld out of range for dim %d of size %lld (shape %s)", (long long)k,
                           dim + 1, (long long)a->shape[dim], ember__tshape(sa, a));
    ember_attrs at = {{dim, k, largest != 0}, {0}};
    ember_tensor *o[2];
    int rc = ember__dispatch(EMBER_OP_TOPK, 1, &a, &at, o);
    *values = rc < 0 ? NULL : o[0];
    *indices = rc < 0 ? NULL : o[1];
    return rc;
}

int ember_searchsorted(ember_tensor *sorted, ember_tensor *values, int right, ember_tensor **out)
{
    char sa[200], sb[200];
    if (!sorted || !values) return ember__fail(EMBER_ERR_ARG, "searchsorted: argument is NULL");
    if (sorted->ndim == 0) return ember__fail(EMBER_ERR_SHAPE, "searchsorted: the sorted sequence must have at least 1 dim");
    if (sorted->ndim > 1) {
        bool ok = values->ndim == sorted->ndim;
        for (int d = 0; ok && d < sorted->ndim - 1; d++) ok = values->shape[d] == sorted->shape[d];
        if (!ok)
            return ember__fail(EMBER_ERR_SHAPE, "searchsorted: values of shape %s must match the leading dims of the "
                               "sequence %s", ember__tshape(sb, values), ember__tshape(sa, sorted));
    }
    ember_tensor *in[2] = {sorted, values};
    ember_attrs at = {{right != 0}, {0}};
    return ember__dispatch(EMBER_OP_SEARCHSORTED, 2, in, &at, out);
}

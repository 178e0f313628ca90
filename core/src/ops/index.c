/* index.c: the indexing ops, gather and index_select, and their adjoints
   scatter_add and index_add. Index tensors here are 0-based int64 or int32.

   Every kernel walks rows: the dims before the last (or, for the adjoints,
   everything but the indexed dim) are split across the thread pool, and the
   inner loop copies or adds elements by their size, so they work for every
   dtype. The adjoints give each result element its terms in the order of the
   source, whatever the thread count, so their sums are the same bits on 1 or
   many threads (and deterministic mode needs nothing of its own). A gather
   checks its indices in the pass that reads them. */
#include "ops.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int check_index(const char *op, const ember_tensor *idx)
{
    if (idx->dtype != EMBER_INT64 && idx->dtype != EMBER_INT32)
        return ember__fail(EMBER_ERR_DTYPE, "%s: index tensor must be int64 or int32, got %s", op,
                           ember_dtype_name(idx->dtype));
    return EMBER_OK;
}

static int index_out_of_range(const char *op, int64_t bad, int dim, int64_t size)
{
    return ember__fail(EMBER_ERR_ARG, "%s: index %lld out of range for dim %d of size %lld", op,
                       (long long)bad + 1, dim + 1, (long long)size);
}

/* the indices as a contiguous int64 tensor, each checked against size */
static int read_indices(const char *op, ember_tensor *idx, int dim, int64_t size, ember_tensor **out)
{
    EMBER_TRY(check_index(op, idx));
    ember_tensor *c;
    EMBER_TRY(ember__contiguous_as(idx, EMBER_INT64, &c));
    const int64_t *p = (const int64_t *)ember__ptr(c);
    for (int64_t i = 0; i < c->numel; i++) {
        if (p[i] < 0 || p[i] >= size) {
            int64_t bad = p[i];
            ember_tensor_release(c);
            return index_out_of_range(op, bad, dim, size);
        }
    }
    *out = c;
    return EMBER_OK;
}

/* The element offset of row r of a tensor walked as rows of its last dim:
   r is the flat index over the dims before the last. */
static int64_t row_offset(const ember_tensor *t, int nd, const int64_t *shape, int64_t r)
{
    int64_t off = t->offset;
    for (int d = nd - 2; d >= 0; d--) {
        off += (r % shape[d]) * t->strides[d];
        r /= shape[d];
    }
    return off;
}

/* The multi-index of row r over shape's dims before the last (the last is 0). */
static void row_index(int nd, const int64_t *shape, int64_t r, int64_t *ix)
{
    ix[nd - 1] = 0;
    for (int d = nd - 2; d >= 0; d--) {
        ix[d] = r % shape[d];
        r /= shape[d];
    }
}

/* Copies n elements of es bytes: dst[j] = src[j * ss] (strides in elements). */
static void copy_strided(char *dst, const char *src, int64_t n, int64_t ss, int es)
{
    if (ss == 1) {
        memcpy(dst, src, (size_t)(n * es));
        return;
    }
#define COPY(T)                                                                            \
    for (int64_t j = 0; j < n; j++) ((T *)dst)[j] = ((const T *)src)[j * ss];                 \
    return;
    switch (es) {
    case 8: COPY(uint64_t)
    case 4: COPY(uint32_t)
    case 2: COPY(uint16_t)
    case 1: COPY(uint8_t)
    default:
        for (int64_t j = 0; j < n; j++) memcpy(dst + j * es, src + j * ss * es, (size_t)es);
    }
#undef COPY
}

/* Runs the loop macro M(T) with T the unsigned type of an element's es
   bytes (a copy by size serves every dtype); M ends with a break. */
#define BY_ELEMENT_SIZE(es, M)                                                             \
    switch (es) {                                                                          \
    case 8: M(uint64_t)                                                                    \
    case 4: M(uint32_t)                                                                    \
    case 2: M(uint16_t)                                                                    \
    default: M(uint8_t)                                                                    \
    }

/* ------------------------------------------------------------------ gather */
/* out[.., j] = a[.., idx[.., j] (along dim), ..]: out has idx's shape, a row
   is idx's last dim. */
typedef struct {
    const ember_tensor *a, *idx;
    char *out;
    int dim, nd, es;
    int64_t L, size;
    int64_t *bad_row;   /* the first row holding a bad index (per chunk, min taken after) */
} gather_job;

/* the index at element j of a row starting at q (int32 or int64) */
#define INDEX_AT(is64, q, j, is) ((is64) ? ((const int64_t *)(q))[(j) * (is)] : ((const int32_t *)(q))[(j) * (is)])

static void gather_rows(void *ctx, int64_t r0, int64_t r1)
{
    const gather_job *g = ctx;
    const ember_tensor *a = g->a, *x = g->idx;
    int nd = g->nd, dim = g->dim, es = g->es;
    bool is64 = x->dtype == EMBER_INT64, last = dim == nd - 1;
    int64_t L = g->L, is = x->strides[nd - 1], sd = a->strides[dim], sl = a->strides[nd - 1];
    int xs = ember_dtype_size(x->dtype);
    const char *src = a->storage->data, *xi = x->storage->data;
    for (int64_t r = r0; r < r1; r++) {
        int64_t ix[EMBER_MAX_DIMS];
        row_index(nd, x->shape, r, ix);
        int64_t xo = row_offset(x, nd, x->shape, r), ao = a->offset;
        for (int d = 0; d < nd - 1; d++)
            if (d != dim) ao += ix[d] * a->strides[d];
        const char *q = xi + xo * xs;
        char *dst = g->out + r * L * es;
        /* element j of the row: a's row picked along dim, at column j unless
           dim is the last (then the row's indices pick within a's row) */
#define GATHER_ROW(T, COLUMN)                                                              \
    for (int64_t j = 0; j < L; j++) {                                                      \
        int64_t k = INDEX_AT(is64, q, j, is);                                              \
        if ((uint64_t)k >= (uint64_t)g->size) {                                            \
            if (r < *g->bad_row) *g->bad_row = r;                                          \
            k = 0;                                                                         \
        }                                                                                  \
        ((T *)dst)[j] = ((const T *)src)[ao + k * sd + (COLUMN)];                          \
    }                                                                                      \
    break;
#define PICK(T) GATHER_ROW(T, 0)
#define ACROSS(T) GATHER_ROW(T, j * sl)
        if (last) {
            BY_ELEMENT_SIZE(es, PICK)
        } else {
            BY_ELEMENT_SIZE(es, ACROSS)
        }
#undef PICK
#undef ACROSS
#undef GATHER_ROW
    }
}

/* the first bad index of row r, for the message */
static int64_t bad_index_in(const ember_tensor *x, int nd, int64_t r, int64_t size)
{
    const char *q = (const char *)x->storage->data + row_offset(x, nd, x->shape, r) * ember_dtype_size(x->dtype);
    bool is64 = x->dtype == EMBER_INT64;
    for (int64_t j = 0; j < x->shape[nd - 1]; j++) {
        int64_t k = INDEX_AT(is64, q, j, x->strides[nd - 1]);
        if (k < 0 || k >= size) return k;
    }
    return 0;
}

/* Rows of `grain`-many elements at least per chunk; each chunk records its
   first bad row, the smallest wins (the message names the first bad index). */
typedef struct {
    gather_job job;
    int64_t bad[64];
    int64_t chunk;
} gather_split;

static void gather_chunk(void *ctx, int64_t c0, int64_t c1)
{
    gather_split *s = ctx;
    for (int64_t c = c0; c < c1; c++) {
        gather_job j = s->job;
        j.bad_row = &s->bad[c];
        int64_t rows = s->job.idx->numel / s->job.L, r0 = c * s->chunk, r1 = r0 + s->chunk;
        gather_rows(&j, r0, r1 < rows ? r1 : rows);
    }
}

/* GATHER: i[0] dim; inputs (a, idx of a's ndim): out[i][j] = a[i][idx[i][j]] along
   dim (shapes checked by ember_gather) */
int fwd_gather(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    ember_tensor *a = in[0], *x = in[1];
    int dim = (int)at->i[0];
    EMBER_TRY(check_index("gather", x));
    if (x->ndim == 0) return ember__fail(EMBER_ERR_SHAPE, "gather: a 0-d input has no dim to gather along");
    EMBER_TRY(ember__new(x->ndim, x->shape, a->dtype, EMBER_CPU, out));
    int nd = x->ndim;
    int64_t L = x->shape[nd - 1];
    if (x->numel == 0) return EMBER_OK;
    gather_split s = {{a, x, ember__ptr(*out), dim, nd, ember_dtype_size(a->dtype), L, a->shape[dim], NULL},
                      {0}, 0};
    int64_t rows = x->numel / L, chunks = 64;
    s.chunk = (rows + chunks - 1) / chunks;
    chunks = (rows + s.chunk - 1) / s.chunk;
    for (int64_t c = 0; c < chunks; c++) s.bad[c] = INT64_MAX;
    int64_t rows_per_grain = EMBER_PARALLEL_GRAIN / 4 / (L > 0 ? L : 1) / s.chunk;
    ember__parallel_for(chunks, rows_per_grain > 1 ? rows_per_grain : 1, gather_chunk, &s);
    for (int64_t c = 0; c < chunks; c++) {
        if (s.bad[c] != INT64_MAX) {
            ember_tensor_release(*out);
            *out = NULL;
            return index_out_of_range("gather", bad_index_in(x, nd, s.bad[c], a->shape[dim]), dim, a->shape[dim]);
        }
    }
    return EMBER_OK;
}

/* ------------------------------------------------------------------ index_select */
typedef struct {
    const ember_tensor *a;
    const int64_t *p;   /* the checked indices */
    int64_t n;          /* how many */
    int64_t shape[EMBER_MAX_DIMS];   /* the result's */
    char *out;
    int dim, nd, es;
} select_job;

/* rows r0..r1 of the result, a row being its last dim */
static void select_rows(void *ctx, int64_t r0, int64_t r1)
{
    const select_job *j = ctx;
    const ember_tensor *a = j->a;
    int nd = j->nd, dim = j->dim, es = j->es;
    int64_t L = j->shape[nd - 1];
    const char *src = a->storage->data;
    for (int64_t r = r0; r < r1; r++) {
        int64_t ix[EMBER_MAX_DIMS];
        row_index(nd, j->shape, r, ix);
        char *dst = j->out + r * L * es;
        if (dim == nd - 1) {   /* pick elements of a's row */
            int64_t ao = a->offset;
            for (int d = 0; d < nd - 1; d++) ao += ix[d] * a->strides[d];
            int64_t sd = a->strides[dim];
#define PICK(T)                                                                            \
    for (int64_t k = 0; k < L; k++) ((T *)dst)[k] = ((const T *)src)[ao + j->p[k] * sd];     \
    break;
            BY_ELEMENT_SIZE(es, PICK)
#undef PICK
        } else {   /* a whole row of a, chosen along dim */
            int64_t ao = a->offset;
            for (int d = 0; d < nd - 1; d++) ao += (d == dim ? j->p[ix[d]] : ix[d]) * a->strides[d];
            copy_strided(dst, src + ao * es, L, a->strides[nd - 1], es);
        }
    }
}

/* INDEX_SELECT: i[0] dim; inputs (a, idx 1-D). The shapes are checked by
   ember_index_select, for every device; the index values here. */
int fwd_index_select(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    ember_tensor *a = in[0], *ix = NULL;
    int dim = (int)at->i[0], rc = EMBER_OK;
    EMBER_TRY(read_indices("index_select", in[1], dim, a->shape[dim], &ix));
    select_job j = {a, (const int64_t *)ember__ptr(ix), ix->numel, {0}, NULL, dim, a->ndim,
                    ember_dtype_size(a->dtype)};
    memcpy(j.shape, a->shape, sizeof j.shape);
    j.shape[dim] = ix->numel;
    EMBER_CHECK(ember__new(a->ndim, j.shape, a->dtype, EMBER_CPU, out));
    if ((*out)->numel > 0) {
        j.out = ember__ptr(*out);
        int64_t L = j.shape[a->ndim - 1], rows = (*out)->numel / L;
        int64_t grain = EMBER_PARALLEL_GRAIN / 4 / L;
        ember__parallel_for(rows, grain > 1 ? grain : 1, select_rows, &j);
    }
done:
    ember_tensor_release(ix);
    return rc;
}

/* ------------------------------------------------------------------ scatter_add, index_add */
/* Adds a contiguous source s (outer x n x inner, n along dim) into the zero
   result dst: element (b, k, c) goes to dst's (b, p, c) where p is idx[b, k,
   c] (scatter_add) or idx[k] (index_add). dst_outer[b] and dst_inner[c] are
   the result's offsets of those coordinates (its shape may be larger than
   the source's off dim). Work is split over b, or over c when there are few
   b; every element then gets its terms in the order of k. */
typedef struct {
    const int64_t *p, *dst_outer, *dst_inner;
    const char *src;
    char *dst;
    int64_t outer, n, inner, dst_dim_stride;
    int dt, es;
    bool per_element;   /* scatter_add: an index per source element */
} scatter_job;

#define SCATTER_LOOP(T, ADD)                                                               \
    for (int64_t b = b0; b < b1; b++)                                                      \
        for (int64_t k = 0; k < j->n; k++) {                                               \
            const T *x = (const T *)j->src + (b * j->n + k) * j->inner;                    \
            const int64_t *pk = j->p + (j->per_element ? (b * j->n + k) * j->inner : k);   \
            T *d = (T *)j->dst + j->dst_outer[b];                                          \
            for (int64_t c = c0; c < c1; c++) {                                            \
                T *e = d + (j->per_element ? pk[c] : pk[0]) * j->dst_dim_stride + j->dst_inner[c]; \
                ADD;                                                                       \
            }                                                                              \
        }

/* index_add of floats: whole rows, the result's row as contiguous as the
   source's (its shape off dim is the source's), so the loop vectorises */
#define ROWS_LOOP(T)                                                                       \
    for (int64_t b = b0; b < b1; b++)                                                      \
        for (int64_t k = 0; k < j->n; k++) {                                               \
            const T *x = (const T *)j->src + (b * j->n + k) * j->inner;                    \
            T *d = (T *)j->dst + j->dst_outer[b] + j->p[k] * j->dst_dim_stride;            \
            for (int64_t c = c0; c < c1; c++) d[c] += x[c];                                \
        }

static void scatter_block(const scatter_job *j, int64_t b0, int64_t b1, int64_t c0, int64_t c1)
{
    if (!j->per_element && j->dt == EMBER_FLOAT32) {
        ROWS_LOOP(float)
        return;
    }
    if (!j->per_element && j->dt == EMBER_FLOAT64) {
        ROWS_LOOP(double)
        return;
    }
    switch (j->dt) {
    case EMBER_FLOAT32: SCATTER_LOOP(float, *e += x[c]) break;
    case EMBER_FLOAT64: SCATTER_LOOP(double, *e += x[c]) break;
    case EMBER_INT64: SCATTER_LOOP(int64_t, *e = (int64_t)((uint64_t)*e + (uint64_t)x[c])) break;
    case EMBER_INT32: SCATTER_LOOP(int32_t, *e = (int32_t)((uint32_t)*e + (uint32_t)x[c])) break;
    default: {   /* computed in double, rounded once per term, as before */
        int es = j->es;
        for (int64_t b = b0; b < b1; b++)
            for (int64_t k = 0; k < j->n; k++) {
                const char *x = j->src + (b * j->n + k) * j->inner * es;
                const int64_t *pk = j->p + (j->per_element ? (b * j->n + k) * j->inner : k);
                for (int64_t c = c0; c < c1; c++) {
                    int64_t at = j->dst_outer[b] + (j->per_element ? pk[c] : pk[0]) * j->dst_dim_stride + j->dst_inner[c];
                    char *e = j->dst + at * es;
                    ember__store(e, j->dt, ember__load(e, j->dt) + ember__load(x + c * es, j->dt));
                }
            }
    }
    }
}
#undef SCATTER_LOOP
#undef ROWS_LOOP

static void scatter_over_outer(void *ctx, int64_t b0, int64_t b1)
{
    const scatter_job *j = ctx;
    scatter_block(j, b0, b1, 0, j->inner);
}

static void scatter_over_inner(void *ctx, int64_t c0, int64_t c1)
{
    const scatter_job *j = ctx;
    scatter_block(j, 0, j->outer, c0, c1);
}

/* adds src into a zero tensor of the given shape at the indexed positions
   (shapes checked by scatter_api) */
static int scatter_impl(const char *op, bool per_element, int nd, const int64_t *shape, int dim,
                        ember_tensor *idx, ember_tensor *src, ember_tensor **out)
{
    ember_tensor *ix = NULL, *s = NULL;
    int64_t *offs = NULL;
    int rc = EMBER_OK;
    EMBER_TRY(read_indices(op, idx, dim, shape[dim], &ix));
    EMBER_CHECK(ember__contiguous_as(src, src->dtype, &s));
    EMBER_CHECK(ember_full(nd, shape, 0, src->dtype, EMBER_CPU, out));
    if (s->numel == 0) goto done;
    {
        int64_t outer = 1, inner = 1, rstr[EMBER_MAX_DIMS];
        for (int d = 0; d < dim; d++) outer *= s->shape[d];
        for (int d = dim + 1; d < nd; d++) inner *= s->shape[d];
        ember__contiguous_strides(nd, shape, rstr);
        offs = malloc((size_t)(outer + inner) * sizeof *offs);
        if (!offs) {
            rc = ember__fail(EMBER_ERR_OOM, "%s: out of memory", op);
            goto done;
        }
        for (int64_t b = 0; b < outer; b++) {   /* the source's outer coordinates in the result */
            int64_t r = b, o = 0;
            for (int d = dim - 1; d >= 0; d--) {
                o += (r % s->shape[d]) * rstr[d];
                r /= s->shape[d];
            }
            offs[b] = o;
        }
        for (int64_t c = 0; c < inner; c++) {
            int64_t r = c, o = 0;
            for (int d = nd - 1; d > dim; d--) {
                o += (r % s->shape[d]) * rstr[d];
                r /= s->shape[d];
            }
            offs[outer + c] = o;
        }
        scatter_job j = {(const int64_t *)ember__ptr(ix), offs, offs + outer, ember__ptr(s), ember__ptr(*out),
                         outer, s->shape[dim], inner, rstr[dim], src->dtype, ember_dtype_size(src->dtype),
                         per_element};
        int64_t per_b = s->shape[dim] * inner, grain = EMBER_PARALLEL_GRAIN / 4;
        int threads = ember__job_threads(s->numel);
        if (outer >= 4 * threads || inner < 64)
            ember__parallel_for(outer, per_b ? (grain + per_b - 1) / per_b : outer, scatter_over_outer, &j);
        else
            ember__parallel_for(inner, (grain + outer * s->shape[dim] - 1) / (outer * s->shape[dim]),
                                scatter_over_inner, &j);
    }
done:
    free(offs);
    ember_tensor_release(ix);
    ember_tensor_release(s);
    if (rc < 0) {
        ember_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

/* SCATTER_ADD, INDEX_ADD: i[0] dim, i[1] ndim, i[2..] result shape; inputs (idx, src) */
int fwd_scatter_add(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    return scatter_impl("scatter_add", true, (int)at->i[1], &at->i[2], (int)at->i[0], in[0], in[1], out);
}

int fwd_index_add(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    return scatter_impl("index_add", false, (int)at->i[1], &at->i[2], (int)at->i[0], in[0], in[1], out);
}

/* ------------------------------------------------------------------ public entry points */
int ember_index_select(ember_tensor *a, int dim, ember_tensor *idx, ember_tensor **out)
{
    char sb[200];
    EMBER_TRY(ember__check_dim("index_select", a, dim, 0));
    if (!idx) return ember__fail(EMBER_ERR_ARG, "index_select: index is NULL");
    EMBER_TRY(check_index("index_select", idx));
    if (idx->ndim > 1)
        return ember__fail(EMBER_ERR_SHAPE, "index_select: index must be 1-D, got shape %s", ember__tshape(sb, idx));
    ember_tensor *in[2] = {a, idx};
    ember_attrs at = {{dim}, {0}};
    return ember__dispatch(EMBER_OP_INDEX_SELECT, 2, in, &at, out);
}

int ember_gather(ember_tensor *a, int dim, ember_tensor *idx, ember_tensor **out)
{
    EMBER_TRY(ember__check_dim("gather", a, dim, 0));
    if (!idx) return ember__fail(EMBER_ERR_ARG, "gather: index is NULL");
    EMBER_TRY(check_index("gather", idx));
    char sa[200], sb[200];
    if (idx->ndim != a->ndim)
        return ember__fail(EMBER_ERR_SHAPE, "gather: index of shape %s must have the %d dims of the input %s",
                           ember__tshape(sb, idx), a->ndim, ember__tshape(sa, a));
    for (int d = 0; d < a->ndim; d++)
        if (d != dim && idx->shape[d] > a->shape[d])
            return ember__fail(EMBER_ERR_SHAPE, "gather: index of shape %s does not fit the input %s",
                               ember__tshape(sb, idx), ember__tshape(sa, a));
    ember_tensor *in[2] = {a, idx};
    ember_attrs at = {{dim}, {0}};
    return ember__dispatch(EMBER_OP_GATHER, 2, in, &at, out);
}

/* What scatter_impl walks must lie inside the result: index_add's source
   matches the result's shape except along dim (its index is 1-D, one entry
   per source row); scatter_add's index has the source's shape, which fits in
   the result except along dim. */
static int scatter_fits(const char *name, bool per_element, const int64_t *shape, int dim,
                        const ember_tensor *idx, const ember_tensor *src)
{
    char sr[200], ss[200], si[200];
    int nd = src->ndim;
    bool ok = per_element ? idx->ndim == nd : idx->ndim == 1 && idx->numel == src->shape[dim];
    for (int d = 0; ok && d < nd; d++) {
        if (per_element && idx->shape[d] != src->shape[d]) ok = false;
        if (d != dim && (per_element ? src->shape[d] > shape[d] : src->shape[d] != shape[d])) ok = false;
    }
    if (ok) return EMBER_OK;
    ember__shape_str(sr, nd, shape);
    return ember__fail(EMBER_ERR_SHAPE, "%s: index %s and source %s do not fit a result of shape %s along dim %d",
                       name, ember__tshape(si, idx), ember__tshape(ss, src), sr, dim + 1);
}

static int scatter_api(int op, int ndim, const int64_t *shape, int dim, ember_tensor *idx, ember_tensor *src,
                       ember_tensor **out)
{
    const char *name = ember__ops[op].name;
    if (!idx || !src || (ndim > 0 && !shape)) return ember__fail(EMBER_ERR_ARG, "%s: NULL argument", name);
    EMBER_TRY(ember__check_shape(name, ndim, shape, NULL));
    if (ndim != src->ndim || dim < 0 || dim >= ndim)
        return ember__fail(EMBER_ERR_ARG, "%s: dim %d of a %d-dim result does not fit a source of %d dims", name,
                           dim + 1, ndim, src->ndim);
    EMBER_TRY(check_index(name, idx));
    EMBER_TRY(scatter_fits(name, op == EMBER_OP_SCATTER_ADD, shape, dim, idx, src));
    if (ndim > EMBER_MAX_ATTRS - 2) return ember__fail(EMBER_ERR_SHAPE, "%s: too many dims", name);
    ember_tensor *in[2] = {idx, src};
    ember_attrs at = {{dim, ndim}, {0}};
    for (int d = 0; d < ndim; d++) at.i[2 + d] = shape[d];
    return ember__dispatch(op, 2, in, &at, out);
}

int ember_scatter_add(int ndim, const int64_t *shape, int dim, ember_tensor *idx, ember_tensor *src,
                      ember_tensor **out)
{
    return scatter_api(EMBER_OP_SCATTER_ADD, ndim, shape, dim, idx, src, out);
}

int ember_index_add(int ndim, const int64_t *shape, int dim, ember_tensor *idx, ember_tensor *src,
                    ember_tensor **out)
{
    return scatter_api(EMBER_OP_INDEX_ADD, ndim, shape, dim, idx, src, out);
}

/* index.c: the kernels of the indexing ops, gather and index_select, and
   their adjoints scatter_add and index_add (their public entry points:
   index_api.c). Index tensors here are int64 or int32, read
   where they lie (any strides), counted from a base: 0 for C's callers, 1
   for Lua's, whose indices then need no shifted copy.

   gather and index_select are one kernel: a result row (its last dim) takes
   each element from a's row picked along dim, the indices of index_select
   being a view of its 1-D index broadcast over the other dims. Each row's
   indices are checked in a first vector pass over them (in L1 after it),
   then copied by element size, so the kernel serves every dtype. Work is
   split into tasks fixed by the shape (row chunks, and column tiles when
   the gather picks along a leading dim, so that a tile of a stays in the
   core's cache while every row reads it), hence the same result on any
   thread count. The adjoints give each result element its terms in the
   order of the source, whatever the thread count, so their sums are the
   same bits on 1 or many threads (and deterministic mode needs nothing of
   its own). */
#include "ops.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BASE_ATTR EMBER_INDEX_BASE_ATTR

int ember__check_index(const char *op, const ember_tensor *idx)
{
    if (idx->dtype != EMBER_INT64 && idx->dtype != EMBER_INT32)
        return ember__fail(EMBER_ERR_DTYPE, "%s: index tensor must be int64 or int32, got %s", op,
                           ember_dtype_name(idx->dtype));
    return EMBER_OK;
}

/* bad is the index as given (counted from base); the message counts from 1 */
static int index_out_of_range(const char *op, int64_t bad, int64_t base, int dim, int64_t size)
{
    return ember__fail(EMBER_ERR_ARG, "%s: index %lld out of range for dim %d of size %lld", op,
                       (long long)(bad - base + 1), dim + 1, (long long)size);
}

/* the index at element j of q (int32 or int64), stride is in elements */
#define INDEX_AT(is64, q, j, is) ((is64) ? ((const int64_t *)(q))[(j) * (is)] : ((const int32_t *)(q))[(j) * (is)])

/* a's index k (counted from base) is outside [0, size) */
#define OUTSIDE(k, base, size) ((uint64_t)((int64_t)(k) - (base)) >= (uint64_t)(size))

/* Whether any of the n contiguous indices at q lies outside [0, size): one
   branch-free pass the compiler vectorises (an embedding's 4096 indices in
   0.3 us, where the loop below, which stops at the first, took 3-4) */
EMBER_SIMD static bool any_outside(const char *q, bool is64, int64_t n, int64_t base, int64_t size)
{
    uint64_t bad = 0;
    if (is64)
        for (int64_t k = 0; k < n; k++) bad |= OUTSIDE(((const int64_t *)q)[k], base, size);
    else
        for (int64_t k = 0; k < n; k++) bad |= OUTSIDE(((const int32_t *)q)[k], base, size);
    return bad != 0;
}

/* Fails naming the first index of a 0- or 1-D index outside [0, size). */
static int check_1d(const char *op, const ember_tensor *idx, int64_t base, int dim, int64_t size)
{
    const char *q = ember__ptr(idx);
    int64_t is = idx->ndim ? idx->strides[0] : 0;
    bool is64 = idx->dtype == EMBER_INT64;
    if (is == 1 && !any_outside(q, is64, idx->numel, base, size)) return EMBER_OK;
    for (int64_t k = 0; k < idx->numel; k++)
        if (OUTSIDE(INDEX_AT(is64, q, k, is), base, size))
            return index_out_of_range(op, INDEX_AT(is64, q, k, is), base, dim, size);
    return EMBER_OK;
}

/* The smallest of *slot and v, kept by any thread (only on the error path). */
static void keep_min(int64_t *slot, int64_t v)
{
    int64_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
    while (v < cur && !__atomic_compare_exchange_n(slot, &cur, v, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

/* ------------------------------------------------------------------ gather, index_select */
/* out[.., j] = a[.., idx[.., j] (along dim), ..]: a result row is its last
   dim; x_str are the index's strides over the result's dims (0 where
   index_select's index is broadcast). */
typedef struct {
    const char *src, *xi;
    char *out;
    int64_t shape[EMBER_MAX_DIMS], a_str[EMBER_MAX_DIMS], x_str[EMBER_MAX_DIMS];
    int64_t a_off, x_off, size, base, sd;   /* sd: a's stride along dim */
    int64_t rows, L, rchunk, W, tiles;
    int64_t bad_row;   /* the first row holding a bad index (INT64_MAX: none) */
    int nd, dim, es;
    bool is64;
    bool checked;   /* the indices are known to be in range (index_select's, checked once) */
} gather_job;

/* One row's n elements: dst[j] = src[o + k_j sd + j sl], k_j = q[j is] -
   base (sl is 0 when the indices pick within a's row). False, with nothing
   read from a, when an index is out of range (unless checked before). */
#define GATHER_ROW_FN(NAME, T, I)                                                          \
    EMBER_SIMD static bool NAME(char *dstv, const char *srcv, const char *qv, int64_t n, int64_t is,      \
                     int64_t sd, int64_t sl, int64_t ao, int64_t size, int64_t base, bool checked) \
    {                                                                                      \
        T *restrict dst = (T *)dstv;                                                       \
        const T *restrict src = (const T *)srcv;                                           \
        const I *restrict q = (const I *)qv;                                               \
        uint64_t bad = 0;                                                                  \
        if (!checked && is == 1)                                                           \
            for (int64_t j = 0; j < n; j++) bad |= OUTSIDE(q[j], base, size);              \
        else if (!checked)                                                                 \
            for (int64_t j = 0; j < (is ? n : 1); j++) bad |= OUTSIDE(q[j * is], base, size); \
        if (bad) return false;                                                             \
        int64_t o = ao - base * sd;                                                        \
        if (is == 0) {                                                                     \
            const T *s = src + o + q[0] * sd;                                              \
            if (sl == 1)                                                                   \
                memcpy(dst, s, (size_t)n * sizeof(T));                                     \
            else                                                                           \
                for (int64_t j = 0; j < n; j++) dst[j] = s[j * sl];                        \
        } else if (is == 1 && sd == 1 && sl == 0) {                                        \
            const T *s = src + o;                                                          \
            int64_t j = 0; /* 16 picks, one vector store: 4096x1024, 2.9 ms, not 4 */     \
            for (; j + 16 <= n; j += 16) {                                                 \
                T t[16];                                                                   \
                for (int l = 0; l < 16; l++) t[l] = s[q[j + l]];                           \
                memcpy(dst + j, t, sizeof t);                                              \
            }                                                                              \
            for (; j < n; j++) dst[j] = s[q[j]];                                           \
        } else if (is == 1 && sl == 1) {                                                   \
            for (int64_t j = 0; j < n; j++) dst[j] = src[o + q[j] * sd + j];               \
        } else {                                                                           \
            for (int64_t j = 0; j < n; j++) dst[j] = src[o + q[j * is] * sd + j * sl];     \
        }                                                                                  \
        return true;                                                                       \
    }
GATHER_ROW_FN(gather_row_8_64, uint64_t, int64_t)
GATHER_ROW_FN(gather_row_4_64, uint32_t, int64_t)
GATHER_ROW_FN(gather_row_2_64, uint16_t, int64_t)
GATHER_ROW_FN(gather_row_1_64, uint8_t, int64_t)
GATHER_ROW_FN(gather_row_8_32, uint64_t, int32_t)
GATHER_ROW_FN(gather_row_4_32, uint32_t, int32_t)
GATHER_ROW_FN(gather_row_2_32, uint16_t, int32_t)
GATHER_ROW_FN(gather_row_1_32, uint8_t, int32_t)
#undef GATHER_ROW_FN

typedef bool (*gather_row_fn)(char *, const char *, const char *, int64_t, int64_t, int64_t, int64_t, int64_t,
                              int64_t, int64_t, bool);

static gather_row_fn gather_row_for(int es, bool is64)
{
    switch (es) {
    case 8: return is64 ? gather_row_8_64 : gather_row_8_32;
    case 4: return is64 ? gather_row_4_64 : gather_row_4_32;
    case 2: return is64 ? gather_row_2_64 : gather_row_2_32;
    default: return is64 ? gather_row_1_64 : gather_row_1_32;
    }
}

/* Tasks t0..t1: task t is row chunk t / tiles and column tile t % tiles. */
static void gather_tasks(void *ctx, int64_t t0, int64_t t1)
{
    gather_job *g = ctx;
    int nd = g->nd, dim = g->dim, es = g->es, xs = g->is64 ? 8 : 4;
    int64_t sd = g->sd, sl = dim == nd - 1 ? 0 : g->a_str[nd - 1], is = g->x_str[nd - 1];
    gather_row_fn row = gather_row_for(es, g->is64);
    /* a 2-D gather along dim 1 picks from its tile's slice of a, size rows
       of a row stride that is often a power of two: those lines crowd into a
       few of the cache's sets and evict each other (a 1 MiB slice of 4096
       rows 4 KiB apart keeps about 64 KiB). The slice is copied to a dense
       block first, which stays in the cache, and picked from there. */
    bool dense = g->tiles > 1 && nd == 2 && dim == 0 && sl == 1;
    bool pick_rows = nd == 2 && dim == 0 && is == 0 && sl == 1;
    size_t sbytes = dense ? (size_t)(g->size * g->W * es) : 0;
    char *slice = dense ? ember__alloc(sbytes) : NULL;
    for (int64_t t = t0; t < t1; t++) {
        int64_t r0 = t / g->tiles * g->rchunk, r1 = r0 + g->rchunk, c0 = t % g->tiles * g->W, c1 = c0 + g->W;
        if (r1 > g->rows) r1 = g->rows;
        if (c1 > g->L) c1 = g->L;
        if (slice) {
            int64_t wn = c1 - c0;
            for (int64_t k = 0; k < g->size; k++)
                memcpy(slice + k * wn * es, g->src + (g->a_off + k * sd + c0) * es, (size_t)(wn * es));
            for (int64_t r = r0; r < r1; r++) {
                int64_t xo = g->x_off + r * g->x_str[0] + c0 * is;
                if (!row(g->out + (r * g->L + c0) * es, slice, g->xi + xo * xs, wn, is, wn, 1, 0, g->size, g->base,
                         g->checked)) {
                    keep_min(&g->bad_row, r);
                    break;
                }
            }
            continue;
        }
        /* whole rows picked from a table (index_select, embedding): one
           memcpy a row, its index checked as it goes, nothing else per row
           (the general loop's walk over dims, its call and a software
           prefetch of the row ahead cost 10-15% more than PyTorch's memcpy
           loop; the prefetch, which once paid, now stalled on its misses) */
        if (pick_rows) {
            size_t nb = (size_t)((c1 - c0) * es);
            const char *s0 = g->src + (g->a_off + c0) * es;
            for (int64_t r = r0; r < r1; r++) {
                int64_t k = INDEX_AT(g->is64, g->xi, g->x_off + r * g->x_str[0], 1) - g->base;
                if ((uint64_t)k >= (uint64_t)g->size) {
                    keep_min(&g->bad_row, r);
                    break;
                }
                memcpy(g->out + (r * g->L + c0) * es, s0 + k * sd * es, nb);
            }
            continue;
        }
        int64_t ix[EMBER_MAX_DIMS] = {0}, rest = r0;
        for (int d = nd - 2; d >= 0; d--) {
            ix[d] = rest % g->shape[d];
            rest /= g->shape[d];
        }
        for (int64_t r = r0; r < r1; r++) {
            int64_t ao = g->a_off + c0 * sl, xo = g->x_off + c0 * is;
            for (int d = 0; d < nd - 1; d++) {
                if (d != dim) ao += ix[d] * g->a_str[d];
                xo += ix[d] * g->x_str[d];
            }
            /* a tile's rows lie far apart: fetch two rows ahead (8% faster) */
            if (g->tiles > 1 && ix[nd - 2] + 2 < g->shape[nd - 2]) {
                const char *nx = g->xi + (xo + 2 * g->x_str[nd - 2]) * xs;
                char *no = g->out + ((r + 2) * g->L + c0) * es;
                for (int64_t b = 0; b < (c1 - c0) * xs; b += 64) __builtin_prefetch(nx + b);
                for (int64_t b = 0; b < (c1 - c0) * es; b += 64) __builtin_prefetch(no + b, 1);
            }
            if (!row(g->out + (r * g->L + c0) * es, g->src, g->xi + xo * xs, c1 - c0, is, sd, sl, ao, g->size,
                     g->base, g->checked)) {
                keep_min(&g->bad_row, r);
                break;
            }
            for (int d = nd - 2; d >= 0 && ++ix[d] == g->shape[d]; d--) ix[d] = 0;
        }
    }
    if (slice) ember__free(slice, sbytes);
}

/* the first bad index of row r, for the message */
static int64_t bad_index_in(const gather_job *g, int64_t r)
{
    int nd = g->nd;
    int64_t xo = g->x_off;
    for (int d = nd - 2; d >= 0; d--) {
        xo += (r % g->shape[d]) * g->x_str[d];
        r /= g->shape[d];
    }
    const char *q = g->xi + xo * (g->is64 ? 8 : 4);
    for (int64_t j = 0; j < g->L; j++) {
        int64_t k = INDEX_AT(g->is64, q, j, g->x_str[nd - 1]);
        if (OUTSIDE(k, g->base, g->size)) return k;
    }
    return g->base;
}

/* Runs a job whose pointers, shapes and strides are set: picks the task
   grid by the shape alone, then the first bad index fails naming op. */
static int gather_run(const char *op, gather_job *g)
{
    g->sd = g->a_str[g->dim];
    /* Rows of one element (a label a row, as cross-entropy picks) drop the
       last dim: the dim before it is the row, walked in one call. Picking
       along the dropped dim, dim is then past the last (no row dim picked). */
    if (g->nd >= 2 && g->shape[g->nd - 1] == 1) g->nd--;
    int nd = g->nd;
    g->L = g->shape[nd - 1];
    g->rows = 1;
    for (int d = 0; d < nd - 1; d++) g->rows *= g->shape[d];
    g->bad_row = INT64_MAX;
    g->rchunk = (g->rows + 63) / 64;
    g->W = g->L;
    /* picking along a leading dim with an index per element, every row reads
       the same slice of a: columns in tiles of 256 bytes or more whose slice
       (size x W) fits in 1 MiB, each tile over the rows that share the slice
       (at 4096 x 1024 along dim 1, one thread: 13.5-14.5 ms under any load,
       where whole rows took 6 to 23 ms by the neighbours' load) */
    if (g->dim < nd - 1 && g->x_str[nd - 1] != 0 && g->L > 0) {
        int64_t line = 256 / g->es, w = (1 << 20) / (g->size * g->es + 1) / line * line;
        if (w < line) w = line;
        if (w < g->L) {
            int64_t share = 1;
            for (int d = g->dim; d < nd - 1; d++) share *= g->shape[d];
            g->W = w;
            if (g->rchunk < share) g->rchunk = share;
        }
    }
    g->tiles = (g->L + g->W - 1) / g->W;
    int64_t tasks = (g->rows + g->rchunk - 1) / g->rchunk * g->tiles, per = g->rchunk * g->W;
    int64_t grain = EMBER_PARALLEL_GRAIN / 4 / (per > 0 ? per : 1);
    ember__parallel_for(tasks, grain > 1 ? grain : 1, gather_tasks, g);
    if (g->bad_row == INT64_MAX) return EMBER_OK;
    return index_out_of_range(op, bad_index_in(g, g->bad_row), g->base, g->dim, g->size);
}

static void gather_init(gather_job *g, const ember_tensor *a, const ember_tensor *x, int dim, int64_t base,
                        char *out)
{
    memset(g, 0, sizeof *g);
    g->src = a->storage->data;
    g->xi = x->storage->data;
    g->out = out;
    g->a_off = a->offset;
    g->x_off = x->offset;
    memcpy(g->a_str, a->strides, sizeof g->a_str);
    g->size = a->shape[dim];
    g->base = base;
    g->nd = a->ndim;
    g->dim = dim;
    g->es = ember_dtype_size(a->dtype);
    g->is64 = x->dtype == EMBER_INT64;
}

/* GATHER: i[0] dim, i[BASE_ATTR] base; inputs (a, idx of a's ndim):
   out[i][j] = a[i][idx[i][j]] along dim (shapes checked by ember_gather) */
int fwd_gather(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    ember_tensor *a = in[0], *x = in[1];
    int dim = (int)at->i[0];
    EMBER_TRY(ember__check_index("gather", x));
    if (x->ndim == 0) return ember__fail(EMBER_ERR_SHAPE, "gather: a 0-d input has no dim to gather along");
    EMBER_TRY(ember__new(x->ndim, x->shape, a->dtype, EMBER_CPU, out));
    if (x->numel == 0) return EMBER_OK;
    gather_job g;
    gather_init(&g, a, x, dim, at->i[BASE_ATTR], ember__ptr(*out));
    memcpy(g.shape, x->shape, sizeof g.shape);
    memcpy(g.x_str, x->strides, sizeof g.x_str);
    int rc = gather_run("gather", &g);
    if (rc < 0) {
        ember_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

/* index_select's job over as few dims as it goes: a dim of size 1 other
   than dim dropped, and two neighbours on the same side of dim merged where
   a steps evenly over both (always, for a contiguous a). A data set's batch
   (n, 1, 28, 28) picked along dim 0 is then n rows of 784, each one copy,
   where it was 28 n rows of 28 elements, each a call (0.5 ms a batch of 128
   where a copy of its 400 KB takes tens of microseconds). The same
   elements in the same places. */
static void index_select_merge_dims(gather_job *g)
{
    int nd = g->nd;
    for (int d = 0; d < nd && nd > 1;) {
        bool drop = d != g->dim && g->shape[d] == 1;
        bool merge = !drop && d + 1 < nd && d != g->dim && d + 1 != g->dim &&
                     g->a_str[d] == g->a_str[d + 1] * g->shape[d + 1];
        if (!drop && !merge) {
            d++;
            continue;
        }
        if (merge) {
            g->shape[d + 1] *= g->shape[d];
            g->x_str[d + 1] = 0;
        }
        for (int e = d; e + 1 < nd; e++) {   /* dim d goes (its size folded into d + 1) */
            g->shape[e] = g->shape[e + 1];
            g->a_str[e] = g->a_str[e + 1];
            g->x_str[e] = g->x_str[e + 1];
        }
        nd--;
        if (g->dim > d) g->dim--;
    }
    g->nd = nd;
}

/* INDEX_SELECT: i[0] dim, i[BASE_ATTR] base; inputs (a, idx 1-D). The
   shapes are checked by ember_index_select, for every device; the index
   values here. */
int fwd_index_select(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    ember_tensor *a = in[0], *x = in[1];
    int dim = (int)at->i[0];
    EMBER_TRY(ember__check_index("index_select", x));
    gather_job g;
    gather_init(&g, a, x, dim, at->i[BASE_ATTR], NULL);
    memcpy(g.shape, a->shape, sizeof g.shape);
    g.shape[dim] = x->numel;
    g.x_str[dim] = x->ndim ? x->strides[0] : 0;
    EMBER_TRY(ember__new(a->ndim, g.shape, a->dtype, EMBER_CPU, out));
    g.out = ember__ptr(*out);
    /* the 1-D index is checked once, not once a row */
    int rc = check_1d("index_select", x, g.base, dim, g.size);
    g.checked = true;
    if (rc == EMBER_OK && (*out)->numel > 0) {
        index_select_merge_dims(&g);
        rc = gather_run("index_select", &g);
    }
    if (rc < 0) {
        ember_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

/* ------------------------------------------------------------------ scatter_add, index_add */
/* Adds a contiguous source s (outer x n x inner, n along dim) into the zero
   result dst: element (b, k, c) goes to dst's (b, p - base, c) where p is
   idx[b, k, c] (scatter_add: a contiguous index of the source's shape) or
   idx[k] (index_add: 1-D, checked before). dst_outer[b] and dst_inner[c]
   are the result's offsets of those coordinates (its shape may be larger
   than the source's off dim). Work is split over b, or over c when there
   are few b; every element then gets its terms in the order of k. A
   scatter_add block stops at its first bad index, keeping the smallest
   position over the blocks (the result is dropped). */
typedef struct {
    const char *xi, *src;
    char *dst;
    const int64_t *dst_outer, *dst_inner;
    int64_t outer, n, inner, dst_dim_stride, xstride, size, base;
    int64_t bad;    /* the first bad position in the index (INT64_MAX: none) */
    int64_t W;      /* columns (of inner) a tile: the result's slice size x W in cache */
    int dt, es;
    bool per_element, is64;
    bool zero_here;   /* the blocks zero their parts of the result (zero_part) */
} scatter_job;

#define SCATTER_LOOP(I, ADD)                                                               \
    for (int64_t b = b0; b < b1; b++) {                                                    \
        int64_t db = j->dst_outer[b] - base * dds;                                         \
        for (int64_t k = 0; k < n; k++) {                                                  \
            int64_t at = (b * n + k) * inner;                                              \
            const I *pk = q + (per ? at : k * j->xstride);                                 \
            for (int64_t c = c0; c < c1; c++) {                                            \
                int64_t p = per ? pk[c] : pk[0];                                           \
                if (EMBER_UNLIKELY(OUTSIDE(p, base, size))) {                              \
                    keep_min(&j->bad, at + c);                                             \
                    return;                                                                \
                }                                                                          \
                ADD(db + p * dds + inner_off[c], at + c);                                  \
            }                                                                              \
        }                                                                                  \
    }

/* d[e] += s[x] for each dtype: integers wrap, the dtypes without a C type
   are computed in double and rounded once per term */
#define ADD_F32(e, x) ((float *)dst)[e] += ((const float *)src)[x]
#define ADD_F64(e, x) ((double *)dst)[e] += ((const double *)src)[x]
#define ADD_I64(e, x)                                                                      \
    ((int64_t *)dst)[e] = (int64_t)((uint64_t)((int64_t *)dst)[e] + (uint64_t)((const int64_t *)src)[x])
#define ADD_I32(e, x)                                                                      \
    ((int32_t *)dst)[e] = (int32_t)((uint32_t)((int32_t *)dst)[e] + (uint32_t)((const int32_t *)src)[x])
#define ADD_ANY(e, x)                                                                      \
    ember__store(dst + (e) * j->es, j->dt,                                                 \
                 ember__load(dst + (e) * j->es, j->dt) + ember__load(src + (x) * j->es, j->dt))

/* scatter_add along the innermost dim: rows of n indices, each checked in
   a first pass, then added */
#define LAST_DIM_LOOP(T, I)                                                                \
    for (int64_t b = b0; b < b1; b++) {                                                    \
        const I *restrict pk = q + b * n;                                                  \
        const T *restrict x = (const T *)j->src + b * n;                                   \
        T *restrict d = (T *)j->dst;                                                       \
        int64_t db = j->dst_outer[b] - j->base * dds;                                      \
        uint64_t bad = 0;                                                                  \
        for (int64_t k = 0; k < n; k++) bad |= OUTSIDE(pk[k], j->base, j->size);           \
        if (bad) {                                                                         \
            int64_t k = 0;                                                                 \
            while (!OUTSIDE(pk[k], j->base, j->size)) k++;                                 \
            keep_min(&j->bad, b * n + k);                                 \
            return;                                                                        \
        }                                                                                  \
        for (int64_t k = 0; k < n; k++) d[db + pk[k] * dds] += x[k];                       \
    }

/* index_add of floats: whole rows, the result's row as contiguous as the
   source's (its shape off dim is the source's), so the loop vectorises */
#define ROWS_LOOP(T, I)                                                                    \
    for (int64_t b = b0; b < b1; b++)                                                      \
        for (int64_t k = 0; k < n; k++) {                                                  \
            const T *restrict x = (const T *)j->src + (b * n + k) * j->inner;              \
            T *restrict d = (T *)j->dst + j->dst_outer[b] + (q[k * j->xstride] - j->base) * dds; \
            for (int64_t c = c0; c < c1; c++) d[c] += x[c];                                \
        }

/* LOOP(T, I) with T float or double, by the job's dtype, then return */
#define BY_FLOAT_TYPE(LOOP, I)                                                             \
    if (j->dt == EMBER_FLOAT32) {                                                          \
        LOOP(float, I)                                                                     \
    } else {                                                                               \
        LOOP(double, I)                                                                    \
    }                                                                                      \
    return;

#define SCATTER_BLOCK_FN(NAME, I)                                                          \
    EMBER_SIMD static void NAME(scatter_job *j, int64_t b0, int64_t b1, int64_t c0, int64_t c1) \
    {                                                                                      \
        const I *q = (const I *)j->xi;                                                     \
        char *dst = j->dst;                                                                \
        const char *src = j->src;                                                          \
        const int64_t *inner_off = j->dst_inner;                                           \
        int64_t n = j->n, dds = j->dst_dim_stride, inner = j->inner, base = j->base, size = j->size; \
        bool per = j->per_element;                                                         \
        bool floats = j->dt == EMBER_FLOAT32 || j->dt == EMBER_FLOAT64;                    \
        if (floats && per && inner == 1) {                                                 \
            BY_FLOAT_TYPE(LAST_DIM_LOOP, I)                                                \
        }                                                                                  \
        if (floats && !per) {                                                              \
            BY_FLOAT_TYPE(ROWS_LOOP, I)                                                    \
        }                                                                                  \
        switch (j->dt) {                                                                   \
        case EMBER_FLOAT32: SCATTER_LOOP(I, ADD_F32) break;                                \
        case EMBER_FLOAT64: SCATTER_LOOP(I, ADD_F64) break;                                \
        case EMBER_INT64: SCATTER_LOOP(I, ADD_I64) break;                                  \
        case EMBER_INT32: SCATTER_LOOP(I, ADD_I32) break;                                  \
        default: SCATTER_LOOP(I, ADD_ANY)                                                  \
        }                                                                                  \
    }
SCATTER_BLOCK_FN(scatter_block_64, int64_t)
SCATTER_BLOCK_FN(scatter_block_32, int32_t)
#undef SCATTER_BLOCK_FN
#undef BY_FLOAT_TYPE
#undef SCATTER_LOOP
#undef LAST_DIM_LOOP
#undef ROWS_LOOP
#undef ADD_F32
#undef ADD_F64
#undef ADD_I64
#undef ADD_I32
#undef ADD_ANY

static void scatter_block(scatter_job *j, int64_t b0, int64_t b1, int64_t c0, int64_t c1)
{
    if (j->is64)
        scatter_block_64(j, b0, b1, c0, c1);
    else
        scatter_block_32(j, b0, b1, c0, c1);
}

/* Where the source covers the result off dim, the block that adds into a
   part of the result zeroes it just before (in cache then, with no pass of
   its own): the places (b, 0..size, c0..c1), contiguous from c0 to c1. */
static void zero_part(const scatter_job *j, int64_t b, int64_t c0, int64_t c1)
{
    char *d = j->dst + (j->dst_outer[b] + c0) * j->es;
    if (c0 == 0 && c1 == j->inner) {
        memset(d, 0, (size_t)(j->size * j->inner * j->es));
        return;
    }
    for (int64_t p = 0; p < j->size; p++) memset(d + p * j->dst_dim_stride * j->es, 0, (size_t)((c1 - c0) * j->es));
}

/* blocks of b, each in column tiles */
static void scatter_over_outer(void *ctx, int64_t b0, int64_t b1)
{
    scatter_job *j = ctx;
    for (int64_t b = b0; b < b1; b++)
        for (int64_t c = 0; c < j->inner; c += j->W) {
            int64_t c1 = c + j->W < j->inner ? c + j->W : j->inner;
            if (j->zero_here) zero_part(j, b, c, c1);
            scatter_block(j, b, b + 1, c, c1);
        }
}

/* column tiles, each over every b */
static void scatter_over_inner(void *ctx, int64_t c0, int64_t c1)
{
    scatter_job *j = ctx;
    for (int64_t c = c0; c < c1; c += j->W) {
        int64_t e = c + j->W < c1 ? c + j->W : c1;
        for (int64_t b = 0; j->zero_here && b < j->outer; b++) zero_part(j, b, c, e);
        scatter_block(j, 0, j->outer, c, e);
    }
}

/* zeroes bytes [64 c0, 64 c1) of a result (all-zero bits are 0 in every dtype) */
typedef struct {
    char *p;
    int64_t n;
} zero_job;

static void zero_lines(void *ctx, int64_t c0, int64_t c1)
{
    const zero_job *z = ctx;
    int64_t e = c1 * 64 < z->n ? c1 * 64 : z->n;
    memset(z->p + c0 * 64, 0, (size_t)(e - c0 * 64));
}

/* adds src into a zero tensor of the given shape at the indexed positions,
   counted from base (shapes checked by scatter_api) */
static int scatter_impl(const char *op, bool per_element, int nd, const int64_t *shape, int dim, int64_t base,
                        ember_tensor *idx, ember_tensor *src, ember_tensor **out)
{
    ember_tensor *ix = NULL, *s = NULL;
    int64_t *offs = NULL;
    int rc = EMBER_OK;
    *out = NULL;
    EMBER_TRY(ember__check_index(op, idx));
    if (!per_element) EMBER_TRY(check_1d(op, idx, base, dim, shape[dim]));   /* index_add's, first */
    /* scatter_add's index, walked in the source's order */
    if (per_element) {
        EMBER_CHECK(ember__contiguous_as(idx, idx->dtype, &ix));
    } else {
        ember_tensor_retain(idx);
        ix = idx;
    }
    EMBER_CHECK(ember__contiguous_as(src, src->dtype, &s));
    EMBER_CHECK(ember__new(nd, shape, src->dtype, EMBER_CPU, out));
    {
        int64_t outer = 1, inner = 1, rstr[EMBER_MAX_DIMS];
        for (int d = 0; d < dim; d++) outer *= s->shape[d];
        for (int d = dim + 1; d < nd; d++) inner *= s->shape[d];
        ember__contiguous_strides(nd, shape, rstr);
        offs = malloc((size_t)(outer + inner + 1) * sizeof *offs);
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
        scatter_job j = {ember__ptr(ix), ember__ptr(s), ember__ptr(*out), offs, offs + outer, outer,
                         s->shape[dim], inner, rstr[dim], ix->ndim ? ix->strides[0] : 0, shape[dim], base,
                         INT64_MAX, inner, src->dtype, ember_dtype_size(src->dtype), per_element,
                         ix->dtype == EMBER_INT64, false};
        /* scatter_add's places along dim differ column by column: as a
           gather's, its columns go in tiles whose slice of the result fits
           in 1 MiB */
        if (per_element) {
            int64_t line = 256 / j.es, w = (1 << 20) / (shape[dim] * j.es + 1) / line * line;
            j.W = w > line ? w : line;
        }
        int64_t per_b = s->shape[dim] * inner, grain = EMBER_PARALLEL_GRAIN / 4;
        int threads = ember__job_threads(s->numel);
        bool over_outer = outer >= 4 * threads || inner < 64, covers = s->numel > 0;
        for (int d = 0; d < nd; d++)
            if (d != dim && s->shape[d] != shape[d]) covers = false;
        j.zero_here = covers;
        if (!covers) {
            zero_job z = {ember__ptr(*out), (*out)->numel * j.es};
            ember__parallel_for((z.n + 63) / 64, EMBER_PARALLEL_GRAIN / 16, zero_lines, &z);
        }
        if (s->numel == 0) goto done;
        if (over_outer)
            ember__parallel_for(outer, per_b ? (grain + per_b - 1) / per_b : outer, scatter_over_outer, &j);
        else
            ember__parallel_for(inner, (grain + outer * s->shape[dim] - 1) / (outer * s->shape[dim]),
                                scatter_over_inner, &j);
        if (j.bad != INT64_MAX) {
            int64_t k = INDEX_AT(j.is64, j.xi, j.bad, 1);
            rc = index_out_of_range(op, k, base, dim, shape[dim]);
        }
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

/* SCATTER_ADD, INDEX_ADD: i[0] dim, i[1] ndim, i[2..] result shape,
   i[BASE_ATTR] base; inputs (idx, src) */
int fwd_scatter_add(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    return scatter_impl("scatter_add", true, (int)at->i[1], &at->i[2], (int)at->i[0], at->i[BASE_ATTR], in[0],
                        in[1], out);
}

int fwd_index_add(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    return scatter_impl("index_add", false, (int)at->i[1], &at->i[2], (int)at->i[0], at->i[BASE_ATTR], in[0],
                        in[1], out);
}

/* reduce.c: reductions (sum, mean, var, logsumexp, norm, max/min, argmax/argmin)
   and sum_to (the adjoint of broadcasting); softmax.c reuses its row kernels
   (reduce.h).

   Strategy: the reduced dims are permuted to the end (a view), made contiguous
   when they are not, and each output element reduces one contiguous row of
   length R. Reducing the leading dims of a contiguous tensor (a bias gradient)
   instead adds rows down blocks of columns, on all threads (leading_sum).
   float32 and float64 have typed loops with several accumulators; every other
   dtype goes through double (int64 sums through int64, so they stay exact).
   Long rows are split into fixed blocks whose partials are combined in order,
   so results never depend on the number of threads.

   dtypes: sum of integers and bools is int64; mean, var, logsumexp and norm
   compute integers in float32; max/min keep the dtype.
   Empty reductions: sum 0, mean nan, max/min/argmax fail. */
#include "reduce.h"

#include <math.h>
#include <string.h>

#define BLOCK 16384

/* ------------------------------------------------------------------ row kernels */
EMBER_INLINE double sum_f32_body(const float *x, int64_t n)
{
    /* F32_LANES independent sums per block, blocks combined in double */
    double total = 0;
    for (int64_t b = 0; b < n; b += BLOCK) {
        int64_t e = b + BLOCK < n ? b + BLOCK : n, i = b;
        float acc[F32_LANES] = {0};
        for (; i + F32_LANES <= e; i += F32_LANES)
            for (int k = 0; k < F32_LANES; k++) acc[k] += x[i + k];
        float s = fold_f32(acc, F32_LANES);
        for (; i < e; i++) s += x[i];
        total += s;
    }
    return total;
}

EMBER_SIMD static double sum_f32(const float *x, int64_t n) { return sum_f32_body(x, n); }

/* sum_f32 of four whole blocks at once, into part[0..3]. One block's sum is
   one chain of vector adds, each waiting on the last (at AVX-512's width a
   single register: a third of the adds' throughput); four blocks are four
   independent chains. Each block keeps sum_f32's order, so the same bits. */
EMBER_SIMD static void sum4_blocks_f32(const float *x, double *part)
{
    /* four named accumulators, so that each stays in registers */
    float a0[F32_LANES] = {0}, a1[F32_LANES] = {0}, a2[F32_LANES] = {0}, a3[F32_LANES] = {0};
    const float *x1 = x + BLOCK, *x2 = x + 2 * BLOCK, *x3 = x + 3 * BLOCK;
    for (int64_t i = 0; i < BLOCK; i += F32_LANES) {
        for (int k = 0; k < F32_LANES; k++) a0[k] += x[i + k];
        for (int k = 0; k < F32_LANES; k++) a1[k] += x1[i + k];
        for (int k = 0; k < F32_LANES; k++) a2[k] += x2[i + k];
        for (int k = 0; k < F32_LANES; k++) a3[k] += x3[i + k];
    }
    float *acc[4] = {a0, a1, a2, a3};
    for (int q = 0; q < 4; q++) {
        double total = 0;   /* sum_f32_body's start: a block summing to -0 gives +0 */
        total += fold_f32(acc[q], F32_LANES);
        part[q] = total;
    }
}

/* rows r0 .. r1 of n float32 each, summed (divided by n for a mean) into
   float32: sum_f32's order, inlined, so that a short row (a global pooling's
   7 x 7) does not pay a call, a switch and a generic store. A row shorter
   than a block is one block: its float sum is kept for a group of rows,
   which are then widened and divided together (the divisions vectorise
   instead of each row waiting on its own); the same bits as sum_f32. */
#define SHORT_GROUP 16

_Static_assert(F32_LANES == 16, "rows_sum_f32 folds 16 lanes");
EMBER_SIMD static void rows_sum_f32(const float *x, int64_t n, int64_t r0, int64_t r1, bool mean, float *out)
{
    if (n > BLOCK) {
        for (int64_t r = r0; r < r1; r++) {
            double v = sum_f32_body(x + r * n, n);
            out[r] = (float)(mean ? v / (double)n : v);
        }
        return;
    }
    const double dn = (double)n;
    for (int64_t r = r0; r < r1; r += SHORT_GROUP) {
        int m = r1 - r < SHORT_GROUP ? (int)(r1 - r) : SHORT_GROUP;
        float s[SHORT_GROUP];
        int q = 0;
        for (; q + 4 <= m; q += 4) short_rows4_f32(x + (r + q) * n, n, s + q);
        for (; q < m; q++) s[q] = short_row_f32(x + (r + q) * n, n);
        if (mean)
            for (int j = 0; j < m; j++) out[r + j] = (float)((double)s[j] / dn);
        else
            for (int j = 0; j < m; j++) out[r + j] = s[j];
    }
}

EMBER_SIMD static double sum_f64(const double *x, int64_t n)
{
    double acc[F64_LANES] = {0};
    int64_t i = 0;
    for (; i + F64_LANES <= n; i += F64_LANES)
        for (int k = 0; k < F64_LANES; k++) acc[k] += x[i + k];
    double s = fold_f64(acc, F64_LANES);
    for (; i < n; i++) s += x[i];
    return s;
}

static double row_sum(const char *p, int dt, int64_t n)
{
    if (dt == EMBER_FLOAT32) return sum_f32((const float *)p, n);
    if (dt == EMBER_FLOAT64) return sum_f64((const double *)p, n);
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += at(p, dt, i);
    return s;
}

static int64_t row_isum(const char *p, int dt, int64_t n)
{
    uint64_t s = 0;   /* wraps like PyTorch's int64 sums, without undefined behaviour */
    if (dt == EMBER_INT64)
        for (int64_t i = 0; i < n; i++) s += (uint64_t)((const int64_t *)p)[i];
    else
        for (int64_t i = 0; i < n; i++) s += (uint64_t)(int64_t)at(p, dt, i);
    return (int64_t)s;
}

EMBER_SIMD static float max_f32(const float *x, int64_t n, float sign) { return row_max_f32(x, n, sign); }

/* max (sign = 1) or min (sign = -1): a NaN wins; *idx gets the first position */
double ember__row_extreme(const char *p, int dt, int64_t n, int sign, int64_t *idx)
{
    double best = at(p, dt, 0);
    int64_t bi = 0;
    if (best == best) {
        for (int64_t i = 1; i < n; i++) {
            double v = at(p, dt, i);
            if (v != v) {
                best = v;
                bi = i;
                break;
            }
            if (sign > 0 ? v > best : v < best) {
                best = v;
                bi = i;
            }
        }
    }
    if (idx) *idx = bi;
    return best;
}

/* row_extreme's value alone: float32 rows through the vectorised max_f32 */
static double extreme(const char *p, int dt, int64_t n, int sign)
{
    if (dt == EMBER_FLOAT32) return sign * (double)max_f32((const float *)p, n, (float)sign);
    return ember__row_extreme(p, dt, n, sign, NULL);
}

static double row_var(const char *p, int dt, int64_t n, int unbiased)
{
    double mean = row_sum(p, dt, n) / (double)n, ss = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = at(p, dt, i) - mean;
        ss += d * d;
    }
    return ss / (double)(n - (unbiased ? 1 : 0));
}

static double row_logsumexp(const char *p, int dt, int64_t n)
{
    if (n == 0) return -INFINITY;
    double m = ember__row_extreme(p, dt, n, 1, NULL);
    if (m != m) return m;
    if (isinf(m)) return m;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += exp(at(p, dt, i) - m);
    return m + log(s);
}

static double row_norm(const char *p, int dt, int64_t n, double pw)
{
    double s = 0;
    if (isinf(pw)) {
        for (int64_t i = 0; i < n; i++) {
            double v = fabs(at(p, dt, i));
            if (v > s || v != v) s = v;
        }
        return s;
    }
    if (pw == 1) {
        for (int64_t i = 0; i < n; i++) s += fabs(at(p, dt, i));
        return s;
    }
    if (pw == 2) {
        for (int64_t i = 0; i < n; i++) {
            double v = at(p, dt, i);
            s += v * v;
        }
        return sqrt(s);
    }
    for (int64_t i = 0; i < n; i++) s += pow(fabs(at(p, dt, i)), pw);
    return pow(s, 1 / pw);
}

/* ------------------------------------------------------------------ layout */
/* A contiguous tensor whose last r dims are a's reduced dims (mask) and whose
   leading dims are the kept ones, in order; *rows and *len describe it. */
int ember__reduced_last(ember_tensor *a, unsigned mask, ember_tensor **out, int64_t *rows, int64_t *len)
{
    int64_t shape[EMBER_MAX_DIMS], strides[EMBER_MAX_DIMS];
    int k = 0;
    *rows = 1;
    *len = 1;
    for (int d = 0; d < a->ndim; d++)
        if (!((mask >> d) & 1)) {
            shape[k] = a->shape[d];
            strides[k++] = a->strides[d];
            *rows *= a->shape[d];
        }
    for (int d = 0; d < a->ndim; d++)
        if ((mask >> d) & 1) {
            shape[k] = a->shape[d];
            strides[k++] = a->strides[d];
            *len *= a->shape[d];
        }
    ember_tensor *v;
    EMBER_TRY(ember__make_view(a, a->ndim, shape, strides, a->offset, &v));
    int rc = ember__contiguous_as(v, v->dtype, out);
    ember_tensor_release(v);
    return rc;
}

static int out_shape(const ember_tensor *a, unsigned mask, int keepdim, int64_t *shape)
{
    int k = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (!((mask >> d) & 1)) shape[k++] = a->shape[d];
        else if (keepdim) shape[k++] = 1;
    }
    return k;
}

static int reduce_dtype(int op, int dt)
{
    if (op == EMBER_OP_SUM) return ember__is_float(dt) ? dt : EMBER_INT64;
    if (op == EMBER_OP_AMAX_ALL || op == EMBER_OP_AMIN_ALL) return dt;
    return ember__is_float(dt) ? dt : EMBER_FLOAT32;
}

/* ------------------------------------------------------------------ the row drivers */
typedef struct {
    int op, dt, odt;
    const char *src;
    char *dst;
    int64_t len, esize, oesize;
    int unbiased;
    double p;
} row_ctx;

static double row_value(const row_ctx *c, const char *row)
{
    switch (c->op) {
    case EMBER_OP_SUM: return row_sum(row, c->dt, c->len);
    case EMBER_OP_MEAN: return row_sum(row, c->dt, c->len) / (double)c->len;
    case EMBER_OP_VAR: return row_var(row, c->dt, c->len, c->unbiased);
    case EMBER_OP_LOGSUMEXP: return row_logsumexp(row, c->dt, c->len);
    case EMBER_OP_NORM: return row_norm(row, c->dt, c->len, c->p);
    case EMBER_OP_AMAX_ALL: return extreme(row, c->dt, c->len, 1);
    case EMBER_OP_AMIN_ALL: return extreme(row, c->dt, c->len, -1);
    default: return NAN;   /* never: fwd_reduce runs only the ops above */
    }
}

static void rows_range(void *vctx, int64_t b, int64_t e)
{
    const row_ctx *c = vctx;
    if (c->dt == EMBER_FLOAT32 && c->odt == EMBER_FLOAT32 && (c->op == EMBER_OP_SUM || c->op == EMBER_OP_MEAN)) {
        rows_sum_f32((const float *)c->src, c->len, b, e, c->op == EMBER_OP_MEAN, (float *)c->dst);
        return;
    }
    for (int64_t r = b; r < e; r++) {
        const char *row = c->src + r * c->len * c->esize;
        char *o = c->dst + r * c->oesize;
        if (c->op == EMBER_OP_SUM && c->odt == EMBER_INT64) *(int64_t *)o = row_isum(row, c->dt, c->len);
        else ember__store(o, c->odt, row_value(c, row));
    }
}

/* one long row: fixed blocks in parallel, partials combined in order */
typedef struct {
    const row_ctx *c;
    double *part;
    int64_t *ipart;
} block_ctx;

/* whether blocks up to k (exclusive) are within e and whole in a row of len */
static bool k_fits(int64_t k, int64_t e, int64_t len) { return k <= e && k * BLOCK <= len; }

static void blocks_range(void *vctx, int64_t b, int64_t e)
{
    const block_ctx *bc = vctx;
    const row_ctx *c = bc->c;
    bool f32_sum = c->dt == EMBER_FLOAT32 && (c->op == EMBER_OP_SUM || c->op == EMBER_OP_MEAN);
    for (; f32_sum && k_fits(b + 4, e, c->len); b += 4) sum4_blocks_f32((const float *)c->src + b * BLOCK, bc->part + b);
    for (int64_t k = b; k < e; k++) {
        int64_t start = k * BLOCK, n = c->len - start < BLOCK ? c->len - start : BLOCK;
        const char *p = c->src + start * c->esize;
        switch (c->op) {
        case EMBER_OP_SUM:
            if (c->odt == EMBER_INT64) bc->ipart[k] = row_isum(p, c->dt, n);
            else bc->part[k] = row_sum(p, c->dt, n);
            break;
        case EMBER_OP_MEAN: bc->part[k] = row_sum(p, c->dt, n); break;
        case EMBER_OP_AMAX_ALL: bc->part[k] = extreme(p, c->dt, n, 1); break;
        case EMBER_OP_AMIN_ALL: bc->part[k] = extreme(p, c->dt, n, -1); break;
        default: bc->part[k] = NAN; break;   /* never: blockable() admits only the ops above */
        }
    }
}

static bool blockable(int op) { return op == EMBER_OP_SUM || op == EMBER_OP_MEAN || op == EMBER_OP_AMAX_ALL || op == EMBER_OP_AMIN_ALL; }

static int reduce_one_row(row_ctx *c)
{
    int64_t nb = (c->len + BLOCK - 1) / BLOCK;
    if (!blockable(c->op) || nb < 2) {
        rows_range(c, 0, 1);
        return EMBER_OK;
    }
    double *part = ember__alloc((size_t)nb * sizeof(double) * 2);
    if (!part) return ember__fail(EMBER_ERR_OOM, "%s: out of memory", ember__ops[c->op].name);
    block_ctx bc = {c, part, (int64_t *)(part + nb)};
    ember__parallel_for(nb, 1, blocks_range, &bc);
    if (c->op == EMBER_OP_SUM && c->odt == EMBER_INT64) {
        uint64_t s = 0;
        for (int64_t k = 0; k < nb; k++) s += (uint64_t)bc.ipart[k];
        *(int64_t *)c->dst = (int64_t)s;
    } else {
        double v = part[0];
        for (int64_t k = 1; k < nb; k++) {
            double x = part[k];
            if (c->op == EMBER_OP_SUM || c->op == EMBER_OP_MEAN) v += x;
            else if (x != x || v != v) v = v != v ? v : x;
            else if (c->op == EMBER_OP_AMAX_ALL ? x > v : x < v) v = x;
        }
        if (c->op == EMBER_OP_MEAN) v /= (double)c->len;
        ember__store(c->dst, c->odt, v);
    }
    ember__free(part, (size_t)nb * sizeof(double) * 2);
    return EMBER_OK;
}

/* sum or mean over the leading dims of a contiguous float tensor: each
   column's sum runs down the rows in order in double (float32 too), four rows
   per pass over a block of LEAD_COLS columns whose sums stay in L1. Tasks are
   blocks of columns, and, where the columns are too few to share out, also
   blocks of LEAD_ROWS rows whose partial sums are added in order after: the
   split is fixed by the shape, so the bits are the same on any thread count. */
#define LEAD_COLS 256
#define LEAD_ROWS 1024

#define ADD_ROWS(NAME, T)                                                                  \
    EMBER_SIMD static void NAME(double *restrict acc, const T *restrict x, int64_t n, int64_t rows, int64_t w) \
    {                                                                                      \
        int64_t r = 0;                                                                     \
        for (; r + 4 <= rows; r += 4) {                                                    \
            const T *x0 = x + r * w, *x1 = x0 + w, *x2 = x1 + w, *x3 = x2 + w;             \
            for (int64_t j = 0; j < n; j++)                                                \
                acc[j] = (((acc[j] + (double)x0[j]) + (double)x1[j]) + (double)x2[j]) + (double)x3[j]; \
        }                                                                                  \
        for (; r < rows; r++)                                                              \
            for (int64_t j = 0; j < n; j++) acc[j] += (double)x[r * w + j];                \
    }
ADD_ROWS(add_rows_f32, float)
ADD_ROWS(add_rows_f64, double)

typedef struct {
    const char *x;
    double *part;   /* [row block][width] */
    int64_t rows, width, rb, ncb;
    int f64;
} lead_ctx;

static void lead_range(void *vctx, int64_t b, int64_t e)
{
    const lead_ctx *c = vctx;
    for (int64_t t = b; t < e; t++) {
        int64_t s = t / c->ncb, j0 = t % c->ncb * LEAD_COLS, r0 = s * c->rb;
        int64_t n = c->width - j0 < LEAD_COLS ? c->width - j0 : LEAD_COLS;
        int64_t m = c->rows - r0 < c->rb ? c->rows - r0 : c->rb;
        double *acc = c->part + s * c->width + j0;
        memset(acc, 0, (size_t)n * sizeof *acc);
        if (c->f64) add_rows_f64(acc, (const double *)c->x + r0 * c->width + j0, n, m, c->width);
        else add_rows_f32(acc, (const float *)c->x + r0 * c->width + j0, n, m, c->width);
    }
}

static bool leading_sum(int op, ember_tensor *a, unsigned mask, ember_tensor *o)
{
    if (!a->is_contiguous || (op != EMBER_OP_SUM && op != EMBER_OP_MEAN)) return false;
    if (a->dtype != EMBER_FLOAT32 && a->dtype != EMBER_FLOAT64) return false;
    int lead = 0;
    while (lead < a->ndim && ((mask >> lead) & 1)) lead++;
    if (lead == 0 || lead == a->ndim || (mask >> lead) != 0) return false;
    int64_t rows = 1, width = 1;
    for (int d = 0; d < lead; d++) rows *= a->shape[d];
    for (int d = lead; d < a->ndim; d++) width *= a->shape[d];
    if (rows < 2) return false;
    double scale = op == EMBER_OP_MEAN ? 1.0 / (double)rows : 1.0;
    lead_ctx c = {ember__ptr(a), NULL, rows, width, rows, (width + LEAD_COLS - 1) / LEAD_COLS,
                  a->dtype == EMBER_FLOAT64};
    if (c.ncb < 16 && rows >= 2 * LEAD_ROWS) c.rb = LEAD_ROWS;
    int64_t nrb = (rows + c.rb - 1) / c.rb;
    size_t bytes = (size_t)(nrb * width) * sizeof(double);
    bool in_place = nrb == 1 && c.f64;   /* float64 sums straight into the output */
    c.part = in_place ? (double *)ember__ptr(o) : ember__alloc(bytes);
    if (!c.part) return false;
    int64_t per = c.rb * (width < LEAD_COLS ? width : LEAD_COLS);
    ember__parallel_for(nrb * c.ncb, per >= EMBER_PARALLEL_GRAIN ? 1 : EMBER_PARALLEL_GRAIN / per + 1, lead_range, &c);
    for (int64_t j = 0; j < width; j++) {
        double v = c.part[j];
        for (int64_t s = 1; s < nrb; s++) v += c.part[s * width + j];
        if (c.f64) ((double *)ember__ptr(o))[j] = v * scale;
        else ((float *)ember__ptr(o))[j] = (float)(v * scale);
    }
    if (!in_place) ember__free(c.part, bytes);
    return true;
}

/* sum or mean of a contiguous float tensor over outer and inner dims around
   kept middle ones (a bias gradient: NCHW summed over N, H and W): each kept
   index adds up its rows of the inner size in place, where the general path
   would first copy the tensor into (kept, reduced) order. */
typedef struct {
    const char *x;
    char *y;
    int64_t outer, kept, inner;
    double scale;
    int f64;
} around_ctx;

static void around_range(void *vctx, int64_t b, int64_t e)
{
    const around_ctx *c = vctx;
    for (int64_t k = b; k < e; k++) {
        double acc = 0;
        for (int64_t r = 0; r < c->outer; r++) {
            int64_t at = (r * c->kept + k) * c->inner;
            acc += c->f64 ? sum_f64((const double *)c->x + at, c->inner) : sum_f32((const float *)c->x + at, c->inner);
        }
        if (c->f64) ((double *)c->y)[k] = acc * c->scale;
        else ((float *)c->y)[k] = (float)(acc * c->scale);
    }
}

static bool around_sum(int op, ember_tensor *a, unsigned mask, ember_tensor *o)
{
    if (!a->is_contiguous || (op != EMBER_OP_SUM && op != EMBER_OP_MEAN)) return false;
    if (a->dtype != EMBER_FLOAT32 && a->dtype != EMBER_FLOAT64) return false;
    int lead = 0, trail;
    while (lead < a->ndim && ((mask >> lead) & 1)) lead++;
    trail = lead;
    while (trail < a->ndim && !((mask >> trail) & 1)) trail++;
    if (lead == 0 || trail == lead || trail == a->ndim || (mask >> trail) != (1u << (a->ndim - trail)) - 1)
        return false;
    around_ctx c = {ember__ptr(a), ember__ptr(o), 1, 1, 1, 1.0, a->dtype == EMBER_FLOAT64};
    for (int d = 0; d < lead; d++) c.outer *= a->shape[d];
    for (int d = lead; d < trail; d++) c.kept *= a->shape[d];
    for (int d = trail; d < a->ndim; d++) c.inner *= a->shape[d];
    if (op == EMBER_OP_MEAN) c.scale = 1.0 / ((double)c.outer * (double)c.inner);
    int64_t per = c.outer * c.inner;
    ember__parallel_for(c.kept, per >= EMBER_PARALLEL_GRAIN ? 1 : EMBER_PARALLEL_GRAIN / per + 1, around_range, &c);
    return true;
}

/* MAX_DIM, MIN_DIM, ARGMAX, ARGMIN (i[0] dim, -1 for all; i[1] keepdim): the
   result's shape (the values' dtype), failing on an empty dim */
static int arg_plan(int op, const ember_tensor *a, const ember_attrs *at, ember__reduce_plan *p)
{
    char sa[200];
    int dim = (int)at->i[0];
    memset(p, 0, sizeof *p);
    p->mask = dim < 0 ? (1u << a->ndim) - 1 : 1u << dim;
    p->keepdim = at->i[1] && dim >= 0;
    p->ndim = out_shape(a, p->mask, p->keepdim, p->shape);
    p->dtype = a->dtype;
    p->len = 1;
    for (int d = 0; d < a->ndim; d++)
        if ((p->mask >> d) & 1) p->len *= a->shape[d];
    if (p->len == 0)   /* 1-based, as every message names dims */
        return ember__fail(EMBER_ERR_SHAPE, "%s: cannot reduce an empty dim %d of shape %s", ember__ops[op].name,
                           dim + 1, ember__tshape(sa, a));
    return EMBER_OK;
}

/* Reduces `a` over `mask` into a new tensor of the kept (or keepdim) shape. */
/* SUM, MEAN, VAR, NORM: i[0] keepdim, i[1] mask (VAR: i[2] unbiased; NORM: f[0] p).
   LOGSUMEXP: i[0] keepdim, i[1] mask of one dim. AMAX_ALL, AMIN_ALL: none.
   MAX_DIM, MIN_DIM, ARGMAX, ARGMIN: arg_plan's. */
int ember__reduce_plan_make(int op, const ember_tensor *a, const ember_attrs *at, ember__reduce_plan *p)
{
    char sa[200];
    if (op == EMBER_OP_MAX_DIM || op == EMBER_OP_MIN_DIM || op == EMBER_OP_ARGMAX || op == EMBER_OP_ARGMIN)
        return arg_plan(op, a, at, p);
    bool all = op == EMBER_OP_AMAX_ALL || op == EMBER_OP_AMIN_ALL;
    p->mask = all ? (1u << a->ndim) - 1 : (unsigned)at->i[1];
    p->keepdim = all ? 0 : (int)at->i[0];
    p->unbiased = all ? 0 : (int)at->i[2];
    p->p = all ? 0 : at->f[0];
    p->ndim = out_shape(a, p->mask, p->keepdim, p->shape);
    p->dtype = reduce_dtype(op, a->dtype);
    p->len = 1;
    for (int d = 0; d < a->ndim; d++)
        if ((p->mask >> d) & 1) p->len *= a->shape[d];
    /* sum of nothing is 0, mean of nothing nan, lse -inf */
    p->empty = op == EMBER_OP_MEAN || op == EMBER_OP_VAR ? NAN : op == EMBER_OP_LOGSUMEXP ? -INFINITY : 0;
    if (p->len == 0 && all && a->numel == 0)
        return ember__fail(EMBER_ERR_SHAPE, "%s: cannot reduce an empty tensor of shape %s",
                           op == EMBER_OP_AMAX_ALL ? "max" : "min", ember__tshape(sa, a));
    return EMBER_OK;
}

int fwd_reduce(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    ember_tensor *a = in[0];
    ember__reduce_plan p;
    EMBER_TRY(ember__reduce_plan_make(op, a, at, &p));
    EMBER_TRY(ember__new(p.ndim, p.shape, p.dtype, EMBER_CPU, out));
    ember_tensor *o = *out;
    if (o->numel == 0) return EMBER_OK;
    if (p.len == 0) return ember__fill_raw(o, p.empty);
    if (leading_sum(op, a, p.mask, o) || around_sum(op, a, p.mask, o)) return EMBER_OK;
    ember_tensor *r = NULL;
    int64_t rows, rlen;
    int rc = ember__reduced_last(a, p.mask, &r, &rows, &rlen);
    if (rc < 0) {
        ember_tensor_release(o);
        *out = NULL;
        return rc;
    }
    row_ctx c = {op, r->dtype, p.dtype, ember__ptr(r), ember__ptr(o), rlen, ember_dtype_size(r->dtype),
                 ember_dtype_size(p.dtype), p.unbiased, p.p};
    if (rows == 1) rc = reduce_one_row(&c);
    else ember__parallel_for(rows, rlen >= EMBER_PARALLEL_GRAIN ? 1 : EMBER_PARALLEL_GRAIN / rlen + 1,
                             rows_range, &c);
    ember_tensor_release(r);
    if (rc < 0) {
        ember_tensor_release(o);
        *out = NULL;
    }
    return rc;
}

/* ------------------------------------------------------------------ max/min along a dim */
typedef struct {
    const char *src;
    char *vals;
    int64_t *idx;
    int64_t len;
    int dt, sign, want_vals;
} arg_ctx;

/* ember__row_extreme's position for float32: the vectorised max_f32, then
   the first element equal to it (-0 and +0 alike, so the first of them, as
   there), or the first NaN */
static int64_t first_extreme_f32(const float *x, int64_t n, int sign)
{
    float m = (float)sign * max_f32(x, n, (float)sign);
    int64_t i = 0;
    if (m != m)
        while (x[i] == x[i]) i++;
    else
        while (x[i] != m) i++;
    return i;
}

static void arg_range(void *vctx, int64_t b, int64_t e)
{
    const arg_ctx *c = vctx;
    int es = ember_dtype_size(c->dt);
    for (int64_t r = b; r < e; r++) {
        const char *row = c->src + r * c->len * es;
        int64_t bi;
        if (c->dt == EMBER_FLOAT32) bi = first_extreme_f32((const float *)row, c->len, c->sign);
        else ember__row_extreme(row, c->dt, c->len, c->sign, &bi);
        if (c->idx) c->idx[r] = bi;
        if (c->want_vals) memcpy(c->vals + r * es, row + bi * es, (size_t)es);
    }
}

static int arg_impl(int op, ember_tensor *a, const ember_attrs *at, int sign, ember_tensor **vals, ember_tensor **idx)
{
    ember__reduce_plan p;
    EMBER_TRY(arg_plan(op, a, at, &p));
    ember_tensor *r = NULL;
    int64_t rows, rlen;
    int rc = EMBER_OK;
    if (vals) EMBER_CHECK(ember__new(p.ndim, p.shape, a->dtype, EMBER_CPU, vals));
    EMBER_CHECK(ember__new(p.ndim, p.shape, EMBER_INT64, EMBER_CPU, idx));
    EMBER_CHECK(ember__reduced_last(a, p.mask, &r, &rows, &rlen));
    arg_ctx c = {ember__ptr(r), vals ? ember__ptr(*vals) : NULL, (int64_t *)ember__ptr(*idx), rlen,
                 r->dtype, sign, vals != NULL};
    ember__parallel_for(rows, rlen >= EMBER_PARALLEL_GRAIN ? 1 : EMBER_PARALLEL_GRAIN / rlen + 1, arg_range, &c);
done:
    ember_tensor_release(r);
    return rc;
}

/* MAX_DIM, MIN_DIM: i[0] dim, i[1] keepdim; outputs values, int64 indices */
int fwd_minmax_dim(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    return arg_impl(op, in[0], at, op == EMBER_OP_MAX_DIM ? 1 : -1, &out[0], &out[1]);
}

/* ARGMAX, ARGMIN: i[0] dim (-1: flattened), i[1] keepdim */
int fwd_arg_reduce(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    return arg_impl(op, in[0], at, op == EMBER_OP_ARGMAX ? 1 : -1, NULL, out);
}

/* ------------------------------------------------------------------ sum_to */
/* i[0] ndim, i[1..] target shape; the target must broadcast to the input's shape */
int fwd_sum_to(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    char sa[200], sb[200];
    ember_tensor *a = in[0];
    int nd = (int)at->i[0];
    const int64_t *target = &at->i[1];
    if (nd > a->ndim) goto bad;
    unsigned mask = 0;
    int lead = a->ndim - nd;
    for (int d = 0; d < a->ndim; d++) {
        if (d < lead) {
            mask |= 1u << d;
            continue;
        }
        int64_t t = target[d - lead];
        if (t == a->shape[d]) continue;
        if (t != 1) goto bad;
        mask |= 1u << d;
    }
    if (mask == 0) {
        if (nd == a->ndim) {
            ember_tensor_retain(a);
            *out = a;
            return EMBER_OK;
        }
    }
    ember_attrs keep = {{1, mask}, {0}};   /* keepdim, the dims */
    EMBER_TRY(ember__run_nograd(EMBER_OP_SUM, 1, &a, &keep, out));   /* on a's device */
    /* the keepdim result holds the target's elements in order: reshape the header */
    ember_tensor *o = *out;
    o->ndim = (int8_t)nd;
    if (nd) memcpy(o->shape, target, (size_t)nd * sizeof *target);
    ember__contiguous_strides(nd, o->shape, o->strides);
    ember__refresh_geometry(o);
    return EMBER_OK;
bad:
    return ember__fail(EMBER_ERR_SHAPE, "sum_to: shape %s cannot be summed to %s", ember__tshape(sa, a),
                       ember__shape_str(sb, nd, target));
}

/* ------------------------------------------------------------------ public entry points */
static int reduce_api(int op, ember_tensor *a, int ndims, const int *dims, int keepdim, int unbiased,
                      double p, ember_tensor **out)
{
    const char *name = ember__ops[op].name;
    if (!a || !out) return ember__fail(EMBER_ERR_ARG, "%s: NULL argument", name);
    unsigned mask;
    EMBER_TRY(ember__dims_mask(name, a, ndims, dims, &mask));
    ember_attrs at = {{keepdim != 0, mask, unbiased != 0}, {p, 0}};
    return ember__dispatch(op, 1, &a, &at, out);
}

int ember_sum(ember_tensor *a, int ndims, const int *dims, int keepdim, ember_tensor **out)
{
    return reduce_api(EMBER_OP_SUM, a, ndims, dims, keepdim, 0, 0, out);
}

int ember_mean(ember_tensor *a, int ndims, const int *dims, int keepdim, ember_tensor **out)
{
    return reduce_api(EMBER_OP_MEAN, a, ndims, dims, keepdim, 0, 0, out);
}

int ember_var(ember_tensor *a, int ndims, const int *dims, int keepdim, int unbiased, ember_tensor **out)
{
    return reduce_api(EMBER_OP_VAR, a, ndims, dims, keepdim, unbiased, 0, out);
}

int ember_norm(ember_tensor *a, double p, int ndims, const int *dims, int keepdim, ember_tensor **out)
{
    if (!(p > 0)) return ember__fail(EMBER_ERR_ARG, "norm: p must be positive, got %g", p);
    return reduce_api(EMBER_OP_NORM, a, ndims, dims, keepdim, 0, p, out);
}

int ember_logsumexp(ember_tensor *a, int dim, int keepdim, ember_tensor **out)
{
    return reduce_api(EMBER_OP_LOGSUMEXP, a, 1, &dim, keepdim, 0, 0, out);
}

int ember_amax_all(ember_tensor *a, ember_tensor **out)
{
    return ember__dispatch(EMBER_OP_AMAX_ALL, 1, &a, NULL, out);
}

int ember_amin_all(ember_tensor *a, ember_tensor **out)
{
    return ember__dispatch(EMBER_OP_AMIN_ALL, 1, &a, NULL, out);
}

int ember__reduce_check_dim(const char *name, const ember_tensor *a, int dim, bool allow_all)
{
    char sa[200];
    if (!a) return ember__fail(EMBER_ERR_ARG, "%s: NULL argument", name);
    if ((allow_all && dim == -1) || (dim >= 0 && dim < a->ndim)) return EMBER_OK;
    return ember__fail(EMBER_ERR_ARG, "%s: dim %d out of range for shape %s", name, dim + 1, ember__tshape(sa, a));
}

static int minmax_api(int op, ember_tensor *a, int dim, int keepdim, ember_tensor **values, ember_tensor **indices)
{
    EMBER_TRY(ember__reduce_check_dim(ember__ops[op].name, a, dim, false));
    if (!values || !indices) return ember__fail(EMBER_ERR_ARG, "%s: NULL output", ember__ops[op].name);
    ember_attrs at = {{dim, keepdim != 0}, {0}};
    ember_tensor *o[2];
    int rc = ember__dispatch(op, 1, &a, &at, o);
    *values = rc < 0 ? NULL : o[0];
    *indices = rc < 0 ? NULL : o[1];
    return rc;
}

int ember_max_dim(ember_tensor *a, int dim, int keepdim, ember_tensor **values, ember_tensor **indices)
{
    return minmax_api(EMBER_OP_MAX_DIM, a, dim, keepdim, values, indices);
}

int ember_min_dim(ember_tensor *a, int dim, int keepdim, ember_tensor **values, ember_tensor **indices)
{
    return minmax_api(EMBER_OP_MIN_DIM, a, dim, keepdim, values, indices);
}

int ember_argmax(ember_tensor *a, int dim, int keepdim, ember_tensor **out)
{
    EMBER_TRY(ember__reduce_check_dim("argmax", a, dim, true));
    ember_attrs at = {{dim, keepdim != 0}, {0}};
    return ember__dispatch(EMBER_OP_ARGMAX, 1, &a, &at, out);
}

int ember_argmin(ember_tensor *a, int dim, int keepdim, ember_tensor **out)
{
    EMBER_TRY(ember__reduce_check_dim("argmin", a, dim, true));
    ember_attrs at = {{dim, keepdim != 0}, {0}};
    return ember__dispatch(EMBER_OP_ARGMIN, 1, &a, &at, out);
}

int ember_sum_to(ember_tensor *a, int ndim, const int64_t *shape, ember_tensor **out)
{
    if (!a || !out || (ndim > 0 && !shape)) return ember__fail(EMBER_ERR_ARG, "sum_to: NULL argument");
    if (ndim < 0 || ndim > EMBER_MAX_DIMS)
        return ember__fail(EMBER_ERR_SHAPE, "sum_to: %d dims requested", ndim);
    ember_attrs at = {{ndim}, {0}};
    for (int d = 0; d < ndim; d++) at.i[1 + d] = shape[d];
    return ember__dispatch(EMBER_OP_SUM_TO, 1, &a, &at, out);
}

/* prod.c: the product reduction (ops.def's PROD), of every element or along
   one dim, every dtype. Floats multiply in double (float16 and bfloat16 read
   through float32) and keep their dtype; integers and bools multiply in
   int64, wrapping as PyTorch's do, and give int64. It runs on the CPU; on
   another device it copies its input to the host and back (ember__on_host),
   as the scans do. The product of nothing is 1.

   Layout: the input, contiguous in the compute dtype, is outer x n x inner
   with the reduced dim (or everything) as n. A row (inner 1) multiplies into
   eight lanes, rows in parallel; one long row is split into fixed blocks whose
   partial products are combined in order, so the result never depends on the
   number of threads; columns (inner > 1) multiply whole rows into a tile of
   accumulators, the tiles in parallel. */
#include "ops.h"
#include "../backend.h"

#include <stdint.h>
#include <string.h>

#define LANES 32
#define TILE 256
#define BLOCK 16384

/* the product of x[0..n) in lanes, then in order */
#define ROW_PROD(name, T, A)                                                        \
    EMBER_SIMD static A name(const T *x, int64_t n)                                 \
    {                                                                               \
        A acc[LANES];                                                               \
        for (int k = 0; k < LANES; k++) acc[k] = 1;                                 \
        int64_t i = 0;                                                              \
        for (; i + LANES <= n; i += LANES)                                          \
            for (int k = 0; k < LANES; k++) acc[k] *= (A)x[i + k];                  \
        A p = 1;                                                                    \
        for (int k = 0; k < LANES; k++) p *= acc[k];                                \
        for (; i < n; i++) p *= (A)x[i];                                            \
        return p;                                                                   \
    }
ROW_PROD(prod_f32, float, double)
ROW_PROD(prod_f64, double, double)
ROW_PROD(prod_i64, int64_t, uint64_t)
#undef ROW_PROD

typedef struct {
    const char *x;
    char *y;
    int dt;   /* the compute dtype: float32, float64 or int64 */
    int64_t n, inner, tiles;
    double *part;
    uint64_t *ipart;
} prod_job;

/* rows [b, e) of length n into y[b..e) */
static void rows_range(void *ctx, int64_t b, int64_t e)
{
    const prod_job *j = ctx;
    for (int64_t r = b; r < e; r++) {
        if (j->dt == EMBER_FLOAT32) ((float *)j->y)[r] = (float)prod_f32((const float *)j->x + r * j->n, j->n);
        else if (j->dt == EMBER_FLOAT64) ((double *)j->y)[r] = prod_f64((const double *)j->x + r * j->n, j->n);
        else ((int64_t *)j->y)[r] = (int64_t)prod_i64((const int64_t *)j->x + r * j->n, j->n);
    }
}

/* blocks [b, e) of the one row */
static void blocks_range(void *ctx, int64_t b, int64_t e)
{
    const prod_job *j = ctx;
    for (int64_t k = b; k < e; k++) {
        int64_t start = k * BLOCK, len = j->n - start < BLOCK ? j->n - start : BLOCK;
        if (j->dt == EMBER_FLOAT32) j->part[k] = prod_f32((const float *)j->x + start, len);
        else if (j->dt == EMBER_FLOAT64) j->part[k] = prod_f64((const double *)j->x + start, len);
        else j->ipart[k] = prod_i64((const int64_t *)j->x + start, len);
    }
}

/* columns [0, w) of n rows `inner` apart multiplied into y, four rows at a
   time (one load and store of the accumulators for four rows) */
#define COLS(name, T, A)                                                            \
    EMBER_SIMD static void name(const T *x, T *y, int64_t n, int64_t inner, int64_t w) \
    {                                                                               \
        A acc[TILE];                                                                \
        for (int64_t c = 0; c < w; c++) acc[c] = 1;                                 \
        int64_t k = 0;                                                              \
        for (; k + 4 <= n; k += 4) {                                                \
            const T *r = x + k * inner;                                             \
            for (int64_t c = 0; c < w; c++)                                         \
                acc[c] *= ((A)r[c] * (A)r[inner + c]) * ((A)r[2 * inner + c] * (A)r[3 * inner + c]); \
        }                                                                           \
        for (; k < n; k++)                                                          \
            for (int64_t c = 0; c < w; c++) acc[c] *= (A)x[k * inner + c];          \
        for (int64_t c = 0; c < w; c++) y[c] = (T)acc[c];                           \
    }
COLS(cols_f32, float, double)
COLS(cols_f64, double, double)
COLS(cols_i64, int64_t, uint64_t)
#undef COLS

/* tiles [b, e): tile t is columns [c0, c0 + TILE) of block o = t / tiles */
static void cols_range(void *ctx, int64_t b, int64_t e)
{
    const prod_job *j = ctx;
    for (int64_t t = b; t < e; t++) {
        int64_t o = t / j->tiles, c0 = (t % j->tiles) * TILE, w = j->inner - c0 < TILE ? j->inner - c0 : TILE;
        int64_t from = o * j->n * j->inner + c0, to = o * j->inner + c0;
        if (j->dt == EMBER_FLOAT32) cols_f32((const float *)j->x + from, (float *)j->y + to, j->n, j->inner, w);
        else if (j->dt == EMBER_FLOAT64) cols_f64((const double *)j->x + from, (double *)j->y + to, j->n, j->inner, w);
        else cols_i64((const int64_t *)j->x + from, (int64_t *)j->y + to, j->n, j->inner, w);
    }
}

static int one_row(prod_job *j)
{
    int64_t nb = (j->n + BLOCK - 1) / BLOCK;
    if (nb < 2) {
        rows_range(j, 0, 1);
        return EMBER_OK;
    }
    size_t bytes = (size_t)nb * (sizeof(double) + sizeof(uint64_t));
    j->part = ember__alloc(bytes);
    if (!j->part) return ember__fail(EMBER_ERR_OOM, "prod: out of memory");
    j->ipart = (uint64_t *)(j->part + nb);
    ember__parallel_for(nb, 1, blocks_range, j);
    double p = 1;
    uint64_t ip = 1;
    for (int64_t k = 0; k < nb; k++) {
        p *= j->part[k];
        ip *= j->ipart[k];
    }
    if (j->dt == EMBER_FLOAT32) *(float *)j->y = (float)p;
    else if (j->dt == EMBER_FLOAT64) *(double *)j->y = p;
    else *(int64_t *)j->y = (int64_t)ip;
    ember__free(j->part, bytes);
    return EMBER_OK;
}

int ember__kernel_result(int nd, const int64_t *shape, int rdt, int cdt, ember_tensor **out, ember_tensor **work)
{
    EMBER_TRY(ember__new(nd, shape, rdt, EMBER_CPU, out));
    if (rdt == cdt) {
        *work = *out;
        ember_tensor_retain(*work);
        return EMBER_OK;
    }
    int rc = ember__new(nd, shape, cdt, EMBER_CPU, work);
    if (rc < 0) {
        ember_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

int ember__kernel_result_end(int rc, ember_tensor *work, ember_tensor *in, ember_tensor **out)
{
    if (rc >= 0 && work != *out) rc = ember__copy_into(*out, work);
    ember_tensor_release(work);
    ember_tensor_release(in);
    if (rc < 0) {
        ember_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

/* PROD: i[0] keepdim, i[1] mask (one dim, or every dim) */
int fwd_prod(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    ember_tensor *a = in[0], *c = NULL, *y = NULL;
    if (a->storage->device != EMBER_CPU) return ember__on_host(op, nin, in, at, 1, out);
    unsigned mask = (unsigned)at->i[1];
    bool all = a->ndim == 0 || mask == (1u << a->ndim) - 1;
    int dt = a->dtype, cdt = dt == EMBER_FLOAT64 ? dt : ember__is_float(dt) ? EMBER_FLOAT32 : EMBER_INT64;
    int rdt = ember__is_float(dt) ? dt : EMBER_INT64, nd = 0, rc = EMBER_OK;
    int64_t shape[EMBER_MAX_DIMS] = {0}, outer = 1, n = 1, inner = 1;
    for (int d = 0; d < a->ndim; d++) {
        bool red = (mask >> d) & 1;
        if (!red || at->i[0]) shape[nd++] = red ? 1 : a->shape[d];
        if (red) n *= a->shape[d];
        else if (all || d < __builtin_ctz(mask)) outer *= a->shape[d];
        else inner *= a->shape[d];
    }
    EMBER_TRY(ember__kernel_result(nd, shape, rdt, cdt, out, &y));
    if (y->numel == 0) return ember__kernel_result_end(rc, y, c, out);
    if (n == 0) return ember__kernel_result_end(ember__fill_raw(y, 1), y, c, out);
    rc = ember__contiguous_as(a, cdt, &c);
    if (rc == EMBER_OK) {
        prod_job j = {ember__ptr(c), ember__ptr(y), cdt, n, inner, (inner + TILE - 1) / TILE, NULL, NULL};
        if (inner > 1) {
            int64_t per = n * TILE;
            ember__parallel_for(outer * j.tiles, EMBER_PARALLEL_GRAIN / per + 1, cols_range, &j);
        } else if (outer > 1) {
            ember__parallel_for(outer, EMBER_PARALLEL_GRAIN / n + 1, rows_range, &j);
        } else {
            rc = one_row(&j);
        }
    }
    return ember__kernel_result_end(rc, y, c, out);
}

int ember_prod(ember_tensor *a, int dim, int keepdim, ember_tensor **out)
{
    char sa[200];
    if (!a || !out) return ember__fail(EMBER_ERR_ARG, "prod: NULL argument");
    if (dim < -1 || dim >= (a->ndim > 0 ? a->ndim : 1))
        return ember__fail(EMBER_ERR_ARG, "prod: dim %d out of range for shape %s", dim + 1, ember__tshape(sa, a));
    unsigned mask = dim < 0 || a->ndim == 0 ? (1u << a->ndim) - 1 : 1u << dim;
    ember_attrs at = {{keepdim != 0, mask}, {0}};
    return ember__dispatch(EMBER_OP_PROD, 1, &a, &at, out);
}

/* random.c: Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy
   as 1, 2, 3", SC'11). Element i of a draw is a pure function of (seed,
   counter offset, i), so results are the same for every thread count and
   platform; each draw advances the offset past the blocks it used. */
#include "internal.h"
#include "ops/ops.h"
#include "autograd.h"
#include "backend.h"
#include "philox.h"

#include <math.h>
#include <stdatomic.h>
#include <string.h>

/* One generator for the process: threads draw disjoint blocks of it. */
static _Atomic uint64_t g_seed = 67280421310721ULL;
static _Atomic uint64_t g_offset;   /* next unused 128-bit block */

void ember_manual_seed(uint64_t seed)
{
    g_seed = seed;
    g_offset = 0;
}

uint64_t ember_initial_seed(void) { return g_seed; }

int ember_get_rng_state(uint64_t *seed, uint64_t *offset)
{
    if (!seed || !offset)
        return ember__fail(EMBER_ERR_ARG, "get_rng_state: NULL %s", !seed ? "seed" : "offset");
    *seed = g_seed;
    *offset = g_offset;
    return EMBER_OK;
}

void ember_set_rng_state(uint64_t seed, uint64_t offset)
{
    g_seed = seed;
    g_offset = offset;
}

typedef struct {
    ember__draw d;
    char *data;
    int64_t esize;
} draw_ctx;

static void draw_range(void *vctx, int64_t b, int64_t e)
{
    const draw_ctx *c = vctx;
    for (int64_t i = b; i < e; i++) ember__draw_store(&c->d, i, c->data + i * c->esize);
}

/* Draws into a contiguous t, on its device. */
static int draw_into(ember_tensor *t, const ember__draw *d)
{
    int device = t->storage->device;
    if (device == EMBER_CPU) {
        draw_ctx c = {*d, ember__ptr(t), ember_dtype_size(t->dtype)};
        ember__parallel_for(t->numel, 8192, draw_range, &c);
        return EMBER_OK;
    }
    const ember_backend *be = ember__backend(device);
    char name[32];
    if (!be->random)
        return ember__fail(EMBER_ERR_UNSUPPORTED, "random draws are not implemented for %s",
                           ember__device_name(name, device));
    return be->random(t, d);
}

/* Fills t (any layout, any device) with draws; goes through a contiguous
   buffer on t's device when needed. */
static int fill_random(ember_tensor *t, int dist, double a, double b)
{
    ember_tensor *buf = t;
    if (!t->is_contiguous) EMBER_TRY(ember__new(t->ndim, t->shape, t->dtype, t->storage->device, &buf));
    /* claim this draw's blocks at once, so concurrent draws never share one */
    uint64_t first = atomic_fetch_add(&g_offset, ember__draw_blocks(dist, t->numel));
    ember__draw d = {dist, t->dtype, g_seed, first, a, b};
    int rc = draw_into(buf, &d);
    if (buf != t) {
        if (rc == EMBER_OK) rc = ember__copy_into(t, buf);
        ember_tensor_release(buf);
    }
    return rc;
}

static int make(const char *op, int ndim, const int64_t *shape, int dtype, int device,
                bool need_float, ember_tensor **out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "%s: out is NULL", op);
    *out = NULL;
    if (!ember__valid_dtype(dtype)) return ember__fail(EMBER_ERR_DTYPE, "%s: unknown dtype %d", op, dtype);
    if (need_float && !ember__is_float(dtype))
        return ember__fail(EMBER_ERR_DTYPE, "%s: expected a floating point dtype, got %s", op,
                           ember_dtype_name(dtype));
    int rc = ember__new(ndim, shape, dtype, device, out);
    return rc < 0 ? ember__fail_prefix(rc, op) : rc;
}

static int finish(int rc, ember_tensor **out)
{
    if (rc < 0) {
        ember_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

int ember_rand(int ndim, const int64_t *shape, int dtype, int device, ember_tensor **out)
{
    EMBER_TRY(make("rand", ndim, shape, dtype, device, true, out));
    return finish(fill_random(*out, EMBER__DRAW_UNIFORM, 0, 1), out);
}

int ember_randn(int ndim, const int64_t *shape, int dtype, int device, ember_tensor **out)
{
    EMBER_TRY(make("randn", ndim, shape, dtype, device, true, out));
    return finish(fill_random(*out, EMBER__DRAW_NORMAL, 0, 1), out);
}

int ember_randint(int64_t low, int64_t high, int ndim, const int64_t *shape, int dtype, int device,
                  ember_tensor **out)
{
    if (high <= low)
        return ember__fail(EMBER_ERR_ARG, "randint: expected low < high, got low=%lld high=%lld",
                           (long long)low, (long long)high);
    if (out) *out = NULL;
    if (ember__valid_dtype(dtype)) {   /* every draw must fit: low .. high - 1 */
        EMBER_TRY(ember__check_value("randint", (double)low, dtype));
        EMBER_TRY(ember__check_value("randint", (double)(high - 1), dtype));
    }
    EMBER_TRY(make("randint", ndim, shape, dtype, device, false, out));
    return finish(fill_random(*out, EMBER__DRAW_INT, (double)low, (double)((uint64_t)high - (uint64_t)low)), out);
}

/* A random fill in place: the old value and its history are gone. */
static int overwrite(const char *name, ember_tensor *t, int dist, double a, double b)
{
    EMBER_TRY(ember__check_writable(name, t));
    int rec = ember__ag_write_recorded(name, t, NULL);
    EMBER_TRY(rec);
    EMBER_TRY(fill_random(t, dist, a, b));
    t->storage->version++;
    return rec ? ember__ag_commit(t, NULL) : EMBER_OK;
}

int ember_uniform_(ember_tensor *t, double low, double high)
{
    if (!t) return ember__fail(EMBER_ERR_ARG, "uniform_: argument is NULL");
    if (!ember__is_float(t->dtype))
        return ember__fail(EMBER_ERR_DTYPE, "uniform_: expected a floating point tensor, got %s",
                           ember_dtype_name(t->dtype));
    if (!(low <= high)) return ember__fail(EMBER_ERR_ARG, "uniform_: expected low <= high, got %g > %g", low, high);
    return overwrite("uniform", t, EMBER__DRAW_UNIFORM, low, high);
}

int ember_normal_(ember_tensor *t, double mean, double std)
{
    if (!t) return ember__fail(EMBER_ERR_ARG, "normal_: argument is NULL");
    if (!ember__is_float(t->dtype))
        return ember__fail(EMBER_ERR_DTYPE, "normal_: expected a floating point tensor, got %s",
                           ember_dtype_name(t->dtype));
    if (!(std >= 0)) return ember__fail(EMBER_ERR_ARG, "normal_: expected std >= 0, got %g", std);
    return overwrite("normal", t, EMBER__DRAW_NORMAL, mean, std);
}

/* ------------------------------------------------------------------ ranges */
int ember_arange(double start, double end, double step, int dtype, int device, ember_tensor **out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "arange: out is NULL");
    *out = NULL;
    if (step == 0 || step != step || start != start || end != end)
        return ember__fail(EMBER_ERR_ARG, "arange: invalid range start=%g end=%g step=%g", start, end, step);
    if ((step > 0 && end < start) || (step < 0 && end > start))
        return ember__fail(EMBER_ERR_ARG, "arange: step %g does not lead from %g to %g", step, start, end);
    double nf = ceil((end - start) / step);
    if (nf > 1e15) return ember__fail(EMBER_ERR_OOM, "arange: %g elements is too many", nf);
    int64_t n = (int64_t)nf;
    if (n > 0 && ember__valid_dtype(dtype)) {   /* the values run from the first to the last */
        EMBER_TRY(ember__check_value("arange", start, dtype));
        EMBER_TRY(ember__check_value("arange", start + (double)(n - 1) * step, dtype));
    }
    ember_tensor *t;
    EMBER_TRY(make("arange", 1, &n, dtype, EMBER_CPU, false, &t));
    char *p = ember__ptr(t);
    int es = ember_dtype_size(dtype);
    for (int64_t i = 0; i < n; i++) ember__store(p + i * es, dtype, start + (double)i * step);
    if (device == EMBER_CPU) {
        *out = t;
        return EMBER_OK;
    }
    int rc = ember_to_device(t, device, out);
    ember_tensor_release(t);
    return rc;
}

int ember_linspace(double start, double end, int64_t steps, int dtype, int device, ember_tensor **out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "linspace: out is NULL");
    *out = NULL;
    if (steps < 0) return ember__fail(EMBER_ERR_ARG, "linspace: steps must be >= 0, got %lld", (long long)steps);
    if (steps > 0 && ember__valid_dtype(dtype)) {   /* the values run from start to end */
        EMBER_TRY(ember__check_value("linspace", start, dtype));
        EMBER_TRY(ember__check_value("linspace", end, dtype));
    }
    ember_tensor *t;
    EMBER_TRY(make("linspace", 1, &steps, dtype, EMBER_CPU, false, &t));
    char *p = ember__ptr(t);
    int es = ember_dtype_size(dtype);
    double step = steps > 1 ? (end - start) / (double)(steps - 1) : 0;
    /* symmetric evaluation as PyTorch does, so the last value is exactly `end` */
    for (int64_t i = 0; i < steps; i++) {
        double v = steps == 1 ? start   /* PyTorch's one value is start */
                   : i < steps / 2 ? start + step * (double)i : end - step * (double)(steps - 1 - i);
        ember__store(p + i * es, dtype, v);
    }
    if (device == EMBER_CPU) {
        *out = t;
        return EMBER_OK;
    }
    int rc = ember_to_device(t, device, out);
    ember_tensor_release(t);
    return rc;
}

int ember_eye(int64_t n, int64_t m, int dtype, int device, ember_tensor **out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "eye: out is NULL");
    *out = NULL;
    if (n < 0 || m < 0) return ember__fail(EMBER_ERR_ARG, "eye: sizes must be >= 0, got %lld x %lld",
                                           (long long)n, (long long)m);
    int64_t shape[2] = {n, m};
    ember_tensor *t;
    EMBER_TRY(make("eye", 2, shape, dtype, EMBER_CPU, false, &t));
    memset(ember__ptr(t), 0, (size_t)(t->numel * ember_dtype_size(dtype)));
    int es = ember_dtype_size(dtype);
    for (int64_t i = 0; i < n && i < m; i++) ember__store(ember__ptr(t) + (i * m + i) * es, dtype, 1);
    if (device == EMBER_CPU) {
        *out = t;
        return EMBER_OK;
    }
    int rc = ember_to_device(t, device, out);
    ember_tensor_release(t);
    return rc;
}

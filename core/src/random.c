/* random.c: Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy
   as 1, 2, 3", SC'11). Element i of a draw is a pure function of (seed,
   counter offset, i), so results are the same for every thread count and
   platform; each draw advances the offset past the blocks it used. */
#include "internal.h"
#include "ops/ops.h"
#include "autograd.h"
#include "backend.h"
#include "dtr.h"
#include "philox.h"
#include "plan/plan.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* A generator: a Philox stream (its seed, the key) and the next unused
   128-bit counter block; threads draw disjoint blocks of it. The process
   has one default generator; ember_generator_new makes private ones whose
   draws leave every other stream where it was. */
struct ember_generator {
    _Atomic uint64_t seed;
    _Atomic uint64_t offset; /* next unused 128-bit block */
};

static ember_generator g_default = {67280421310721ULL, 0};

static ember_generator *gen_or_default(ember_generator *g) { return g ? g : &g_default; }

ember_generator *ember_default_generator(void) { return &g_default; }

int ember_generator_new(uint64_t seed, ember_generator **out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "generator_new: out is NULL");
    *out = NULL;
    ember_generator *g = malloc(sizeof *g);
    if (!g) return ember__fail(EMBER_ERR_OOM, "generator_new: out of memory");
    atomic_init(&g->seed, seed);
    atomic_init(&g->offset, 0);
    *out = g;
    return EMBER_OK;
}

void ember_generator_free(ember_generator *g)
{
    if (g && g != &g_default) free(g);
}

void ember_generator_manual_seed(ember_generator *g, uint64_t seed)
{
    g = gen_or_default(g);
    g->seed = seed;
    g->offset = 0;
}

uint64_t ember_generator_initial_seed(ember_generator *g) { return gen_or_default(g)->seed; }

int ember_generator_get_state(ember_generator *g, uint64_t *seed, uint64_t *offset)
{
    if (!seed || !offset)
        return ember__fail(EMBER_ERR_ARG, "get_rng_state: NULL %s", !seed ? "seed" : "offset");
    g = gen_or_default(g);
    *seed = g->seed;
    *offset = g->offset;
    return EMBER_OK;
}

void ember_generator_set_state(ember_generator *g, uint64_t seed, uint64_t offset)
{
    g = gen_or_default(g);
    g->seed = seed;
    g->offset = offset;
}

void ember_manual_seed(uint64_t seed) { ember_generator_manual_seed(NULL, seed); }
uint64_t ember_initial_seed(void) { return g_default.seed; }
int ember_get_rng_state(uint64_t *seed, uint64_t *offset) { return ember_generator_get_state(NULL, seed, offset); }
void ember_set_rng_state(uint64_t seed, uint64_t offset) { ember_generator_set_state(NULL, seed, offset); }

typedef struct {
    ember__draw d;
    char *data;
    int64_t esize;
} draw_ctx;

/* The CPU's draws: the blocks a range reads are computed PHILOX_LANES at a
   time, one counter per lane of plain arrays, a loop the compiler vectorises
   at every width (32x32->64 multiplies: vpmuludq, NEON's umull); each block
   is computed once (ember__draw_store per element computes a uniform's block
   twice, once for each of its two elements). Element i still reads the block
   and lanes of philox.h and converts them with its formulas, so the bits are
   those of ember__draw_store for every range split and width. */
enum { PHILOX_LANES = 16 };

/* GCC unrolls the ten rounds over sixteen lanes into scalar code (the
   vectoriser then finds no loop) unless told to keep both loops */
#ifdef __GNUC__
#define KEEP_LOOP _Pragma("GCC unroll 1")
#else
#define KEEP_LOOP
#endif

EMBER_INLINE void philox_lanes(uint64_t seed, uint64_t first, uint32_t r[4][PHILOX_LANES])
{
    uint32_t c0[PHILOX_LANES], c1[PHILOX_LANES], c2[PHILOX_LANES], c3[PHILOX_LANES];
    for (int j = 0; j < PHILOX_LANES; j++) {
        uint64_t block = first + (uint64_t)j;
        c0[j] = (uint32_t)block;
        c1[j] = (uint32_t)(block >> 32);
        c2[j] = c3[j] = 0;
    }
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    KEEP_LOOP
    for (int round = 0; round < 10; round++) {
        KEEP_LOOP
        for (int j = 0; j < PHILOX_LANES; j++) EMBER__PHILOX_ROUND(c0[j], c1[j], c2[j], c3[j], k0, k1);
        k0 += EMBER__PHILOX_W0;
        k1 += EMBER__PHILOX_W1;
    }
    memcpy(r[0], c0, sizeof c0);
    memcpy(r[1], c1, sizeof c1);
    memcpy(r[2], c2, sizeof c2);
    memcpy(r[3], c3, sizeof c3);
}

/* A float32 uniform from the high word x of its bits: ember__draw_store_bits'
   formula, with high's float and the float below it worked out once. */
EMBER_INLINE float uniform_f32(uint32_t x, double a, double span, float high, float below, bool clamp)
{
    float f = (float)(a + span * ((x >> 8) * (1.0 / 16777216.0)));
    return clamp && f >= high ? below : f;
}

/* Elements [b, e) of dropout's keep mask (EMBER__DRAW_KEEP): element i is
   element i of the uniform draw of dtype d->dtype compared with p as ge
   compares them (p in float32, the 16-bit floats widened to it; float64
   for a float64 draw), the bits rand then ge give, with no draw stored in
   between. */
static void keep_range(const draw_ctx *c, int64_t b, int64_t e)
{
    const ember__draw *d = &c->d;
    const ember__draw u = {EMBER__DRAW_UNIFORM, d->dtype, d->seed, d->offset, 0, 1};
    uint8_t *out = (uint8_t *)c->data;
    double v8[1];   /* one element of the draw, of any dtype */
    double p = d->dtype == EMBER_FLOAT64 ? d->a : (double)(float)d->a;
    bool f32 = d->dtype == EMBER_FLOAT32;
    /* a float32 uniform is its high word's top 24 bits times 2^-24, exactly
       (never rounded up to 1): u >= p, p in float32, is those bits >= keep */
    uint32_t keep = (uint32_t)ceil((double)(float)p * 16777216.0);
    uint32_t r[4][PHILOX_LANES];
    for (int64_t blk = b >> 1; blk << 1 < e; blk += PHILOX_LANES) {
        philox_lanes(d->seed, d->offset + (uint64_t)blk, r);
        int64_t i0 = blk << 1;
        if (f32 && i0 >= b && i0 + 2 * PHILOX_LANES <= e) {
            for (int j = 0; j < PHILOX_LANES; j++) {
                out[i0 + 2 * j] = (r[0][j] >> 8) >= keep;
                out[i0 + 2 * j + 1] = (r[2][j] >> 8) >= keep;
            }
            continue;
        }
        int64_t lo = i0 > b ? i0 : b, hi = i0 + 2 * PHILOX_LANES < e ? i0 + 2 * PHILOX_LANES : e;
        for (int64_t i = lo; i < hi; i++) {
            int j = (int)((i - i0) >> 1), h = (int)(i & 1) * 2;
            ember__draw_store_bits(&u, ((uint64_t)r[h][j] << 32) | r[h + 1][j], (char *)v8);
            out[i] = ember__load((const char *)v8, d->dtype) >= p;
        }
    }
}

/* Elements [b, e) of the draw; a uniform's element i reads lanes 2(i&1) and
   2(i&1)+1 of block i/2, a normal's element i all of block i. */
EMBER_SIMD static void draw_range(void *vctx, int64_t b, int64_t e)
{
    const draw_ctx *c = vctx;
    const ember__draw *d = &c->d;
    uint32_t r[4][PHILOX_LANES];
    if (d->dist == EMBER__DRAW_KEEP) {
        keep_range(c, b, e);
        return;
    }
    if (d->dist == EMBER__DRAW_NORMAL) {
        /* libm's log and cos per element (a vector libm has other bits),
           then the square roots and products at the vector width */
        double lg[PHILOX_LANES] = {0}, cs[PHILOX_LANES] = {0}, v[PHILOX_LANES];   /* a short last batch reads zeros */
        for (int64_t i = b; i < e; i += PHILOX_LANES) {
            philox_lanes(d->seed, d->offset + (uint64_t)i, r);
            int m = e - i < PHILOX_LANES ? (int)(e - i) : PHILOX_LANES;
            for (int j = 0; j < m; j++) {
                ember__philox4 q = {{r[0][j], r[1][j], r[2][j], r[3][j]}};
                lg[j] = log(ember__normal_u1(q));
                cs[j] = cos(ember__normal_angle(q));
            }
            for (int j = 0; j < PHILOX_LANES; j++) v[j] = ember__normal(d, lg[j], cs[j]);
            if (d->dtype == EMBER_FLOAT32 && m == PHILOX_LANES) {
                float *out = (float *)c->data + i;
                for (int j = 0; j < PHILOX_LANES; j++) out[j] = (float)v[j];
            } else {
                for (int j = 0; j < m; j++) ember__store(c->data + (i + j) * c->esize, d->dtype, v[j]);
            }
        }
        return;
    }
    bool f32 = d->dist == EMBER__DRAW_UNIFORM && d->dtype == EMBER_FLOAT32;
    double span = d->b - d->a;
    float high = (float)d->b, below = nextafterf(high, -INFINITY);
    bool clamp = d->b > d->a;
    for (int64_t blk = b >> 1; blk << 1 < e; blk += PHILOX_LANES) {
        philox_lanes(d->seed, d->offset + (uint64_t)blk, r);
        int64_t i0 = blk << 1;   /* the first element of this batch of blocks */
        if (f32 && i0 >= b && i0 + 2 * PHILOX_LANES <= e) {
            float *out = (float *)c->data + i0;
            for (int j = 0; j < PHILOX_LANES; j++) {
                out[2 * j] = uniform_f32(r[0][j], d->a, span, high, below, clamp);
                out[2 * j + 1] = uniform_f32(r[2][j], d->a, span, high, below, clamp);
            }
            continue;
        }
        int64_t lo = i0 > b ? i0 : b, hi = i0 + 2 * PHILOX_LANES < e ? i0 + 2 * PHILOX_LANES : e;
        for (int64_t i = lo; i < hi; i++) {
            int j = (int)((i - i0) >> 1), h = (int)(i & 1) * 2;
            uint64_t bits = ((uint64_t)r[h][j] << 32) | r[h + 1][j];
            ember__draw_store_bits(d, bits, c->data + i * c->esize);
        }
    }
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

int ember__draw_fill(ember_tensor *t, const ember__draw *d) { return draw_into(t, d); }   /* dtr.c's replay */

/* Fills t (any layout, any device) with draws; goes through a contiguous
   buffer on t's device when needed. */
static int fill_random(ember_generator *g, ember_tensor *t, int dist, double a, double b)
{
    g = gen_or_default(g);
    ember_tensor *buf = t;
    if (!t->is_contiguous) EMBER_TRY(ember__new(t->ndim, t->shape, t->dtype, t->storage->device, &buf));
    /* claim this draw's blocks at once, so concurrent draws never share one */
    uint64_t first = atomic_fetch_add(&g->offset, ember__draw_blocks(dist, t->numel));
    ember__draw d = {dist, t->dtype, g->seed, first, a, b};
    int rc = draw_into(buf, &d);
    if (EMBER_UNLIKELY(ember__dtr_on) && rc == EMBER_OK && buf == t) ember__dtr_note_draw(t, &d);   /* its recipe */
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

/* A new tensor of draws; under a trace (plan.h) one entry, which a replay
   draws afresh at the generator's offset then. */
static int random_new(ember_generator *g, const char *op, int dist, double a, double b, int ndim,
                      const int64_t *shape, int dtype, int device, bool floats, ember_tensor **out)
{
    if (EMBER_LIKELY(!ember__trace_on)) {
        EMBER_TRY(make(op, ndim, shape, dtype, device, floats, out));
        return finish(fill_random(g, *out, dist, a, b), out);
    }
    if (g && g != &g_default)
        return ember__fail(EMBER_ERR_STATE, "%s: draws from a generator other than the default one inside "
                                            "ember.jit.trace cannot be replayed", op);
    int depth = ember__trace_enter(), rc = make(op, ndim, shape, dtype, device, floats, out);
    if (rc >= 0) rc = finish(fill_random(NULL, *out, dist, a, b), out);
    ember__call_args args = {{dist, dtype, device, ndim}, {a, b}};
    if (rc >= 0) memcpy(&args.i[4], shape, (size_t)ndim * sizeof *shape);
    return ember__trace_leave(depth, rc, PE_RANDOM, 0, 0, NULL, 1, out, NULL, &args);
}

int ember__random_new(int dist, double a, double b, int ndim, const int64_t *shape, int dtype, int device,
                      ember_tensor **out)
{
    return random_new(NULL, "random", dist, a, b, ndim, shape, dtype, device, false, out);
}

int ember_rand_gen(ember_generator *g, int ndim, const int64_t *shape, int dtype, int device,
                   ember_tensor **out)
{
    return random_new(g, "rand", EMBER__DRAW_UNIFORM, 0, 1, ndim, shape, dtype, device, true, out);
}

int ember_randn_gen(ember_generator *g, int ndim, const int64_t *shape, int dtype, int device,
                    ember_tensor **out)
{
    return random_new(g, "randn", EMBER__DRAW_NORMAL, 0, 1, ndim, shape, dtype, device, true, out);
}

int ember_randint_gen(ember_generator *g, int64_t low, int64_t high, int ndim, const int64_t *shape,
                      int dtype, int device, ember_tensor **out)
{
    if (high <= low)
        return ember__fail(EMBER_ERR_ARG, "randint: expected low < high, got low=%lld high=%lld",
                           (long long)low, (long long)high);
    if (out) *out = NULL;
    if (ember__valid_dtype(dtype)) {   /* every draw must fit: low .. high - 1 */
        EMBER_TRY(ember__check_value("randint", (double)low, dtype));
        EMBER_TRY(ember__check_value("randint", (double)(high - 1), dtype));
    }
    return random_new(g, "randint", EMBER__DRAW_INT, (double)low, (double)((uint64_t)high - (uint64_t)low), ndim,
                      shape, dtype, device, false, out);
}

int ember_dropout_mask_gen(ember_generator *g, const ember_tensor *x, double p, ember_tensor **out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "dropout: out is NULL");
    *out = NULL;
    if (!x) return ember__fail(EMBER_ERR_ARG, "dropout: input is NULL");
    if (!ember__is_float(x->dtype))
        return ember__fail(EMBER_ERR_DTYPE, "dropout: expected a floating point input, got %s",
                           ember_dtype_name(x->dtype));
    if (!(p >= 0 && p <= 1)) return ember__fail(EMBER_ERR_ARG, "dropout: p must be in [0, 1], got %g", p);
    int device = x->storage->device;
    if (ember__trace_on || device != EMBER_CPU) {   /* a plan's entries, a device's kernels: rand, then ge */
        ember_tensor *u = NULL, *s = NULL;
        int rc = ember_rand_gen(g, x->ndim, x->shape, x->dtype, device, &u);
        if (rc >= 0) rc = ember_scalar(p, EMBER_FLOAT64, 1, &s);
        if (rc >= 0) rc = ember_ge(u, s, out);
        ember_tensor_release(u);
        ember_tensor_release(s);
        return rc;
    }
    g = gen_or_default(g);
    EMBER_TRY(make("dropout", x->ndim, x->shape, EMBER_BOOL, EMBER_CPU, false, out));
    uint64_t first = atomic_fetch_add(&g->offset, ember__draw_blocks(EMBER__DRAW_KEEP, x->numel));
    ember__draw d = {EMBER__DRAW_KEEP, x->dtype, g->seed, first, p, 0};
    int rc = draw_into(*out, &d);
    if (EMBER_UNLIKELY(ember__dtr_on) && rc == EMBER_OK) ember__dtr_note_draw(*out, &d);   /* its recipe */
    return finish(rc, out);
}

int ember_rand(int ndim, const int64_t *shape, int dtype, int device, ember_tensor **out)
{
    return ember_rand_gen(NULL, ndim, shape, dtype, device, out);
}

int ember_randn(int ndim, const int64_t *shape, int dtype, int device, ember_tensor **out)
{
    return ember_randn_gen(NULL, ndim, shape, dtype, device, out);
}

int ember_randint(int64_t low, int64_t high, int ndim, const int64_t *shape, int dtype, int device,
                  ember_tensor **out)
{
    return ember_randint_gen(NULL, low, high, ndim, shape, dtype, device, out);
}

/* A random fill in place: the old value and its history are gone. */
static int overwrite_now(ember_generator *g, const char *name, ember_tensor *t, int dist, double a, double b);

static int overwrite(ember_generator *g, const char *name, ember_tensor *t, int dist, double a, double b)
{
    if (EMBER_LIKELY(!ember__trace_on)) return overwrite_now(g, name, t, dist, a, b);
    if (g && g != &g_default)
        return ember__fail(EMBER_ERR_STATE, "%s_: draws from a generator other than the default one inside "
                                            "ember.jit.trace cannot be replayed", name);
    int depth = ember__trace_enter();
    ember__call_args args = {{dist}, {a, b}};
    return ember__trace_leave(depth, overwrite_now(NULL, name, t, dist, a, b), PE_RANDOM_, 0, 1, &t, 0, NULL, NULL,
                              &args);
}

int ember__random_fill(int dist, double a, double b, ember_tensor *t) { return overwrite(NULL, "random", t, dist, a, b); }

static int overwrite_now(ember_generator *g, const char *name, ember_tensor *t, int dist, double a, double b)
{
    EMBER_TRY(ember__check_writable(name, t));
    int rec = ember__ag_write_recorded(name, t, NULL);
    EMBER_TRY(rec);
    EMBER_TRY(fill_random(g, t, dist, a, b));
    t->storage->version++;
    return rec ? ember__ag_commit(t, NULL) : EMBER_OK;
}

static int need_float(const char *name, const ember_tensor *t)
{
    if (!t) return ember__fail(EMBER_ERR_ARG, "%s: argument is NULL", name);
    if (!ember__is_float(t->dtype))
        return ember__fail(EMBER_ERR_DTYPE, "%s: expected a floating point tensor, got %s", name,
                           ember_dtype_name(t->dtype));
    return EMBER_OK;
}

int ember_uniform_gen_(ember_generator *g, ember_tensor *t, double low, double high)
{
    EMBER_TRY(need_float("uniform_", t));
    if (!(low <= high)) return ember__fail(EMBER_ERR_ARG, "uniform_: expected low <= high, got %g > %g", low, high);
    return overwrite(g, "uniform", t, EMBER__DRAW_UNIFORM, low, high);
}

int ember_normal_gen_(ember_generator *g, ember_tensor *t, double mean, double std)
{
    EMBER_TRY(need_float("normal_", t));
    if (!(std >= 0)) return ember__fail(EMBER_ERR_ARG, "normal_: expected std >= 0, got %g", std);
    return overwrite(g, "normal", t, EMBER__DRAW_NORMAL, mean, std);
}

int ember_uniform_(ember_tensor *t, double low, double high) { return ember_uniform_gen_(NULL, t, low, high); }
int ember_normal_(ember_tensor *t, double mean, double std) { return ember_normal_gen_(NULL, t, mean, std); }

int ember_exponential_gen_(ember_generator *g, ember_tensor *t, double lambd)
{
    EMBER_TRY(need_float("exponential_", t));
    if (!(lambd > 0 && lambd < INFINITY))
        return ember__fail(EMBER_ERR_ARG, "exponential_: expected a finite lambd > 0, got %g", lambd);
    return overwrite(g, "exponential", t, EMBER__DRAW_EXPONENTIAL, lambd, 0);
}

int ember_geometric_gen_(ember_generator *g, ember_tensor *t, double p)
{
    if (!t) return ember__fail(EMBER_ERR_ARG, "geometric_: argument is NULL");
    if (t->dtype == EMBER_BOOL)
        return ember__fail(EMBER_ERR_DTYPE, "geometric_: expected a numeric tensor, got bool");
    if (!(p > 0 && p <= 1)) return ember__fail(EMBER_ERR_ARG, "geometric_: expected 0 < p <= 1, got %g", p);
    return overwrite(g, "geometric", t, EMBER__DRAW_GEOMETRIC, p, 0);
}

int ember_bernoulli_gen_(ember_generator *g, ember_tensor *t, double p)
{
    if (!t) return ember__fail(EMBER_ERR_ARG, "bernoulli_: argument is NULL");
    if (!(p >= 0 && p <= 1)) return ember__fail(EMBER_ERR_ARG, "bernoulli_: expected 0 <= p <= 1, got %g", p);
    return overwrite(g, "bernoulli", t, EMBER__DRAW_BERNOULLI, p, 0);
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

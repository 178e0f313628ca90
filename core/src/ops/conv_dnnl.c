/* conv_dnnl.c: conv2d and its two adjoints through oneDNN's primitives
   (float32, built when CMake finds oneDNN; conv.c runs everything else).

   Each product is one oneDNN convolution primitive (direct algorithm) whose
   operands are described with format_tag_any, so oneDNN picks the blocked
   layouts its kernels want; ember's NCHW / OIHW tensors are reordered into
   them and the result back, by reorder primitives made once with it. A
   primitive is made for one geometry and one thread count: they are kept in
   a table keyed by both, so a training loop makes each once. Scratchpads
   are ember's blocks (scratchpad_mode_user), so one primitive can run on
   several host threads at once.

   oneDNN's weight gradient sums over the batch in a split that follows its
   thread count, so ember fixes the split itself (conv_dnnl_wgrad.c); the
   forward and the data gradient gave the same bits on 1 and 2 threads
   (spec/thread_bits_spec.lua). Under deterministic mode the convolutions
   run on ember's kernels. The fused ops (conv2d_relu's backward,
   conv2d_relu_max_pool2d) are in conv_dnnl_fused.c, over the same
   primitives (conv_dnnl.h). */
#include "conv_dnnl.h"

#include <pthread.h>
#include <float.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dnnl_inc.h"
#ifdef EMBER_HAVE_DNNL
#include <oneapi/dnnl/dnnl_version.h>
#endif

static int dnnl_enabled = 1;

void ember_set_dnnl_enabled(int on) { dnnl_enabled = on != 0; }

#ifndef EMBER_HAVE_DNNL

int ember_dnnl_enabled(void) { return 0; }
const char *ember_dnnl_info(void) { return "none (not built with oneDNN)"; }

bool ember__dnnl_conv(conv_kind kind, const conv_geom *g, const float *a, const float *b, const ember_tensor *w,
                      const float *bias, float *res)
{
    EMBER_UNUSED(kind), EMBER_UNUSED(g), EMBER_UNUSED(a), EMBER_UNUSED(b), EMBER_UNUSED(w), EMBER_UNUSED(bias);
    EMBER_UNUSED(res);
    return false;
}

bool ember__dnnl_conv_bf16(conv_kind kind, const conv_geom *g, const void *a, const void *b, const ember_tensor *w,
                           float *res)
{
    EMBER_UNUSED(kind), EMBER_UNUSED(g), EMBER_UNUSED(a), EMBER_UNUSED(b), EMBER_UNUSED(w), EMBER_UNUSED(res);
    return false;
}

bool ember__dnnl_conv_relu_backward(const conv_geom *g, const float *gy, const float *y, const float *x,
                                    const float *w, float *gx, float *gw, float *gb)
{
    EMBER_UNUSED(g), EMBER_UNUSED(gy), EMBER_UNUSED(y), EMBER_UNUSED(x), EMBER_UNUSED(w), EMBER_UNUSED(gx);
    EMBER_UNUSED(gw), EMBER_UNUSED(gb);
    return false;
}

bool ember__dnnl_conv_relu_pool(const conv_geom *g, const float *x, const float *w, const float *bias, int64_t kh,
                                int64_t kw, float *p, int32_t *idx)
{
    EMBER_UNUSED(g), EMBER_UNUSED(x), EMBER_UNUSED(w), EMBER_UNUSED(bias), EMBER_UNUSED(kh), EMBER_UNUSED(kw);
    EMBER_UNUSED(p), EMBER_UNUSED(idx);
    return false;
}

bool ember__dnnl_conv_relu_pool_backward(const conv_geom *g, int64_t kh, int64_t kw, const float *gp,
                                         const float *p, const int32_t *idx, const float *x, const float *w,
                                         float *gx, float *gw, float *gb)
{
    EMBER_UNUSED(g), EMBER_UNUSED(kh), EMBER_UNUSED(kw), EMBER_UNUSED(gp), EMBER_UNUSED(p), EMBER_UNUSED(idx);
    EMBER_UNUSED(x), EMBER_UNUSED(w), EMBER_UNUSED(gx), EMBER_UNUSED(gw), EMBER_UNUSED(gb);
    return false;
}

#else

static dnnl_engine_t engine;
static pthread_once_t engine_once = PTHREAD_ONCE_INIT;

static char info[64];

/* libgomp's thread pool does not survive fork: a child's first parallel
   region with more than one thread waits forever for the parent's workers.
   A forked child therefore runs oneDNN on one thread (as PyTorch does). */
static volatile int forked_child;

static void on_fork_child(void) { forked_child = 1; }

static void make_engine(void)
{
    pthread_atfork(NULL, NULL, on_fork_child);
    const dnnl_version_t *v = dnnl_version();
    if (dnnl_engine_create(&engine, dnnl_cpu, 0) != dnnl_success) engine = NULL;
    snprintf(info, sizeof info, "oneDNN %d.%d.%d (%s threads)%s", v->major, v->minor, v->patch,
#ifdef DNNL_OMP
             "OpenMP",
#else
             "its own",
#endif
             engine ? "" : ", no CPU engine");
}

int ember_dnnl_enabled(void)
{
    pthread_once(&engine_once, make_engine);
    return dnnl_enabled && engine != NULL;
}

/* written once, with the engine: no thread-local buffer, since libgomp's
   static TLS and libember's must together fit in what glibc keeps for dlopen */
const char *ember_dnnl_info(void)
{
    pthread_once(&engine_once, make_engine);
    return info;
}

dnnl_engine_t ember__dnnl_engine(void) { return engine; }

/* ------------------------------------------------------------------ primitives, by geometry */


void ember__dnnl_conv_key(conv_kind kind, int variant, const conv_geom *g, int nthr, int64_t *key)
{
    const int64_t k[KEY_LEN] = {kind, variant, nthr, g->N, g->C, g->H, g->W, g->O, g->kH,
                                g->kW, g->G, g->sh, g->sw, g->ph, g->pw, g->dh, g->dw, g->nhwc};
    memcpy(key, k, sizeof k);
}

/* the stream and memory objects of one call (dnnl_conv's kept) */
typedef struct dnnl_conv_mems {
    dnnl_stream_t stream;
    dnnl_memory_t user[NARGS], inner[NARGS], scratch, bias;
} mems;

static void mems_destroy(mems *m)
{
    for (int i = 0; i < NARGS; i++) {
        dnnl_memory_destroy(m->user[i]);
        dnnl_memory_destroy(m->inner[i]);
    }
    dnnl_memory_destroy(m->scratch);
    dnnl_memory_destroy(m->bias);
    dnnl_stream_destroy(m->stream);
}

void ember__dnnl_conv_destroy(dnnl_conv *c)
{
    if (!c) return;
    if (c->kept) mems_destroy(c->kept);
    free(c->kept);
    dnnl_primitive_destroy(c->conv);
    for (int i = 0; i < NARGS; i++) dnnl_primitive_destroy(c->reorder[i]);
    free(c);
}

/* the (grouped) weight as ember keeps it: (O, C/G, kH, kW), or (G, O/G, C/G, kH, kW);
   channels_last (NHWC_WEIGHT in g->nhwc) its channels innermost, (O, kH, kW, C/G) */
static dnnl_status_t weight_md(const conv_geom *g, bool any, dnnl_data_type_t dt, dnnl_memory_desc_t *md)
{
    const bool ohwi = (g->nhwc & NHWC_WEIGHT) != 0;
    if (g->G == 1) {
        const dnnl_dims_t d = {g->O, g->Cg, g->kH, g->kW};
        return dnnl_memory_desc_init_by_tag(md, 4, d, dt, any ? dnnl_format_tag_any : ohwi ? dnnl_ohwi : dnnl_oihw);
    }
    const dnnl_dims_t d = {g->G, g->Og, g->Cg, g->kH, g->kW};
    return dnnl_memory_desc_init_by_tag(md, 5, d, dt, any ? dnnl_format_tag_any : ohwi ? dnnl_gohwi : dnnl_goihw);
}

static dnnl_status_t act_md(int64_t n, int64_t c, int64_t h, int64_t w, bool any, bool nhwc, dnnl_data_type_t dt,
                            dnnl_memory_desc_t *md)
{
    const dnnl_dims_t d = {n, c, h, w};
    return dnnl_memory_desc_init_by_tag(md, 4, d, dt, any ? dnnl_format_tag_any : nhwc ? dnnl_nhwc : dnnl_nchw);
}

/* x, w, y descriptors in ember's layouts (NCHW, or channels_last where
   g->nhwc says), or (any) in those oneDNN will choose, in data types dt[0..2].
   channels_last activations are given to the primitive as they are (its
   nhwc kernels, as PyTorch's channels_last): no reorder of x, y or their
   gradients, only of the weight into the primitive's blocked layout */
static dnnl_status_t geom_mds(const conv_geom *g, bool any, const dnnl_data_type_t *dt, dnnl_memory_desc_t *x,
                              dnnl_memory_desc_t *w, dnnl_memory_desc_t *y)
{
    const bool nhwc = (g->nhwc & NHWC_ACT) != 0, any_act = any && !nhwc;
    dnnl_status_t s = act_md(g->N, g->C, g->H, g->W, any_act, nhwc, dt[0], x);
    if (s == dnnl_success) s = weight_md(g, any, dt[1], w);
    if (s == dnnl_success) s = act_md(g->N, g->O, g->Ho, g->Wo, any_act, nhwc, dt[2], y);
    return s;
}

#define DNNL_TRY(call)                                                                         \
    do {                                                                                       \
        if ((call) != dnnl_success) goto fail;                                                 \
    } while (0)

/* the attr of a fused forward: ReLU applied to the biased sum as it is written.
   oneDNN's ReLU (alpha 0, alpha -0 alike) is a maximum with 0 that turns a
   NaN sum into 0, where PyTorch's relu keeps it: the fused primitives run
   only where relu_post_op_exact says no sum can be NaN. */
static dnnl_status_t relu_post_op(dnnl_primitive_attr_t attr)
{
    dnnl_post_ops_t po;
    dnnl_status_t s = dnnl_post_ops_create(&po);
    if (s != dnnl_success) return s;
    s = dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f);
    if (s == dnnl_success) s = dnnl_primitive_attr_set_post_ops(attr, po);
    dnnl_post_ops_destroy(po);
    return s;
}

/* channels_last (g->nhwc): into *w the weight layout oneDNN picks for the
   same float32 convolution on its blocked activations. Left free, its nhwc
   primitives pick brgconv's (Acdb32a, Acdb64a), into which oneDNN 2.6
   reorders a weight several times slower than into the blocked kernels'
   (docs/nn.md, "channels_last"); its jit kernels also read nhwc
   activations with those weights. false where none is had. */
static bool blocked_weight_md(const conv_geom *g, dnnl_memory_desc_t *w)
{
    conv_geom gb = *g;
    gb.nhwc = 0;
    const dnnl_data_type_t dt[3] = {dnnl_f32, dnnl_f32, dnnl_f32};
    const dnnl_dims_t strides = {g->sh, g->sw}, dil = {g->dh - 1, g->dw - 1}, pad = {g->ph, g->pw};
    dnnl_memory_desc_t x, wa, y;
    dnnl_convolution_desc_t fd;
    dnnl_primitive_desc_t pd = NULL;
    if (geom_mds(&gb, true, dt, &x, &wa, &y) != dnnl_success ||
        dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &x, &wa, NULL,
                                                   &y, strides, dil, pad, pad) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &fd, NULL, engine, NULL) != dnnl_success)
        return false;
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    if (md) *w = *md;
    dnnl_primitive_desc_destroy(pd);
    return md != NULL;
}

/* variant: DNNL_F32, DNNL_F32_RELU (a forward with a bias and a ReLU
   post-op) or DNNL_BF16 (the product's two operands bfloat16, its result
   float32; the backward ones' forward hint all bfloat16); fixed_w: the
   float32 weight in blocked_weight_md's layout */
static dnnl_conv *conv_create_as(conv_kind kind, int variant, const conv_geom *g, bool fixed_w)
{
    dnnl_conv *c = calloc(1, sizeof *c);
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t fwd_pd = NULL, pd = NULL;
    if (!c) return NULL;
    const bool fused = variant == DNNL_F32_RELU, bf = variant == DNNL_BF16;
    const dnnl_data_type_t lo = bf ? dnnl_bf16 : dnnl_f32;
    /* x, w, y: the result float32, the operands (and the hint's) lo */
    const dnnl_data_type_t dts[3] = {kind == CONV_BWD_INPUT ? dnnl_f32 : lo, kind == CONV_BWD_WEIGHT ? dnnl_f32 : lo,
                                     kind == CONV_FWD ? dnnl_f32 : lo},
                           hint[3] = {lo, lo, lo};
    dnnl_memory_desc_t ux, uw, uy, ax, aw, ay, hx, hw, hy;
    DNNL_TRY(geom_mds(g, false, dts, &ux, &uw, &uy));
    DNNL_TRY(geom_mds(g, true, dts, &ax, &aw, &ay));
    DNNL_TRY(geom_mds(g, true, kind == CONV_FWD ? dts : hint, &hx, &hw, &hy));
    if (fixed_w) {
        if (!blocked_weight_md(g, &hw)) goto fail;
        aw = hw;
    }
    const dnnl_dims_t strides = {g->sh, g->sw}, dil = {g->dh - 1, g->dw - 1}, pad = {g->ph, g->pw};
    const dnnl_dims_t bias_dims = {g->O};
    c->fused = fused;
    DNNL_TRY(dnnl_memory_desc_init_by_tag(&c->bias, 1, bias_dims, dnnl_f32, dnnl_a));
    DNNL_TRY(dnnl_primitive_attr_create(&attr));
    DNNL_TRY(dnnl_primitive_attr_set_scratchpad_mode(attr, dnnl_scratchpad_mode_user));
    if (fused) DNNL_TRY(relu_post_op(attr));
    /* the forward primitive, which is also the backward ones' hint */
    dnnl_convolution_desc_t fd, bd;
    DNNL_TRY(dnnl_dilated_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &hx, &hw,
                                                        fused ? &c->bias : NULL, &hy, strides, dil, pad, pad));
    DNNL_TRY(dnnl_primitive_desc_create(&fwd_pd, &fd, attr, engine, NULL));
    dnnl_query_t q[NARGS];
    switch (kind) {
    case CONV_FWD:
        pd = fwd_pd, fwd_pd = NULL;
        q[ARG_A] = dnnl_query_src_md, q[ARG_B] = dnnl_query_weights_md, q[ARG_RES] = dnnl_query_dst_md;
        c->user[ARG_A] = ux, c->user[ARG_B] = uw, c->user[ARG_RES] = uy;
        break;
    case CONV_BWD_INPUT:
        DNNL_TRY(dnnl_dilated_convolution_backward_data_desc_init(&bd, dnnl_convolution_direct, &ax, &aw, &ay,
                                                                  strides, dil, pad, pad));
        DNNL_TRY(dnnl_primitive_desc_create(&pd, &bd, attr, engine, fwd_pd));
        q[ARG_A] = dnnl_query_diff_dst_md, q[ARG_B] = dnnl_query_weights_md, q[ARG_RES] = dnnl_query_diff_src_md;
        c->user[ARG_A] = uy, c->user[ARG_B] = uw, c->user[ARG_RES] = ux;
        break;
    case CONV_BWD_WEIGHT:
        DNNL_TRY(dnnl_dilated_convolution_backward_weights_desc_init(&bd, dnnl_convolution_direct, &ax, &aw, NULL,
                                                                     &ay, strides, dil, pad, pad));
        DNNL_TRY(dnnl_primitive_desc_create(&pd, &bd, attr, engine, fwd_pd));
        q[ARG_A] = dnnl_query_src_md, q[ARG_B] = dnnl_query_diff_dst_md, q[ARG_RES] = dnnl_query_diff_weights_md;
        c->user[ARG_A] = ux, c->user[ARG_B] = uy, c->user[ARG_RES] = uw;
        break;
    }
    /* oneDNN's reference kernels (what it falls back to for some nhwc
       products) are orders of magnitude slower than ember's own */
    const char *impl = NULL;
    if (g->nhwc && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
        strncmp(impl, "ref", 3) == 0)
        goto fail;
    for (int i = 0; i < NARGS; i++) {
        const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, q[i], 0);
        if (!md) goto fail;
        c->inner[i] = *md;
        c->inner_bytes[i] = dnnl_memory_desc_get_size(md);
        if (dnnl_memory_desc_equal(md, &c->user[i])) continue;
        const dnnl_memory_desc_t *from = i == ARG_RES ? md : &c->user[i], *to = i == ARG_RES ? &c->user[i] : md;
        dnnl_primitive_desc_t rpd;
        DNNL_TRY(dnnl_reorder_primitive_desc_create(&rpd, from, engine, to, engine, NULL));
        dnnl_status_t s = dnnl_primitive_create(&c->reorder[i], rpd);
        dnnl_primitive_desc_destroy(rpd);
        DNNL_TRY(s);
    }
    const dnnl_memory_desc_t *sp = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
    if (sp) c->scratch = *sp, c->scratch_bytes = dnnl_memory_desc_get_size(sp);
    DNNL_TRY(dnnl_primitive_create(&c->conv, pd));
    dnnl_primitive_desc_destroy(fwd_pd);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    return c;
fail:
    dnnl_primitive_desc_destroy(fwd_pd);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    ember__dnnl_conv_destroy(c);
    return NULL;
}

/* a channels_last float32 forward with blocked_weight_md's weight where
   oneDNN has a kernel for it, else as oneDNN picks (the adjoints: with a
   fixed weight layout oneDNN 2.6 had only its reference kernels for them) */
static dnnl_conv *conv_create(conv_kind kind, int variant, const conv_geom *g)
{
    dnnl_conv *c = (g->nhwc & NHWC_ACT) && kind == CONV_FWD && variant != DNNL_BF16
                       ? conv_create_as(kind, variant, g, true) : NULL;
    return c ? c : conv_create_as(kind, variant, g, false);
}

/* Made primitives live until the process ends; past MAX_CACHED geometries
   (never in a training loop) a primitive is made for the call and dropped.
   Found by a hash of the key (open addressing over four times as many
   slots): a network at batch 1 asks for one of a hundred-odd keys some 50
   times a forward, where comparing each in turn took microseconds a call. */
enum { CACHE_SLOTS = 4 * MAX_CACHED };
static pthread_mutex_t cache_mu = PTHREAD_MUTEX_INITIALIZER;
static dnnl_conv *cache[CACHE_SLOTS];
static int ncached;

static uint64_t key_hash(const int64_t *key)
{
    uint64_t h = 1469598103934665603ull;   /* FNV-1a over the key's words */
    for (int i = 0; i < KEY_LEN; i++) h = (h ^ (uint64_t)key[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

/* the key's slot: the one holding it, or the empty one where it would go */
static int cache_slot(const int64_t *key)
{
    int i = (int)(key_hash(key) & (CACHE_SLOTS - 1));
    while (cache[i] && memcmp(cache[i]->key, key, sizeof cache[i]->key) != 0) i = (i + 1) & (CACHE_SLOTS - 1);
    return i;
}

static dnnl_conv *cache_find(const int64_t *key) { return cache[cache_slot(key)]; }

/* the primitive for the key (conv NULL where oneDNN declined the geometry:
   it is not asked again), and whether the caller must destroy it */
dnnl_conv *ember__dnnl_conv_get(conv_kind kind, int variant, const conv_geom *g, const int64_t *key, bool *owned)
{
    pthread_mutex_lock(&cache_mu);
    dnnl_conv *c = cache_find(key);
    pthread_mutex_unlock(&cache_mu);
    *owned = false;
    if (c) return c;
    dnnl_conv *made = conv_create(kind, variant, g);
    if (!made && !(made = calloc(1, sizeof *made))) return NULL;
    memcpy(made->key, key, sizeof made->key);
    pthread_mutex_lock(&cache_mu);
    c = cache_find(key);   /* another thread may have made it meanwhile */
    if (!c && ncached < MAX_CACHED) c = cache[cache_slot(key)] = made, made = NULL, ncached++;
    pthread_mutex_unlock(&cache_mu);
    if (!c) c = made, made = NULL, *owned = true;
    ember__dnnl_conv_destroy(made);
    return c;
}

/* ------------------------------------------------------------------ running one product */

static int args_of(conv_kind kind, int i)
{
    static const int arg[3][NARGS] = {
        [CONV_FWD] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
        [CONV_BWD_INPUT] = {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
        [CONV_BWD_WEIGHT] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS},
    };
    return arg[kind][i];
}

/* *mem, described by md, pointed at data: made the first time, its
   handle set after (which oneDNN documents as what making it does) */
static bool mem_at(dnnl_memory_t *mem, const dnnl_memory_desc_t *md, void *data)
{
    if (*mem) return dnnl_memory_set_data_handle(*mem, data) == dnnl_success;
    return dnnl_memory_create(mem, md, engine, data) == dnnl_success;
}

/* Reorders under this many bytes (a weight: 36 KB for 32 x 32 x 3 x 3, 147
   KB for 64 x 64 x 3 x 3) run on the calling thread alone: a few
   microseconds of copying, where a parallel region on a loaded machine waits
   for its second thread (2-core EPYC, load 6-7, 2 threads: oneDNN's verbose
   log gave a 32 x 32 x 3 x 3 weight's reorder a median of 1.6 ms against a
   least of 4 us; PyTorch's, beside it, 8 us). The same bytes either way:
   a reorder copies. Larger ones (the activations of an NCHW product, large
   weights) keep the team. */
#define SMALL_REORDER_BYTES ((size_t)1 << 20)

/* runs reorder r from `from` into `to`, of `bytes` bytes, on s */
static dnnl_status_t run_reorder(dnnl_primitive_t r, dnnl_stream_t s, dnnl_memory_t from, dnnl_memory_t to,
                                 size_t bytes)
{
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
#ifdef DNNL_OMP
    const int before = omp_get_max_threads();
    const bool alone = bytes < SMALL_REORDER_BYTES && before > 1;
    if (alone) omp_set_num_threads(1);
#endif
    dnnl_status_t st = dnnl_primitive_execute(r, s, 2, ra);
    if (st == dnnl_success) st = dnnl_stream_wait(s);
#ifdef DNNL_OMP
    if (alone) omp_set_num_threads(before);
#endif
    return st;
}

/* Runs the product on user[] (ember's layouts), reordering what the
   primitive wants in another layout; an operand given in inner[] is in the
   primitive's layout already and is read as it is (the result, written so
   and left there). The stream and memory objects are c's kept ones where
   no other call holds them (a batch-1 forward's convolutions are small
   enough that making them, five allocations a call, was a quarter of a
   call's time), else this call's own. */
bool ember__dnnl_conv_execute(const dnnl_conv *cc, conv_kind kind, void *const *user, void *const *inner,
                              const float *bias)
{
    dnnl_conv *c = (dnnl_conv *)cc;   /* its kept objects only, under busy */
    mems own = {0}, *m = &own;
    const bool kept = !atomic_flag_test_and_set(&c->busy);
    if (kept && (c->kept || (c->kept = calloc(1, sizeof *c->kept)))) m = c->kept;
    void *ibuf[NARGS] = {0}, *sbuf = NULL;
    bool ok = false, into[NARGS] = {false};   /* into[i]: the operand runs from m->inner[i] */
    if (!m->stream) DNNL_TRY(dnnl_stream_create(&m->stream, engine, dnnl_stream_default_flags));
    for (int i = 0; i < NARGS; i++) {
        if (inner && inner[i]) {
            if (!mem_at(&m->inner[i], &c->inner[i], inner[i])) goto fail;
            into[i] = true;
            continue;
        }
        if (!mem_at(&m->user[i], &c->user[i], user[i])) goto fail;
        if (!c->reorder[i]) continue;
        if (!(ibuf[i] = ember__alloc(c->inner_bytes[i]))) goto fail;
        if (!mem_at(&m->inner[i], &c->inner[i], ibuf[i])) goto fail;
        into[i] = true;
    }
    for (int i = 0; i < NARGS; i++)   /* the operands into the primitive's layouts */
        if (c->reorder[i] && i != ARG_RES && !(inner && inner[i]))
            DNNL_TRY(run_reorder(c->reorder[i], m->stream, m->user[i], m->inner[i], c->inner_bytes[i]));
    dnnl_exec_arg_t ca[NARGS + 2];
    int nca = 0;
    for (int i = 0; i < NARGS; i++) ca[nca++] = (dnnl_exec_arg_t){args_of(kind, i), into[i] ? m->inner[i] : m->user[i]};
    if (c->fused) {
        if (!mem_at(&m->bias, &c->bias, (void *)bias)) goto fail;
        ca[nca++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, m->bias};
    }
    if (c->scratch_bytes) {
        if (!(sbuf = ember__alloc(c->scratch_bytes))) goto fail;
        if (!mem_at(&m->scratch, &c->scratch, sbuf)) goto fail;
        ca[nca++] = (dnnl_exec_arg_t){DNNL_ARG_SCRATCHPAD, m->scratch};
    }
    dnnl_status_t cst;   /* with the signals held: a gemm-based implementation runs the GEMM kernels (dnnl_inc.h) */
    EMBER_DNNL_SIGNALS_HELD({
        cst = dnnl_primitive_execute(c->conv, m->stream, nca, ca);
        if (cst == dnnl_success) cst = dnnl_stream_wait(m->stream);
    });
    DNNL_TRY(cst);
    if (c->reorder[ARG_RES] && !(inner && inner[ARG_RES]))
        DNNL_TRY(run_reorder(c->reorder[ARG_RES], m->stream, m->inner[ARG_RES], m->user[ARG_RES],
                             c->inner_bytes[ARG_RES]));
    ok = true;
fail:
    for (int i = 0; i < NARGS; i++)
        if (ibuf[i]) ember__free(ibuf[i], c->inner_bytes[i]);
    if (sbuf) ember__free(sbuf, c->scratch_bytes);
    if (m == &own) mems_destroy(&own);
    if (kept) atomic_flag_clear(&c->busy);
    return ok;
}

/* Every call into oneDNN's convolutions starts here: false where oneDNN is
   off (not working, switched off, or deterministic mode), else the thread
   count its primitives are made for, with the caller's OpenMP team (which
   oneDNN runs on) set to the thread policy's count for a job, and the team's size
   before in *omp_before for dnnl_leave. */
static bool dnnl_usable(void) { return dnnl_enabled && !ember_is_deterministic() && ember_dnnl_enabled(); }

bool ember__dnnl_enter(const conv_geom *g, int *nthr, int *omp_before)
{
    if (!dnnl_usable()) return false;
    *nthr = forked_child ? 1 : ember__job_threads(g->N * g->O * g->Ho * g->Wo * g->K);   /* multiply-adds */
#ifdef DNNL_OMP
    *omp_before = omp_get_max_threads();
    omp_set_num_threads(*nthr);
#else
    *omp_before = 0;
#endif
    return true;
}

void ember__dnnl_leave(int nthr, int omp_before)
{
#ifdef DNNL_OMP
    omp_set_num_threads(omp_before);
    ember__team_done(nthr);
#else
    EMBER_UNUSED(nthr);
    EMBER_UNUSED(omp_before);
#endif
}

/* the largest |v| over n floats as the bits of its magnitude: the bits with
   the sign cleared order as the magnitudes do, NaN and the infinities
   (0x7f800000 and up) above every finite value, so one integer maximum (a
   vector max per lane) finds both */
EMBER_SIMD static uint32_t max_abs_bits(const float *v, int64_t n)
{
    uint32_t m = 0;
    for (int64_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, v + i, sizeof u);
        u &= 0x7fffffffu;
        m = u > m ? u : m;
    }
    return m;
}

typedef struct {
    const float *v;
    atomic_uint m;
} max_abs_job;

static void max_abs_range(void *vctx, int64_t b, int64_t e)
{
    max_abs_job *j = vctx;
    unsigned m = max_abs_bits(j->v + b, e - b), cur = atomic_load_explicit(&j->m, memory_order_relaxed);
    while (m > cur && !atomic_compare_exchange_weak(&j->m, &cur, m)) {
    }
}

/* the largest |v| over n floats, or infinity where one is NaN or infinite:
   on ember's threads in chunks of 1 MB (256K floats) or more, so an input
   of the CNN recipe's size (200K floats, 0.8 MB, read in well under the
   time of waking a thread on a loaded machine) stays on the caller's */
static float max_abs(const float *v, int64_t n)
{
    max_abs_job j = {v, 0};
    ember__parallel_for(n, 262144, max_abs_range, &j);
    uint32_t m = atomic_load(&j.m);
    if (m >= 0x7f800000u) return INFINITY;
    float f;
    memcpy(&f, &m, sizeof f);
    return f;
}

/* Whether relu's post-op gives relu's values: no output of conv2d(x, w) + b
   can be NaN when every operand is finite and K max|x| max|w| + max|b| is
   below FLT_MAX / 2, which bounds every partial sum in any order (rounding
   included) away from an infinity. One read of x, w and b, against the
   K multiply-adds of each output; elsewhere (a NaN or an infinity in the
   operands, or values near the float range's end) ember's kernels run and
   apply relu as relu does. */
bool ember__dnnl_relu_exact(const conv_geom *g, const float *x, const float *w, const float *bias)
{
    double mx = max_abs(x, g->N * g->C * g->H * g->W), mw = max_abs(w, g->O * g->K), mb = max_abs(bias, g->O);
    return (double)g->K * mx * mw + mb < FLT_MAX / 2;   /* false for an infinity */
}

/* oneDNN's bfloat16 convolutions run on CPUs with AVX-512 BF16 or AMX
   (elsewhere it would emulate them, slower than float32) */
static bool bf16_isa(void)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    return isa == dnnl_cpu_isa_avx512_core_bf16 || isa == dnnl_cpu_isa_avx512_core_amx;
}

/* the product of kind in variant (DNNL_F32 or DNNL_BF16) on user pointers,
   the weight's layout kept on w's storage (NULL: not kept) */
static bool run_variant(conv_kind kind, int variant, const conv_geom *g, const void *a, const void *b,
                        const ember_tensor *w, const float *bias, float *res)
{
    int nthr, omp_before;
    if (kind == CONV_BWD_WEIGHT)
        return g->Ho * g->Wo > 4 && dnnl_usable() && ember__dnnl_weight_grad(g, variant, a, b, 0, res);
    if (!ember__dnnl_enter(g, &nthr, &omp_before)) return false;
    int64_t key[KEY_LEN];
    ember__dnnl_conv_key(kind, variant, g, nthr, key);
    bool owned, ok = false;
    dnnl_conv *c = ember__dnnl_conv_get(kind, variant, g, key, &owned);
    if (c && c->conv) {
        void *user[NARGS] = {(void *)a, (void *)b, res}, *inner[NARGS] = {NULL, NULL, NULL};
        ember__dnnl_wentry *e = w && kind != CONV_BWD_WEIGHT ? ember__dnnl_wcache_get(c, w, b) : NULL;
        if (e) inner[ARG_B] = (void *)ember__dnnl_wcache_data(e);
        ok = ember__dnnl_conv_execute(c, kind, user, inner, bias);
        ember__dnnl_wcache_done(e);
    }
    if (owned) ember__dnnl_conv_destroy(c);
    ember__dnnl_leave(nthr, omp_before);
    return ok;
}

bool ember__dnnl_conv_bf16(conv_kind kind, const conv_geom *g, const void *a, const void *b, const ember_tensor *w,
                           float *res)
{
    return bf16_isa() && run_variant(kind, DNNL_BF16, g, a, b, w, NULL, res);
}

bool ember__dnnl_conv(conv_kind kind, const conv_geom *g, const float *a, const float *b, const ember_tensor *w,
                      const float *bias, float *res)
{
    if (bias && !ember__dnnl_relu_exact(g, a, b, bias)) return false;
    /* the weight gradient's groups are a job of ember's pool (conv_dnnl_wgrad.c);
       on planes of 4 outputs or fewer (the last stages of ResNet and
       MobileNet on small images) each of its eight groups writes a whole
       O x K gradient for a short sum, 2-8x ember's kernels there
       (docs/nn.md, "Depthwise, 1x1 and grouped convolutions") */
    return run_variant(kind, bias ? DNNL_F32_RELU : DNNL_F32, g, a, b, w, bias, res);
}

#endif

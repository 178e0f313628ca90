/* conv_dnnl_fused.c: the fused convolutions through oneDNN (float32, built
   when CMake finds oneDNN; conv_fused.c composes them from ember's ops
   otherwise): conv2d_relu's backward, and conv2d_relu_max_pool2d with its
   backward, the pooling done on oneDNN's blocked output. The primitives and
   their table are conv_dnnl.c's (conv_dnnl.h). */
#include "conv_dnnl.h"

#ifdef EMBER_HAVE_DNNL

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ conv2d_relu's backward */
/* The gradient of relu(conv2d(x, w) + b) from g and the output y: gz = 0
   where y <= 0, else g (a NaN y passes g, as relu_backward), its sums per channel (b's gradient), and the two adjoints of
   gz. Both adjoints read gz in the layout their primitives chose; where
   that is the same for the two, plain NCHW or aBcd16b (16 channels to a
   block, the count padded with zeros: what the AVX-512 kernels take), the
   mask is applied while gz is written in it, so no separate ReLU pass, bias
   sum or reorder of gz runs, and the adjoints share the one copy. */
/* where a gradient writer puts gz: the primitives' layout, and gz's sums
   per sample and channel (N, O), b's gradient before the samples are added */
typedef struct {
    float *gz;
    double *sums;
    bool blocked;   /* aBcd16b, else NCHW */
} gz_target;

typedef struct {
    const conv_geom *g;
    const float *gy, *y;
} mask_job;

/* one channel's plane, NCHW: z = 0 where y <= 0, else g, and the sum of
   those values in 16 double lanes added in a fixed order afterwards (the
   vector width changes no bit) */
EMBER_INLINE double mask_plane(const float *restrict g, const float *restrict y, int64_t n, float *restrict z)
{
    double lanes[16] = {0};
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int l = 0; l < 16; l++) {
            float gv = g[i + l], yv = y[i + l];   /* both loaded: the select is a blend */
            float v = yv <= 0 ? 0.0f : gv;
            z[i + l] = v;
            lanes[l] += (double)v;
        }
    for (; i < n; i++) {
        float v = y[i] <= 0 ? 0.0f : g[i];
        z[i] = v;
        lanes[i % 16] += (double)v;
    }
    double sum = 0;
    for (int l = 0; l < 16; l++) sum += lanes[l];
    return sum;
}

/* a block of 16 channels' planes (live of them; the rest is padding) into
   aBcd16b, 16 positions at a time: the masked values gathered in a 16 x 16
   tile with each channel's row read contiguously, then written as 16
   contiguous rows of 16 channels; the sums as in mask_plane */
EMBER_INLINE void mask_block(const float *restrict g, const float *restrict y, int64_t HW, int live,
                             float *restrict z, double *restrict sum)
{
    double lanes[16][16];
    memset(lanes, 0, sizeof lanes);
    float t[16][16];
    memset(t, 0, sizeof t);
    int64_t i = 0;
    for (; i + 16 <= HW; i += 16) {
        for (int c = 0; c < live; c++)
            for (int l = 0; l < 16; l++) {
                float gv = g[c * HW + i + l], yv = y[c * HW + i + l];
                float v = yv <= 0 ? 0.0f : gv;
                t[c][l] = v;
                lanes[c][l] += (double)v;
            }
        for (int l = 0; l < 16; l++)
            for (int c = 0; c < 16; c++) z[(i + l) * 16 + c] = t[c][l];
    }
    for (; i < HW; i++)
        for (int c = 0; c < 16; c++) {
            float v = c < live && !(y[c * HW + i] <= 0) ? g[c * HW + i] : 0.0f;
            z[i * 16 + c] = v;
            if (c < live) lanes[c][i % 16] += (double)v;
        }
    for (int c = 0; c < live; c++) {
        double s = 0;
        for (int l = 0; l < 16; l++) s += lanes[c][l];
        sum[c] = s;
    }
}

/* samples [n0, n1) of gz into t (a gz_fill: it takes either layout) */
EMBER_SIMD static bool fill_masked(void *vctx, const gz_target *t, int64_t n0, int64_t n1)
{
    const mask_job *j = vctx;
    int64_t O = j->g->O, HW = j->g->Ho * j->g->Wo, OB = (O + 15) / 16;
    for (int64_t n = n0; n < n1; n++) {
        const float *gp = j->gy + n * O * HW, *yp = j->y + n * O * HW;
        double *sum = t->sums + n * O;
        if (!t->blocked) {
            for (int64_t o = 0; o < O; o++) sum[o] = mask_plane(gp + o * HW, yp + o * HW, HW, t->gz + (n * O + o) * HW);
            continue;
        }
        for (int64_t ob = 0; ob < OB; ob++) {
            int live = O - ob * 16 < 16 ? (int)(O - ob * 16) : 16;
            mask_block(gp + ob * 16 * HW, yp + ob * 16 * HW, HW, live, t->gz + (n * OB + ob) * HW * 16, sum + ob * 16);
        }
    }
    return true;
}

/* md is the convolution's output (N, O, Ho, Wo) in aBcd16b: 16 channels to
   a block, the count padded with zeros */
bool ember__dnnl_blocked16(const dnnl_memory_desc_t *md, const conv_geom *g)
{
    dnnl_memory_desc_t blk;
    const dnnl_dims_t d = {g->N, g->O, g->Ho, g->Wo};
    return dnnl_memory_desc_init_by_tag(&blk, 4, d, dnnl_f32, dnnl_aBcd16b) == dnnl_success &&
           dnnl_memory_desc_equal(md, &blk);
}

/* the layout both adjoints read gz in: GZ_NCHW, GZ_BLOCKED (aBcd16b), or 0
   for neither or not the same */
static int shared_layout(const dnnl_conv *cw, const dnnl_conv *cd, const conv_geom *g)
{
    const dnnl_memory_desc_t *mw = &cw->inner[ARG_B];   /* bwd_weights' diff_dst */
    if (cd && !dnnl_memory_desc_equal(mw, &cd->inner[ARG_A])) return 0;
    if (dnnl_memory_desc_equal(mw, &cw->user[ARG_B])) return GZ_NCHW;
    return ember__dnnl_blocked16(mw, g) ? GZ_BLOCKED : 0;
}

/* A writer of gz: fill(ctx, t, n0, n1) writes samples [n0, n1) of gz and
   their sums into t, returning false (for any sample) on input it cannot
   take; it is run only for the layouts (GZ_*) its caller names. */
typedef bool (*gz_fill)(void *ctx, const gz_target *t, int64_t n0, int64_t n1);

typedef struct {
    gz_fill fill;
    void *ctx;
    gz_target t;
    atomic_int failed;
} fill_job;

static void fill_samples(void *vctx, int64_t n0, int64_t n1)
{
    fill_job *j = vctx;
    if (!j->fill(j->ctx, &j->t, n0, n1)) atomic_store_explicit(&j->failed, 1, memory_order_relaxed);
}

/* gw, gb and, given gx, gx from the gz a writer makes in the layout both
   adjoints' primitives read, which they share; false where oneDNN is off
   or declines, the layout is not one the writer takes, or the writer fails */
static bool adjoints_of(const conv_geom *g, int layouts, gz_fill fill, void *ctx, const float *x, const float *w,
                        float *gx, float *gw, float *gb)
{
    int nthr, omp_before;
    if (!ember__dnnl_enter(g, &nthr, &omp_before)) return false;
    int64_t kw[KEY_LEN], kd[KEY_LEN];
    ember__dnnl_conv_key(CONV_BWD_WEIGHT, false, g, nthr, kw);
    ember__dnnl_conv_key(CONV_BWD_INPUT, false, g, nthr, kd);
    bool own_w = false, own_d = false, ok = false;
    dnnl_conv *cw = ember__dnnl_conv_get(CONV_BWD_WEIGHT, false, g, kw, &own_w);
    dnnl_conv *cd = gx ? ember__dnnl_conv_get(CONV_BWD_INPUT, false, g, kd, &own_d) : NULL;
    const int layout = cw && cw->conv && (!gx || (cd && cd->conv)) ? shared_layout(cw, cd, g) & layouts : 0;
    size_t zbytes = layout ? cw->inner_bytes[ARG_B] : 0, sbytes = (size_t)(g->N * g->O) * sizeof(double);
    float *gz = layout ? ember__alloc(zbytes) : NULL;
    double *sums = gz ? ember__alloc(sbytes) : NULL;
    if (sums) {
        fill_job fj = {fill, ctx, {gz, sums, layout == GZ_BLOCKED}, 0};
        ember__parallel_for(g->N, 1, fill_samples, &fj);
        ok = !atomic_load(&fj.failed);
    }
    if (ok) {
        for (int64_t o = 0; o < g->O; o++) {   /* b's gradient: the samples in order */
            double acc = 0;
            for (int64_t n = 0; n < g->N; n++) acc += sums[n * g->O + o];
            gb[o] = (float)acc;
        }
        ok = ember__dnnl_weight_grad(g, DNNL_F32, x, gz, layout, gw);   /* fixed groups (conv_dnnl_wgrad.c) */
        if (ok && gx) {
            void *ud[NARGS] = {NULL, (void *)w, gx}, *id[NARGS] = {gz, NULL, NULL};
            ok = ember__dnnl_conv_execute(cd, CONV_BWD_INPUT, ud, id, NULL);
        }
    }
    if (gz) ember__free(gz, zbytes);
    if (sums) ember__free(sums, sbytes);
    if (own_w) ember__dnnl_conv_destroy(cw);
    if (own_d) ember__dnnl_conv_destroy(cd);
    ember__dnnl_leave(nthr, omp_before);
    return ok;
}

bool ember__dnnl_conv_relu_backward(const conv_geom *g, const float *gy, const float *y, const float *x,
                                    const float *w, float *gx, float *gw, float *gb)
{
    mask_job j = {g, gy, y};
    return adjoints_of(g, GZ_NCHW | GZ_BLOCKED, fill_masked, &j, x, w, gx, gw, gb);
}

/* ------------------------------------------------------------------ conv2d_relu_max_pool2d */
/* The convolution's output y = relu(conv2d(x, w) + b) is written in
   aBcd16b, where max pooling (windows of kernel kh x kw at the same stride,
   no padding) reads 16 channels of a position as one vector, so y is never
   reordered to NCHW nor read a second time as a plane; the backward writes
   the gradient straight into aBcd16b from the pooled gradient, values and
   positions: gp where the pooled value is positive, at its position, zero
   elsewhere (what max_pool2d_backward and relu's mask give), each of y's
   positions written once. */
typedef struct {
    const conv_geom *g;
    int64_t kh, kw, Hp, Wp;
    const float *y;        /* aBcd16b */
    float *p;              /* (N, O, Hp, Wp) */
    int32_t *idx;
} pool_job;

/* a tile's results, tv[t][c] and ti[t][c] for window t < m and channel
   c < live, into the channels' planes (HpWp apart) of p and idx, a
   channel's run of m at a time */
EMBER_INLINE void store_tile(float *p, int32_t *idx, int64_t HpWp, int live, int m, float tv[16][16],
                             int32_t ti[16][16])
{
    for (int c = 0; c < live; c++)
        for (int t = 0; t < m; t++) p[c * HpWp + t] = tv[t][c], idx[c * HpWp + t] = ti[t][c];
}

/* One window of kh x kw positions from (h0, w0) in a block of y (16
   channels a position, rows Wo positions long): its maximum and position
   for each of the 16 channels into bv and bi, compared as pool.c compares
   (a > b, or a is NaN: the first maximum in window order kept, or the last
   NaN, as PyTorch), written as (a > b) | !(a == a) with no branch. */
EMBER_INLINE void window_max(const float *yb, int64_t Wo, int64_t h0, int64_t w0, int64_t kh, int64_t kw,
                             float *bv, int32_t *bi)
{
    const int32_t p0 = (int32_t)(h0 * Wo + w0);
    for (int c = 0; c < 16; c++) bv[c] = yb[(int64_t)p0 * 16 + c], bi[c] = p0;
    for (int64_t h = h0; h < h0 + kh; h++)
        for (int64_t w = w0; w < w0 + kw; w++) {
            const int32_t pos = (int32_t)(h * Wo + w);
            const float *v = yb + (int64_t)pos * 16;
            for (int c = 0; c < 16; c++) {
                const float a = v[c], b = bv[c];
                const int gt = (a > b) | !(a == a);
                bv[c] = gt ? a : b;
                bi[c] = gt ? pos : bi[c];
            }
        }
}

/* blocks q0 .. q1 of y, q = n * OB + ob, pooled 16 windows of a row at a
   time by WINDOW (window_max or its AVX-512 twin); the results gather in a
   16 x 16 tile written a channel's run at a time */
#define POOL_BLOCKS(NAME, WINDOW)                                                                              \
    static void NAME(void *vctx, int64_t q0, int64_t q1)                                                      \
    {                                                                                                         \
        const pool_job *j = vctx;                                                                             \
        const int64_t O = j->g->O, Ho = j->g->Ho, Wo = j->g->Wo, OB = (O + 15) / 16, HpWp = j->Hp * j->Wp;    \
        for (int64_t q = q0; q < q1; q++) {                                                                   \
            const int64_t n = q / OB, ob = q % OB;                                                            \
            const int live = O - ob * 16 < 16 ? (int)(O - ob * 16) : 16;                                      \
            const float *yb = j->y + q * Ho * Wo * 16;                                                        \
            float *pb = j->p + (n * O + ob * 16) * HpWp;                                                      \
            int32_t *ib = j->idx + (n * O + ob * 16) * HpWp;                                                  \
            for (int64_t oh = 0; oh < j->Hp; oh++)                                                            \
                for (int64_t ow0 = 0; ow0 < j->Wp; ow0 += 16) {                                               \
                    const int m = j->Wp - ow0 < 16 ? (int)(j->Wp - ow0) : 16;                                 \
                    float tv[16][16];                                                                         \
                    int32_t ti[16][16];                                                                       \
                    for (int t = 0; t < m; t++)                                                               \
                        WINDOW(yb, Wo, oh * j->kh, (ow0 + t) * j->kw, j->kh, j->kw, tv[t], ti[t]);            \
                    store_tile(pb + oh * j->Wp + ow0, ib + oh * j->Wp + ow0, HpWp, live, m, tv, ti);          \
                }                                                                                             \
        }                                                                                                     \
    }

EMBER_SIMD POOL_BLOCKS(pool_blocks, window_max)

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_POOL512 1

/* window_max with AVX-512 intrinsics: a window's 16 channels are one
   register (GCC leaves the loop above scalar: it unrolls the 16 channels
   and its straight-line vectoriser does not take the NaN-aware compare) */
__attribute__((target("avx512f"))) EMBER_INLINE void window_max_512(const float *yb, int64_t Wo, int64_t h0,
                                                                     int64_t w0, int64_t kh, int64_t kw,
                                                                     float *tv, int32_t *ti)
{
    const int32_t p0 = (int32_t)(h0 * Wo + w0);
    __m512 bv = _mm512_loadu_ps(yb + (int64_t)p0 * 16);
    __m512i bi = _mm512_set1_epi32(p0);
    for (int64_t h = h0; h < h0 + kh; h++)
        for (int64_t w = w0; w < w0 + kw; w++) {
            const int32_t pos = (int32_t)(h * Wo + w);
            const __m512 a = _mm512_loadu_ps(yb + (int64_t)pos * 16);
            const __mmask16 gt = _mm512_cmp_ps_mask(a, bv, _CMP_GT_OQ) | _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
            bv = _mm512_mask_mov_ps(bv, gt, a);
            bi = _mm512_mask_mov_epi32(bi, gt, _mm512_set1_epi32(pos));
        }
    _mm512_storeu_ps(tv, bv);
    _mm512_storeu_si512(ti, bi);
}

__attribute__((target("avx512f"))) POOL_BLOCKS(pool_blocks_512, window_max_512)
#undef POOL_BLOCKS

/* the CPU has AVX-512F, and EMBER_NO_AVX512 is not set (it keeps these
   kernels off, so that the portable ones can be tested on such a CPU) */
static bool have_avx512(void) { return ember__cpu_avx512f() && !getenv("EMBER_NO_AVX512"); }
#else
static bool have_avx512(void) { return false; }
#endif

bool ember__dnnl_conv_relu_pool(const conv_geom *g, const float *x, const float *w, const float *bias, int64_t kh,
                                int64_t kw, float *p, int32_t *idx)
{
    int nthr, omp_before;
    if (!ember__dnnl_relu_exact(g, x, w, bias)) return false;
    if (!ember__dnnl_enter(g, &nthr, &omp_before)) return false;
    int64_t key[KEY_LEN];
    ember__dnnl_conv_key(CONV_FWD, true, g, nthr, key);
    bool owned, ok = false;
    dnnl_conv *c = ember__dnnl_conv_get(CONV_FWD, true, g, key, &owned);
    size_t ybytes = c && c->conv && ember__dnnl_blocked16(&c->inner[ARG_RES], g) ? c->inner_bytes[ARG_RES] : 0;
    float *y = ybytes ? ember__alloc(ybytes) : NULL;
    if (y) {
        void *user[NARGS] = {(void *)x, (void *)w, NULL}, *inner[NARGS] = {NULL, NULL, y};
        ok = ember__dnnl_conv_execute(c, CONV_FWD, user, inner, bias);
    }
    if (ok) {
        const int64_t Hp = (g->Ho - kh) / kh + 1, Wp = (g->Wo - kw) / kw + 1;
        pool_job j = {g, kh, kw, Hp, Wp, y, p, idx};
        void (*kernel)(void *, int64_t, int64_t) = pool_blocks;
#ifdef HAVE_POOL512
        if (have_avx512()) kernel = pool_blocks_512;
#endif
        ember__parallel_for(g->N * ((g->O + 15) / 16), 1, kernel, &j);
    }
    if (y) ember__free(y, ybytes);
    if (owned) ember__dnnl_conv_destroy(c);
    ember__dnnl_leave(nthr, omp_before);
    return ok;
}

typedef struct {
    const conv_geom *g;
    int64_t kh, kw, Hp, Wp;
    const float *gp, *p;
    const int32_t *idx;
} unpool_job;

/* the positions of a block zb of gz (aBcd16b) that no window covers: the
   rows below the last window and the columns right of it, zero */
static void zero_uncovered(const unpool_job *j, float *zb)
{
    const int64_t Ho = j->g->Ho, Wo = j->g->Wo, hc = j->Hp * j->kh, wc = j->Wp * j->kw;
    for (int64_t h = 0; h < Ho; h++) {
        const int64_t w0 = h < hc ? wc : 0;
        if (w0 < Wo) memset(zb + (h * Wo + w0) * 16, 0, sizeof(float) * 16 * (size_t)(Wo - w0));
    }
}

/* samples n0 .. n1 of gz in aBcd16b: each window of y written whole, gp at
   the pooled position where the pooled value is positive, 0 elsewhere;
   the rows and columns no window covers are 0. The sums take the masked gp
   of each channel in window order. false when a position is not in its
   window (the indices did not come from the forward) */
EMBER_SIMD static bool fill_unpooled(void *vctx, const gz_target *tg, int64_t n0, int64_t n1)
{
    const unpool_job *j = vctx;
    const int64_t O = j->g->O, Ho = j->g->Ho, Wo = j->g->Wo, OB = (O + 15) / 16, HpWp = j->Hp * j->Wp;
    const int64_t kh = j->kh, kw = j->kw;
    bool ok = true;
    for (int64_t n = n0; n < n1; n++)
        for (int64_t ob = 0; ob < OB; ob++) {
            const int live = O - ob * 16 < 16 ? (int)(O - ob * 16) : 16;
            float *zb = tg->gz + (n * OB + ob) * Ho * Wo * 16;
            const int64_t base = (n * O + ob * 16) * HpWp;
            double acc[16] = {0};
            zero_uncovered(j, zb);
            for (int64_t oh = 0; oh < j->Hp; oh++) {
                for (int64_t ow = 0; ow < j->Wp; ow++) {
                    float val[16];
                    int32_t pos[16];
                    for (int c = 0; c < 16; c++) {
                        const int64_t k = base + c * HpWp + oh * j->Wp + ow;
                        val[c] = c < live && !(j->p[k] <= 0) ? j->gp[k] : 0.0f;
                        pos[c] = c < live ? j->idx[k] : -1;
                        acc[c] += (double)val[c];
                    }
                    const int64_t h0 = oh * kh, w0 = ow * kw;
                    int hits = 0;
                    for (int64_t h = h0; h < h0 + kh; h++)
                        for (int64_t w = w0; w < w0 + kw; w++) {
                            float *zr = zb + (h * Wo + w) * 16;
                            const int64_t at = h * Wo + w;
                            for (int c = 0; c < 16; c++) {
                                const bool here = pos[c] == at;
                                zr[c] = here ? val[c] : 0.0f;
                                hits += here;
                            }
                        }
                    ok = ok && hits == live;
                }
            }
            for (int c = 0; c < live; c++) tg->sums[n * O + ob * 16 + c] = acc[c];
        }
    return ok;
}

#ifdef HAVE_POOL512
/* fill_unpooled with AVX-512: a window's 16 channels of gp, p and the
   positions come in by gathers (one plane apart), each of y's positions in
   the window is written as one masked move */
__attribute__((target("avx512f"))) static bool fill_unpooled_512(void *vctx, const gz_target *tg, int64_t n0,
                                                                 int64_t n1)
{
    const unpool_job *j = vctx;
    const int64_t O = j->g->O, Ho = j->g->Ho, Wo = j->g->Wo, OB = (O + 15) / 16, HpWp = j->Hp * j->Wp;
    const int64_t kh = j->kh, kw = j->kw;
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i plane = _mm512_mullo_epi32(lane, _mm512_set1_epi32((int32_t)HpWp));
    bool ok = true;
    for (int64_t n = n0; n < n1; n++)
        for (int64_t ob = 0; ob < OB; ob++) {
            const int live = O - ob * 16 < 16 ? (int)(O - ob * 16) : 16;
            const __mmask16 lm = (__mmask16)((1u << live) - 1);
            float *zb = tg->gz + (n * OB + ob) * Ho * Wo * 16;
            const int64_t base = (n * O + ob * 16) * HpWp;
            __m512d acc_lo = _mm512_setzero_pd(), acc_hi = _mm512_setzero_pd();
            zero_uncovered(j, zb);
            for (int64_t oh = 0; oh < j->Hp; oh++) {
                for (int64_t ow = 0; ow < j->Wp; ow++) {
                    const int64_t k = base + oh * j->Wp + ow;
                    const __m512 gv = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), lm, plane, j->gp + k, 4);
                    const __m512 pv = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), lm, plane, j->p + k, 4);
                    const __m512i lo = _mm512_mask_i32gather_epi32(_mm512_set1_epi32(-1), lm, plane, j->idx + k, 4);
                    const __mmask16 pos = _mm512_cmp_ps_mask(pv, _mm512_setzero_ps(), _CMP_NLE_UQ);   /* !(p <= 0): NaN too */
                    const __m512 val = _mm512_maskz_mov_ps(pos, gv);
                    acc_lo = _mm512_add_pd(acc_lo, _mm512_cvtps_pd(_mm512_castps512_ps256(val)));
                    acc_hi = _mm512_add_pd(acc_hi, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(
                                                       _mm512_castps_pd(val), 1))));
                    __mmask16 hits = 0;
                    for (int64_t h = oh * kh; h < oh * kh + kh; h++)
                        for (int64_t w = ow * kw; w < ow * kw + kw; w++) {
                            const __mmask16 here = _mm512_cmpeq_epi32_mask(lo, _mm512_set1_epi32((int32_t)(h * Wo + w)));
                            _mm512_storeu_ps(zb + (h * Wo + w) * 16, _mm512_maskz_mov_ps(here, val));
                            hits |= here;
                        }
                    ok = ok && (hits & lm) == lm;
                }
            }
            double sums[16];
            _mm512_storeu_pd(sums, acc_lo);
            _mm512_storeu_pd(sums + 8, acc_hi);
            for (int c = 0; c < live; c++) tg->sums[n * O + ob * 16 + c] = sums[c];
        }
    return ok;
}
#endif

bool ember__dnnl_conv_relu_pool_backward(const conv_geom *g, int64_t kh, int64_t kw, const float *gp,
                                         const float *p, const int32_t *idx, const float *x, const float *w,
                                         float *gx, float *gw, float *gb)
{
    unpool_job j = {g, kh, kw, (g->Ho - kh) / kh + 1, (g->Wo - kw) / kw + 1, gp, p, idx};
    gz_fill fill = fill_unpooled;
#ifdef HAVE_POOL512
    /* the gathers' offsets, a plane apart, fit in int32 */
    if (have_avx512() && 16 * j.Hp * j.Wp < INT32_MAX) fill = fill_unpooled_512;
#endif
    return adjoints_of(g, GZ_BLOCKED, fill, &j, x, w, gx, gw, gb);
}

#endif

/* conv.c: conv2d and its two adjoints on the CPU.

   conv2d is im2col + GEMM. A chunk of the batch is unfolded at once into a
   column matrix cols (K = C/groups * kH * kW rows, nb * H' * W' columns), so
   each group is one large GEMM instead of nb small ones; the chunk is sized
   so cols stays near 16M elements. The two adjoints reuse the same unfolding:
   the input gradient is W^T g folded back (col2im), the weight gradient is
   g cols^T summed over chunks. The GEMMs go through gemm.c's one entry;
   the batch is split into tasks on ember's pool (conv_run). The fused ops'
   backward and conv2d_relu_max_pool2d are in conv_fused.c.
   Dtypes: nn.h. */
#include "conv.h"

#include <stdio.h>
#include <string.h>

/* columns of the unfolded matrix per chunk, times its rows */
#define CHUNK_ELEMS (512 * 1024)

/* ------------------------------------------------------------------ conv geometry */

int ember__conv_geom_init(const char *op, const int64_t *xs, const int64_t *ws, const int64_t *st,
                          const int64_t *pd, const int64_t *dl, int64_t groups, conv_geom *g)
{
    char sx[200], sw[200];   /* the shapes, written only into a failure's message */
    if (st[0] < 1 || st[1] < 1 || dl[0] < 1 || dl[1] < 1 || pd[0] < 0 || pd[1] < 0)
        return ember__fail(EMBER_ERR_ARG,
                           "%s: stride {%lld, %lld} and dilation {%lld, %lld} must be positive and padding "
                           "{%lld, %lld} non-negative",
                           op, (long long)st[0], (long long)st[1], (long long)dl[0], (long long)dl[1],
                           (long long)pd[0], (long long)pd[1]);
    if (!nn_attrs_in_range(2, st) || !nn_attrs_in_range(2, pd) || !nn_attrs_in_range(2, dl) ||
        !nn_attrs_in_range(1, &groups) || !nn_attrs_in_range(2, ws + 2))
        return ember__fail(EMBER_ERR_ARG,
                           "%s: stride {%lld, %lld}, padding {%lld, %lld}, dilation {%lld, %lld}, groups %lld and the "
                           "kernel of weight %s must be below 2^31",
                           op, (long long)st[0], (long long)st[1], (long long)pd[0], (long long)pd[1],
                           (long long)dl[0], (long long)dl[1], (long long)groups, ember__shape_str(sw, 4, ws));
    if (groups < 1 || xs[1] % groups != 0 || ws[0] % groups != 0)
        return ember__fail(EMBER_ERR_ARG, "%s: groups = %lld must divide the input channels %lld and the output "
                           "channels %lld (input %s, weight %s)", op, (long long)groups, (long long)xs[1],
                           (long long)ws[0], ember__shape_str(sx, 4, xs), ember__shape_str(sw, 4, ws));
    if (ws[1] * groups != xs[1])
        return ember__fail(EMBER_ERR_SHAPE, "%s: input %s has %lld channels but weight %s with groups = %lld "
                           "expects %lld", op, ember__shape_str(sx, 4, xs), (long long)xs[1],
                           ember__shape_str(sw, 4, ws), (long long)groups, (long long)(ws[1] * groups));
    g->N = xs[0], g->C = xs[1], g->H = xs[2], g->W = xs[3];
    g->O = ws[0], g->kH = ws[2], g->kW = ws[3], g->G = groups;
    g->sh = st[0], g->sw = st[1], g->ph = pd[0], g->pw = pd[1], g->dh = dl[0], g->dw = dl[1];
    if (g->kH < 1 || g->kW < 1)
        return ember__fail(EMBER_ERR_SHAPE, "%s: weight %s has an empty kernel", op, ember__shape_str(sw, 4, ws));
    g->Ho = nn_out_size(g->H, g->kH, g->sh, g->ph, g->dh);
    g->Wo = nn_out_size(g->W, g->kW, g->sw, g->pw, g->dw);
    if (g->Ho < 1 || g->Wo < 1)
        return ember__fail(EMBER_ERR_SHAPE, "%s: input %s padded by {%lld, %lld} is smaller than the dilated "
                           "kernel of weight %s", op, ember__shape_str(sx, 4, xs), (long long)g->ph,
                           (long long)g->pw, ember__shape_str(sw, 4, ws));
    g->Cg = g->C / groups, g->Og = g->O / groups;
    g->nhwc = 0;
    g->K = g->Cg * g->kH * g->kW;
    int64_t plane, cols;   /* im2col's column count per sample, K H' W', must be a size */
    if (__builtin_mul_overflow(g->Ho, g->Wo, &plane) || __builtin_mul_overflow(g->K, plane, &cols) ||
        cols > ((int64_t)1 << 50))
        return ember__fail(EMBER_ERR_SHAPE, "%s: input %s and weight %s give %lld x %lld outputs per channel, "
                           "too many to convolve", op, ember__shape_str(sx, 4, xs), ember__shape_str(sw, 4, ws),
                           (long long)g->Ho, (long long)g->Wo);
    return EMBER_OK;
}

/* samples per chunk so that K x (nb H' W') stays near CHUNK_ELEMS */
static int64_t chunk_of(const conv_geom *g)
{
    int64_t per = g->K * g->Ho * g->Wo;
    int64_t nb = per > 0 ? CHUNK_ELEMS / per : g->N;
    if (nb < 1) nb = 1;
    return nb < g->N ? nb : g->N;
}

/* ------------------------------------------------------------------ im2col / col2im
   cols row r = (c kH + i) kW + j of group gi, column (n H' + oh) W' + ow holds
   x[n0 + n, gi Cg + c, oh sh - ph + i dh, ow sw - pw + j dw] (0 outside). */

typedef struct {
    const conv_geom *g;
    int dt;
    char *x;         /* contiguous input (N, C, H, W) */
    char *cols;      /* K x L */
    int64_t n0, nb, gi;
} unfold_ctx;

/* conv.h */
void ember__conv_valid_cols(const conv_geom *g, int64_t j, int64_t *lo, int64_t *hi)
{
    int64_t off = j * g->dw - g->pw;   /* iw = ow sw + off */
    int64_t a = off >= 0 ? 0 : (-off + g->sw - 1) / g->sw;
    int64_t b = g->W - 1 - off < 0 ? 0 : (g->W - 1 - off) / g->sw + 1;
    if (b > g->Wo) b = g->Wo;
    if (a > b) a = b;
    *lo = a;
    *hi = b;
}

/* With unit strides and an output as wide as the input (a "same" convolution),
   row (i, j) of the columns is the input plane shifted by one flat offset,
   (i dh - ph) W + (j dw - pw), except in the kernel's padding: the output rows
   whose input row is outside the plane, and in the other rows the columns that
   the shift wraps into the neighbouring row. So one copy (or one add) of the
   whole plane and a fix-up of those few columns replace a short copy per row. */
static bool is_plane_shift(const conv_geom *g) { return g->sh == 1 && g->sw == 1 && g->Wo == g->W; }

/* The fix-up loops zero one or two elements a row: GCC would make each a call
   to memset, which costs more than the stores. */
#if defined(__GNUC__) && !defined(__clang__)
#define SMALL_LOOPS __attribute__((optimize("no-tree-loop-distribute-patterns")))
#else
#define SMALL_LOOPS
#endif

/* Where row (i, j) of the columns comes from in the plane shift: source index =
   column index + shift; the output rows [r0, r1) read an input row inside the
   plane; within them [a, b) is the flat span whose source lies inside the
   plane, and the columns [lo, hi) of each row are the ones that did not wrap. */
typedef struct {
    int64_t shift, r0, r1, a, b, lo, hi;
} plane_shift;

static void plane_shift_of(const conv_geom *g, int64_t i, int64_t j, plane_shift *ps)
{
    const int64_t W = g->W, oi = i * g->dh - g->ph;
    ps->shift = oi * W + j * g->dw - g->pw;
    int64_t r0 = oi < 0 ? -oi : 0, r1 = g->H - oi < g->Ho ? g->H - oi : g->Ho;
    if (r0 > g->Ho) r0 = g->Ho;   /* padding taller than the output */
    if (r1 < r0) r1 = r0;
    int64_t a = r0 * W, b = r1 * W;
    if (a < -ps->shift) a = -ps->shift;
    if (b > g->H * W - ps->shift) b = g->H * W - ps->shift;
    if (b < a) a = b = r0 * W;   /* nothing inside */
    ps->r0 = r0, ps->r1 = r1, ps->a = a, ps->b = b;
    ember__conv_valid_cols(g, j, &ps->lo, &ps->hi);
}

#define DEFINE_UNFOLD(T, SUFFIX)                                                               \
    /* zeroes the columns the shift wrapped into the neighbouring row */                     \
    SMALL_LOOPS static void zero_wrapped_##SUFFIX(T *d, int64_t W, const plane_shift *ps)     \
    {                                                                                          \
        for (int64_t oh = ps->r0; oh < ps->r1; oh++) {                                         \
            for (int64_t ow = 0; ow < ps->lo; ow++) d[oh * W + ow] = 0;                        \
            for (int64_t ow = ps->hi; ow < W; ow++) d[oh * W + ow] = 0;                        \
        }                                                                                      \
    }                                                                                          \
    /* one (channel, i, j) row of the columns for one sample, by the plane shift */          \
    static void im2col_shift_##SUFFIX(const conv_geom *g, const T *restrict plane, T *restrict d, \
                                      int64_t i, int64_t j)                                    \
    {                                                                                          \
        plane_shift ps;                                                                        \
        plane_shift_of(g, i, j, &ps);                                                          \
        memset(d, 0, sizeof(T) * (size_t)ps.a);                                                \
        if (ps.b > ps.a) memcpy(d + ps.a, plane + (ps.a + ps.shift), sizeof(T) * (size_t)(ps.b - ps.a)); \
        memset(d + ps.b, 0, sizeof(T) * (size_t)(g->Ho * g->W - ps.b));                        \
        zero_wrapped_##SUFFIX(d, g->W, &ps);                                                   \
    }                                                                                          \
    /* adds one row of the columns into its input plane; the wrapped columns are zeroed in   \
       the (scratch) columns first so that the whole span can be added in one loop */        \
    static void col2im_shift_##SUFFIX(const conv_geom *g, T *restrict plane, T *restrict s,   \
                                      int64_t i, int64_t j)                                    \
    {                                                                                          \
        plane_shift ps;                                                                        \
        plane_shift_of(g, i, j, &ps);                                                          \
        zero_wrapped_##SUFFIX(s, g->W, &ps);                                                   \
        if (ps.b <= ps.a) return;                                                              \
        T *restrict p = plane + (ps.a + ps.shift);   /* input position of column a */         \
        const T *restrict q = s + ps.a;                                                        \
        for (int64_t k = 0; k < ps.b - ps.a; k++) p[k] += q[k];                                \
    }                                                                                          \
    static void im2col_##SUFFIX(const unfold_ctx *u, int64_t r0, int64_t r1)                   \
    {                                                                                          \
        const conv_geom *g = u->g;                                                             \
        const int64_t HW = g->Ho * g->Wo, L = u->nb * HW;                                      \
        const bool shift = is_plane_shift(g);                                                  \
        for (int64_t r = r0; r < r1; r++) {                                                    \
            int64_t j = r % g->kW, i = (r / g->kW) % g->kH, c = r / (g->kW * g->kH);           \
            int64_t lo, hi, off = j * g->dw - g->pw;                                           \
            ember__conv_valid_cols(g, j, &lo, &hi);                                                        \
            T *dst = (T *)u->cols + r * L;                                                     \
            for (int64_t n = 0; n < u->nb; n++) {                                              \
                const T *plane = (const T *)u->x + ((u->n0 + n) * g->C + u->gi * g->Cg + c) * g->H * g->W; \
                if (shift) {                                                                   \
                    im2col_shift_##SUFFIX(g, plane, dst + n * HW, i, j);                       \
                    continue;                                                                  \
                }                                                                              \
                for (int64_t oh = 0; oh < g->Ho; oh++) {                                       \
                    int64_t ih = oh * g->sh - g->ph + i * g->dh;                               \
                    T *d = dst + n * HW + oh * g->Wo;                                          \
                    if (ih < 0 || ih >= g->H) {                                                \
                        memset(d, 0, sizeof(T) * (size_t)g->Wo);                               \
                        continue;                                                              \
                    }                                                                          \
                    const T *row = plane + ih * g->W;                                          \
                    for (int64_t ow = 0; ow < lo; ow++) d[ow] = 0;                             \
                    if (g->sw == 1) memcpy(d + lo, row + (off + lo), sizeof(T) * (size_t)(hi - lo)); \
                    else                                                                       \
                        for (int64_t ow = lo; ow < hi; ow++) d[ow] = row[off + ow * g->sw];    \
                    for (int64_t ow = hi; ow < g->Wo; ow++) d[ow] = 0;                         \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    /* adds cols back into x; one task owns whole channels, so no two write one plane */      \
    static void col2im_##SUFFIX(const unfold_ctx *u, int64_t c0, int64_t c1)                   \
    {                                                                                          \
        const conv_geom *g = u->g;                                                             \
        const int64_t HW = g->Ho * g->Wo, L = u->nb * HW;                                      \
        const bool shift = is_plane_shift(g);                                                  \
        for (int64_t c = c0; c < c1; c++)                                                      \
            for (int64_t i = 0; i < g->kH; i++)                                                \
                for (int64_t j = 0; j < g->kW; j++) {                                          \
                    int64_t lo, hi, off = j * g->dw - g->pw;                                   \
                    ember__conv_valid_cols(g, j, &lo, &hi);                                                \
                    T *src = (T *)u->cols + ((c * g->kH + i) * g->kW + j) * L;                 \
                    for (int64_t n = 0; n < u->nb; n++) {                                      \
                        T *plane = (T *)u->x + ((u->n0 + n) * g->C + u->gi * g->Cg + c) * g->H * g->W; \
                        if (shift) {                                                           \
                            col2im_shift_##SUFFIX(g, plane, src + n * HW, i, j);               \
                            continue;                                                          \
                        }                                                                      \
                        for (int64_t oh = 0; oh < g->Ho; oh++) {                               \
                            int64_t ih = oh * g->sh - g->ph + i * g->dh;                       \
                            if (ih < 0 || ih >= g->H) continue;                                \
                            const T *restrict s = src + n * HW + oh * g->Wo;                   \
                            T *restrict row = plane + ih * g->W;                               \
                            if (g->sw == 1)                                                    \
                                for (int64_t ow = lo; ow < hi; ow++) row[off + ow] += s[ow];   \
                            else                                                               \
                                for (int64_t ow = lo; ow < hi; ow++) row[off + ow * g->sw] += s[ow]; \
                        }                                                                      \
                    }                                                                          \
                }                                                                              \
    }

DEFINE_UNFOLD(float, f32)
DEFINE_UNFOLD(double, f64)

static void im2col_range(void *ctx, int64_t r0, int64_t r1)
{
    const unfold_ctx *u = ctx;
    if (u->dt == EMBER_FLOAT32) im2col_f32(u, r0, r1);
    else im2col_f64(u, r0, r1);
}

static void col2im_range(void *ctx, int64_t c0, int64_t c1)
{
    const unfold_ctx *u = ctx;
    if (u->dt == EMBER_FLOAT32) col2im_f32(u, c0, c1);
    else col2im_f64(u, c0, c1);
}

static void unfold(unfold_ctx *u)
{
    int64_t L = u->nb * u->g->Ho * u->g->Wo;
    ember__parallel_for(u->g->K, ember__nn_rows_grain(L), im2col_range, u);
}

static void fold(unfold_ctx *u)
{
    int64_t per = u->g->kH * u->g->kW * u->nb * u->g->Ho * u->g->Wo;
    ember__parallel_for(u->g->Cg, ember__nn_rows_grain(per), col2im_range, u);
}

/* (nb, O, HW) <-> (O, nb, HW) block moves between the output layout and the GEMM layout */
static void to_gemm_layout(int es, const char *src, char *dst, int64_t nb, int64_t O, int64_t HW)
{
    for (int64_t n = 0; n < nb; n++)
        for (int64_t o = 0; o < O; o++)
            memcpy(dst + (o * nb + n) * HW * es, src + (n * O + o) * HW * es, (size_t)(HW * es));
}

static void from_gemm_layout(int es, const char *src, char *dst, int64_t nb, int64_t O, int64_t HW)
{
    for (int64_t n = 0; n < nb; n++)
        for (int64_t o = 0; o < O; o++)
            memcpy(dst + (n * O + o) * HW * es, src + (o * nb + n) * HW * es, (size_t)(HW * es));
}

/* 1x1 kernels with unit stride and no padding need no unfolding: the input planes are the columns */
static bool is_pointwise(const conv_geom *g)
{
    return g->kH == 1 && g->kW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0;
}

/* ------------------------------------------------------------------ conv2d */

/* One driver for the three products (conv.h); a and b are the op's inputs. */
/* The batch is split into one task per thread; each task unfolds its own
   chunks and runs its products through gemm.c on the task's thread, with
   OpenBLAS held at one thread meanwhile. On these thin products (a few dozen output channels)
   OpenBLAS's own threading gains little, while independent per-task GEMMs on
   cache-sized chunks use both cores. The weight gradient is summed from one
   accumulator per task, in task order, so results do not depend on timing. */
typedef struct {
    conv_kind kind;
    const conv_geom *g;
    int cdt, es;
    int64_t nbmax, per_task;
    char *X;              /* input (FWD, BWD_WEIGHT) or the input gradient (BWD_INPUT) */
    const char *Wt, *GY;  /* weight; output gradient */
    char *res;
    char **cols, **gl, **acc;
    size_t cols_bytes, gl_bytes;
} conv_job;

/* C (M x N, contiguous) = op(A) op(B) + beta C through gemm.c's entry */
static void product(int dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const char *A, int64_t lda,
                    const char *B, int64_t ldb, double beta, char *C)
{
    const ember__mat a = {A, ta, lda}, b = {B, tb, ldb};
    ember__gemm_run(dt, M, N, K, &a, &b, beta, C);
}

static void conv_chunk(const conv_job *j, int64_t task, int64_t n0, int64_t nb, bool first)
{
    const conv_geom *g = j->g;
    const int es = j->es, cdt = j->cdt;
    const int64_t HW = g->Ho * g->Wo, L = nb * HW;
    const bool pw = is_pointwise(g) && nb == 1;
    /* one sample's (O, HW) block is in the GEMM layout already */
    char *cols = j->cols[task], *gl = nb > 1 ? j->gl[task]
                                   : j->kind == CONV_FWD ? j->res + n0 * g->O * HW * es
                                                         : (char *)j->GY + n0 * g->O * HW * es;
    if (j->kind != CONV_FWD && nb > 1) to_gemm_layout(es, j->GY + n0 * g->O * HW * es, gl, nb, g->O, HW);
    for (int64_t gi = 0; gi < g->G; gi++) {
        unfold_ctx u = {g, cdt, j->X, cols, n0, nb, gi};
        char *colm = pw ? j->X + (n0 * g->C + gi * g->Cg) * HW * es : cols;
        char *glg = gl + gi * g->Og * L * es;
        const char *wg = j->Wt ? j->Wt + gi * g->Og * g->K * es : NULL;
        switch (j->kind) {
        case CONV_FWD:   /* y_g (Og x L) = w_g (Og x K) cols (K x L) */
            if (!pw) unfold(&u);
            product(cdt, false, false, g->Og, L, g->K, wg, g->K, colm, L, 0.0, glg);
            break;
        case CONV_BWD_INPUT:   /* cols (K x L) = w_g^T gy_g, folded back into gx */
            if (pw) {
                product(cdt, true, false, g->K, L, g->Og, wg, g->K, glg, L, 1.0, colm);
            } else {
                product(cdt, true, false, g->K, L, g->Og, wg, g->K, glg, L, 0.0, cols);
                fold(&u);
            }
            break;
        case CONV_BWD_WEIGHT:   /* gw_g (Og x K) += gy_g (Og x L) cols^T */
            if (!pw) unfold(&u);
            product(cdt, false, true, g->Og, g->K, L, glg, L, colm, L, first ? 0.0 : 1.0,
                    j->acc[task] + gi * g->Og * g->K * es);
            break;
        }
    }
    if (j->kind == CONV_FWD && nb > 1) from_gemm_layout(es, gl, j->res + n0 * g->O * HW * es, nb, g->O, HW);
}

static void conv_tasks(void *ctx, int64_t t0, int64_t t1)
{
    const conv_job *j = ctx;
    for (int64_t t = t0; t < t1; t++) {
        int64_t lo = t * j->per_task, hi = lo + j->per_task < j->g->N ? lo + j->per_task : j->g->N;
        for (int64_t n0 = lo; n0 < hi; n0 += j->nbmax)
            conv_chunk(j, t, n0, hi - n0 < j->nbmax ? hi - n0 : j->nbmax, n0 == lo);
    }
}

#define CONV_TASKS 8

/* A 1x1 convolution of 1x1 planes (after global pooling: squeeze-and-excite
   gates, a classifier written as a convolution) is one matrix product over
   the whole batch, x (N, C) and y (N, O) as they are: y = x w^T, gx = gy w,
   gw = gy^T x (the sum over the batch inside the product, split by
   gemm.c by shape alone). */
static bool is_pointwise_1x1(const conv_geom *g) { return is_pointwise(g) && g->H * g->W == 1 && g->G == 1; }

static void pointwise_batch(conv_kind kind, const conv_geom *g, int cdt, const char *a, const char *b, char *res)
{
    switch (kind) {
    case CONV_FWD: product(cdt, false, true, g->N, g->O, g->C, a, g->C, b, g->C, 0.0, res); break;
    case CONV_BWD_INPUT: product(cdt, false, false, g->N, g->C, g->O, a, g->O, b, g->C, 0.0, res); break;
    case CONV_BWD_WEIGHT: product(cdt, true, false, g->O, g->C, g->N, b, g->O, a, g->C, 0.0, res); break;
    }
}

static int conv_run(conv_kind kind, const conv_geom *g, int cdt, ember_tensor *a, ember_tensor *b, ember_tensor *res)
{
    const int es = ember_dtype_size(cdt);
    const int64_t HW = g->Ho * g->Wo;
    if (is_pointwise_1x1(g)) {
        pointwise_batch(kind, g, cdt, ember__ptr(a), ember__ptr(b), ember__ptr(res));
        return EMBER_OK;
    }
    /* a number of tasks fixed by the shape, never by the thread count: a
       weight gradient sums the tasks' partial sums in task order, so its
       bits follow the tasks (docs/frame_loop.md, "Threads"); each task's
       products run on one OpenBLAS thread */
    int64_t ntasks = CONV_TASKS;
    if (ntasks > g->N) ntasks = g->N;
    /* a batch whose columns fit in one chunk (small planes: ResNet's last
       stages) is one task, whose products gemm.c splits over the threads
       by shape: a weight gradient then sums over the batch inside one
       product, instead of in eight O x K accumulators added after */
    if (!__builtin_mul_overflow(g->K, g->N * HW, &(int64_t){0}) && g->K * g->N * HW <= CHUNK_ELEMS) ntasks = 1;
    int64_t per_task = (g->N + ntasks - 1) / ntasks;
    ntasks = (g->N + per_task - 1) / per_task;
    /* a 1x1 convolution runs one product per sample, on the input planes as they are */
    const bool pw = is_pointwise(g);
    int64_t nbmax = pw ? 1 : chunk_of(g);
    if (nbmax > per_task) nbmax = per_task;
    char *cols[16] = {0}, *gl[16] = {0}, *acc[16] = {0};
    size_t cols_bytes = pw ? 0 : (size_t)(g->K * nbmax * HW * es);
    size_t gl_bytes = nbmax > 1 ? (size_t)(g->O * nbmax * HW * es) : 0;
    size_t acc_bytes = (size_t)(g->O * g->K * es);
    int rc = EMBER_OK;
    for (int64_t t = 0; t < ntasks; t++) {
        if (cols_bytes && !(cols[t] = ember__alloc(cols_bytes))) goto oom;
        if (gl_bytes && !(gl[t] = ember__alloc(gl_bytes))) goto oom;
        if (kind == CONV_BWD_WEIGHT) {
            if (t == 0) acc[t] = ember__ptr(res);
            else if (!(acc[t] = ember__alloc(acc_bytes))) goto oom;
        }
    }
    conv_job j = {kind, g, cdt, es, nbmax, per_task, kind == CONV_BWD_INPUT ? ember__ptr(res) : ember__ptr(a),
                  kind == CONV_BWD_WEIGHT ? NULL : ember__ptr(b),
                  kind == CONV_BWD_INPUT ? ember__ptr(a) : kind == CONV_BWD_WEIGHT ? ember__ptr(b) : NULL,
                  ember__ptr(res), cols, gl, acc, cols_bytes, gl_bytes};
    if (kind == CONV_BWD_INPUT) memset(ember__ptr(res), 0, (size_t)(res->numel * es));
    if (ntasks == 1) conv_tasks(&j, 0, 1);   /* on this thread, so gemm.c may use the pool */
    else ember__parallel_for(ntasks, 1, conv_tasks, &j);
    if (kind == CONV_BWD_WEIGHT)
        for (int64_t t = 1; t < ntasks; t++) {
            int64_t n = g->O * g->K;
            if (cdt == EMBER_FLOAT32) {
                float *d = (float *)acc[0];
                const float *src = (const float *)acc[t];
                for (int64_t i = 0; i < n; i++) d[i] += src[i];
            } else {
                double *d = (double *)acc[0];
                const double *src = (const double *)acc[t];
                for (int64_t i = 0; i < n; i++) d[i] += src[i];
            }
        }
    goto done;
oom:
    rc = ember__fail(EMBER_ERR_OOM, "conv2d: out of memory for a %lld x %lld column buffer", (long long)g->K,
                     (long long)(nbmax * HW));
done:
    for (int64_t t = 0; t < 16; t++) {
        if (cols[t]) ember__free(cols[t], cols_bytes);
        if (gl[t]) ember__free(gl[t], gl_bytes);
        if (t > 0 && acc[t]) ember__free(acc[t], acc_bytes);
    }
    return rc;
}

void ember__conv_attrs_unpack(const ember_attrs *at, const int64_t **st, const int64_t **pd, const int64_t **dl)
{
    *st = &at->i[0];
    *pd = &at->i[2];
    *dl = &at->i[4];
}

int ember__conv_bias_check(const char *name, const ember_tensor *b, const ember_tensor *x, int64_t O)
{
    char sb[200], sx[200];
    if (b->ndim != 1 || b->shape[0] != O)
        return ember__fail(EMBER_ERR_SHAPE, "%s: bias must have shape {%lld}, got %s", name, (long long)O,
                           ember__tshape(sb, b));
    if (b->dtype != x->dtype)
        return ember__fail(EMBER_ERR_DTYPE, "%s: bias must share the input's dtype, got %s %s and %s %s", name,
                           ember_dtype_name(b->dtype), ember__tshape(sb, b), ember_dtype_name(x->dtype),
                           ember__tshape(sx, x));
    return EMBER_OK;
}

/* res = relu(res + bias), bias one per channel of res (N, O, H', W'): NaN stays NaN */
#define BIAS_RELU(T)                                                                           \
    static void bias_relu_##T(T *res, const T *bias, int64_t planes, int64_t O, int64_t HW)    \
    {                                                                                          \
        for (int64_t p = 0; p < planes; p++) {                                                 \
            T *r = res + p * HW, v = bias[p % O];                                              \
            for (int64_t i = 0; i < HW; i++) r[i] = r[i] + v < 0 ? 0 : r[i] + v;               \
        }                                                                                      \
    }
BIAS_RELU(float)
BIAS_RELU(double)

static void bias_relu(ember_tensor *res, const ember_tensor *bias, const conv_geom *g)
{
    if (res->dtype == EMBER_FLOAT32)
        bias_relu_float((float *)ember__ptr(res), (const float *)ember__ptr(bias), g->N * g->O, g->O, g->Ho * g->Wo);
    else
        bias_relu_double((double *)ember__ptr(res), (const double *)ember__ptr(bias), g->N * g->O, g->O, g->Ho * g->Wo);
}

static conv_kind kind_of(int op)
{
    return op == EMBER_OP_CONV2D || op == EMBER_OP_CONV2D_RELU || op == EMBER_OP_CONV2D_RELU_POOL ? CONV_FWD
           : op == EMBER_OP_CONV2D_BACKWARD_INPUT ? CONV_BWD_INPUT : CONV_BWD_WEIGHT;
}

int ember__conv_plan_make(int op, ember_tensor *const *in, const ember_attrs *at, conv_geom *g, int64_t *rs)
{
    const char *name = ember__ops[op].name;
    const conv_kind kind = kind_of(op);
    const int64_t *st, *pd, *dl;
    ember__conv_attrs_unpack(at, &st, &pd, &dl);
    ember_tensor *a = in[0], *b = in[1];
    char sa[200], sb[200];
    EMBER_TRY(ember__nn_need_4d(name, kind == CONV_BWD_INPUT ? "grad_output" : "input", a));
    EMBER_TRY(ember__nn_need_4d(name, kind == CONV_FWD ? "weight" : kind == CONV_BWD_INPUT ? "weight" : "grad_output", b));
    EMBER_TRY(ember__nn_need_float(name, "input", a));
    EMBER_TRY(ember__nn_need_float(name, "weight", b));
    if (a->dtype != b->dtype)
        return ember__fail(EMBER_ERR_DTYPE, "%s: operands must share a dtype, got %s %s and %s %s", name,
                           ember_dtype_name(a->dtype), ember__tshape(sa, a), ember_dtype_name(b->dtype),
                           ember__tshape(sb, b));
    int64_t xs[4], ws[4], ys[4];
    switch (kind) {
    case CONV_FWD:
        memcpy(xs, a->shape, sizeof xs);
        memcpy(ws, b->shape, sizeof ws);
        break;
    case CONV_BWD_INPUT:
        EMBER_TRY(ember__nn_attr_shape(name, at, xs));
        memcpy(ws, b->shape, sizeof ws);
        break;
    case CONV_BWD_WEIGHT:
        memcpy(xs, a->shape, sizeof xs);
        EMBER_TRY(ember__nn_attr_shape(name, at, ws));
        break;
    }
    EMBER_TRY(ember__conv_geom_init(name, xs, ws, st, pd, dl, at->i[6], g));
    ys[0] = g->N, ys[1] = g->O, ys[2] = g->Ho, ys[3] = g->Wo;
    const int64_t *gys = kind == CONV_BWD_INPUT ? a->shape : kind == CONV_BWD_WEIGHT ? b->shape : NULL;
    if (gys && memcmp(gys, ys, sizeof ys) != 0)
        return ember__fail(EMBER_ERR_SHAPE, "%s: grad_output has shape %s but the convolution gives "
                           "{%lld, %lld, %lld, %lld}", name, ember__tshape(sa, kind == CONV_BWD_INPUT ? a : b),
                           (long long)ys[0], (long long)ys[1], (long long)ys[2], (long long)ys[3]);
    memcpy(rs, kind == CONV_FWD ? ys : kind == CONV_BWD_INPUT ? xs : ws, sizeof ys);
    return EMBER_OK;
}

/* conv2d_relu off the CPU: conv2d, the bias added as a {1, O, 1, 1} view, relu */
static int conv2d_relu_composed(ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    ember_tensor *y = NULL, *bv = NULL, *z = NULL;
    ember_attrs va = {{4, 1, in[2]->shape[0], 1, 1}, {0}};
    int rc = EMBER_OK;
    EMBER_CHECK(ember__run_nograd(EMBER_OP_CONV2D, 2, in, at, &y));
    EMBER_CHECK(ember__run_nograd(EMBER_OP_VIEW, 1, &in[2], &va, &bv));
    ember_tensor *yb[2] = {y, bv};
    EMBER_CHECK(ember__run_nograd(EMBER_OP_ADD, 2, yb, NULL, &z));
    rc = ember__run_nograd(EMBER_OP_RELU, 1, &z, NULL, out);
done:
    ember_tensor_release(y);
    ember_tensor_release(bv);
    ember_tensor_release(z);
    return rc;
}

/* conv2d, conv2d_relu and conv2d's two adjoints: one driver for the three
   products (conv.h); conv2d_relu adds its bias and cuts at zero in the
   product's output pass (a oneDNN post-op, or one pass after ember's kernels) */
/* the product on contiguous operands into res: oneDNN first (float32), where
   it is faster (docs/nn.md, "Depthwise, 1x1 and grouped convolutions"; not
   at 1x1 convolutions of 1x1 planes, one product here), which also adds
   conv2d_relu's bias and cuts at zero (*post_done); else ember's kernels */
static int run_product(conv_kind kind, const conv_geom *g, int cdt, ember_tensor *ca, ember_tensor *cb,
                       const ember_tensor *w, ember_tensor *cbias, ember_tensor *res, bool *post_done)
{
    *post_done = cdt == EMBER_FLOAT32 && !is_pointwise_1x1(g) &&
                 ember__dnnl_conv(kind, g, (const float *)ember__ptr(ca), (const float *)ember__ptr(cb), w,
                                  cbias ? (const float *)ember__ptr(cbias) : NULL, (float *)ember__ptr(res));
    if (*post_done) return EMBER_OK;
    if (ember__conv_is_depthwise(g)) return ember__conv_depthwise(kind, g, cdt, ca, cb, res);
    return conv_run(kind, g, cdt, ca, cb, res);
}

/* run_product on the live taps only where some taps only read padding
   (conv_taps.c): the weight (FWD, BWD_INPUT) cut to them, or the weight
   gradient computed for them and the dead taps' left 0; w the weight as the
   caller holds it, whose layout oneDNN may keep (NULL: none, a weight gradient) */
static int run_live_taps(conv_kind kind, const conv_geom *g, int cdt, ember_tensor *ca, ember_tensor *cb,
                         const ember_tensor *w, ember_tensor *cbias, ember_tensor *res, bool *post_done)
{
    conv_geom gc;
    int64_t i0, j0;
    if (!ember__conv_live_taps(g, &gc, &i0, &j0))
        return run_product(kind, g, cdt, ca, cb, w, cbias, res, post_done);
    const int es = ember_dtype_size(cdt);
    const int64_t ws[4] = {g->O, g->Cg, gc.kH, gc.kW};
    ember_tensor *wc = NULL;
    int rc;
    if (kind == CONV_BWD_WEIGHT) {
        EMBER_TRY(ember__new(4, ws, cdt, EMBER_CPU, &wc));
        rc = run_product(kind, &gc, cdt, ca, cb, NULL, NULL, wc, post_done);
        if (rc >= 0) {
            memset(ember__ptr(res), 0, (size_t)(res->numel * es));
            ember__conv_crop(g, &gc, i0, j0, es, ember__ptr(res), ember__ptr(wc), true);
        }
    } else {   /* the cut weight kept on w's where it can be (conv_taps.c): then its own layout too */
        bool kept;
        EMBER_TRY(ember__conv_live_weight(g, &gc, i0, j0, cdt, w, cb, &wc, &kept));
        rc = run_product(kind, &gc, cdt, ca, wc, kept ? wc : NULL, cbias, res, post_done);
    }
    ember_tensor_release(wc);
    return rc;
}

/* the product on a and b into res (contiguous, the product's shape) in
   ember's layout: contiguous copies where they are not, the bias and ReLU
   of conv2d_relu (cbias) applied */
static int product_nchw(conv_kind kind, const conv_geom *g, int cdt, ember_tensor *a, ember_tensor *b,
                        ember_tensor *cbias, ember_tensor *res)
{
    ember_tensor *ca = NULL, *cb = NULL;
    int rc = EMBER_OK;
    bool post_done;
    EMBER_CHECK(ember__contiguous_as(a, cdt, &ca));
    EMBER_CHECK(ember__contiguous_as(b, cdt, &cb));
    EMBER_CHECK(run_live_taps(kind, g, cdt, ca, cb, kind == CONV_BWD_WEIGHT ? NULL : b, cbias, res, &post_done));
    if (!post_done && cbias) bias_relu(res, cbias, g);
done:
    ember_tensor_release(ca);
    ember_tensor_release(cb);
    return rc;
}

/* The same into res channels_last (nhwc.c; a weight gradient (O, kH, kW,
   C/G)): oneDNN reads and writes the activations as they are (float32, and
   bfloat16 operands where dt is and the CPU has its kernels), and a weight
   as it is, (O, kH, kW, C/G) or (O, C/G, kH, kW) (a strided one copied);
   elsewhere ember's kernels run on NCHW copies and the result is copied
   into res, once (docs/nn.md). */
static int product_nhwc(conv_kind kind, const conv_geom *g, int dt, int cdt, ember_tensor *a, ember_tensor *b,
                        ember_tensor *cbias, ember_tensor *res)
{
    const bool b_weight = kind != CONV_BWD_WEIGHT, w_ohwi = b_weight ? ember__is_nhwc(b) : true;
    const bool b_nhwc = b_weight ? w_ohwi : true;
    conv_geom gn = *g;
    gn.nhwc = NHWC_ACT | (w_ohwi ? NHWC_WEIGHT : 0);
    ember_tensor *ca = NULL, *cb = NULL, *tmp = NULL;
    int rc = EMBER_OK;
    if (dt == EMBER_BFLOAT16 && !cbias && a->dtype == b->dtype) {
        EMBER_CHECK(ember__layout_as(a, dt, true, &ca));
        EMBER_CHECK(ember__layout_as(b, dt, b_nhwc, &cb));
        if (ember__dnnl_conv_bf16(kind, &gn, ember__ptr(ca), ember__ptr(cb), b_weight ? b : NULL,
                                  (float *)ember__ptr(res)))
            goto done;
        ember_tensor_release(ca);
        ember_tensor_release(cb);
        ca = cb = NULL;
    }
    if (cdt == EMBER_FLOAT32 && !is_pointwise_1x1(g)) {
        EMBER_CHECK(ember__layout_as(a, cdt, true, &ca));
        EMBER_CHECK(ember__layout_as(b, cdt, b_nhwc, &cb));
        if (ember__dnnl_conv(kind, &gn, (const float *)ember__ptr(ca), (const float *)ember__ptr(cb),
                             b_weight ? b : NULL, cbias ? (const float *)ember__ptr(cbias) : NULL,
                             (float *)ember__ptr(res)))
            goto done;
    }
    EMBER_CHECK(ember__new(4, res->shape, cdt, EMBER_CPU, &tmp));
    EMBER_CHECK(product_nchw(kind, g, cdt, a, b, cbias, tmp));
    rc = ember__copy_kernel(res, tmp);
done:
    ember_tensor_release(ca);
    ember_tensor_release(cb);
    ember_tensor_release(tmp);
    return rc;
}

/* Whether a product follows the channels_last layout: where either operand
   is channels_last (and not also contiguous), as PyTorch's convolutions do;
   its result is then channels_last too. */
static bool wants_nhwc(const ember_tensor *a, const ember_tensor *b)
{
    return a->storage->device == EMBER_CPU && (ember__is_nhwc(a) || ember__is_nhwc(b));
}

int fwd_conv2d(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const conv_kind kind = kind_of(op);
    ember_tensor *a = in[0], *b = in[1];
    conv_geom g;
    int64_t rs[4];
    EMBER_TRY(ember__conv_plan_make(op, in, at, &g, rs));
    const bool fused = op == EMBER_OP_CONV2D_RELU;
    if (fused) {
        EMBER_TRY(ember__conv_bias_check(ember__ops[op].name, in[2], a, g.O));
        if (a->storage->device != EMBER_CPU) return conv2d_relu_composed(in, at, out);
    }
    const bool nhwc = wants_nhwc(a, b);
    int dt = a->dtype, cdt = nn_compute_dtype(dt);
    ember_tensor *ca = NULL, *cb = NULL, *cbias = NULL, *res = NULL;
    int rc = EMBER_OK;
    EMBER_CHECK(nhwc ? ember__new_nhwc(rs, cdt, &res) : ember__new(4, rs, cdt, EMBER_CPU, &res));
    if (res->numel == 0) goto ok;
    if (fused) EMBER_CHECK(ember__contiguous_as(in[2], cdt, &cbias));
    if (g.N == 0 || g.K == 0 || g.Og == 0) {   /* an empty sum */
        ember__fill_raw(res, 0);
        if (cbias) bias_relu(res, cbias, &g);   /* NCHW: an empty sum has no channels, nothing is channels_last */
        goto ok;
    }
    if (nhwc) {
        EMBER_CHECK(product_nhwc(kind, &g, dt, cdt, a, b, cbias, res));
        goto ok;
    }
    /* bfloat16 operands straight into oneDNN's bfloat16 kernels where the
       CPU has them (a float32 result, rounded to bfloat16 by nn_finish) */
    if (dt == EMBER_BFLOAT16 && !fused && a->dtype == b->dtype) {
        EMBER_CHECK(ember__contiguous_as(a, dt, &ca));
        EMBER_CHECK(ember__contiguous_as(b, dt, &cb));
        if (ember__dnnl_conv_bf16(kind, &g, ember__ptr(ca), ember__ptr(cb), kind == CONV_BWD_WEIGHT ? NULL : b,
                                  (float *)ember__ptr(res)))
            goto ok;
    }
    EMBER_CHECK(product_nchw(kind, &g, cdt, a, b, cbias, res));
ok:
    rc = ember__nn_finish_layout(res, dt, nhwc, out);
    res = NULL;
done:
    ember_tensor_release(ca);
    ember_tensor_release(cb);
    ember_tensor_release(cbias);
    ember_tensor_release(res);
    return rc;
}

/* ------------------------------------------------------------------ public entry points */
/* attrs from stride, padding, dilation, groups and, for an adjoint, the shape
   it produces; c is conv2d_relu's bias (NULL for the others) */
static int conv_dispatch(int op, ember_tensor *a, ember_tensor *b, ember_tensor *c, const int64_t *shape,
                         const int64_t *stride, const int64_t *padding, const int64_t *dilation, int64_t groups,
                         ember_tensor **out)
{
    const char *name = ember__ops[op].name;
    NEED_ARGS(name, out, stride, padding, dilation);
    ember_attrs at;
    ember__nn_set_pairs(&at, stride, padding, dilation);
    at.i[6] = groups;
    if (op != EMBER_OP_CONV2D && op != EMBER_OP_CONV2D_RELU) EMBER_TRY(ember__nn_set_shape(&at, name, shape));
    ember_tensor *in[3] = {a, b, c};
    return ember__dispatch(op, op == EMBER_OP_CONV2D_RELU ? 3 : 2, in, &at, out);
}

int ember_conv2d(ember_tensor *x, ember_tensor *w, const int64_t *stride, const int64_t *padding,
                 const int64_t *dilation, int64_t groups, ember_tensor **out)
{
    return conv_dispatch(EMBER_OP_CONV2D, x, w, NULL, NULL, stride, padding, dilation, groups, out);
}

int ember_conv2d_relu(ember_tensor *x, ember_tensor *w, ember_tensor *b, const int64_t *stride,
                      const int64_t *padding, const int64_t *dilation, int64_t groups, ember_tensor **out)
{
    return conv_dispatch(EMBER_OP_CONV2D_RELU, x, w, b, NULL, stride, padding, dilation, groups, out);
}

int ember_conv2d_relu_max_pool2d(ember_tensor *x, ember_tensor *w, ember_tensor *b, const int64_t *stride,
                                 const int64_t *padding, const int64_t *dilation, int64_t groups,
                                 const int64_t *kernel, const int64_t *pool_stride, ember_tensor **values,
                                 ember_tensor **indices)
{
    const char *name = "conv2d_relu_max_pool2d";
    NEED_ARGS(name, values, stride, padding, dilation, kernel, pool_stride);
    ember_attrs at;
    ember__nn_set_pairs(&at, stride, padding, dilation);
    at.i[6] = groups;
    at.i[12] = kernel[0], at.i[13] = kernel[1], at.i[14] = pool_stride[0], at.i[15] = pool_stride[1];
    ember_tensor *in[3] = {x, w, b}, *res[2] = {NULL, NULL};
    int rc = ember__dispatch(EMBER_OP_CONV2D_RELU_POOL, 3, in, &at, res);
    *values = res[0];
    if (indices) *indices = res[1];
    else ember_tensor_release(res[1]);
    return rc;
}

int ember_conv2d_backward_input(ember_tensor *g, ember_tensor *w, const int64_t *x_shape, const int64_t *stride,
                                const int64_t *padding, const int64_t *dilation, int64_t groups, ember_tensor **out)
{
    return conv_dispatch(EMBER_OP_CONV2D_BACKWARD_INPUT, g, w, NULL, x_shape, stride, padding, dilation, groups, out);
}

int ember_conv2d_backward_weight(ember_tensor *x, ember_tensor *g, const int64_t *w_shape, const int64_t *stride,
                                 const int64_t *padding, const int64_t *dilation, int64_t groups, ember_tensor **out)
{
    return conv_dispatch(EMBER_OP_CONV2D_BACKWARD_WEIGHT, x, g, NULL, w_shape, stride, padding, dilation, groups, out);
}

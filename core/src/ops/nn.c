/* nn.c: convolution and pooling on the CPU.

   conv2d is im2col + GEMM. A chunk of the batch is unfolded at once into a
   column matrix cols (K = C/groups * kH * kW rows, nb * H' * W' columns), so
   each group is one large GEMM instead of nb small ones; the chunk is sized
   so cols stays near 16M elements. The two adjoints reuse the same unfolding:
   the input gradient is W^T g folded back (col2im), the weight gradient is
   g cols^T summed over chunks. OpenBLAS threads the GEMMs itself; the
   unfolding runs on ember's pool, which sleeps while BLAS works.

   Pooling runs one (n, c) plane per task. max_pool2d returns the flat
   position h * W + w of each maximum within its plane (NaN wins, as in
   PyTorch); avg_pool2d counts padding as zeros. The 2x2 stride-2 float32
   case, the common one, has SSE2 kernels both ways (four windows per step,
   the last step overlapping the one before instead of a scalar tail): on
   64x16x28x28 the forward went 1.48 -> 0.29 ms and the backward 0.56 ->
   0.24-0.30 ms; the scalar loops' selects had become mispredicted branches.

   float32 and float64 compute natively; float16 and bfloat16 compute in
   float32 and round once at the end. Integer inputs are an error. */
#include "ops.h"

#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#ifdef EMBER_HAVE_BLAS
#include <cblas.h>
#endif
#ifdef __SSE2__
#include <emmintrin.h>

/* NaN-aware x > y lane by lane, and a select by mask */
static inline __m128 sse_gt_nan(__m128 x, __m128 y)
{
    return _mm_or_ps(_mm_cmpgt_ps(x, y), _mm_and_ps(_mm_cmpunord_ps(x, x), _mm_cmpord_ps(y, y)));
}
static inline __m128 sse_select(__m128 m, __m128 a, __m128 b) { return _mm_or_ps(_mm_and_ps(m, a), _mm_andnot_ps(m, b)); }
#endif

/* columns of the unfolded matrix per chunk, times its rows */
#define CHUNK_ELEMS (512 * 1024)

/* ------------------------------------------------------------------ helpers */

/* The dtype kernels compute in: float32 for the half types. */
static int compute_dtype(int dt)
{
    return dt == EMBER_FLOAT64 ? EMBER_FLOAT64 : EMBER_FLOAT32;
}

/* t as a contiguous tensor of dtype dt: a new reference (t itself when it already is one). */
static int contiguous_as(ember_tensor *t, int dt, ember_tensor **out)
{
    if (t->dtype == dt && t->is_contiguous) {
        ember_tensor_retain(t);
        *out = t;
        return EMBER_OK;
    }
    ember_tensor *c = NULL;
    EMBER_TRY(ember__new(t->ndim, t->shape, dt, EMBER_CPU, &c));
    int rc = ember__copy_kernel(c, t);
    if (rc < 0) {
        ember_tensor_release(c);
        return rc;
    }
    *out = c;
    return EMBER_OK;
}

/* Converts a float32/float64 result into the caller's dtype (steals res). */
static int finish(ember_tensor *res, int dt, ember_tensor **out)
{
    if (res->dtype == dt) {
        *out = res;
        return EMBER_OK;
    }
    ember_tensor *o = NULL;
    int rc = ember__new(res->ndim, res->shape, dt, EMBER_CPU, &o);
    if (rc == EMBER_OK) rc = ember__copy_kernel(o, res);
    ember_tensor_release(res);
    if (rc < 0) {
        ember_tensor_release(o);
        return rc;
    }
    *out = o;
    return EMBER_OK;
}

static int need_float(const char *op, const char *what, const ember_tensor *t)
{
    if (ember__is_float(t->dtype)) return EMBER_OK;
    char s[200];
    return ember__fail(EMBER_ERR_DTYPE, "%s: %s must be a floating tensor, got %s %s", op, what,
                       ember_dtype_name(t->dtype), ember__tshape(s, t));
}

static int need_4d(const char *op, const char *what, const ember_tensor *t)
{
    if (t->ndim == 4) return EMBER_OK;
    char s[200];
    return ember__fail(EMBER_ERR_SHAPE, "%s: %s must be 4-D (N, C, H, W), got shape %s", op, what,
                       ember__tshape(s, t));
}

/* output extent of a window sweep, or a negative number when the window does not fit */
static int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil)
{
    int64_t span = dil * (k - 1) + 1;
    if (in + 2 * pad < span) return -1;
    return (in + 2 * pad - span) / stride + 1;
}

/* C = alpha op(A) op(B) + beta C, row-major, contiguous operands */
static void gemm(int dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                 const void *B, int64_t ldb, double beta, void *C, int64_t ldc)
{
    if (M == 0 || N == 0) return;
#ifdef EMBER_HAVE_BLAS
    if (dt == EMBER_FLOAT32)
        cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                    (int)K, 1.0f, (const float *)A, (int)lda, (const float *)B, (int)ldb, (float)beta, (float *)C,
                    (int)ldc);
    else
        cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                    (int)K, 1.0, (const double *)A, (int)lda, (const double *)B, (int)ldb, beta, (double *)C,
                    (int)ldc);
#else
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            double s = 0;
            for (int64_t k = 0; k < K; k++) {
                int64_t ai = ta ? k * lda + i : i * lda + k, bi = tb ? j * ldb + k : k * ldb + j;
                s += dt == EMBER_FLOAT32 ? (double)((const float *)A)[ai] * ((const float *)B)[bi]
                                         : ((const double *)A)[ai] * ((const double *)B)[bi];
            }
            if (dt == EMBER_FLOAT32) {
                float *c = (float *)C + i * ldc + j;
                *c = (float)(s + (beta != 0 ? beta * *c : 0));
            } else {
                double *c = (double *)C + i * ldc + j;
                *c = s + (beta != 0 ? beta * *c : 0);
            }
        }
#endif
}

/* ------------------------------------------------------------------ conv geometry */

typedef struct {
    int64_t N, C, H, W;       /* input */
    int64_t O, kH, kW;        /* weight (O, C / G, kH, kW) */
    int64_t G;                /* groups */
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t Ho, Wo;
    int64_t Cg, Og, K;        /* per group: channels in and out, K = Cg kH kW */
} conv_geom;

static int conv_geom_init(const char *op, const int64_t *xs, const int64_t *ws, const int64_t *st,
                          const int64_t *pd, const int64_t *dl, int64_t groups, conv_geom *g)
{
    char sx[200], sw[200];
    snprintf(sx, sizeof sx, "{%lld, %lld, %lld, %lld}", (long long)xs[0], (long long)xs[1], (long long)xs[2],
             (long long)xs[3]);
    snprintf(sw, sizeof sw, "{%lld, %lld, %lld, %lld}", (long long)ws[0], (long long)ws[1], (long long)ws[2],
             (long long)ws[3]);
    if (st[0] < 1 || st[1] < 1 || dl[0] < 1 || dl[1] < 1 || pd[0] < 0 || pd[1] < 0)
        return ember__fail(EMBER_ERR_ARG,
                           "%s: stride {%lld, %lld} and dilation {%lld, %lld} must be positive and padding "
                           "{%lld, %lld} non-negative",
                           op, (long long)st[0], (long long)st[1], (long long)dl[0], (long long)dl[1],
                           (long long)pd[0], (long long)pd[1]);
    if (groups < 1 || xs[1] % groups != 0 || ws[0] % groups != 0)
        return ember__fail(EMBER_ERR_ARG, "%s: groups = %lld must divide the input channels %lld and the output "
                           "channels %lld (input %s, weight %s)", op, (long long)groups, (long long)xs[1],
                           (long long)ws[0], sx, sw);
    if (ws[1] * groups != xs[1])
        return ember__fail(EMBER_ERR_SHAPE, "%s: input %s has %lld channels but weight %s with groups = %lld "
                           "expects %lld", op, sx, (long long)xs[1], sw, (long long)groups,
                           (long long)(ws[1] * groups));
    g->N = xs[0], g->C = xs[1], g->H = xs[2], g->W = xs[3];
    g->O = ws[0], g->kH = ws[2], g->kW = ws[3], g->G = groups;
    g->sh = st[0], g->sw = st[1], g->ph = pd[0], g->pw = pd[1], g->dh = dl[0], g->dw = dl[1];
    if (g->kH < 1 || g->kW < 1)
        return ember__fail(EMBER_ERR_SHAPE, "%s: weight %s has an empty kernel", op, sw);
    g->Ho = out_size(g->H, g->kH, g->sh, g->ph, g->dh);
    g->Wo = out_size(g->W, g->kW, g->sw, g->pw, g->dw);
    if (g->Ho < 1 || g->Wo < 1)
        return ember__fail(EMBER_ERR_SHAPE, "%s: input %s padded by {%lld, %lld} is smaller than the dilated "
                           "kernel of weight %s", op, sx, (long long)g->ph, (long long)g->pw, sw);
    g->Cg = g->C / groups, g->Og = g->O / groups;
    g->K = g->Cg * g->kH * g->kW;
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

/* the output columns ow whose input column ow sw - pw + j dw lies inside [0, W) */
static void valid_cols(const conv_geom *g, int64_t j, int64_t *lo, int64_t *hi)
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
    valid_cols(g, j, &ps->lo, &ps->hi);
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
            valid_cols(g, j, &lo, &hi);                                                        \
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
                    valid_cols(g, j, &lo, &hi);                                                \
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

/* grain in rows so a task moves at least ~32K elements */
static int64_t rows_grain(int64_t row_elems)
{
    int64_t gr = row_elems > 0 ? EMBER_PARALLEL_GRAIN / row_elems : 1;
    return gr < 1 ? 1 : gr;
}

static void unfold(unfold_ctx *u)
{
    int64_t L = u->nb * u->g->Ho * u->g->Wo;
    ember__parallel_for(u->g->K, rows_grain(L), im2col_range, u);
}

static void fold(unfold_ctx *u)
{
    int64_t per = u->g->kH * u->g->kW * u->nb * u->g->Ho * u->g->Wo;
    ember__parallel_for(u->g->Cg, rows_grain(per), col2im_range, u);
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

typedef enum { CONV_FWD, CONV_BWD_INPUT, CONV_BWD_WEIGHT } conv_kind;

/* One driver for the three products. a and b are the op's inputs:
   FWD (x, w) -> y;  BWD_INPUT (gy, w) -> gx;  BWD_WEIGHT (x, gy) -> gw. */
/* The batch is split into one task per thread; each task unfolds its own
   chunks and calls a single-threaded GEMM on them, with OpenBLAS held at one
   thread meanwhile. On these thin products (a few dozen output channels)
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

static void conv_chunk(const conv_job *j, int64_t task, int64_t n0, int64_t nb, bool first)
{
    const conv_geom *g = j->g;
    const int es = j->es, cdt = j->cdt;
    const int64_t HW = g->Ho * g->Wo, L = nb * HW;
    const bool pw = is_pointwise(g) && nb == 1;
    char *cols = j->cols[task], *gl = j->gl[task];
    if (j->kind != CONV_FWD) to_gemm_layout(es, j->GY + n0 * g->O * HW * es, gl, nb, g->O, HW);
    for (int64_t gi = 0; gi < g->G; gi++) {
        unfold_ctx u = {g, cdt, j->X, cols, n0, nb, gi};
        char *colm = pw ? j->X + (n0 * g->C + gi * g->Cg) * HW * es : cols;
        char *glg = gl + gi * g->Og * L * es;
        const char *wg = j->Wt ? j->Wt + gi * g->Og * g->K * es : NULL;
        switch (j->kind) {
        case CONV_FWD:   /* y_g (Og x L) = w_g (Og x K) cols (K x L) */
            if (!pw) unfold(&u);
            gemm(cdt, false, false, g->Og, L, g->K, wg, g->K, colm, L, 0.0, glg, L);
            break;
        case CONV_BWD_INPUT:   /* cols (K x L) = w_g^T gy_g, folded back into gx */
            if (pw) {
                gemm(cdt, true, false, g->K, L, g->Og, wg, g->K, glg, L, 1.0, colm, L);
            } else {
                gemm(cdt, true, false, g->K, L, g->Og, wg, g->K, glg, L, 0.0, cols, L);
                fold(&u);
            }
            break;
        case CONV_BWD_WEIGHT:   /* gw_g (Og x K) += gy_g (Og x L) cols^T */
            if (!pw) unfold(&u);
            gemm(cdt, false, true, g->Og, g->K, L, glg, L, colm, L, first ? 0.0 : 1.0,
                 j->acc[task] + gi * g->Og * g->K * es, g->K);
            break;
        }
    }
    if (j->kind == CONV_FWD) from_gemm_layout(es, gl, j->res + n0 * g->O * HW * es, nb, g->O, HW);
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

static int conv_run(conv_kind kind, const conv_geom *g, int cdt, ember_tensor *a, ember_tensor *b, ember_tensor *res)
{
    const int es = ember_dtype_size(cdt);
    const int64_t HW = g->Ho * g->Wo;
    /* one task per thread; a fixed number in deterministic mode, since a
       weight gradient sums the tasks' partial sums */
    int64_t ntasks = ember_is_deterministic() ? 4 : ember_num_threads();
    if (ntasks > g->N) ntasks = g->N;
    if (ntasks > 16) ntasks = 16;
    int64_t per_task = (g->N + ntasks - 1) / ntasks;
    ntasks = (g->N + per_task - 1) / per_task;
    int64_t nbmax = chunk_of(g);
    if (nbmax > per_task) nbmax = per_task;
    char *cols[16] = {0}, *gl[16] = {0}, *acc[16] = {0};
    const bool pw = is_pointwise(g) && nbmax == 1;
    size_t cols_bytes = pw ? 0 : (size_t)(g->K * nbmax * HW * es);
    size_t gl_bytes = (size_t)(g->O * nbmax * HW * es);
    size_t acc_bytes = (size_t)(g->O * g->K * es);
    int rc = EMBER_OK;
    for (int64_t t = 0; t < ntasks; t++) {
        if (cols_bytes && !(cols[t] = ember__alloc(cols_bytes))) goto oom;
        if (!(gl[t] = ember__alloc(gl_bytes))) goto oom;
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
#ifdef EMBER_HAVE_BLAS
    int blas_threads = openblas_get_num_threads();
    if (ntasks > 1) openblas_set_num_threads(1);
#endif
    ember__parallel_for(ntasks, 1, conv_tasks, &j);
#ifdef EMBER_HAVE_BLAS
    if (ntasks > 1) openblas_set_num_threads(blas_threads);
#endif
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

static void conv_attrs_unpack(const ember_attrs *at, const int64_t **st, const int64_t **pd, const int64_t **dl)
{
    *st = &at->i[0];
    *pd = &at->i[2];
    *dl = &at->i[4];
}

/* the shape a backward op produces, from attrs i[7] (ndim) and i[8..11] */
static int attr_shape(const char *op, const ember_attrs *at, int64_t *shape)
{
    if (at->i[7] != 4)
        return ember__fail(EMBER_ERR_SHAPE, "%s: the result shape must be 4-D, got %lld dims", op,
                           (long long)at->i[7]);
    for (int d = 0; d < 4; d++) {
        shape[d] = at->i[8 + d];
        if (shape[d] < 0) return ember__fail(EMBER_ERR_SHAPE, "%s: negative size in the result shape", op);
    }
    return EMBER_OK;
}

static int conv_common(conv_kind kind, int op, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    const char *name = ember__ops[op].name;
    const int64_t *st, *pd, *dl;
    conv_attrs_unpack(at, &st, &pd, &dl);
    ember_tensor *a = in[0], *b = in[1];
    char sa[200], sb[200];
    EMBER_TRY(need_4d(name, kind == CONV_BWD_INPUT ? "grad_output" : "input", a));
    EMBER_TRY(need_4d(name, kind == CONV_FWD ? "weight" : kind == CONV_BWD_INPUT ? "weight" : "grad_output", b));
    EMBER_TRY(need_float(name, "input", a));
    EMBER_TRY(need_float(name, "weight", b));
    if (a->dtype != b->dtype)
        return ember__fail(EMBER_ERR_DTYPE, "%s: operands must share a dtype, got %s %s and %s %s", name,
                           ember_dtype_name(a->dtype), ember__tshape(sa, a), ember_dtype_name(b->dtype),
                           ember__tshape(sb, b));
    int64_t xs[4], ws[4], ys[4], rs[4];
    switch (kind) {
    case CONV_FWD:
        memcpy(xs, a->shape, sizeof xs);
        memcpy(ws, b->shape, sizeof ws);
        break;
    case CONV_BWD_INPUT:
        EMBER_TRY(attr_shape(name, at, xs));
        memcpy(ws, b->shape, sizeof ws);
        break;
    case CONV_BWD_WEIGHT:
        memcpy(xs, a->shape, sizeof xs);
        EMBER_TRY(attr_shape(name, at, ws));
        break;
    }
    conv_geom g;
    EMBER_TRY(conv_geom_init(name, xs, ws, st, pd, dl, at->i[6], &g));
    ys[0] = g.N, ys[1] = g.O, ys[2] = g.Ho, ys[3] = g.Wo;
    const int64_t *gys = kind == CONV_BWD_INPUT ? a->shape : kind == CONV_BWD_WEIGHT ? b->shape : NULL;
    if (gys && memcmp(gys, ys, sizeof ys) != 0)
        return ember__fail(EMBER_ERR_SHAPE, "%s: grad_output has shape %s but the convolution gives "
                           "{%lld, %lld, %lld, %lld}", name, ember__tshape(sa, kind == CONV_BWD_INPUT ? a : b),
                           (long long)ys[0], (long long)ys[1], (long long)ys[2], (long long)ys[3]);
    memcpy(rs, kind == CONV_FWD ? ys : kind == CONV_BWD_INPUT ? xs : ws, sizeof rs);
    int dt = a->dtype, cdt = compute_dtype(dt);
    ember_tensor *ca = NULL, *cb = NULL, *res = NULL;
    int rc = EMBER_OK;
    EMBER_CHECK(ember__new(4, rs, cdt, EMBER_CPU, &res));
    if (res->numel == 0) goto ok;
    if (g.N == 0 || g.K == 0 || g.Og == 0) {   /* an empty sum */
        ember__fill_raw(res, 0);
        goto ok;
    }
    EMBER_CHECK(contiguous_as(a, cdt, &ca));
    EMBER_CHECK(contiguous_as(b, cdt, &cb));
    EMBER_CHECK(conv_run(kind, &g, cdt, ca, cb, res));
ok:
    rc = finish(res, dt, out);
    res = NULL;
done:
    ember_tensor_release(ca);
    ember_tensor_release(cb);
    ember_tensor_release(res);
    return rc;
}

int fwd_conv2d(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    return conv_common(CONV_FWD, op, in, at, out);
}

int fwd_conv2d_backward_input(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    return conv_common(CONV_BWD_INPUT, op, in, at, out);
}

int fwd_conv2d_backward_weight(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    return conv_common(CONV_BWD_WEIGHT, op, in, at, out);
}

/* ------------------------------------------------------------------ pooling */

typedef struct {
    int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, Ho, Wo;
} pool_geom;

static int pool_geom_init(const char *op, const int64_t *xs, const int64_t *k, const int64_t *st,
                          const int64_t *pd, pool_geom *p)
{
    if (k[0] < 1 || k[1] < 1 || st[0] < 1 || st[1] < 1 || pd[0] < 0 || pd[1] < 0)
        return ember__fail(EMBER_ERR_ARG, "%s: kernel {%lld, %lld} and stride {%lld, %lld} must be positive and "
                           "padding {%lld, %lld} non-negative", op, (long long)k[0], (long long)k[1],
                           (long long)st[0], (long long)st[1], (long long)pd[0], (long long)pd[1]);
    if (2 * pd[0] > k[0] || 2 * pd[1] > k[1])
        return ember__fail(EMBER_ERR_ARG, "%s: padding {%lld, %lld} must be at most half the kernel {%lld, %lld}",
                           op, (long long)pd[0], (long long)pd[1], (long long)k[0], (long long)k[1]);
    p->N = xs[0], p->C = xs[1], p->H = xs[2], p->W = xs[3];
    p->kh = k[0], p->kw = k[1], p->sh = st[0], p->sw = st[1], p->ph = pd[0], p->pw = pd[1];
    p->Ho = out_size(p->H, p->kh, p->sh, p->ph, 1);
    p->Wo = out_size(p->W, p->kw, p->sw, p->pw, 1);
    if (p->Ho < 1 || p->Wo < 1)
        return ember__fail(EMBER_ERR_SHAPE, "%s: input {%lld, %lld, %lld, %lld} padded by {%lld, %lld} is smaller "
                           "than the kernel {%lld, %lld}", op, (long long)xs[0], (long long)xs[1],
                           (long long)xs[2], (long long)xs[3], (long long)p->ph, (long long)p->pw,
                           (long long)p->kh, (long long)p->kw);
    return EMBER_OK;
}

typedef struct {
    const pool_geom *p;
    int dt;
    const char *x;
    char *y;
    int64_t *idx;
} pool_ctx;

/* NaN-aware x > y: x > y, or x is NaN and y is not. Max pooling keeps the
   first maximum in window order, a NaN winning, as PyTorch does. */
#define POOL_GT(x, y) ((x) > (y) || ((x) != (x) && (y) == (y)))

#ifdef __SSE2__
/* windows ow .. ow + 3 of one output row */
static inline void maxpool2_fwd4(const float *r0, const float *r1, int64_t W, int64_t at, int64_t ow, float *y,
                                 int64_t *ix)
{
    const __m128i one = _mm_set1_epi32(1), wv = _mm_set1_epi32((int)W), zero = _mm_setzero_si128();
    __m128i pos = _mm_add_epi32(_mm_set1_epi32((int)(at + 2 * ow)), _mm_setr_epi32(0, 2, 4, 6));
    __m128 p0 = _mm_loadu_ps(r0 + 2 * ow), p1 = _mm_loadu_ps(r0 + 2 * ow + 4);
    __m128 q0 = _mm_loadu_ps(r1 + 2 * ow), q1 = _mm_loadu_ps(r1 + 2 * ow + 4);
    __m128 a = _mm_shuffle_ps(p0, p1, _MM_SHUFFLE(2, 0, 2, 0)), b = _mm_shuffle_ps(p0, p1, _MM_SHUFFLE(3, 1, 3, 1));
    __m128 c = _mm_shuffle_ps(q0, q1, _MM_SHUFFLE(2, 0, 2, 0)), d = _mm_shuffle_ps(q0, q1, _MM_SHUFFLE(3, 1, 3, 1));
    __m128 t1 = sse_gt_nan(b, a), t2 = sse_gt_nan(d, c);
    __m128 m1 = sse_select(t1, b, a), m2 = sse_select(t2, d, c);
    __m128 t3 = sse_gt_nan(m2, m1);
    _mm_storeu_ps(y + ow, sse_select(t3, m2, m1));
    /* offset in the window: t3 ? W + t2 : t1 */
    __m128i o1 = _mm_and_si128(_mm_castps_si128(t1), one);
    __m128i o2 = _mm_add_epi32(wv, _mm_and_si128(_mm_castps_si128(t2), one));
    __m128i m3 = _mm_castps_si128(t3);
    __m128i pk = _mm_add_epi32(pos, _mm_or_si128(_mm_and_si128(m3, o2), _mm_andnot_si128(m3, o1)));
    _mm_storeu_si128((__m128i *)(ix + ow), _mm_unpacklo_epi32(pk, zero));
    _mm_storeu_si128((__m128i *)(ix + ow + 2), _mm_unpackhi_epi32(pk, zero));
}
#endif

/* One output row of 2x2 stride-2 max pooling over input rows r0 and r1;
   `at` is the flat position of r0[0] in its plane. Each window is a
   tournament: (a, b) and (c, d), then the two winners, the earlier one
   kept on ties, which gives the first maximum in window order. */
static void maxpool2_row_f32(const float *restrict r0, const float *restrict r1, int64_t W, int64_t Wo, int64_t at,
                             float *restrict y, int64_t *restrict ix)
{
    int64_t ow = 0;
#ifdef __SSE2__
    /* four windows per step; compilers leave the scalar loop's selects as
       branches, which mispredict on real data (the comparisons are coin flips) */
    if (Wo >= 4 && at + 2 * Wo + W < INT32_MAX) {
        for (; ow + 4 <= Wo; ow += 4) maxpool2_fwd4(r0, r1, W, at, ow, y, ix);
        /* the last windows as one more step, overlapping the one before: no scalar tail */
        if (ow < Wo) maxpool2_fwd4(r0, r1, W, at, Wo - 4, y, ix);
        ow = Wo;
    }
#endif
    for (; ow < Wo; ow++) {
        float a = r0[2 * ow], b = r0[2 * ow + 1], c = r1[2 * ow], d = r1[2 * ow + 1];
        int t1 = POOL_GT(b, a), t2 = POOL_GT(d, c);
        float m1 = t1 ? b : a, m2 = t2 ? d : c;
        int t3 = POOL_GT(m2, m1);
        y[ow] = t3 ? m2 : m1;
        ix[ow] = at + 2 * ow + (t3 ? W + t2 : t1);
    }
}

#define DEFINE_POOL(T, SUFFIX)                                                                 \
    static void maxpool_##SUFFIX(const pool_ctx *c, int64_t q0, int64_t q1)                    \
    {                                                                                          \
        const pool_geom *p = c->p;                                                             \
        for (int64_t q = q0; q < q1; q++) {                                                    \
            const T *x = (const T *)c->x + q * p->H * p->W;                                    \
            T *y = (T *)c->y + q * p->Ho * p->Wo;                                              \
            int64_t *ix = c->idx + q * p->Ho * p->Wo;                                          \
            for (int64_t oh = 0; oh < p->Ho; oh++)                                             \
                for (int64_t ow = 0; ow < p->Wo; ow++) {                                       \
                    int64_t h0 = oh * p->sh - p->ph, w0 = ow * p->sw - p->pw;                  \
                    int64_t h1 = h0 + p->kh < p->H ? h0 + p->kh : p->H;                        \
                    int64_t w1 = w0 + p->kw < p->W ? w0 + p->kw : p->W;                        \
                    if (h0 < 0) h0 = 0;                                                        \
                    if (w0 < 0) w0 = 0;                                                        \
                    T best = x[h0 * p->W + w0];                                                \
                    int64_t at = h0 * p->W + w0;                                               \
                    for (int64_t h = h0; h < h1; h++)                                          \
                        for (int64_t w = w0; w < w1; w++) {                                    \
                            T v = x[h * p->W + w];                                             \
                            if (POOL_GT(v, best)) {                                            \
                                best = v;                                                      \
                                at = h * p->W + w;                                             \
                            }                                                                  \
                        }                                                                      \
                    y[oh * p->Wo + ow] = best;                                                 \
                    ix[oh * p->Wo + ow] = at;                                                  \
                }                                                                              \
        }                                                                                      \
    }                                                                                          \
    static void maxpool_bwd_##SUFFIX(const pool_ctx *c, int64_t q0, int64_t q1)                \
    {                                                                                          \
        const pool_geom *p = c->p;                                                             \
        for (int64_t q = q0; q < q1; q++) {                                                    \
            const T *g = (const T *)c->x + q * p->Ho * p->Wo;                                  \
            const int64_t *ix = c->idx + q * p->Ho * p->Wo;                                    \
            T *gx = (T *)c->y + q * p->H * p->W;                                               \
            for (int64_t k = 0; k < p->Ho * p->Wo; k++) gx[ix[k]] += g[k];                     \
        }                                                                                      \
    }                                                                                          \
    static void avgpool_##SUFFIX(const pool_ctx *c, int64_t q0, int64_t q1)                    \
    {                                                                                          \
        const pool_geom *p = c->p;                                                             \
        const T inv = (T)1 / (T)(p->kh * p->kw);                                               \
        for (int64_t q = q0; q < q1; q++) {                                                    \
            const T *x = (const T *)c->x + q * p->H * p->W;                                    \
            T *y = (T *)c->y + q * p->Ho * p->Wo;                                              \
            for (int64_t oh = 0; oh < p->Ho; oh++)                                             \
                for (int64_t ow = 0; ow < p->Wo; ow++) {                                       \
                    int64_t h0 = oh * p->sh - p->ph, w0 = ow * p->sw - p->pw;                  \
                    int64_t h1 = h0 + p->kh < p->H ? h0 + p->kh : p->H;                        \
                    int64_t w1 = w0 + p->kw < p->W ? w0 + p->kw : p->W;                        \
                    if (h0 < 0) h0 = 0;                                                        \
                    if (w0 < 0) w0 = 0;                                                        \
                    T s = 0;                                                                   \
                    for (int64_t h = h0; h < h1; h++)                                          \
                        for (int64_t w = w0; w < w1; w++) s += x[h * p->W + w];                \
                    y[oh * p->Wo + ow] = s * inv;                                              \
                }                                                                              \
        }                                                                                      \
    }                                                                                          \
    static void avgpool_bwd_##SUFFIX(const pool_ctx *c, int64_t q0, int64_t q1)                \
    {                                                                                          \
        const pool_geom *p = c->p;                                                             \
        const T inv = (T)1 / (T)(p->kh * p->kw);                                               \
        for (int64_t q = q0; q < q1; q++) {                                                    \
            const T *g = (const T *)c->x + q * p->Ho * p->Wo;                                  \
            T *gx = (T *)c->y + q * p->H * p->W;                                               \
            for (int64_t oh = 0; oh < p->Ho; oh++)                                             \
                for (int64_t ow = 0; ow < p->Wo; ow++) {                                       \
                    int64_t h0 = oh * p->sh - p->ph, w0 = ow * p->sw - p->pw;                  \
                    int64_t h1 = h0 + p->kh < p->H ? h0 + p->kh : p->H;                        \
                    int64_t w1 = w0 + p->kw < p->W ? w0 + p->kw : p->W;                        \
                    if (h0 < 0) h0 = 0;                                                        \
                    if (w0 < 0) w0 = 0;                                                        \
                    T v = g[oh * p->Wo + ow] * inv;                                            \
                    for (int64_t h = h0; h < h1; h++)                                          \
                        for (int64_t w = w0; w < w1; w++) gx[h * p->W + w] += v;               \
                }                                                                              \
        }                                                                                      \
    }

DEFINE_POOL(float, f32)
DEFINE_POOL(double, f64)

enum { POOL_MAX, POOL_MAX_BWD, POOL_AVG, POOL_AVG_BWD };

typedef struct {
    pool_ctx c;
    int kind;
} pool_task;

/* 2x2 windows, stride 2, no padding (the layer every small CNN uses), float32 */
static bool is_maxpool2(const pool_ctx *c)
{
    const pool_geom *p = c->p;
    return c->dt == EMBER_FLOAT32 && p->kh == 2 && p->kw == 2 && p->sh == 2 && p->sw == 2 && p->ph == 0 &&
           p->pw == 0;
}

static void maxpool2_f32(const pool_ctx *c, int64_t q0, int64_t q1)
{
    const pool_geom *p = c->p;
    for (int64_t q = q0; q < q1; q++) {
        const float *x = (const float *)c->x + q * p->H * p->W;
        float *y = (float *)c->y + q * p->Ho * p->Wo;
        int64_t *ix = c->idx + q * p->Ho * p->Wo;
        for (int64_t oh = 0; oh < p->Ho; oh++)
            maxpool2_row_f32(x + 2 * oh * p->W, x + (2 * oh + 1) * p->W, p->W, p->Wo, 2 * oh * p->W,
                             y + oh * p->Wo, ix + oh * p->Wo);
    }
}

static void pool_range(void *ctx, int64_t q0, int64_t q1)
{
    const pool_task *t = ctx;
    bool f = t->c.dt == EMBER_FLOAT32;
    switch (t->kind) {
    case POOL_MAX:
        if (is_maxpool2(&t->c)) maxpool2_f32(&t->c, q0, q1);
        else if (f) maxpool_f32(&t->c, q0, q1);
        else maxpool_f64(&t->c, q0, q1);
        break;
    case POOL_MAX_BWD: f ? maxpool_bwd_f32(&t->c, q0, q1) : maxpool_bwd_f64(&t->c, q0, q1); break;
    case POOL_AVG: f ? avgpool_f32(&t->c, q0, q1) : avgpool_f64(&t->c, q0, q1); break;
    default: f ? avgpool_bwd_f32(&t->c, q0, q1) : avgpool_bwd_f64(&t->c, q0, q1); break;
    }
}

static void pool_launch(pool_task *t)
{
    const pool_geom *p = t->c.p;
    ember__parallel_for(p->N * p->C, rows_grain(p->H * p->W), pool_range, t);
}

int fwd_max_pool2d(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const char *name = ember__ops[op].name;
    ember_tensor *x = in[0];
    EMBER_TRY(need_4d(name, "input", x));
    EMBER_TRY(need_float(name, "input", x));
    pool_geom p;
    EMBER_TRY(pool_geom_init(name, x->shape, &at->i[0], &at->i[2], &at->i[4], &p));
    int dt = x->dtype, cdt = compute_dtype(dt), rc = EMBER_OK;
    int64_t ys[4] = {p.N, p.C, p.Ho, p.Wo};
    ember_tensor *cx = NULL, *y = NULL, *ix = NULL;
    EMBER_CHECK(ember__new(4, ys, cdt, EMBER_CPU, &y));
    EMBER_CHECK(ember__new(4, ys, EMBER_INT64, EMBER_CPU, &ix));
    if (y->numel > 0) {
        EMBER_CHECK(contiguous_as(x, cdt, &cx));
        pool_task t = {{&p, cdt, ember__ptr(cx), ember__ptr(y), (int64_t *)ember__ptr(ix)}, POOL_MAX};
        pool_launch(&t);
    }
    rc = finish(y, dt, &out[0]);
    y = NULL;
    EMBER_CHECK(rc);
    out[1] = ix;
    ix = NULL;
done:
    ember_tensor_release(cx);
    ember_tensor_release(y);
    ember_tensor_release(ix);
    return rc;
}

/* ------------------------------------------------------------------ 2x2 max-pool backward
   When every index of a plane lies in its own 2x2 window (what max_pool2d
   gives for kernel 2, stride 2, on a float32 plane), each window of gx is
   written whole in one pass: g at the index, 0 at the other three; no zero
   fill, no scatter. A plane with any other index is redone the general way
   (zero, then gx[ix] += g), which also finds indices outside the plane. */
typedef struct {
    const pool_geom *p;
    const float *g;
    const int64_t *idx;
    float *gx;
    atomic_int bad_index;
} pool2_bwd_ctx;

#ifdef __SSE2__
/* windows ow .. ow + 3 of one row: false when an index is not in its window */
static inline bool maxpool2_bwd4(const float *gr, const int64_t *ir, float *r0, float *r1, int64_t W, int64_t at,
                                 int64_t ow)
{
    const __m128i zero = _mm_setzero_si128(), one = _mm_set1_epi32(1);
    const __m128i wv = _mm_set1_epi32((int)W), w1 = _mm_set1_epi32((int)W + 1);
    __m128i pos = _mm_add_epi32(_mm_set1_epi32((int)(at + 2 * ow)), _mm_setr_epi32(0, 2, 4, 6));
    __m128i i01 = _mm_loadu_si128((const __m128i *)(ir + ow));
    __m128i i23 = _mm_loadu_si128((const __m128i *)(ir + ow + 2));
    /* low and high halves of the four int64 indices */
    __m128i lo = _mm_unpacklo_epi64(_mm_shuffle_epi32(i01, _MM_SHUFFLE(2, 0, 2, 0)),
                                    _mm_shuffle_epi32(i23, _MM_SHUFFLE(2, 0, 2, 0)));
    __m128i hi = _mm_unpacklo_epi64(_mm_shuffle_epi32(i01, _MM_SHUFFLE(3, 1, 3, 1)),
                                    _mm_shuffle_epi32(i23, _MM_SHUFFLE(3, 1, 3, 1)));
    __m128i r = _mm_sub_epi32(lo, pos);
    __m128i ma = _mm_cmpeq_epi32(r, zero), mb = _mm_cmpeq_epi32(r, one);
    __m128i mc = _mm_cmpeq_epi32(r, wv), md = _mm_cmpeq_epi32(r, w1);
    __m128i ok = _mm_and_si128(_mm_or_si128(_mm_or_si128(ma, mb), _mm_or_si128(mc, md)), _mm_cmpeq_epi32(hi, zero));
    if (_mm_movemask_epi8(ok) != 0xFFFF) return false;
    __m128 v = _mm_loadu_ps(gr + ow);
    __m128 va = _mm_and_ps(_mm_castsi128_ps(ma), v), vb = _mm_and_ps(_mm_castsi128_ps(mb), v);
    __m128 vc = _mm_and_ps(_mm_castsi128_ps(mc), v), vd = _mm_and_ps(_mm_castsi128_ps(md), v);
    _mm_storeu_ps(r0 + 2 * ow, _mm_unpacklo_ps(va, vb));
    _mm_storeu_ps(r0 + 2 * ow + 4, _mm_unpackhi_ps(va, vb));
    _mm_storeu_ps(r1 + 2 * ow, _mm_unpacklo_ps(vc, vd));
    _mm_storeu_ps(r1 + 2 * ow + 4, _mm_unpackhi_ps(vc, vd));
    return true;
}
#endif

/* one plane pooled 2x2 without remainder rows or columns beyond the last window;
   false when some index is not in its window */
static bool maxpool2_bwd_plane(const pool_geom *p, const float *g, const int64_t *ix, float *gx)
{
    const int64_t W = p->W, Ho = p->Ho, Wo = p->Wo;
    for (int64_t oh = 0; oh < Ho; oh++) {
        float *r0 = gx + 2 * oh * W, *r1 = r0 + W;
        const float *gr = g + oh * Wo;
        const int64_t *ir = ix + oh * Wo, at = 2 * oh * W;
        int64_t ow = 0;
#ifdef __SSE2__
        if (Wo >= 4 && at + 2 * Wo + W < INT32_MAX) {
            for (; ow + 4 <= Wo; ow += 4)
                if (!maxpool2_bwd4(gr, ir, r0, r1, W, at, ow)) return false;
            /* the last windows as one more step of four, overlapping the one before
               (rewriting a window gives the same values): no scalar tail */
            if (ow < Wo && !maxpool2_bwd4(gr, ir, r0, r1, W, at, Wo - 4)) return false;
            ow = Wo;
        }
#endif
        for (; ow < Wo; ow++) {
            int64_t k = ir[ow] - (at + 2 * ow);
            if (k != 0 && k != 1 && k != W && k != W + 1) return false;
            float v = gr[ow];
            r0[2 * ow] = k == 0 ? v : 0.0f;
            r0[2 * ow + 1] = k == 1 ? v : 0.0f;
            r1[2 * ow] = k == W ? v : 0.0f;
            r1[2 * ow + 1] = k == W + 1 ? v : 0.0f;
        }
    }
    return true;
}

static void maxpool2_bwd_range(void *vctx, int64_t q0, int64_t q1)
{
    pool2_bwd_ctx *c = vctx;
    const pool_geom *p = c->p;
    const int64_t HW = p->H * p->W, n = p->Ho * p->Wo;
    for (int64_t q = q0; q < q1; q++) {
        const float *g = c->g + q * n;
        const int64_t *ix = c->idx + q * n;
        float *gx = c->gx + q * HW;
        if (maxpool2_bwd_plane(p, g, ix, gx)) continue;
        memset(gx, 0, sizeof(float) * (size_t)HW);
        for (int64_t k = 0; k < n; k++) {
            if (ix[k] < 0 || ix[k] >= HW) {
                atomic_store_explicit(&c->bad_index, 1, memory_order_relaxed);
                break;
            }
            gx[ix[k]] += g[k];
        }
    }
}

/* indices may come from anywhere: fails naming the first one outside its plane */
static int check_pool_indices(const char *name, const int64_t *ix, int64_t n, const pool_geom *p)
{
    for (int64_t k = 0; k < n; k++)
        if (ix[k] < 0 || ix[k] >= p->H * p->W)
            return ember__fail(EMBER_ERR_ARG, "%s: index %lld is outside a %lld x %lld plane", name,
                               (long long)ix[k], (long long)p->H, (long long)p->W);
    return EMBER_OK;
}

/* shared by the two pool adjoints: checks g against the pooled shape of x_shape */
static int pool_bwd_geom(const char *name, ember_tensor *g, const ember_attrs *at, int64_t *xs, pool_geom *p)
{
    EMBER_TRY(need_4d(name, "grad_output", g));
    EMBER_TRY(need_float(name, "grad_output", g));
    EMBER_TRY(attr_shape(name, at, xs));
    EMBER_TRY(pool_geom_init(name, xs, &at->i[0], &at->i[2], &at->i[4], p));
    int64_t ys[4] = {p->N, p->C, p->Ho, p->Wo};
    if (memcmp(g->shape, ys, sizeof ys) != 0) {
        char s[200];
        return ember__fail(EMBER_ERR_SHAPE, "%s: grad_output has shape %s but pooling gives {%lld, %lld, %lld, %lld}",
                           name, ember__tshape(s, g), (long long)ys[0], (long long)ys[1], (long long)ys[2],
                           (long long)ys[3]);
    }
    return EMBER_OK;
}

int fwd_max_pool2d_backward(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const char *name = ember__ops[op].name;
    ember_tensor *g = in[0], *idx = in[1];
    char s1[200], s2[200];
    EMBER_TRY(need_4d(name, "grad_output", g));
    EMBER_TRY(need_float(name, "grad_output", g));
    int64_t xs[4];
    EMBER_TRY(attr_shape(name, at, xs));
    if (idx->dtype != EMBER_INT64 || idx->ndim != 4 || memcmp(idx->shape, g->shape, sizeof(int64_t) * 4) != 0)
        return ember__fail(EMBER_ERR_SHAPE, "%s: indices must be int64 of the grad_output's shape %s, got %s %s",
                           name, ember__tshape(s1, g), ember_dtype_name(idx->dtype), ember__tshape(s2, idx));
    if (g->shape[0] != xs[0] || g->shape[1] != xs[1])
        return ember__fail(EMBER_ERR_SHAPE, "%s: grad_output %s and input {%lld, %lld, %lld, %lld} differ in N or C",
                           name, ember__tshape(s1, g), (long long)xs[0], (long long)xs[1], (long long)xs[2],
                           (long long)xs[3]);
    /* each index names its input position: the window geometry is not needed */
    pool_geom p = {.N = xs[0], .C = xs[1], .H = xs[2], .W = xs[3], .Ho = g->shape[2], .Wo = g->shape[3]};
    int dt = g->dtype, cdt = compute_dtype(dt), rc = EMBER_OK;
    ember_tensor *cg = NULL, *ci = NULL, *gx = NULL;
    EMBER_CHECK(ember__new(4, xs, cdt, EMBER_CPU, &gx));
    if (g->numel == 0) {
        EMBER_CHECK(ember__fill_raw(gx, 0));
    } else {
        EMBER_CHECK(contiguous_as(g, cdt, &cg));
        EMBER_CHECK(contiguous_as(idx, EMBER_INT64, &ci));
        int64_t *ix = (int64_t *)ember__ptr(ci);
        if (cdt == EMBER_FLOAT32 && 2 * p.Ho == p.H && 2 * p.Wo == p.W) {
            /* planes tiled by 2x2 windows exactly; the indices are checked on the way */
            pool2_bwd_ctx c = {&p, (const float *)ember__ptr(cg), ix, (float *)ember__ptr(gx), 0};
            ember__parallel_for(p.N * p.C, rows_grain(p.H * p.W), maxpool2_bwd_range, &c);
            if (atomic_load(&c.bad_index)) EMBER_CHECK(check_pool_indices(name, ix, ci->numel, &p));
        } else {
            EMBER_CHECK(check_pool_indices(name, ix, ci->numel, &p));
            EMBER_CHECK(ember__fill_raw(gx, 0));
            pool_task t = {{&p, cdt, ember__ptr(cg), ember__ptr(gx), ix}, POOL_MAX_BWD};
            pool_launch(&t);
        }
    }
    rc = finish(gx, dt, out);
    gx = NULL;
done:
    ember_tensor_release(cg);
    ember_tensor_release(ci);
    ember_tensor_release(gx);
    return rc;
}

int fwd_avg_pool2d(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const char *name = ember__ops[op].name;
    ember_tensor *x = in[0];
    EMBER_TRY(need_4d(name, "input", x));
    EMBER_TRY(need_float(name, "input", x));
    pool_geom p;
    EMBER_TRY(pool_geom_init(name, x->shape, &at->i[0], &at->i[2], &at->i[4], &p));
    int dt = x->dtype, cdt = compute_dtype(dt), rc = EMBER_OK;
    int64_t ys[4] = {p.N, p.C, p.Ho, p.Wo};
    ember_tensor *cx = NULL, *y = NULL;
    EMBER_CHECK(ember__new(4, ys, cdt, EMBER_CPU, &y));
    if (y->numel > 0) {
        EMBER_CHECK(contiguous_as(x, cdt, &cx));
        pool_task t = {{&p, cdt, ember__ptr(cx), ember__ptr(y), NULL}, POOL_AVG};
        pool_launch(&t);
    }
    rc = finish(y, dt, out);
    y = NULL;
done:
    ember_tensor_release(cx);
    ember_tensor_release(y);
    return rc;
}

int fwd_avg_pool2d_backward(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const char *name = ember__ops[op].name;
    ember_tensor *g = in[0];
    int64_t xs[4];
    pool_geom p;
    EMBER_TRY(pool_bwd_geom(name, g, at, xs, &p));
    int dt = g->dtype, cdt = compute_dtype(dt), rc = EMBER_OK;
    ember_tensor *cg = NULL, *gx = NULL;
    EMBER_CHECK(ember__new(4, xs, cdt, EMBER_CPU, &gx));
    EMBER_CHECK(ember__fill_raw(gx, 0));
    if (g->numel > 0) {
        EMBER_CHECK(contiguous_as(g, cdt, &cg));
        pool_task t = {{&p, cdt, ember__ptr(cg), ember__ptr(gx), NULL}, POOL_AVG_BWD};
        pool_launch(&t);
    }
    rc = finish(gx, dt, out);
    gx = NULL;
done:
    ember_tensor_release(cg);
    ember_tensor_release(gx);
    return rc;
}

/* ------------------------------------------------------------------ public entry points */

static void set_pairs(ember_attrs *at, const int64_t *a, const int64_t *b, const int64_t *c)
{
    memset(at, 0, sizeof *at);
    at->i[0] = a[0], at->i[1] = a[1];
    at->i[2] = b[0], at->i[3] = b[1];
    if (c) at->i[4] = c[0], at->i[5] = c[1];
}

static int set_shape(ember_attrs *at, const char *op, const int64_t *shape)
{
    if (!shape) return ember__fail(EMBER_ERR_ARG, "%s: the result shape is NULL", op);
    at->i[7] = 4;
    for (int d = 0; d < 4; d++) at->i[8 + d] = shape[d];
    return EMBER_OK;
}

#define NEED_ARGS(op, ...)                                                                     \
    do {                                                                                       \
        const void *args_[] = {__VA_ARGS__};                                                   \
        for (size_t k_ = 0; k_ < sizeof args_ / sizeof args_[0]; k_++)                         \
            if (!args_[k_]) return ember__fail(EMBER_ERR_ARG, "%s: an argument is NULL", op);  \
    } while (0)

int ember_conv2d(ember_tensor *x, ember_tensor *w, const int64_t *stride, const int64_t *padding,
                 const int64_t *dilation, int64_t groups, ember_tensor **out)
{
    NEED_ARGS("conv2d", out, stride, padding, dilation);
    ember_attrs at;
    set_pairs(&at, stride, padding, dilation);
    at.i[6] = groups;
    ember_tensor *in[2] = {x, w};
    return ember__dispatch(EMBER_OP_CONV2D, 2, in, &at, out);
}

int ember_conv2d_backward_input(ember_tensor *g, ember_tensor *w, const int64_t *x_shape, const int64_t *stride,
                                const int64_t *padding, const int64_t *dilation, int64_t groups, ember_tensor **out)
{
    NEED_ARGS("conv2d_backward_input", out, stride, padding, dilation);
    ember_attrs at;
    set_pairs(&at, stride, padding, dilation);
    at.i[6] = groups;
    EMBER_TRY(set_shape(&at, "conv2d_backward_input", x_shape));
    ember_tensor *in[2] = {g, w};
    return ember__dispatch(EMBER_OP_CONV2D_BACKWARD_INPUT, 2, in, &at, out);
}

int ember_conv2d_backward_weight(ember_tensor *x, ember_tensor *g, const int64_t *w_shape, const int64_t *stride,
                                 const int64_t *padding, const int64_t *dilation, int64_t groups, ember_tensor **out)
{
    NEED_ARGS("conv2d_backward_weight", out, stride, padding, dilation);
    ember_attrs at;
    set_pairs(&at, stride, padding, dilation);
    at.i[6] = groups;
    EMBER_TRY(set_shape(&at, "conv2d_backward_weight", w_shape));
    ember_tensor *in[2] = {x, g};
    return ember__dispatch(EMBER_OP_CONV2D_BACKWARD_WEIGHT, 2, in, &at, out);
}

int ember_max_pool2d(ember_tensor *x, const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                     ember_tensor **values, ember_tensor **indices)
{
    NEED_ARGS("max_pool2d", values, kernel, stride, padding);
    ember_attrs at;
    set_pairs(&at, kernel, stride, padding);
    ember_tensor *in[1] = {x}, *res[2] = {NULL, NULL};
    int rc = ember__dispatch(EMBER_OP_MAX_POOL2D, 1, in, &at, res);
    *values = res[0];
    if (indices) *indices = res[1];
    else ember_tensor_release(res[1]);
    return rc;
}

int ember_max_pool2d_backward(ember_tensor *g, ember_tensor *indices, const int64_t *x_shape, ember_tensor **out)
{
    NEED_ARGS("max_pool2d_backward", out);
    ember_attrs at;
    memset(&at, 0, sizeof at);
    EMBER_TRY(set_shape(&at, "max_pool2d_backward", x_shape));
    ember_tensor *in[2] = {g, indices};
    return ember__dispatch(EMBER_OP_MAX_POOL2D_BACKWARD, 2, in, &at, out);
}

int ember_avg_pool2d(ember_tensor *x, const int64_t *kernel, const int64_t *stride, const int64_t *padding,
                     ember_tensor **out)
{
    NEED_ARGS("avg_pool2d", out, kernel, stride, padding);
    ember_attrs at;
    set_pairs(&at, kernel, stride, padding);
    ember_tensor *in[1] = {x};
    return ember__dispatch(EMBER_OP_AVG_POOL2D, 1, in, &at, out);
}

int ember_avg_pool2d_backward(ember_tensor *g, const int64_t *x_shape, const int64_t *kernel, const int64_t *stride,
                              const int64_t *padding, ember_tensor **out)
{
    NEED_ARGS("avg_pool2d_backward", out, kernel, stride, padding);
    ember_attrs at;
    set_pairs(&at, kernel, stride, padding);
    EMBER_TRY(set_shape(&at, "avg_pool2d_backward", x_shape));
    ember_tensor *in[1] = {g};
    return ember__dispatch(EMBER_OP_AVG_POOL2D_BACKWARD, 1, in, &at, out);
}

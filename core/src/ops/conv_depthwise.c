/* conv_depthwise.c: depthwise convolutions (every output channel reads one
   input channel: C / groups == 1, MobileNet's 3x3 layers) as direct kernels,
   for conv2d and its two adjoints, float32 and float64.

   im2col + GEMM is a poor fit here: each group's product is a 1 x kH kW by
   kH kW x H'W' product, all unfolding and no arithmetic, and oneDNN's
   depthwise kernels want the blocked layout, so every call reorders. These
   kernels read NCHW in place: an output row is the sum over the kernel's
   taps (i, j) of the tap's weight times a shifted input row, one vector
   loop a tap over the output columns whose input column is inside the
   plane (ember__conv_valid_cols). The adjoints walk the same taps: the input
   gradient adds w gy into the shifted rows of its plane, the weight
   gradient accumulates gy x row by row into one buffer a tap and sums each
   buffer once at the end.

   Work is split by plane (N O forward, N C for the input gradient, O for
   the weight gradient), each plane summed whole by one task in a fixed
   order (taps, then rows, then samples), so results do not depend on the
   thread count. Dtypes: nn.h. */
#include "conv.h"

#include <stdatomic.h>
#include <string.h>

static int direct_enabled = 1;

void ember_set_conv_kernels_enabled(int on) { direct_enabled = on != 0; }
int ember_conv_kernels_enabled(void) { return direct_enabled; }

/* on planes of 16 outputs or fewer: on larger ones their rows are too short
   for the vector loops, and im2col + GEMM was as fast or faster (docs/nn.md) */
bool ember__conv_is_depthwise(const conv_geom *g)
{
    return direct_enabled && g->G > 1 && g->Cg == 1 && g->Ho * g->Wo <= 16;
}

typedef struct {
    const conv_geom *g;
    const char *a, *b;     /* FWD x, w;  BWD_INPUT gy, w;  BWD_WEIGHT x, gy */
    char *res;
    const int64_t *lo, *hi;   /* per kernel column j: the output columns that read inside the plane */
    atomic_int failed;
} dw_job;

/* One walk over a plane's taps for the three products: for each output row
   oh and tap (i, j) whose input row ih is inside the plane, over the output
   columns [lo, hi) whose input column ow sw + off is inside it,
     FWD          y[oh, ow]  += w[i, j] x[ih, ow sw + off]   (y's row zeroed first)
     BWD_INPUT    gx[ih, ow sw + off] += w[i, j] gy[oh, ow]
     BWD_WEIGHT   acc[i, j][ow] += gy[oh, ow] x[ih, ow sw + off]   (acc: kH kW rows of W')
   a is x (FWD, BWD_WEIGHT) or gy; b is w (FWD, BWD_INPUT) or gy; res y, gx or acc. */
#define DW_ROW(dst, expr)                                                                      \
    do {                                                                                       \
        if (g->sw == 1)                                                                        \
            for (int64_t ow = lo; ow < hi; ow++) dst += expr(ow + off);                        \
        else if (g->sw == 2)                                                                   \
            for (int64_t ow = lo; ow < hi; ow++) dst += expr(2 * ow + off);                    \
        else                                                                                   \
            for (int64_t ow = lo; ow < hi; ow++) dst += expr(ow * g->sw + off);                \
    } while (0)
#define FWD_TERM(k) wv * xr[k]
#define WGRAD_TERM(k) gr[ow] * xr[k]

#define DEFINE_DEPTHWISE(T, S)                                                                 \
    EMBER_SIMD static void dw_plane_##S(const dw_job *jb, conv_kind kind, const T *restrict a,  \
                                       const T *restrict b, T *restrict res)                   \
    {                                                                                          \
        const conv_geom *g = jb->g;                                                            \
        const T *restrict in = kind == CONV_BWD_INPUT ? NULL : a;   /* x */                    \
        const T *restrict gy = kind == CONV_FWD ? NULL : kind == CONV_BWD_INPUT ? a : b;       \
        for (int64_t oh = 0; oh < g->Ho; oh++) {                                               \
            T *restrict yr = res + oh * g->Wo;                                                 \
            const T *restrict gr = gy ? gy + oh * g->Wo : NULL;                                \
            if (kind == CONV_FWD)                                                              \
                for (int64_t ow = 0; ow < g->Wo; ow++) yr[ow] = 0;                             \
            for (int64_t i = 0; i < g->kH; i++) {                                              \
                const int64_t ih = oh * g->sh - g->ph + i * g->dh;                             \
                if (ih < 0 || ih >= g->H) continue;                                            \
                const T *restrict xr = in ? in + ih * g->W : NULL;                             \
                T *restrict gxr = res + ih * g->W;                                             \
                for (int64_t j = 0; j < g->kW; j++) {                                          \
                    const int64_t off = j * g->dw - g->pw, lo = jb->lo[j], hi = jb->hi[j];     \
                    const T wv = kind == CONV_BWD_WEIGHT ? 0 : b[i * g->kW + j];               \
                    T *restrict ar = res + (i * g->kW + j) * g->Wo;                            \
                    switch (kind) {                                                            \
                    case CONV_FWD: DW_ROW(yr[ow], FWD_TERM); break;                            \
                    case CONV_BWD_WEIGHT: DW_ROW(ar[ow], WGRAD_TERM); break;                   \
                    case CONV_BWD_INPUT:                                                       \
                        if (g->sw == 1)                                                        \
                            for (int64_t ow = lo; ow < hi; ow++) gxr[ow + off] += wv * gr[ow]; \
                        else                                                                   \
                            for (int64_t ow = lo; ow < hi; ow++) gxr[ow * g->sw + off] += wv * gr[ow]; \
                        break;                                                                 \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }                                                                                          \
    static void dw_fwd_##S(void *ctx, int64_t p0, int64_t p1)                                  \
    {                                                                                          \
        const dw_job *jb = ctx;                                                                \
        const conv_geom *g = jb->g;                                                            \
        for (int64_t p = p0; p < p1; p++) {   /* p = n O + o */                                \
            const int64_t n = p / g->O, o = p % g->O, c = o / g->Og;                           \
            dw_plane_##S(jb, CONV_FWD, (const T *)jb->a + (n * g->C + c) * g->H * g->W,        \
                         (const T *)jb->b + o * g->kH * g->kW, (T *)jb->res + p * g->Ho * g->Wo); \
        }                                                                                      \
    }                                                                                          \
    static void dw_bwd_input_##S(void *ctx, int64_t p0, int64_t p1)                            \
    {                                                                                          \
        const dw_job *jb = ctx;                                                                \
        const conv_geom *g = jb->g;                                                            \
        for (int64_t p = p0; p < p1; p++) {   /* p = n C + c: its Og output channels */        \
            const int64_t n = p / g->C, c = p % g->C;                                          \
            T *gx = (T *)jb->res + p * g->H * g->W;                                            \
            memset(gx, 0, sizeof(T) * (size_t)(g->H * g->W));                                  \
            for (int64_t o = c * g->Og; o < (c + 1) * g->Og; o++)                              \
                dw_plane_##S(jb, CONV_BWD_INPUT, (const T *)jb->a + (n * g->O + o) * g->Ho * g->Wo, \
                             (const T *)jb->b + o * g->kH * g->kW, gx);                        \
        }                                                                                      \
    }                                                                                          \
    static void dw_bwd_weight_##S(void *ctx, int64_t o0, int64_t o1)                           \
    {                                                                                          \
        dw_job *jb = ctx;                                                                      \
        const conv_geom *g = jb->g;                                                            \
        const int64_t taps = g->kH * g->kW;                                                    \
        const size_t bytes = sizeof(T) * (size_t)(taps * g->Wo);                               \
        T *acc = ember__alloc(bytes);                                                          \
        if (!acc) {                                                                            \
            atomic_store(&jb->failed, 1);                                                      \
            return;                                                                            \
        }                                                                                      \
        for (int64_t o = o0; o < o1; o++) {                                                    \
            const int64_t c = o / g->Og;                                                       \
            memset(acc, 0, bytes);                                                             \
            for (int64_t n = 0; n < g->N; n++)                                                 \
                dw_plane_##S(jb, CONV_BWD_WEIGHT, (const T *)jb->a + (n * g->C + c) * g->H * g->W, \
                             (const T *)jb->b + (n * g->O + o) * g->Ho * g->Wo, acc);          \
            T *gw = (T *)jb->res + o * taps;                                                   \
            for (int64_t t = 0; t < taps; t++) {                                               \
                T s = 0;                                                                       \
                for (int64_t ow = 0; ow < g->Wo; ow++) s += acc[t * g->Wo + ow];               \
                gw[t] = s;                                                                     \
            }                                                                                  \
        }                                                                                      \
        ember__free(acc, bytes);                                                               \
    }

DEFINE_DEPTHWISE(float, f32)
DEFINE_DEPTHWISE(double, f64)

int ember__conv_depthwise(conv_kind kind, const conv_geom *g, int cdt, const ember_tensor *a,
                          const ember_tensor *b, ember_tensor *res)
{
    const size_t cols_bytes = sizeof(int64_t) * (size_t)g->kW;
    int64_t *lo = ember__alloc(2 * cols_bytes);
    if (!lo)
        return ember__fail(EMBER_ERR_OOM, "%s: out of memory for a kernel of width %lld",
                           kind == CONV_FWD ? "conv2d" : kind == CONV_BWD_INPUT ? "conv2d_backward_input"
                                                                                : "conv2d_backward_weight",
                           (long long)g->kW);
    int64_t *hi = lo + g->kW;
    for (int64_t j = 0; j < g->kW; j++) ember__conv_valid_cols(g, j, &lo[j], &hi[j]);
    dw_job jb = {g, ember__ptr(a), ember__ptr(b), ember__ptr(res), lo, hi, 0};
    const bool f32 = cdt == EMBER_FLOAT32;
    const int64_t taps = g->kH * g->kW;
    switch (kind) {
    case CONV_FWD:
        ember__parallel_for(g->N * g->O, ember__nn_rows_grain(g->Ho * g->Wo * taps), f32 ? dw_fwd_f32 : dw_fwd_f64,
                            &jb);
        break;
    case CONV_BWD_INPUT:
        ember__parallel_for(g->N * g->C, ember__nn_rows_grain(g->Og * g->Ho * g->Wo * taps),
                            f32 ? dw_bwd_input_f32 : dw_bwd_input_f64, &jb);
        break;
    case CONV_BWD_WEIGHT:
        ember__parallel_for(g->O, ember__nn_rows_grain(g->N * g->Ho * g->Wo * taps),
                            f32 ? dw_bwd_weight_f32 : dw_bwd_weight_f64, &jb);
        break;
    }
    ember__free(lo, 2 * cols_bytes);
    if (atomic_load(&jb.failed))
        return ember__fail(EMBER_ERR_OOM, "conv2d_backward_weight: out of memory for a %lld x %lld buffer",
                           (long long)taps, (long long)g->Wo);
    return EMBER_OK;
}

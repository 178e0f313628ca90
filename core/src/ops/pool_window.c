/* pool_window.c: max and average pooling for any window, stride and padding
   at the vector width (pool.c runs them for every case but its 2x2 stride-2
   float32 max kernels), and average pooling's adjoint. H x W planes, kh x kw
   windows.

   A window's maximum is taken in two sweeps, each a loop over contiguous
   values: along each input row, every full window's maximum of its kw
   values (one pass per tap, over all window starts of the row), from which
   each output column's window is picked (the windows that the padding cuts
   are scanned one by one); then down the kh rows of each output row's
   window, over its Wo columns. Each sweep keeps the earlier value on ties
   and takes a NaN wherever one comes, so the result is the window's first
   maximum in row-major order, or its last NaN, with its flat position in
   the plane: what the one-window-at-a-time scan gives (POOL_GT). Positions
   are carried in an integer as wide as the value (int32 for float32, which
   needs planes below 2^31 values), so the selects stay in vector lanes. */
#include "nn.h"

#include <stdint.h>

#define POOL_GT(x, y) ((x) > (y) || (x) != (x))

/* T the value, IT its position; hv/hi the rows' window maxima (H x Wo), d/dp
   one row's maxima of every full window (W) */
#define POOL_SWEEPS(T, IT, SUF)                                                                             \
    EMBER_SIMD static void row_sweep_##SUF(const ember__pool_geom *p, const T *restrict xr, IT base,        \
                                           T *restrict d, IT *restrict dp, T *restrict hv, IT *restrict hi) \
    {                                                                                                       \
        const int64_t W = p->W, kw = p->kw, full = W - kw + 1;                                              \
        for (int64_t w = 0; w < full; w++) d[w] = xr[w], dp[w] = (IT)w;                                     \
        for (int64_t k = 1; k < kw; k++)                                                                    \
            for (int64_t w = 0; w < full; w++) {                                                            \
                T v = xr[w + k];                                                                            \
                bool gt = POOL_GT(v, d[w]);                                                                 \
                d[w] = gt ? v : d[w];                                                                       \
                dp[w] = gt ? (IT)(w + k) : dp[w];                                                           \
            }                                                                                               \
        for (int64_t ow = 0; ow < p->Wo; ow++) {                                                            \
            int64_t w0 = ow * p->sw - p->pw;                                                                \
            if (w0 >= 0 && w0 < full) {                                                                     \
                hv[ow] = d[w0];                                                                             \
                hi[ow] = base + dp[w0];                                                                     \
                continue;                                                                                   \
            }                                                                                               \
            int64_t a = w0 < 0 ? 0 : w0, b = w0 + kw < W ? w0 + kw : W;   /* cut by the padding */         \
            T best = xr[a];                                                                                 \
            int64_t at = a;                                                                                 \
            for (int64_t w = a + 1; w < b; w++)                                                             \
                if (POOL_GT(xr[w], best)) best = xr[w], at = w;                                             \
            hv[ow] = best;                                                                                  \
            hi[ow] = base + (IT)at;                                                                         \
        }                                                                                                   \
    }                                                                                                       \
    EMBER_SIMD static void col_sweep_##SUF(int64_t Wo, int64_t rows, const T *restrict hv, const IT *restrict hi, \
                                           T *restrict y, int64_t *restrict ix)                             \
    {                                                                                                       \
        IT best_at[256];                                                                                    \
        for (int64_t o0 = 0; o0 < Wo; o0 += 256) {                                                          \
            int64_t n = Wo - o0 < 256 ? Wo - o0 : 256;                                                      \
            for (int64_t o = 0; o < n; o++) y[o0 + o] = hv[o0 + o], best_at[o] = hi[o0 + o];               \
            for (int64_t r = 1; r < rows; r++) {                                                            \
                const T *v = hv + r * Wo + o0;                                                              \
                const IT *vi = hi + r * Wo + o0;                                                            \
                for (int64_t o = 0; o < n; o++) {                                                           \
                    bool gt = POOL_GT(v[o], y[o0 + o]);                                                    \
                    y[o0 + o] = gt ? v[o] : y[o0 + o];                                                    \
                    best_at[o] = gt ? vi[o] : best_at[o];                                                   \
                }                                                                                           \
            }                                                                                               \
            for (int64_t o = 0; o < n; o++) ix[o0 + o] = (int64_t)best_at[o];                               \
        }                                                                                                   \
    }                                                                                                       \
    static bool maxpool_sweeps_##SUF(const ember__pool_geom *p, const T *x, T *y, int64_t *ix, int64_t q0,   \
                                     int64_t q1)                                                            \
    {                                                                                                       \
        const int64_t H = p->H, W = p->W, Wo = p->Wo;                                                       \
        if (sizeof(IT) < 8 && H * W >= INT32_MAX) return false;                                             \
        size_t bytes = (size_t)(H * Wo + W) * (sizeof(T) + sizeof(IT));                                     \
        char *ws = ember__alloc(bytes);                                                                     \
        if (!ws) return false;                                                                              \
        T *hv = (T *)ws, *d = hv + H * Wo;                                                                  \
        IT *hi = (IT *)(d + W), *dp = hi + H * Wo;                                                          \
        for (int64_t q = q0; q < q1; q++) {                                                                 \
            const T *xp = x + q * H * W;                                                                    \
            for (int64_t h = 0; h < H; h++)                                                                 \
                row_sweep_##SUF(p, xp + h * W, (IT)(h * W), d, dp, hv + h * Wo, hi + h * Wo);               \
            for (int64_t oh = 0; oh < p->Ho; oh++) {                                                        \
                int64_t h0 = oh * p->sh - p->ph, h1 = h0 + p->kh < H ? h0 + p->kh : H;                      \
                h0 = h0 < 0 ? 0 : h0;                                                                       \
                int64_t o = (q * p->Ho + oh) * Wo;                                                          \
                col_sweep_##SUF(Wo, h1 - h0, hv + h0 * Wo, hi + h0 * Wo, y + o, ix + o);                    \
            }                                                                                               \
        }                                                                                                   \
        ember__free(ws, bytes);                                                                             \
        return true;                                                                                        \
    }
POOL_SWEEPS(float, int32_t, f32)
POOL_SWEEPS(double, int64_t, f64)
#undef POOL_SWEEPS

/* Average pooling (padding counted as zeros) in the same two sweeps: each
   full window's row sum of its kw values, added in window order, then the
   kh row sums of each output row's window, times 1 / (kh kw). Its adjoint
   spreads each output row's g / (kh kw) along a row of W (window by
   window, in order), then adds that row into the kh input rows of its
   window. The sums associate by rows, so they agree with the window scan
   within rounding. */
#define AVG_SWEEPS(T, SUF)                                                                                  \
    EMBER_SIMD static void avg_row_##SUF(const ember__pool_geom *p, const T *restrict xr, T *restrict d,    \
                                         T *restrict hv)                                                    \
    {                                                                                                       \
        const int64_t W = p->W, kw = p->kw, full = W - kw + 1;                                              \
        for (int64_t w = 0; w < full; w++) d[w] = xr[w];                                                    \
        for (int64_t k = 1; k < kw; k++)                                                                    \
            for (int64_t w = 0; w < full; w++) d[w] += xr[w + k];                                           \
        for (int64_t ow = 0; ow < p->Wo; ow++) {                                                            \
            int64_t w0 = ow * p->sw - p->pw;                                                                \
            if (w0 >= 0 && w0 < full) {                                                                     \
                hv[ow] = d[w0];                                                                             \
                continue;                                                                                   \
            }                                                                                               \
            int64_t a = w0 < 0 ? 0 : w0, b = w0 + kw < W ? w0 + kw : W;                                     \
            T sum = xr[a];                                                                                  \
            for (int64_t w = a + 1; w < b; w++) sum += xr[w];                                               \
            hv[ow] = sum;                                                                                   \
        }                                                                                                   \
    }                                                                                                       \
    EMBER_SIMD static void avg_col_##SUF(int64_t n, int64_t rows, int64_t stride, const T *restrict hv, T inv, \
                                         T *restrict y)                                                     \
    {                                                                                                       \
        for (int64_t o = 0; o < n; o++) y[o] = hv[o];                                                       \
        for (int64_t r = 1; r < rows; r++)                                                                  \
            for (int64_t o = 0; o < n; o++) y[o] += hv[r * stride + o];                                     \
        for (int64_t o = 0; o < n; o++) y[o] *= inv;                                                        \
    }                                                                                                       \
    EMBER_SIMD static void avg_spread_##SUF(const ember__pool_geom *p, const T *restrict g, T inv,          \
                                            T *restrict t, T *restrict gx, int64_t h0, int64_t h1)          \
    {                                                                                                       \
        const int64_t W = p->W;                                                                             \
        for (int64_t w = 0; w < W; w++) t[w] = 0;                                                           \
        for (int64_t ow = 0; ow < p->Wo; ow++) {                                                            \
            int64_t w0 = ow * p->sw - p->pw, a = w0 < 0 ? 0 : w0, b = w0 + p->kw < W ? w0 + p->kw : W;      \
            T v = g[ow] * inv;                                                                              \
            for (int64_t w = a; w < b; w++) t[w] += v;                                                      \
        }                                                                                                   \
        for (int64_t h = h0; h < h1; h++)                                                                   \
            for (int64_t w = 0; w < W; w++) gx[h * W + w] += t[w];                                          \
    }                                                                                                       \
    static bool avgpool_sweeps_##SUF(const ember__pool_geom *p, const T *src, T *dst, int64_t q0, int64_t q1, \
                                     bool bwd)                                                              \
    {                                                                                                       \
        const int64_t H = p->H, W = p->W, Ho = p->Ho, Wo = p->Wo;                                           \
        const T inv = (T)1 / (T)(p->kh * p->kw);                                                            \
        size_t bytes = (size_t)(bwd ? W : H * Wo + W) * sizeof(T);                                          \
        T *ws = ember__alloc(bytes);                                                                        \
        if (!ws) return false;                                                                              \
        for (int64_t q = q0; q < q1; q++) {                                                                 \
            if (bwd) {                                                                                      \
                for (int64_t oh = 0; oh < Ho; oh++) {                                                       \
                    int64_t h0 = oh * p->sh - p->ph, h1 = h0 + p->kh < H ? h0 + p->kh : H;                  \
                    avg_spread_##SUF(p, src + (q * Ho + oh) * Wo, inv, ws, dst + q * H * W, h0 < 0 ? 0 : h0, h1); \
                }                                                                                           \
                continue;                                                                                   \
            }                                                                                               \
            T *hv = ws, *d = ws + H * Wo;                                                                   \
            for (int64_t h = 0; h < H; h++) avg_row_##SUF(p, src + (q * H + h) * W, d, hv + h * Wo);        \
            for (int64_t oh = 0; oh < Ho; oh++) {                                                           \
                int64_t h0 = oh * p->sh - p->ph, h1 = h0 + p->kh < H ? h0 + p->kh : H;                      \
                h0 = h0 < 0 ? 0 : h0;                                                                       \
                avg_col_##SUF(Wo, h1 - h0, Wo, hv + h0 * Wo, inv, dst + (q * Ho + oh) * Wo);                \
            }                                                                                               \
        }                                                                                                   \
        ember__free(ws, bytes);                                                                             \
        return true;                                                                                        \
    }
AVG_SWEEPS(float, f32)
AVG_SWEEPS(double, f64)
#undef AVG_SWEEPS

bool ember__avgpool_sweeps(const ember__pool_geom *p, int dt, const void *src, void *dst, int64_t q0, int64_t q1,
                           bool bwd)
{
    if (dt == EMBER_FLOAT32) return avgpool_sweeps_f32(p, (const float *)src, (float *)dst, q0, q1, bwd);
    return avgpool_sweeps_f64(p, (const double *)src, (double *)dst, q0, q1, bwd);
}

bool ember__maxpool_sweeps(const ember__pool_geom *p, int dt, const void *x, void *y, int64_t *ix, int64_t q0,
                           int64_t q1)
{
    if (dt == EMBER_FLOAT32) return maxpool_sweeps_f32(p, (const float *)x, (float *)y, ix, q0, q1);
    return maxpool_sweeps_f64(p, (const double *)x, (double *)y, ix, q0, q1);
}

/* pool_window.c: max and average pooling for any window, stride and padding
   at the vector width (pool.c runs them for every case but its 2x2 stride-2
   float32 max kernels), and average pooling's adjoint. H x W planes, kh x kw
   windows.

   A window's maximum is taken in two sweeps over the whole plane, each a
   long loop over contiguous values: along the rows, every position's
   maximum of the kw values from it; then down the columns, every
   position's maximum of kh of those, kept where a window inside the plane
   starts (the windows that the padding cuts are scanned one by one). Each
   sweep keeps the earlier value on ties and takes a NaN wherever one comes,
   so the result is the window's first maximum in row-major order, or its
   last NaN, with its flat position in the plane: what the
   one-window-at-a-time scan gives (POOL_GT). Positions are carried in an
   integer as wide as the value (int32 for float32, which needs planes below
   2^31 values), so the selects stay in vector lanes. */
#include "nn.h"

#include <stdint.h>

#define POOL_GT(x, y) ((x) > (y) || (x) != (x))

/* the outputs whose windows lie inside the plane: rows [*oa, *ob), columns
   [*wa, *wb); false when there are none */
static bool inner_windows(const ember__pool_geom *p, int64_t *oa, int64_t *ob, int64_t *wa, int64_t *wb)
{
    *oa = (p->ph + p->sh - 1) / p->sh, *wa = (p->pw + p->sw - 1) / p->sw;
    *ob = p->H >= p->kh ? (p->H - p->kh + p->ph) / p->sh + 1 : 0;
    *wb = p->W >= p->kw ? (p->W - p->kw + p->pw) / p->sw + 1 : 0;
    *ob = *ob < p->Ho ? *ob : p->Ho, *wb = *wb < p->Wo ? *wb : p->Wo;
    return *oa < *ob && *wa < *wb;
}

/* output (oh, ow)'s window clipped to the plane: rows [*h0, *h1), columns [*w0, *w1) */
static void clipped_window(const ember__pool_geom *p, int64_t oh, int64_t ow, int64_t *h0, int64_t *h1, int64_t *w0,
                           int64_t *w1)
{
    int64_t h = oh * p->sh - p->ph, w = ow * p->sw - p->pw;
    *h1 = h + p->kh < p->H ? h + p->kh : p->H, *w1 = w + p->kw < p->W ? w + p->kw : p->W;
    *h0 = h < 0 ? 0 : h, *w0 = w < 0 ? 0 : w;
}

/* T the value, IT its position. hmax: over the whole plane read as one row
   of H W values, d[i] the maximum of x[i .. i + kw) (the windows that run
   past a row's end are never picked); vmax: e[i] the maximum of d[i],
   d[i + W], ..., d[i + (kh - 1) W]. Both are long unit-stride loops (a row
   at a time left a scalar tail with mispredicted selects on every short
   row: 3x3 stride-2 pooling of 56 x 56 planes ran at a tenth of the vector
   speed). */
#define POOL_SWEEPS(T, IT, SUF)                                                                             \
    EMBER_SIMD static void hmax_##SUF(const T *restrict x, int64_t n, int64_t kw, T *restrict d,             \
                                      IT *restrict dp)                                                      \
    {                                                                                                       \
        /* the first two taps from x (a plain copy would become a memcpy, slow on small planes) */         \
        if (kw == 1)                                                                                        \
            for (int64_t i = 0; i < n; i++) d[i] = x[i], dp[i] = (IT)i;                                     \
        else                                                                                                \
            for (int64_t i = 0; i < n; i++) {                                                               \
                bool gt = POOL_GT(x[i + 1], x[i]);                                                          \
                d[i] = gt ? x[i + 1] : x[i];                                                                \
                dp[i] = gt ? (IT)(i + 1) : (IT)i;                                                           \
            }                                                                                               \
        for (int64_t k = 2; k < kw; k++)                                                                    \
            for (int64_t i = 0; i < n; i++) {                                                               \
                T v = x[i + k];                                                                             \
                bool gt = POOL_GT(v, d[i]);                                                                 \
                d[i] = gt ? v : d[i];                                                                       \
                dp[i] = gt ? (IT)(i + k) : dp[i];                                                           \
            }                                                                                               \
    }                                                                                                       \
    EMBER_SIMD static void vmax_##SUF(const T *restrict d, const IT *restrict dp, int64_t n, int64_t kh,     \
                                      int64_t W, T *restrict e, IT *restrict ep)                            \
    {                                                                                                       \
        for (int64_t i = 0; i < n; i++) { /* kh > 1: the first two rows from d */                           \
            bool gt = POOL_GT(d[i + W], d[i]);                                                              \
            e[i] = gt ? d[i + W] : d[i];                                                                    \
            ep[i] = gt ? dp[i + W] : dp[i];                                                                 \
        }                                                                                                   \
        for (int64_t r = 2; r < kh; r++) {                                                                  \
            const T *restrict v = d + r * W;                                                                \
            const IT *restrict vp = dp + r * W;                                                             \
            for (int64_t i = 0; i < n; i++) {                                                               \
                bool gt = POOL_GT(v[i], e[i]);                                                              \
                e[i] = gt ? v[i] : e[i];                                                                    \
                ep[i] = gt ? vp[i] : ep[i];                                                                 \
            }                                                                                               \
        }                                                                                                   \
    }                                                                                                       \
    /* output (oh, ow)'s window scanned in row-major order, clipped to the plane */                         \
    static void scan_window_##SUF(const ember__pool_geom *p, const T *x, int64_t oh, int64_t ow, T *y,        \
                                  int64_t *ix)                                                              \
    {                                                                                                       \
        int64_t h0, h1, w0, w1;                                                                             \
        clipped_window(p, oh, ow, &h0, &h1, &w0, &w1);                                                      \
        T best = x[h0 * p->W + w0];                                                                         \
        int64_t at = h0 * p->W + w0;                                                                        \
        for (int64_t h = h0; h < h1; h++)                                                                   \
            for (int64_t w = w0; w < w1; w++)                                                               \
                if (POOL_GT(x[h * p->W + w], best)) best = x[h * p->W + w], at = h * p->W + w;              \
        *y = best;                                                                                          \
        *ix = at;                                                                                           \
    }                                                                                                       \
    static bool maxpool_sweeps_##SUF(const ember__pool_geom *p, const T *x, T *y, int64_t *ix, int64_t q0,   \
                                     int64_t q1)                                                            \
    {                                                                                                       \
        const int64_t H = p->H, W = p->W, Ho = p->Ho, Wo = p->Wo, HW = H * W;                               \
        if (sizeof(IT) < 8 && HW >= INT32_MAX) return false;                                                \
        int64_t oa, ob, wa, wb;                                                                             \
        bool inner = inner_windows(p, &oa, &ob, &wa, &wb);                                                  \
        size_t bytes = inner ? (size_t)HW * 2 * (sizeof(T) + sizeof(IT)) : 0;                               \
        char *ws = inner ? ember__alloc(bytes) : NULL;                                                      \
        if (inner && !ws) return false;                                                                     \
        T *d = (T *)ws, *e = d + HW;                                                                        \
        IT *dp = (IT *)(e + HW), *ep = dp + HW;                                                             \
        const int64_t n1 = HW - p->kw + 1, n2 = n1 - (p->kh - 1) * W;                                       \
        for (int64_t q = q0; q < q1; q++) {                                                                 \
            const T *xp = x + q * HW;                                                                       \
            T *yp = y + q * Ho * Wo;                                                                        \
            int64_t *ip = ix + q * Ho * Wo;                                                                 \
            if (inner) {                                                                                    \
                hmax_##SUF(xp, n1, p->kw, d, dp);                                                           \
                if (p->kh > 1) vmax_##SUF(d, dp, n2, p->kh, W, e, ep);                                      \
            }                                                                                               \
            const T *ev = p->kh > 1 ? e : d;                                                                \
            const IT *epv = p->kh > 1 ? ep : dp;                                                            \
            for (int64_t oh = 0; oh < Ho; oh++) {                                                           \
                bool row_in = inner && oh >= oa && oh < ob;                                                          \
                const int64_t at = (oh * p->sh - p->ph) * W - p->pw;                                        \
                for (int64_t ow = 0; ow < Wo; ow++) {                                                       \
                    if (row_in && ow == wa) {                                                               \
                        for (; ow < wb; ow++) {                                                             \
                            int64_t i = at + ow * p->sw;                                                    \
                            yp[oh * Wo + ow] = ev[i];                                                       \
                            ip[oh * Wo + ow] = (int64_t)epv[i];                                             \
                        }                                                                                   \
                        if (ow == Wo) break;                                                                \
                    }                                                                                       \
                    scan_window_##SUF(p, xp, oh, ow, yp + oh * Wo + ow, ip + oh * Wo + ow);                 \
                }                                                                                           \
            }                                                                                               \
        }                                                                                                   \
        if (ws) ember__free(ws, bytes);                                                                     \
        return true;                                                                                        \
    }
POOL_SWEEPS(float, int32_t, f32)
POOL_SWEEPS(double, int64_t, f64)
#undef POOL_SWEEPS

/* Average pooling (padding counted as zeros) in the same two sweeps over
   the whole plane: each position's sum of the kw values from it, added in
   window order, then each position's sum of kh of those, top to bottom,
   times 1 / (kh kw) where a window inside the plane starts; a window the
   padding cuts adds its clipped rows the same way, so every output is the
   bits the row-by-row sweeps gave. Its adjoint
   spreads each output row's g / (kh kw) along a row of W (window by
   window, in order), then adds that row into the kh input rows of its
   window. The sums associate by rows, so they agree with the window scan
   within rounding. */
#define AVG_SWEEPS(T, SUF)                                                                                  \
    /* hsum: d[i] = x[i] + ... + x[i + kw - 1] over the plane read as one row;            \
       vsum: e[i] = d[i] + d[i + W] + ... + d[i + (kh - 1) W] */                                          \
    EMBER_SIMD static void hsum_##SUF(const T *restrict x, int64_t n, int64_t kw, T *restrict d)           \
    {                                                                                                       \
        if (kw == 1)                                                                                        \
            for (int64_t i = 0; i < n; i++) d[i] = x[i];                                                    \
        else                                                                                                \
            for (int64_t i = 0; i < n; i++) d[i] = x[i] + x[i + 1];                                         \
        for (int64_t k = 2; k < kw; k++)                                                                    \
            for (int64_t i = 0; i < n; i++) d[i] += x[i + k];                                               \
    }                                                                                                       \
    EMBER_SIMD static void vsum_##SUF(const T *restrict d, int64_t n, int64_t kh, int64_t W, T *restrict e) \
    {                                                                                                       \
        for (int64_t i = 0; i < n; i++) e[i] = d[i] + d[i + W];                                             \
        for (int64_t r = 2; r < kh; r++)                                                                    \
            for (int64_t i = 0; i < n; i++) e[i] += d[i + r * W];                                           \
    }                                                                                                       \
    /* a window the padding cuts: its rows' sums, each left to right, added top to bottom */             \
    static T avg_scan_##SUF(const ember__pool_geom *p, const T *x, int64_t oh, int64_t ow)                   \
    {                                                                                                       \
        int64_t h0, h1, w0, w1;                                                                             \
        clipped_window(p, oh, ow, &h0, &h1, &w0, &w1);                                                      \
        T tot = 0;                                                                                          \
        for (int64_t h = h0; h < h1; h++) {                                                                 \
            T rs = x[h * p->W + w0];                                                                        \
            for (int64_t w = w0 + 1; w < w1; w++) rs += x[h * p->W + w];                                    \
            tot = h == h0 ? rs : tot + rs;                                                                  \
        }                                                                                                   \
        return tot;                                                                                         \
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
    /* 2 x 2 windows at stride 2, every one inside the plane: each output's four values added as the     \
       sweeps add them, (x00 + x01) + (x10 + x11), without the sweeps' sums at the positions no window    \
       starts at (three in four) */                                                                       \
    EMBER_SIMD static void avg2x2_##SUF(const T *restrict x, int64_t W, int64_t Ho, int64_t Wo, T inv,       \
                                        T *restrict y)                                                      \
    {                                                                                                       \
        for (int64_t oh = 0; oh < Ho; oh++) {                                                               \
            const T *restrict r0 = x + 2 * oh * W, *restrict r1 = r0 + W;                                   \
            T *restrict yo = y + oh * Wo;                                                                   \
            for (int64_t ow = 0; ow < Wo; ow++)                                                             \
                yo[ow] = ((r0[2 * ow] + r0[2 * ow + 1]) + (r1[2 * ow] + r1[2 * ow + 1])) * inv;             \
        }                                                                                                   \
    }                                                                                                       \
    static bool avgpool_sweeps_##SUF(const ember__pool_geom *p, const T *src, T *dst, int64_t q0, int64_t q1, \
                                     bool bwd)                                                              \
    {                                                                                                       \
        const int64_t H = p->H, W = p->W, Ho = p->Ho, Wo = p->Wo, HW = H * W;                               \
        const T inv = (T)1 / (T)(p->kh * p->kw);                                                            \
        int64_t oa, ob, wa, wb;                                                                             \
        bool inner = !bwd && inner_windows(p, &oa, &ob, &wa, &wb);                                          \
        if (inner && p->kh == 2 && p->kw == 2 && p->sh == 2 && p->sw == 2 && oa == 0 && wa == 0 && ob == Ho && \
            wb == Wo) {                                                                                     \
            for (int64_t q = q0; q < q1; q++) avg2x2_##SUF(src + q * HW, W, Ho, Wo, inv, dst + q * Ho * Wo);  \
            return true;                                                                                    \
        }                                                                                                   \
        size_t bytes = (size_t)(bwd ? W : inner ? 2 * HW : 1) * sizeof(T);                                  \
        T *ws = ember__alloc(bytes);                                                                        \
        if (!ws) return false;                                                                              \
        T *d = ws, *e = ws + HW;                                                                            \
        const int64_t n1 = HW - p->kw + 1, n2 = n1 - (p->kh - 1) * W;                                       \
        for (int64_t q = q0; q < q1; q++) {                                                                 \
            if (bwd) {                                                                                      \
                for (int64_t oh = 0; oh < Ho; oh++) {                                                       \
                    int64_t h0 = oh * p->sh - p->ph, h1 = h0 + p->kh < H ? h0 + p->kh : H;                  \
                    avg_spread_##SUF(p, src + (q * Ho + oh) * Wo, inv, ws, dst + q * H * W, h0 < 0 ? 0 : h0, h1); \
                }                                                                                           \
                continue;                                                                                   \
            }                                                                                               \
            const T *xp = src + q * HW, *ev = e;                                                            \
            T *yp = dst + q * Ho * Wo;                                                                      \
            if (inner) {                                                                                    \
                hsum_##SUF(xp, n1, p->kw, d);                                                               \
                if (p->kh > 1) vsum_##SUF(d, n2, p->kh, W, e);                                              \
                else ev = d;                                                                                \
            }                                                                                               \
            for (int64_t oh = 0; oh < Ho; oh++) {                                                           \
                bool row_in = inner && oh >= oa && oh < ob;                                                 \
                const int64_t at = (oh * p->sh - p->ph) * W - p->pw;                                        \
                for (int64_t ow = 0; ow < Wo; ow++) {                                                       \
                    if (row_in && ow == wa) {                                                               \
                        for (; ow < wb; ow++) yp[oh * Wo + ow] = ev[at + ow * p->sw] * inv;                 \
                        if (ow == Wo) break;                                                                \
                    }                                                                                       \
                    yp[oh * Wo + ow] = avg_scan_##SUF(p, xp, oh, ow) * inv;                                 \
                }                                                                                           \
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

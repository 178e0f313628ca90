/* pool_window.c: max and average pooling for any window, stride and padding
   at the vector width (pool.c runs them for every case but its 2x2 stride-2
   float32 max kernels), and average pooling's adjoint. H x W planes, kh x kw
   windows.

   Max pooling goes by rows (MAX_ROWS below): each input row reduced at the
   output columns, then each output row the maximum of its window's rows,
   the window's first maximum in row-major order or its last NaN, with its
   flat position in the plane where one is wanted: what the
   one-window-at-a-time scan gives (POOL_GT). Average pooling's forward
   goes the same way with sums (AVG_SWEEPS). */
#include "nn.h"

#include <stdint.h>
#include <string.h>

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

/* T the value, IT its position. Max pooling runs by rows: every input row
   that a window reads is reduced along the row at each output column only
   (hrow: m[j] the maximum of x[j sw .. j sw + kw), its first in the row or
   its last NaN), then each output row takes the maximum of its window's
   rows of m, top to bottom (vcol), keeping the earlier row on ties and a
   later NaN: the first maximum in row-major order, or the last NaN, as the
   one-window-at-a-time scan gives (POOL_GT), in (kw - 1) H Wo + (kh - 1) Ho
   Wo selects where the two sweeps over the whole plane took (kw + kh - 2) H
   W (3x3 stride 2: a quarter). Without positions (ix NULL: the forward no
   gradient needs) the selects move values only. The windows the padding
   cuts are reduced one by one along the row (hclip); rows are clipped by
   the vertical loop's bounds.
   Every loop reads and writes unit-stride and runs whole vectors: with a
   stride sw > 1 the plane is first split into its sw phases (ph[r][i] =
   x[i sw + r], one pass), so that a tap is a contiguous run of one phase
   (a strided load leaves GCC a scalar remainder on each short row); each
   row's loops run to a multiple of POOL_LANES, the extra columns read
   from the plane's next row and written past the row, then overwritten,
   where they stay inside the plane. Positions are int32 for float32
   (planes below 2^31 values), so the selects stay in vector lanes. */
#define POOL_LANES 16   /* the widest vector's float32 lanes */
static inline int64_t lanes_up(int64_t n) { return (n + POOL_LANES - 1) / POOL_LANES * POOL_LANES; }

/* v = the later value u where POOL_GT(u, v) (a bitwise or: branch-free in the loops' remainders);
   with at, u's position pu comes too */
#define MAX_SEL(v, u)                                                                                       \
    do {                                                                                                    \
        bool gt_ = ((u) > (v)) | ((u) != (u));                                                              \
        (v) = gt_ ? (u) : (v);                                                                              \
    } while (0)
#define MAX_SEL_AT(v, at, u, pu)                                                                            \
    do {                                                                                                    \
        bool gt_ = ((u) > (v)) | ((u) != (u));                                                              \
        (v) = gt_ ? (u) : (v);                                                                              \
        (at) = gt_ ? (pu) : (at);                                                                           \
    } while (0)
/* x[i] in the phases ph of stride sw (no division for 1 and 2: a row's taps would pay three) */
#define POOL_TAP(ph, sw, i) ((sw) == 1 ? (ph)[0] + (i) : (sw) == 2 ? (ph)[(i) & 1] + ((i) >> 1) : (ph)[(i) % (sw)] + (i) / (sw))
#define MAX_ROWS(T, IT, SUF)                                                                                \
    /* ph[r][i] = x[i sw + r], i < ceil((n - r) / sw) */                                                    \
    EMBER_SIMD static void phases_##SUF(const T *restrict x, int64_t n, int64_t sw, T *restrict *ph)         \
    {                                                                                                       \
        if (sw == 2) {                                                                                      \
            T *restrict e = ph[0], *restrict o = ph[1];                                                     \
            for (int64_t i = 0; i < n / 2; i++) e[i] = x[2 * i], o[i] = x[2 * i + 1];                       \
            if (n & 1) e[n / 2] = x[n - 1];                                                                 \
            return;                                                                                         \
        }                                                                                                   \
        for (int64_t r = 0; r < sw; r++) {                                                                  \
            T *restrict d = ph[r];                                                                          \
            for (int64_t i = 0; i * sw + r < n; i++) d[i] = x[i * sw + r];                                  \
        }                                                                                                   \
    }                                                                                                       \
    /* m[j], j < n: the maximum of the row's x[b + j sw + k], k < kw (ph its phases); mp[j] (if wanted)    \
       its position in the plane, b + j sw + k. Two or three taps in one pass, in registers */             \
    EMBER_SIMD static void hrow_##SUF(T *const *ph, int64_t sw, int64_t b, int64_t n, int64_t kw,           \
                                      T *restrict m, IT *restrict mp)                                       \
    {                                                                                                       \
        const T *restrict s = POOL_TAP(ph, sw, b);                                                          \
        const T *restrict s1 = kw > 1 ? POOL_TAP(ph, sw, b + 1) : s;                                        \
        const T *restrict s2 = kw > 2 ? POOL_TAP(ph, sw, b + 2) : s;                                        \
        if (kw == 1) {                                                                                      \
            for (int64_t j = 0; j < n; j++) m[j] = s[j];                                                    \
            if (mp)                                                                                         \
                for (int64_t j = 0; j < n; j++) mp[j] = (IT)(b + j * sw);                                   \
            return;                                                                                         \
        }                                                                                                   \
        if (!mp && kw <= 3) {                                                                               \
            for (int64_t j = 0; j < n; j++) {                                                               \
                T v = s[j];                                                                                 \
                MAX_SEL(v, s1[j]);                                                                          \
                if (kw == 3) MAX_SEL(v, s2[j]);                                                             \
                m[j] = v;                                                                                   \
            }                                                                                               \
            return;                                                                                         \
        }                                                                                                   \
        if (kw <= 3) {                                                                                      \
            for (int64_t j = 0; j < n; j++) {                                                               \
                T v = s[j];                                                                                 \
                IT at = (IT)(b + j * sw);                                                                   \
                MAX_SEL_AT(v, at, s1[j], at + 1);                                                           \
                if (kw == 3) MAX_SEL_AT(v, at, s2[j], (IT)(b + j * sw + 2));                                \
                m[j] = v, mp[j] = at;                                                                       \
            }                                                                                               \
            return;                                                                                         \
        }                                                                                                   \
        for (int64_t j = 0; j < n; j++) m[j] = s[j];                                                        \
        if (mp)                                                                                             \
            for (int64_t j = 0; j < n; j++) mp[j] = (IT)(b + j * sw);                                       \
        for (int64_t k = 1; k < kw; k++) {                                                                  \
            s = POOL_TAP(ph, sw, b + k);                                                                    \
            if (!mp) {                                                                                      \
                for (int64_t j = 0; j < n; j++) MAX_SEL(m[j], s[j]);                                        \
                continue;                                                                                   \
            }                                                                                               \
            for (int64_t j = 0; j < n; j++) MAX_SEL_AT(m[j], mp[j], s[j], (IT)(b + k + j * sw));            \
        }                                                                                                   \
    }                                                                                                       \
    /* y[j], j < n: the maximum of m[r pitch + j], r < rows; iy[j] (if wanted) its position; two or        \
       three rows in one pass */                                                                            \
    EMBER_SIMD static void vcol_##SUF(const T *restrict m, const IT *restrict mp, int64_t pitch, int64_t rows, \
                                      int64_t n, T *restrict y, int64_t *restrict iy)                       \
    {                                                                                                       \
        const T *restrict m1 = m + pitch, *restrict m2 = m + 2 * pitch;                                     \
        const IT *restrict p1 = iy ? mp + pitch : NULL, *restrict p2 = iy ? mp + 2 * pitch : NULL;          \
        if (!iy && rows <= 3) {                                                                             \
            for (int64_t j = 0; j < n; j++) {                                                               \
                T v = m[j];                                                                                 \
                if (rows >= 2) MAX_SEL(v, m1[j]);                                                           \
                if (rows == 3) MAX_SEL(v, m2[j]);                                                           \
                y[j] = v;                                                                                   \
            }                                                                                               \
            return;                                                                                         \
        }                                                                                                   \
        if (rows <= 3) {                                                                                    \
            for (int64_t j = 0; j < n; j++) {                                                               \
                T v = m[j];                                                                                 \
                IT at = mp[j];                                                                              \
                if (rows >= 2) MAX_SEL_AT(v, at, m1[j], p1[j]);                                             \
                if (rows == 3) MAX_SEL_AT(v, at, m2[j], p2[j]);                                             \
                y[j] = v, iy[j] = at;                                                                       \
            }                                                                                               \
            return;                                                                                         \
        }                                                                                                   \
        for (int64_t j = 0; j < n; j++) y[j] = m[j];                                                        \
        if (iy)                                                                                             \
            for (int64_t j = 0; j < n; j++) iy[j] = mp[j];                                                  \
        for (int64_t r = 1; r < rows; r++) {                                                                \
            const T *restrict u = m + r * pitch;                                                            \
            const IT *restrict up = iy ? mp + r * pitch : NULL;                                             \
            if (!iy) {                                                                                      \
                for (int64_t j = 0; j < n; j++) MAX_SEL(y[j], u[j]);                                        \
                continue;                                                                                   \
            }                                                                                               \
            for (int64_t j = 0; j < n; j++) MAX_SEL_AT(y[j], iy[j], u[j], (int64_t)up[j]);                  \
        }                                                                                                   \
    }                                                                                                       \
    /* average pooling's: m[j] the sum of the row's x[b + j sw + k], k < kw, added left to right */       \
    EMBER_SIMD static void hsum_##SUF(T *const *ph, int64_t sw, int64_t b, int64_t n, int64_t kw,           \
                                      T *restrict m)                                                        \
    {                                                                                                       \
        const T *restrict s = POOL_TAP(ph, sw, b);                                                          \
        const T *restrict s1 = kw > 1 ? POOL_TAP(ph, sw, b + 1) : s;                                        \
        const T *restrict s2 = kw > 2 ? POOL_TAP(ph, sw, b + 2) : s;                                        \
        if (kw == 1)                                                                                        \
            for (int64_t j = 0; j < n; j++) m[j] = s[j];                                                    \
        else if (kw == 2)                                                                                   \
            for (int64_t j = 0; j < n; j++) m[j] = s[j] + s1[j];                                            \
        else                                                                                                \
            for (int64_t j = 0; j < n; j++) m[j] = (s[j] + s1[j]) + s2[j];                                  \
        for (int64_t k = 3; k < kw; k++) {                                                                  \
            s = POOL_TAP(ph, sw, b + k);                                                                    \
            for (int64_t j = 0; j < n; j++) m[j] += s[j];                                                   \
        }                                                                                                   \
    }                                                                                                       \
    /* y[j] = (m[j] + m[pitch + j] + ...) inv over rows rows, added top to bottom */                        \
    EMBER_SIMD static void vsum_##SUF(const T *restrict m, int64_t pitch, int64_t rows, int64_t n, T inv,     \
                                      T *restrict y)                                                        \
    {                                                                                                       \
        const T *restrict m1 = m + pitch, *restrict m2 = m + 2 * pitch;                                     \
        if (rows == 1)                                                                                      \
            for (int64_t j = 0; j < n; j++) y[j] = m[j] * inv;                                              \
        else if (rows == 2)                                                                                 \
            for (int64_t j = 0; j < n; j++) y[j] = (m[j] + m1[j]) * inv;                                    \
        else if (rows == 3)                                                                                 \
            for (int64_t j = 0; j < n; j++) y[j] = ((m[j] + m1[j]) + m2[j]) * inv;                          \
        else {                                                                                              \
            for (int64_t j = 0; j < n; j++) y[j] = (m[j] + m1[j]) + m2[j];                                  \
            for (int64_t r = 3; r < rows; r++)                                                              \
                for (int64_t j = 0; j < n; j++) y[j] += m[r * pitch + j];                                   \
            for (int64_t j = 0; j < n; j++) y[j] *= inv;                                                    \
        }                                                                                                   \
    }                                                                                                       \
    /* output column ow's window clipped to the row, along rows [0, hn) of the plane x: into m[h pitch] \
       and mp[h pitch] (if wanted) its maximum, or with avg its sum, left to right */                      \
    static void hclip_##SUF(const ember__pool_geom *p, const T *x, int64_t hn, int64_t ow, T *m, IT *mp,     \
                            int64_t pitch, bool avg)                                                        \
    {                                                                                                       \
        int64_t w0 = ow * p->sw - p->pw, w1 = w0 + p->kw < p->W ? w0 + p->kw : p->W;                        \
        w0 = w0 < 0 ? 0 : w0;                                                                               \
        for (int64_t h = 0; h < hn; h++) {                                                                  \
            const T *r = x + h * p->W;                                                                      \
            T best = r[w0];                                                                                 \
            int64_t at = w0;                                                                                \
            if (avg)                                                                                        \
                for (int64_t c = w0 + 1; c < w1; c++) best += r[c];                                         \
            else                                                                                            \
                for (int64_t c = w0 + 1; c < w1; c++) MAX_SEL_AT(best, at, r[c], c);                         \
            m[h * pitch] = best;                                                                            \
            if (mp) mp[h * pitch] = (IT)(h * p->W + at);                                                    \
        }                                                                                                   \
    }                                                                                                       \
    /* planes [q0, q1): max pooling into y (and ix), or with avg average pooling (the sums times        \
       1 / (kh kw), padding counted as zeros: each row's sum left to right, the rows' top to bottom) */    \
    static bool pool_rows_##SUF(const ember__pool_geom *p, const T *x, T *y, int64_t *ix, int64_t q0,        \
                                int64_t q1, bool avg)                                                       \
    {                                                                                                       \
        const int64_t H = p->H, W = p->W, Ho = p->Ho, Wo = p->Wo, HW = H * W, sw = p->sw;                   \
        const T inv = (T)1 / (T)(p->kh * p->kw);                                                            \
        if ((sizeof(IT) < 8 && ix && HW >= INT32_MAX - POOL_LANES * sw) || sw > 64) return false;                      \
        int64_t oa, ob, wa, wb;                                                                             \
        inner_windows(p, &oa, &ob, &wa, &wb); /* the columns [wa, wb) whose windows the row holds */       \
        wa = wa < Wo ? wa : Wo, wb = wb > wa ? wb : wa;                                                     \
        /* the input rows some window reads: [0, hn) */                                                     \
        const int64_t last = (Ho - 1) * p->sh - p->ph + p->kh, hn = last < H ? last : H;                    \
        /* pitch: m's row; reach: what a row's padded loop reads from its first tap */                      \
        const int64_t ni = wb - wa, nip = lanes_up(ni), nv = lanes_up(Wo), c0 = wa * sw - p->pw;            \
        const int64_t pitch = wa + nip > nv ? wa + nip : nv, reach = c0 + (nip - 1) * sw + p->kw;           \
        const int64_t plen = (HW + sw - 1) / sw; /* a phase's length */                                     \
        size_t mbytes = (size_t)(hn * pitch) * (sizeof(T) + (ix ? sizeof(IT) : 0));                         \
        size_t bytes = mbytes + (sw > 1 ? (size_t)(sw * plen) * sizeof(T) : 0);                             \
        char *ws = ember__alloc(bytes);                                                                     \
        if (!ws) return false;                                                                              \
        memset(ws, 0, mbytes); /* the padded columns no row writes are read */                             \
        T *m = (T *)ws, *ph[64];                                                                            \
        IT *mp = ix ? (IT *)(m + hn * pitch) : NULL;                                                        \
        for (int64_t r = 0; r < sw; r++) ph[r] = (T *)(ws + mbytes) + r * plen;                             \
        for (int64_t q = q0; q < q1; q++) {                                                                 \
            const T *xp = x + q * HW;                                                                       \
            if (sw > 1 && ni > 0) phases_##SUF(xp, HW, sw, ph);                                             \
            else ph[0] = (T *)xp;                                                                           \
            for (int64_t h = 0; h < hn; h++) {                                                              \
                T *mr = m + h * pitch;                                                                      \
                IT *mpr = mp ? mp + h * pitch : NULL;                                                       \
                const int64_t n = h * W + reach <= HW ? nip : ni;                                           \
                if (ni > 0 && avg) hsum_##SUF(ph, sw, h * W + c0, n, p->kw, mr + wa);                         \
                else if (ni > 0) hrow_##SUF(ph, sw, h * W + c0, n, p->kw, mr + wa, mpr ? mpr + wa : NULL);   \
            }                                                                                               \
            /* after the rows, whose padded loops write past wb */                                          \
            for (int64_t ow = wa > 0 ? 0 : wb; ow < Wo; ow = ow + 1 == wa ? wb : ow + 1)                     \
                hclip_##SUF(p, xp, hn, ow, m + ow, mp ? mp + ow : NULL, pitch, avg);                        \
            for (int64_t oh = 0; oh < Ho; oh++) {                                                           \
                int64_t h0 = oh * p->sh - p->ph, h1 = h0 + p->kh < hn ? h0 + p->kh : hn;                    \
                h0 = h0 < 0 ? 0 : h0;                                                                       \
                const int64_t n = oh * Wo + nv <= Ho * Wo ? nv : Wo;                                        \
                if (avg) vsum_##SUF(m + h0 * pitch, pitch, h1 - h0, n, inv, y + (q * Ho + oh) * Wo);        \
                else                                                                                        \
                    vcol_##SUF(m + h0 * pitch, mp ? mp + h0 * pitch : NULL, pitch, h1 - h0, n,               \
                               y + (q * Ho + oh) * Wo, ix ? ix + (q * Ho + oh) * Wo : NULL);                \
            }                                                                                               \
        }                                                                                                   \
        ember__free(ws, bytes);                                                                             \
        return true;                                                                                        \
    }
MAX_ROWS(float, int32_t, f32)
MAX_ROWS(double, int64_t, f64)
#undef MAX_ROWS
#undef MAX_SEL
#undef MAX_SEL_AT

/* Average pooling (padding counted as zeros) goes by rows as max pooling
   does (pool_rows with avg): each row's sum at the output columns, added
   left to right, then each output row's sum of its window's rows, top to
   bottom, times 1 / (kh kw); a window the padding cuts adds its clipped
   rows the same way: the bits the two sweeps over the whole plane gave
   before. 2 x 2 windows at stride 2 inside the plane have a kernel of
   their own (avg2x2). Its adjoint spreads each output row's g / (kh kw)
   along a row of W (window by window, in order), then adds that row into
   the kh input rows of its window. The sums associate by rows, so they
   agree with the window scan within rounding. */
#define AVG_SWEEPS(T, SUF)                                                                                  \
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
        if (!bwd) return pool_rows_##SUF(p, src, dst, NULL, q0, q1, true);                                  \
        size_t bytes = (size_t)W * sizeof(T);                                                               \
        T *ws = ember__alloc(bytes);                                                                        \
        if (!ws) return false;                                                                              \
        for (int64_t q = q0; q < q1; q++)                                                                   \
            for (int64_t oh = 0; oh < Ho; oh++) {                                                           \
                int64_t h0 = oh * p->sh - p->ph, h1 = h0 + p->kh < H ? h0 + p->kh : H;                      \
                avg_spread_##SUF(p, src + (q * Ho + oh) * Wo, inv, ws, dst + q * H * W, h0 < 0 ? 0 : h0, h1); \
            }                                                                                               \
        ember__free(ws, bytes);                                                                             \
        return true;                                                                                        \
    }
AVG_SWEEPS(float, f32)
AVG_SWEEPS(double, f64)
#undef AVG_SWEEPS
#undef POOL_TAP

bool ember__avgpool_sweeps(const ember__pool_geom *p, int dt, const void *src, void *dst, int64_t q0, int64_t q1,
                           bool bwd)
{
    if (dt == EMBER_FLOAT32) return avgpool_sweeps_f32(p, (const float *)src, (float *)dst, q0, q1, bwd);
    return avgpool_sweeps_f64(p, (const double *)src, (double *)dst, q0, q1, bwd);
}

bool ember__maxpool_sweeps(const ember__pool_geom *p, int dt, const void *x, void *y, int64_t *ix, int64_t q0,
                           int64_t q1)
{
    if (dt == EMBER_FLOAT32) return pool_rows_f32(p, (const float *)x, (float *)y, ix, q0, q1, false);
    return pool_rows_f64(p, (const double *)x, (double *)y, ix, q0, q1, false);
}

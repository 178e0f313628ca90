/* pool.h: the arithmetic of max and average pooling and their adjoints, one
   output (or input) element per call, over contiguous (N, C, H, W) planes
   with the core's geometry (ember__pool_plan_make). T is the compute type:
   float for float32, float16 and bfloat16, double for float64, as the CPU's
   pool.c computes them; loads and stores go through dtype.h. cuDNN's max
   pooling returns no indices, which max_pool2d gives and its adjoint takes,
   so both pools are kernels of their own. */
#ifndef EMBER_CUDA_POOL_H
#define EMBER_CUDA_POOL_H

#include "dtype.h"
#include "ops/ops.h"

namespace ember_cuda {

/* a pooling op's geometry and the dtype (and its size) of its operands */
struct pool_args {
    ember__pool_geom p;
    int dt, es;
};

/* rows [h0, h1) and columns [w0, w1) of output (oh, ow)'s window, clipped to the plane */
struct pool_window {
    int64_t h0, h1, w0, w1;
};

EMBER_HD pool_window window_of(const ember__pool_geom &p, int64_t oh, int64_t ow)
{
    int64_t h = oh * p.sh - p.ph, w = ow * p.sw - p.pw;
    return {h < 0 ? 0 : h, h + p.kh < p.H ? h + p.kh : p.H, w < 0 ? 0 : w, w + p.kw < p.W ? w + p.kw : p.W};
}

/* NaN-aware x > y, the CPU's POOL_GT: the first maximum in window order wins,
   or the last NaN (a NaN over anything), as PyTorch's max_pool2d */
template <class T> EMBER_HD bool pool_gt(T x, T y) { return x > y || x != x; }

/* element e of planes of rows x cols: its plane, row and column */
struct plane_pos {
    int64_t plane, row, col;
};

EMBER_HD plane_pos position_of(int64_t e, int64_t rows, int64_t cols)
{
    return {e / (rows * cols), e / cols % rows, e % cols};
}

/* average pooling's scale 1 / (kh kw), rounded in the compute type as pool.c rounds it */
template <class T> EMBER_HD T avg_scale(const ember__pool_geom &p) { return (T)1 / (T)(p.kh * p.kw); }

/* max_pool2d's output o (flat over N, C, Ho, Wo): its value into y and the
   flat position h W + w of the maximum in its plane into idx */
template <class T> EMBER_HD void max_pool_at(const pool_args &a, const char *x, char *y, int64_t *idx, int64_t o)
{
    const ember__pool_geom &p = a.p;
    const plane_pos at_o = position_of(o, p.Ho, p.Wo);
    const char *xp = x + at_o.plane * p.H * p.W * a.es;
    pool_window r = window_of(p, at_o.row, at_o.col);
    int64_t at = r.h0 * p.W + r.w0;
    T best = load<T>(xp + at * a.es, a.dt);
    for (int64_t h = r.h0; h < r.h1; h++)
        for (int64_t w = r.w0; w < r.w1; w++) {
            T v = load<T>(xp + (h * p.W + w) * a.es, a.dt);
            if (pool_gt(v, best)) {
                best = v;
                at = h * p.W + w;
            }
        }
    store<T>(y + o * a.es, a.dt, best);
    idx[o] = at;
}

/* avg_pool2d's output o: the window's sum (padding counts as zeros) times 1 / (kh kw) */
template <class T> EMBER_HD void avg_pool_at(const pool_args &a, const char *x, char *y, int64_t o)
{
    const ember__pool_geom &p = a.p;
    const plane_pos at_o = position_of(o, p.Ho, p.Wo);
    const char *xp = x + at_o.plane * p.H * p.W * a.es;
    pool_window r = window_of(p, at_o.row, at_o.col);
    /* the CPU's order (pool_window.c): each window row summed from its first
       value, then the rows' sums added from the first row's */
    T sum = 0;
    for (int64_t h = r.h0; h < r.h1; h++) {
        const char *row = xp + h * p.W * a.es;
        T rs = r.w0 < r.w1 ? load<T>(row + r.w0 * a.es, a.dt) : (T)0;
        for (int64_t w = r.w0 + 1; w < r.w1; w++) rs += load<T>(row + w * a.es, a.dt);
        sum = h == r.h0 ? rs : sum + rs;
    }
    store<T>(y + o * a.es, a.dt, sum * avg_scale<T>(p));
}

/* the outputs [lo, hi) along one dim whose windows (k wide, stride s, padding
   pd) cover input position i */
EMBER_HD void covering(int64_t i, int64_t k, int64_t s, int64_t pd, int64_t n_out, int64_t *lo, int64_t *hi)
{
    int64_t first = i + pd - k + 1;   /* o s >= first */
    *lo = first <= 0 ? 0 : (first + s - 1) / s;
    int64_t last = (i + pd) / s + 1;  /* o s <= i + pd */
    *hi = last < n_out ? last : n_out;
}

/* avg_pool2d_backward's input element i (flat over N, C, H, W): the sum of
   g / (kh kw) over the windows that cover it, in the CPU's order (each g
   times 1 / (kh kw) rounded first, a window row's terms added first, then
   the rows in order), so the same value */
template <class T> EMBER_HD void avg_pool_backward_at(const pool_args &a, const char *g, char *gx, int64_t i)
{
    const ember__pool_geom &p = a.p;
    const plane_pos at_i = position_of(i, p.H, p.W);
    const char *gp = g + at_i.plane * p.Ho * p.Wo * a.es;
    const T scale = avg_scale<T>(p);
    int64_t oh0, oh1, ow0, ow1;
    covering(at_i.row, p.kh, p.sh, p.ph, p.Ho, &oh0, &oh1);
    covering(at_i.col, p.kw, p.sw, p.pw, p.Wo, &ow0, &ow1);
    T sum = 0;
    for (int64_t oh = oh0; oh < oh1; oh++) {
        T row = 0;   /* the CPU spreads a window row's terms along the row first */
        for (int64_t ow = ow0; ow < ow1; ow++) row += load<T>(gp + (oh * p.Wo + ow) * a.es, a.dt) * scale;
        sum += row;
    }
    store<T>(gx + i * a.es, a.dt, sum);
}

/* max_pool2d_backward's output gradient k goes to input element *at (flat
   over N, C, H, W) of the compute-type result; false when its index lies
   outside the plane */
EMBER_HD bool max_pool_backward_target(const ember__pool_geom &p, const int64_t *idx, int64_t k, int64_t *at)
{
    const int64_t HW = p.H * p.W, ix = idx[k];
    *at = k / (p.Ho * p.Wo) * HW + ix;
    return ix >= 0 && ix < HW;
}

}   // namespace ember_cuda

#endif

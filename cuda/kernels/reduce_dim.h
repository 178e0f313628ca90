/* reduce_dim.h: the arithmetic of the reductions that need more than one
   combine: var, logsumexp and norm (statistics in double, in one or two passes
   over a slice, as the CPU's row kernels in core/src/ops/reduce.c compute
   them), and max/min along a dim with indices, argmax and argmin (a value and
   its position, the first NaN or else the first extreme winning, as the CPU's
   row_extreme). Slices are reduce.h's (ecu_reduce). */
#ifndef EMBER_CUDA_REDUCE_DIM_H
#define EMBER_CUDA_REDUCE_DIM_H

#include "index.h"
#include "reduce.h"

/* VAR (unbiased), LOGSUMEXP, NORM (of order p) */
typedef struct ecu_stat {
    int32_t op, unbiased;
    double p;
} ecu_stat;

namespace ember_cuda {

/* var sums x, then (x - mean)^2; logsumexp takes the max m, then sums
   exp(x - m); norm sums |x|, x^2 or |x|^p, or (p = inf) takes the max |x| */
EMBER_HD int stat_passes(const ecu_stat &s) { return s.op == EMBER_OP_NORM ? 1 : 2; }

EMBER_HD bool stat_takes_max(const ecu_stat &s, int pass)
{
    return pass == 0 && (s.op == EMBER_OP_LOGSUMEXP || (s.op == EMBER_OP_NORM && isinf(s.p)));
}

EMBER_HD double stat_identity(const ecu_stat &s, int pass) { return stat_takes_max(s, pass) ? -INFINITY : 0.0; }

/* x's term in a pass; c is the first pass's result (var: the mean, logsumexp: the max) */
EMBER_HD double stat_term(const ecu_stat &s, int pass, double x, double c)
{
    switch (s.op) {
    case EMBER_OP_VAR: return pass == 0 ? x : (x - c) * (x - c);
    case EMBER_OP_LOGSUMEXP: return pass == 0 ? x : exp(x - c);
    case EMBER_OP_NORM: return isinf(s.p) || s.p == 1 ? fabs(x) : s.p == 2 ? x * x : pow(fabs(x), s.p);
    default: return NAN;   /* never: the forward runs VAR, LOGSUMEXP and NORM alone here */
    }
}

/* a max propagates NaN */
EMBER_HD double stat_combine(const ecu_stat &s, int pass, double a, double b)
{
    return stat_takes_max(s, pass) ? ((is_nan(a) || a > b) ? a : b) : a + b;
}

/* the value the second pass is centred on, from the first's */
EMBER_HD double stat_center(const ecu_stat &s, double first, int64_t len)
{
    return s.op == EMBER_OP_VAR ? first / (double)len : first;
}

/* the result from the passes' */
EMBER_HD double stat_finish(const ecu_stat &s, double first, double second, int64_t len)
{
    switch (s.op) {
    case EMBER_OP_VAR: return second / (double)(len - (s.unbiased ? 1 : 0));
    case EMBER_OP_LOGSUMEXP: return is_nan(first) || isinf(first) ? first : first + log(second);
    case EMBER_OP_NORM: return isinf(s.p) || s.p == 1 ? first : s.p == 2 ? sqrt(first) : pow(first, 1 / s.p);
    default: return NAN;   /* never: the forward runs VAR, LOGSUMEXP and NORM alone here */
    }
}

/* elements begin, begin + step, ... of result o's slice, through one pass */
template <class Index>
EMBER_HD double stat_slice(const ecu_reduce &r, const ecu_stat &s, int pass, double c, Index o, Index begin, Index step)
{
    int dt = r.inner.dtype[0];
    return slice_fold(r, o, begin, step, stat_identity(s, pass), [&](double acc, const char *x, Index) {
        return stat_combine(s, pass, acc, stat_term(s, pass, load<double>(x, dt), c));
    });
}

/* The two-pass form (reduce.h's reduce_chunks), per pass: chunk b % chunks
   of result o = b / chunks through the pass, centred on the first pass's
   result of o (first[o]), then each result's chunks combined. */
template <class Index>
EMBER_HD double stat_chunk(const ecu_reduce &r, const ecu_stat &s, int pass, const double *first, int64_t chunks,
                           int64_t b, Index t, Index threads)
{
    Index o = (Index)(b / chunks);
    double c = pass ? stat_center(s, first[o], r.len) : 0;
    return stat_slice(r, s, pass, c, o, (Index)((b % chunks) * threads) + t, (Index)(chunks * threads));
}

EMBER_HD double stat_partials(const ecu_stat &s, int pass, const double *partial, int64_t o, int64_t chunks,
                              int64_t begin, int64_t step)
{
    return fold_partials(partial, o, chunks, begin, step, stat_identity(s, pass),
                         [&](double a, double b) { return stat_combine(s, pass, a, b); });
}

/* After a pass's results v: first[o] keeps the first pass's, the last stores the statistic */
template <class Index>
EMBER_HD void stat_pass_done(const ecu_reduce &r, const ecu_stat &s, int pass, double *first, Index o, double v)
{
    if (pass == 0) first[o] = v;
    if (pass + 1 == stat_passes(s)) reduce_store(r, s.op, o, stat_finish(s, first[o], v, r.len));
}

/* a candidate of an arg reduction: a value and its position in the slice (-1: none yet) */
template <class Acc> struct ecu_arg {
    Acc v;
    int64_t i;
};

/* the winner of two candidates: a NaN, else the larger (sign 1) or smaller
   (-1) value; of equals, the earlier position */
template <class Acc> EMBER_HD ecu_arg<Acc> arg_combine(int sign, ecu_arg<Acc> a, ecu_arg<Acc> b)
{
    if (a.i < 0 || b.i < 0) return a.i < 0 ? b : a;
    bool an = is_nan(a.v), bn = is_nan(b.v);
    if (an || bn) return an && (!bn || a.i < b.i) ? a : b;
    if (a.v == b.v) return a.i < b.i ? a : b;
    return (sign > 0 ? a.v > b.v : a.v < b.v) ? a : b;
}

template <class Acc, class Index>
EMBER_HD ecu_arg<Acc> arg_slice(const ecu_reduce &r, int sign, Index o, Index begin, Index step)
{
    int dt = r.inner.dtype[0];
    return slice_fold(r, o, begin, step, ecu_arg<Acc>{Acc(0), -1}, [&](ecu_arg<Acc> acc, const char *x, Index j) {
        return arg_combine(sign, acc, ecu_arg<Acc>{load<Acc>(x, dt), (int64_t)j});
    });
}

/* Stores result o: its position into the int64 output, and (max_dim,
   min_dim) the element there into values, a contiguous tensor of esize-byte
   elements in the output's shape. */
template <class Index> EMBER_HD void arg_store(const ecu_reduce &r, Index o, int64_t best, char *values, int esize)
{
    Index base[2], off[1];
    iter_offsets(r.outer, o, base);
    *(int64_t *)(r.outer.data[0] + base[0]) = best;
    if (!values) return;
    iter_offsets(r.inner, (Index)best, off);
    copy_element(values + (int64_t)o * esize, r.outer.data[1] + base[1] + off[0], esize);
}

}   // namespace ember_cuda

#endif

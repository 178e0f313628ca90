/* reduce.h: the arithmetic of the reduction kernels (sum, mean, max and min
   of all elements). Each result reduces one slice of the input: the outer
   iterator maps a result to its output element and the start of its slice,
   the inner one an index within the slice to its offset. Sums accumulate in
   double for the float dtypes (the CPU sums float32 in blocks combined in
   double) and in int64 for integers and bool (exact, as on the CPU), means
   in double; max and min compare in the same types and propagate NaN. */
#ifndef EMBER_CUDA_REDUCE_H
#define EMBER_CUDA_REDUCE_H

#include <float.h>

#include "elementwise.h"

typedef struct ecu_reduce {
    ecu_iter outer;   /* operands: the output, the input at a slice's start; over the kept dims */
    ecu_iter inner;   /* operands: the input (and for a row-wise op the output) within a slice */
    int64_t len;      /* elements in a slice */
} ecu_reduce;

namespace ember_cuda {

template <class Acc> EMBER_HD Acc reduce_identity(int op);
template <> EMBER_HD double reduce_identity<double>(int op)
{
    return op == EMBER_OP_AMAX_ALL ? -INFINITY : op == EMBER_OP_AMIN_ALL ? INFINITY : 0.0;
}
template <> EMBER_HD int64_t reduce_identity<int64_t>(int op)
{
    return op == EMBER_OP_AMAX_ALL ? INT64_MIN : op == EMBER_OP_AMIN_ALL ? INT64_MAX : 0;
}

/* the reductions reduce_combine folds: the forward refuses any other, so
   its switch has no case to fall back on */
inline bool has_combine(int op)
{
    return op == EMBER_OP_SUM || op == EMBER_OP_MEAN || op == EMBER_OP_AMAX_ALL || op == EMBER_OP_AMIN_ALL;
}

template <class Acc> EMBER_HD Acc reduce_combine(int op, Acc a, Acc b)
{
    switch (op) {
    case EMBER_OP_AMAX_ALL: return (is_nan(a) || a > b) ? a : b;
    case EMBER_OP_AMIN_ALL: return (is_nan(a) || a < b) ? a : b;
    case EMBER_OP_SUM: case EMBER_OP_MEAN: return a + b;
    default: return a;   /* never: has_combine */
    }
}

/* acc = f(acc, element, j) over elements j = begin, begin + step, ... of
   result o's slice (the element's address; its dtype is r.inner.dtype[0]) */
template <class Acc, class Index, class F>
EMBER_HD Acc slice_fold(const ecu_reduce &r, Index o, Index begin, Index step, Acc acc, F f)
{
    Index base[2], off[1];
    iter_offsets(r.outer, o, base);
    const char *in = r.outer.data[1] + base[1];
    for (Index j = begin; j < (Index)r.len; j += step) {
        iter_offsets(r.inner, j, off);
        acc = f(acc, in + off[0], j);
    }
    return acc;
}

/* Elements begin, begin + step, ... of result o's slice, combined. */
template <class Acc, class Index>
EMBER_HD Acc reduce_slice(const ecu_reduce &r, int op, Index o, Index begin, Index step)
{
    int dt = r.outer.dtype[1];
    return slice_fold(r, o, begin, step, reduce_identity<Acc>(op),
                      [&](Acc acc, const char *x, Index) { return reduce_combine(op, acc, load<Acc>(x, dt)); });
}

/* The two-pass form of a reduction with few results over long slices (a
   full sum): each result's slice is split into chunks, one block each, so
   the whole device works on it; chunk c's threads take elements
   c * threads + t, stepping chunks * threads. A second kernel combines the
   chunks' partial results. Each thread still takes at least 16 elements,
   and about max_blocks blocks run in all. 1: one block per result. */
inline int64_t reduce_chunks(int64_t results, int64_t len, int64_t threads)
{
    const int64_t per_thread = 16, max_blocks = 4096;
    int64_t c = len / (threads * per_thread), cap = max_blocks / (results > 0 ? results : 1);
    if (c > cap) c = cap;
    return c < 2 ? 1 : c;
}

/* acc = f(acc, partial) over partials begin, begin + step, ... of result o's chunks */
template <class Acc, class F>
EMBER_HD Acc fold_partials(const Acc *partial, int64_t o, int64_t chunks, int64_t begin, int64_t step, Acc acc, F f)
{
    for (int64_t c = begin; c < chunks; c += step) acc = f(acc, partial[o * chunks + c]);
    return acc;
}

template <class Acc>
EMBER_HD Acc combine_partials(int op, const Acc *partial, int64_t o, int64_t chunks, int64_t begin, int64_t step)
{
    return fold_partials(partial, o, chunks, begin, step, reduce_identity<Acc>(op),
                         [op](Acc a, Acc b) { return reduce_combine(op, a, b); });
}

/* Stores result o from its combined slice. */
template <class Acc, class Index>
EMBER_HD void reduce_store(const ecu_reduce &r, int op, Index o, Acc acc)
{
    Index base[1];
    iter_offsets(r.outer, o, base);
    if (op == EMBER_OP_MEAN) acc = acc / (Acc)r.len;
    store<Acc>(r.outer.data[0] + base[0], r.outer.dtype[0], acc);
}

/* softmax and log_softmax of a row, as the CPU computes them: the row's max
   m (NaN if any is; 0 for a row of -inf), s = sum exp(x - m) in double; then
   float32 takes exp in float and one float scale (or log s), every other
   dtype computes in double. */
EMBER_HD double softmax_max(double m) { return isinf(m) && m < 0 ? 0 : m; }

template <class Index>
EMBER_HD double softmax_sum(const ecu_reduce &r, Index row, Index begin, Index step, double m)
{
    int dt = r.inner.dtype[0];
    bool f32 = r.inner.dtype[1] == EMBER_FLOAT32;
    return slice_fold(r, row, begin, step, 0.0, [&](double s, const char *x, Index) {
        return s + (f32 ? (double)ember__expf(load<float>(x, dt) - (float)m) : exp(load<double>(x, dt) - m));
    });
}

template <class Index>
EMBER_HD void softmax_write(const ecu_reduce &r, int op, Index row, Index begin, Index step, double m, double s)
{
    Index base[2], off[2];
    iter_offsets(r.outer, row, base);
    const char *in = r.outer.data[1] + base[1];
    char *out = r.outer.data[0] + base[0];
    int dt = r.inner.dtype[0], odt = r.inner.dtype[1];
    bool log_of = op == EMBER_OP_LOG_SOFTMAX;
    for (Index j = begin; j < (Index)r.len; j += step) {
        iter_offsets(r.inner, j, off);
        if (odt == EMBER_FLOAT32) {
            float v = load<float>(in + off[0], dt) - (float)m;
            store<float>(out + off[1], odt, log_of ? v - (float)log(s) : ember__expf(v) * (float)(1.0 / s));
        } else {
            double v = load<double>(in + off[0], dt) - m;
            store<double>(out + off[1], odt, log_of ? v - log(s) : exp(v) / s);
        }
    }
}

/* What a reduction accumulates in: integer sums, maxima and minima in int64
   (exact), everything else in double */
inline ecu_compute reduce_compute(int op, int dt)
{
    return is_float_dtype(dt) || op == EMBER_OP_MEAN ? ECU_DOUBLE : ECU_INT64;
}

}   // namespace ember_cuda

#endif

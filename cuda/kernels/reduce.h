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
    ecu_iter inner;   /* operand 0: the input within a slice; over the reduced dims */
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

template <class Acc> EMBER_HD Acc reduce_combine(int op, Acc a, Acc b)
{
    switch (op) {
    case EMBER_OP_AMAX_ALL: return (is_nan(a) || a > b) ? a : b;
    case EMBER_OP_AMIN_ALL: return (is_nan(a) || a < b) ? a : b;
    default: return a + b;   /* SUM, MEAN */
    }
}

/* Elements begin, begin + step, ... of result o's slice, combined. */
template <class Acc, class Index>
EMBER_HD Acc reduce_slice(const ecu_reduce &r, int op, Index o, Index begin, Index step)
{
    Index base[2], off[1];
    iter_offsets(r.outer, o, base);
    const char *in = r.outer.data[1] + base[1];
    int dt = r.outer.dtype[1];
    Acc acc = reduce_identity<Acc>(op);
    for (Index j = begin; j < (Index)r.len; j += step) {
        iter_offsets(r.inner, j, off);
        acc = reduce_combine(op, acc, load<Acc>(in + off[0], dt));
    }
    return acc;
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

/* What a reduction accumulates in: integer sums, maxima and minima in int64
   (exact), everything else in double */
inline ecu_compute reduce_compute(int op, int dt)
{
    return is_float_dtype(dt) || op == EMBER_OP_MEAN ? ECU_DOUBLE : ECU_INT64;
}

}   // namespace ember_cuda

#endif

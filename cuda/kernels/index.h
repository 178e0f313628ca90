/* index.h: the arithmetic of the index kernels: index_select and gather
   (a copy from the indexed row of the source), scatter_add and index_add (an
   add into the indexed row of the result), and the check of an index's
   values (or of an integer exponent's sign). Each walks an iterator of three operands (ecu_index): the result,
   the source and the index, laid over one shape so that the operand that is
   indexed has stride 0 along the indexed dim, and the index's value k adds
   k * step bytes to it. On the device the adds are atomic: each is exact,
   but floats are added in the order the threads arrive, so float sums into
   one element may round differently from run to run (PyTorch's index_add_
   on CUDA is likewise nondeterministic). */
#ifndef EMBER_CUDA_INDEX_H
#define EMBER_CUDA_INDEX_H

#include <stdint.h>

#include "dtype.h"
#include "iter.h"

typedef struct ecu_index {
    ecu_iter it;     /* operands: the result, the source, the index */
    int64_t step;    /* bytes between rows of the indexed operand along the dim */
    int32_t esize;   /* bytes of an element of the result */
} ecu_index;

namespace ember_cuda {

/* the index's value at element i, and the byte offsets of the result and source */
template <class Index> EMBER_HD int64_t index_at(const ecu_index &x, Index i, Index (&off)[3])
{
    iter_offsets(x.it, i, off);
    return load<int64_t>(x.it.data[2] + off[2], x.it.dtype[2]);
}

EMBER_HD void copy_element(char *dst, const char *src, int esize)
{
    switch (esize) {
    case 1: *dst = *src; break;
    case 2: *(uint16_t *)dst = *(const uint16_t *)src; break;
    case 4: *(uint32_t *)dst = *(const uint32_t *)src; break;
    default: *(uint64_t *)dst = *(const uint64_t *)src; break;
    }
}

/* index_select, gather: element i of the result from the source's row k */
template <class Index> EMBER_HD void gather_at(const ecu_index &x, Index i)
{
    Index off[3];
    int64_t k = index_at(x, i, off);
    copy_element(x.it.data[0] + off[0], x.it.data[1] + off[1] + k * x.step, x.esize);
}

/* *d += *s as the CPU's scatter adds it: float32, float64 and int64 (wrapping)
   natively, every other dtype through double, stored with the CPU's rules
   (saturating integers, bool an or) */
EMBER_HD void add_element(char *d, int dt, const char *s)
{
    switch (dt) {
    case EMBER_FLOAT32: *(float *)d += *(const float *)s; break;
    case EMBER_FLOAT64: *(double *)d += *(const double *)s; break;
    case EMBER_INT64: {
        uint64_t sum = (uint64_t)*(const int64_t *)d + (uint64_t)*(const int64_t *)s;
        *(int64_t *)d = (int64_t)sum;
        break;
    }
    default: ember__store(d, dt, ember__load(d, dt) + ember__load(s, dt)); break;
    }
}

#ifdef __CUDA_ARCH__
/* add_element as one atomic step: the hardware's adds where they are the
   same arithmetic, otherwise a compare-and-swap of the aligned 32-bit word
   holding the element (1-, 2- and 4-byte dtypes; device blocks are whole
   words) */
__device__ inline void add_element_atomic(char *d, int dt, const char *s)
{
    switch (dt) {
    case EMBER_FLOAT32: atomicAdd((float *)d, *(const float *)s); return;
    case EMBER_FLOAT64: atomicAdd((double *)d, *(const double *)s); return;
    case EMBER_INT64:
        atomicAdd((unsigned long long *)d, (unsigned long long)*(const int64_t *)s);
        return;
    default: break;
    }
    uintptr_t at = (uintptr_t)d & 3;
    unsigned *word = (unsigned *)(d - at);
    unsigned old = *word, seen;
    do {
        seen = old;
        unsigned next = seen;
        add_element((char *)&next + at, dt, s);
        old = atomicCAS(word, seen, next);
    } while (old != seen);
}
#endif

/* scatter_add, index_add: source element i added into the result's row k */
template <class Index> EMBER_HD void scatter_add_at(const ecu_index &x, Index i)
{
    Index off[3];
    int64_t k = index_at(x, i, off);
    char *d = x.it.data[0] + off[0] + k * x.step;
#ifdef __CUDA_ARCH__
    add_element_atomic(d, x.it.dtype[0], x.it.data[1] + off[1]);
#else
    add_element(d, x.it.dtype[0], x.it.data[1] + off[1]);
#endif
}

/* Whether element i of an integer tensor (a one-operand iterator) is outside
   [0, max]: an index (max = size - 1), an integer exponent (max = INT64_MAX) */
template <class Index> EMBER_HD bool outside(const ecu_iter &t, Index i, int64_t max)
{
    Index off[1];
    iter_offsets(t, i, off);
    int64_t k = load<int64_t>(t.data[0] + off[0], t.dtype[0]);
    return k < 0 || k > max;
}

}   // namespace ember_cuda

#endif

/* iter.h: the strided, broadcasting iterator of the device kernels. The host
   side (cuda/src/iter.cpp) describes up to ECU_MAX_OPERANDS operands of one
   broadcast shape, output first: a stride of 0 on a broadcast dim, dims merged
   where the memory allows it, so contiguous operands are one flat dim. A
   kernel maps a linear index to each operand's element offset; when every
   offset fits in 31 bits it does so in 32-bit arithmetic. */
#ifndef EMBER_CUDA_ITER_H
#define EMBER_CUDA_ITER_H

#include <stdint.h>

#include "hd.h"

enum { ECU_MAX_DIMS = 8, ECU_MAX_OPERANDS = 4 };

/* the type an elementwise kernel computes in */
enum ecu_compute { ECU_FLOAT, ECU_DOUBLE, ECU_INT64 };

typedef struct ecu_iter {
    int32_t ndim, noperands;
    int32_t dtype[ECU_MAX_OPERANDS];
    int32_t index32;   /* every offset and the element count fit in int32 */
    int64_t numel;
    int64_t shape[ECU_MAX_DIMS];
    int64_t strides[ECU_MAX_OPERANDS][ECU_MAX_DIMS];   /* bytes; [operand][dim], innermost last */
    char *data[ECU_MAX_OPERANDS];                      /* each operand's first element */
} ecu_iter;

namespace ember_cuda {

/* The byte offset of element `linear` (row-major over it.shape) in each of
   the first N operands. Index is int32_t or int64_t. */
template <class Index, int N>
EMBER_HD void iter_offsets(const ecu_iter &it, Index linear, Index (&off)[N])
{
    for (int k = 0; k < N; k++) off[k] = 0;
    for (int d = it.ndim - 1; d >= 0; d--) {
        Index extent = (Index)it.shape[d];
        Index i = linear % extent;
        linear /= extent;
        for (int k = 0; k < N; k++) off[k] += i * (Index)it.strides[k][d];
    }
}

}   // namespace ember_cuda

#endif

/* cells.h: the fused recurrent cells (lstm_cell, gru_cell) on the device:
   the core's core/src/cell_math.h, which core/src/ops/rnn.c runs on the
   CPU: gates in PyTorch's order (LSTM i, f, g, o; GRU r, z, n), float32
   over sigmoidf_ and ember__tanhf, float64 over sigmoid_ and tanh. Element j of the (N, H)
   result is row n = j / H, unit k = j % H; every operand is contiguous. */
#ifndef EMBER_CUDA_CELLS_H
#define EMBER_CUDA_CELLS_H

#include "elementwise.h"

typedef struct ecu_cell {
    const char *gi, *gh, *state;   /* (N, gates H), (N, gates H), (N, H) */
    char *out0, *out1;             /* (N, H): h' (and the LSTM's c') */
    int64_t numel, H;              /* N H, H */
} ecu_cell;

namespace ember_cuda {

/* the core's cell math over this namespace's sigmoidf_ and ember__tanhf */
#include "cell_math.h"

/* c' = f c + i g, h' = o tanh(c') */
template <class T> EMBER_HD void lstm_at(const ecu_cell &c, int64_t j)
{
    int64_t H = c.H, k = j % H;
    const T *a = (const T *)c.gi + (j / H) * 4 * H, *b = (const T *)c.gh + (j / H) * 4 * H;
    const T s = ((const T *)c.state)[j];
    T *cn = (T *)c.out1 + j;
    if constexpr (sizeof(T) == sizeof(float)) ((T *)c.out0)[j] = ember__lstm_f32(a, b, H, k, s, cn);
    else ((T *)c.out0)[j] = ember__lstm_f64(a, b, H, k, s, cn);
}

/* h' = n + z (h - n), n = tanh(gi_n + r gh_n) */
template <class T> EMBER_HD void gru_at(const ecu_cell &c, int64_t j)
{
    int64_t H = c.H, k = j % H;
    const T *a = (const T *)c.gi + (j / H) * 3 * H, *b = (const T *)c.gh + (j / H) * 3 * H;
    const T h = ((const T *)c.state)[j];
    if constexpr (sizeof(T) == sizeof(float)) ((T *)c.out0)[j] = ember__gru_f32(a, b, H, k, h);
    else ((T *)c.out0)[j] = ember__gru_f64(a, b, H, k, h);
}

}   // namespace ember_cuda

#endif

/* cells.h: the arithmetic of the fused recurrent cells (lstm_cell,
   gru_cell) as the CPU computes them (core/src/ops/rnn.c): gates in
   PyTorch's order (LSTM i, f, g, o; GRU r, z, n), float32 over sigmoidf_
   and ember__tanhf, float64 over sigmoid_ and tanh. Element j of the (N, H)
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

EMBER_HD float cell_sigmoid(float x) { return sigmoidf_(x); }
EMBER_HD double cell_sigmoid(double x) { return sigmoid_(x); }
EMBER_HD float cell_tanh(float x) { return ember__tanhf(x); }
EMBER_HD double cell_tanh(double x) { return tanh(x); }

/* c' = f c + i g, h' = o tanh(c') */
template <class T> EMBER_HD void lstm_at(const ecu_cell &c, int64_t j)
{
    int64_t H = c.H, k = j % H;
    const T *a = (const T *)c.gi + (j / H) * 4 * H, *b = (const T *)c.gh + (j / H) * 4 * H;
    T i = cell_sigmoid(a[k] + b[k]), f = cell_sigmoid(a[H + k] + b[H + k]);
    T g = cell_tanh(a[2 * H + k] + b[2 * H + k]), o = cell_sigmoid(a[3 * H + k] + b[3 * H + k]);
    T cy = f * ((const T *)c.state)[j] + i * g;
    ((T *)c.out1)[j] = cy;
    ((T *)c.out0)[j] = o * cell_tanh(cy);
}

/* h' = n + z (h - n), n = tanh(gi_n + r gh_n) */
template <class T> EMBER_HD void gru_at(const ecu_cell &c, int64_t j)
{
    int64_t H = c.H, k = j % H;
    const T *a = (const T *)c.gi + (j / H) * 3 * H, *b = (const T *)c.gh + (j / H) * 3 * H;
    T r = cell_sigmoid(a[k] + b[k]), z = cell_sigmoid(a[H + k] + b[H + k]);
    T nv = cell_tanh(a[2 * H + k] + r * b[2 * H + k]);
    ((T *)c.out0)[j] = nv + z * (((const T *)c.state)[j] - nv);
}

}   // namespace ember_cuda

#endif

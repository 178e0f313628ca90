/* cell_math.h: one element of the fused recurrent cells (lstm_cell,
   gru_cell), written once for the CPU (ops/rnn.c) and the CUDA kernels
   (cuda/kernels/cells.h). Gates in PyTorch's order (LSTM i, f, g, o; GRU r,
   z, n); a and b are one row's gate pre-activations from x and from h (k H
   each), unit k of H. float32 over sigmoidf_ and ember__tanhf, float64 over
   sigmoid_ and tanh, each device's own (ops.h's polynomial forms on the
   host, CUDA's math library on the device), so this header has no includes:
   the CPU includes it after ops.h, cuda/kernels/cells.h inside namespace
   ember_cuda after elementwise.h. EMBER_FORMULA as formulas.h's. */
#ifndef EMBER_CELL_MATH_H
#define EMBER_CELL_MATH_H

#ifndef EMBER_FORMULA
#define EMBER_FORMULA static inline __attribute__((always_inline))
#endif

#define EMBER_CELL_MATH(T, SUF, SIG, TANH)                                                 \
    /* c' = f c + i g, h' = o tanh(c'): returns h', *cn = c' */                            \
    EMBER_FORMULA T ember__lstm_##SUF(const T *a, const T *b, int64_t H, int64_t k, T c, T *cn) \
    {                                                                                      \
        T i = SIG(a[k] + b[k]), f = SIG(a[H + k] + b[H + k]);                              \
        T g = TANH(a[2 * H + k] + b[2 * H + k]), o = SIG(a[3 * H + k] + b[3 * H + k]);     \
        T cy = f * c + i * g;                                                              \
        *cn = cy;                                                                          \
        return o * TANH(cy);                                                               \
    }                                                                                      \
                                                                                           \
    /* h' = (1 - z) n + z h, n = tanh(a_n + r b_n): r scales b_n with its bias, as in    \
       PyTorch; returns h' */                                                              \
    EMBER_FORMULA T ember__gru_##SUF(const T *a, const T *b, int64_t H, int64_t k, T h)    \
    {                                                                                      \
        T r = SIG(a[k] + b[k]), z = SIG(a[H + k] + b[H + k]);                              \
        T nv = TANH(a[2 * H + k] + r * b[2 * H + k]);                                      \
        return nv + z * (h - nv);                                                          \
    }

EMBER_CELL_MATH(float, f32, sigmoidf_, ember__tanhf)
EMBER_CELL_MATH(double, f64, sigmoid_, tanh)

#endif

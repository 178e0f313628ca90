/* rnn.c: the fused cells of the recurrent layers (nn.LSTM, nn.GRU and their
   cells). One op per time step adds the two gate products (x W_ih^T + b and
   h W_hh^T, which linear computes, one GEMM each for all gates), applies the
   gate nonlinearities and updates the state in one pass. The gate layout is
   PyTorch's: i, f, g, o for the LSTM, r, z, n for the GRU. Not here: the
   products themselves, and the backward passes, which are rules of public
   ops in grad_rules.c (so second derivatives work).
   N batch, H hidden size; every operand is (N, k H) row-major. */
#include "ops.h"

#include <math.h>

typedef struct {
    const char *gi, *gh, *state;   /* (N, k H), (N, k H), (N, H) */
    char *out0, *out1;             /* (N, H) each; out1 only for the LSTM */
    int64_t H;
} cell_job;

/* c' = f c + i g, h = o tanh(c'), (i, f, g, o) = (sigmoid, sigmoid, tanh,
   sigmoid) of gi + gh */
#define LSTM_ROWS(NAME, T, SIG, TANH)                                                      \
    static void NAME(void *ctx, int64_t begin, int64_t end)                                \
    {                                                                                      \
        const cell_job *j = ctx;                                                           \
        int64_t H = j->H;                                                                  \
        for (int64_t n = begin; n < end; n++) {                                            \
            const T *a = (const T *)j->gi + n * 4 * H, *b = (const T *)j->gh + n * 4 * H;  \
            const T *c = (const T *)j->state + n * H;                                      \
            T *h = (T *)j->out0 + n * H, *cn = (T *)j->out1 + n * H;                       \
            for (int64_t k = 0; k < H; k++) {                                              \
                T i = SIG(a[k] + b[k]), f = SIG(a[H + k] + b[H + k]);                      \
                T g = TANH(a[2 * H + k] + b[2 * H + k]), o = SIG(a[3 * H + k] + b[3 * H + k]); \
                T cy = f * c[k] + i * g;                                                   \
                cn[k] = cy;                                                                \
                h[k] = o * TANH(cy);                                                       \
            }                                                                              \
        }                                                                                  \
    }
LSTM_ROWS(lstm_rows_f32, float, sigmoidf_, ember__tanhf)
LSTM_ROWS(lstm_rows_f64, double, sigmoid_, tanh)

/* h' = (1 - z) n + z h, (r, z) = sigmoid(gi + gh), n = tanh(gi_n + r gh_n):
   r scales gh_n with its bias, as in PyTorch */
#define GRU_ROWS(NAME, T, SIG, TANH)                                                       \
    static void NAME(void *ctx, int64_t begin, int64_t end)                                \
    {                                                                                      \
        const cell_job *j = ctx;                                                           \
        int64_t H = j->H;                                                                  \
        for (int64_t n = begin; n < end; n++) {                                            \
            const T *a = (const T *)j->gi + n * 3 * H, *b = (const T *)j->gh + n * 3 * H;  \
            const T *hp = (const T *)j->state + n * H;                                     \
            T *h = (T *)j->out0 + n * H;                                                   \
            for (int64_t k = 0; k < H; k++) {                                              \
                T r = SIG(a[k] + b[k]), z = SIG(a[H + k] + b[H + k]);                      \
                T nv = TANH(a[2 * H + k] + r * b[2 * H + k]);                              \
                h[k] = nv + z * (hp[k] - nv);                                              \
            }                                                                              \
        }                                                                                  \
    }
GRU_ROWS(gru_rows_f32, float, sigmoidf_, ember__tanhf)
GRU_ROWS(gru_rows_f64, double, sigmoid_, tanh)

/* Checks (gi, gh, state) of a cell with `k` gates: gi and gh (N, k H), state
   (N, H), one dtype, float32 or float64. */
static int check_cell(const char *op, int k, ember_tensor *const *in, int64_t *H)
{
    char a[160], b[160], c[160];
    const ember_tensor *gi = in[0], *gh = in[1], *st = in[2];
    if (gi->ndim != 2 || gh->ndim != 2 || st->ndim != 2 || gi->shape[0] != gh->shape[0] ||
        gi->shape[1] != gh->shape[1] || gi->shape[0] != st->shape[0] ||
        gi->shape[1] != k * st->shape[1])
        return ember__fail(EMBER_ERR_SHAPE,
                           "%s: gates %s and %s and state %s do not fit: expected (N, %d H), (N, %d H), (N, H)",
                           op, ember__tshape(a, gi), ember__tshape(b, gh), ember__tshape(c, st), k, k);
    if (gi->dtype != gh->dtype || gi->dtype != st->dtype ||
        (gi->dtype != EMBER_FLOAT32 && gi->dtype != EMBER_FLOAT64))
        return ember__fail(EMBER_ERR_DTYPE, "%s: gates %s and %s and state %s must share one dtype, float32 or float64",
                           op, ember_dtype_name(gi->dtype), ember_dtype_name(gh->dtype), ember_dtype_name(st->dtype));
    *H = st->shape[1];
    return EMBER_OK;
}

/* Runs rows(job) over the N rows, on the pool when large, with contiguous
   copies of strided operands; out[0..nout) are new (N, H) tensors. */
static int run_cell(const char *op, int k, ember_tensor *const *in, int nout, ember__range_fn rows32,
                    ember__range_fn rows64, ember_tensor **out)
{
    int64_t H;
    EMBER_TRY(check_cell(op, k, in, &H));
    int dt = in[0]->dtype, rc = EMBER_OK;
    ember_tensor *c[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) EMBER_CHECK(ember__contiguous_as(in[i], dt, &c[i]));
    for (int o = 0; o < nout; o++) EMBER_CHECK(ember__new(2, in[2]->shape, dt, EMBER_CPU, &out[o]));
    cell_job job = {ember__ptr(c[0]), ember__ptr(c[1]), ember__ptr(c[2]), ember__ptr(out[0]),
                    nout > 1 ? ember__ptr(out[1]) : NULL, H};
    int64_t grain = EMBER_PARALLEL_GRAIN / (k * H + 1) + 1;
    ember__parallel_for(in[2]->shape[0], grain, dt == EMBER_FLOAT32 ? rows32 : rows64, &job);
done:
    for (int i = 0; i < 3; i++) ember_tensor_release(c[i]);
    return rc;
}

int fwd_lstm_cell(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    return run_cell("lstm_cell", 4, in, 2, lstm_rows_f32, lstm_rows_f64, out);
}

int fwd_gru_cell(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    return run_cell("gru_cell", 3, in, 1, gru_rows_f32, gru_rows_f64, out);
}

int ember_lstm_cell(ember_tensor *gi, ember_tensor *gh, ember_tensor *c, ember_tensor **h_out,
                    ember_tensor **c_out)
{
    if (!h_out || !c_out) return ember__fail(EMBER_ERR_ARG, "lstm_cell: an output pointer is NULL");
    ember_tensor *in[3] = {gi, gh, c}, *res[2] = {NULL, NULL};
    int rc = ember__dispatch(EMBER_OP_LSTM_CELL, 3, in, NULL, res);
    *h_out = res[0];
    *c_out = res[1];
    return rc;
}

int ember_gru_cell(ember_tensor *gi, ember_tensor *gh, ember_tensor *h, ember_tensor **out)
{
    ember_tensor *in[3] = {gi, gh, h};
    return ember__dispatch(EMBER_OP_GRU_CELL, 3, in, NULL, out);
}

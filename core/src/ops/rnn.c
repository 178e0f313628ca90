/* rnn.c: the fused cells of the recurrent layers (nn.LSTM, nn.GRU and their
   cells). One op per time step adds the two gate products (x W_ih^T + b and
   h W_hh^T, which linear computes, one GEMM each for all gates), applies the
   gate nonlinearities and updates the state in one pass. The gate layout is
   PyTorch's: i, f, g, o for the LSTM, r, z, n for the GRU. Not here: the
   products themselves, and the backward passes, which are rules of public
   ops in grad_rules_nn.c (so second derivatives work).
   N batch, H hidden size; every operand is (N, k H) row-major. */
#include "ops.h"
#include "../cell_math.h"

#include <math.h>

/* One row of a cell: gi, gh (k H), state (H) -> out0 (H) and, for the LSTM,
   out1 (H). The outputs are fresh tensors that overlap no input (hence
   ivdep), so the loop over H vectorises in float32 (float64 calls libm). */
typedef void (*row_fn)(const void *gi, const void *gh, const void *state, void *out0, void *out1, int64_t H);

/* a row of cell_math.h's cells */
#define LSTM_ROW(T, SUF)                                                                   \
    EMBER_SIMD static void lstm_row_##SUF(const void *gi, const void *gh, const void *state, void *out0, \
                                          void *out1, int64_t H)                           \
    {                                                                                      \
        const T *a = gi, *b = gh, *c = state;                                              \
        T *h = out0, *cn = out1;                                                           \
        _Pragma("GCC ivdep")                                                               \
        for (int64_t k = 0; k < H; k++) h[k] = ember__lstm_##SUF(a, b, H, k, c[k], &cn[k]); \
    }
LSTM_ROW(float, f32)
LSTM_ROW(double, f64)

#define GRU_ROW(T, SUF)                                                                    \
    EMBER_SIMD static void gru_row_##SUF(const void *gi, const void *gh, const void *state, void *out0, \
                                         void *out1, int64_t H)                            \
    {                                                                                      \
        EMBER_UNUSED(out1);                                                                \
        const T *a = gi, *b = gh, *hp = state;                                             \
        T *h = out0;                                                                       \
        _Pragma("GCC ivdep")                                                               \
        for (int64_t k = 0; k < H; k++) h[k] = ember__gru_##SUF(a, b, H, k, hp[k]);        \
    }
GRU_ROW(float, f32)
GRU_ROW(double, f64)

/* Gate elements per task: each costs several exp, so a batch of 64 rows of a
   256-unit LSTM (65536 gates) is already worth both cores. */
#define CELL_GRAIN 8192

typedef struct {
    row_fn row;
    const char *gi, *gh, *state;   /* (N, k H), (N, k H), (N, H) */
    char *out0, *out1;             /* (N, H) each; out1 only for the LSTM */
    int64_t k, H, esize;
} cell_job;

static void run_rows(void *ctx, int64_t begin, int64_t end)
{
    const cell_job *j = ctx;
    int64_t gate = j->k * j->H * j->esize, one = j->H * j->esize;
    for (int64_t n = begin; n < end; n++)
        j->row(j->gi + n * gate, j->gh + n * gate, j->state + n * one, j->out0 + n * one,
               j->out1 ? j->out1 + n * one : NULL, j->H);
}

/* Checks (gi, gh, state) of a cell with `k` gates: gi and gh (N, k H), state
   (N, H), one dtype, float32 or float64; before the dispatch, for every device. */
static int check_cell(const char *op, int k, ember_tensor *const *in)
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
    return EMBER_OK;
}

/* Runs a cell with k gates over the N rows, on the pool when large, with
   contiguous copies of strided operands; out[0..nout) are new (N, H) tensors. */
static int run_cell(int k, ember_tensor *const *in, int nout, row_fn row32, row_fn row64, ember_tensor **out)
{
    int64_t H = in[2]->shape[1];
    int dt = in[0]->dtype, rc = EMBER_OK;
    ember_tensor *c[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 3; i++) EMBER_CHECK(ember__contiguous_as(in[i], dt, &c[i]));
    for (int o = 0; o < nout; o++) EMBER_CHECK(ember__new(2, in[2]->shape, dt, EMBER_CPU, &out[o]));
    cell_job job = {dt == EMBER_FLOAT32 ? row32 : row64, ember__ptr(c[0]), ember__ptr(c[1]), ember__ptr(c[2]),
                    ember__ptr(out[0]), nout > 1 ? ember__ptr(out[1]) : NULL, k, H, ember_dtype_size(dt)};
    ember__parallel_for(in[2]->shape[0], CELL_GRAIN / (k * H + 1) + 1, run_rows, &job);
done:
    for (int i = 0; i < 3; i++) ember_tensor_release(c[i]);
    return rc;
}

/* The cells' first-order backward in one pass over a row, for
   grad_rules.c: from the output gradients and what the node keeps, the
   inputs' gradients, by the formulas of grad_lstm_cell and grad_gru_cell.
   in[] and out[] are rows of the widths the table below gives, in units of H. */
typedef void (*back_row_fn)(const void *const *in, void *const *out, int64_t H);

/* in: gh_out, gc_out, gi, gh, c, c'; out: da (for gi and gh alike), dc */
#define LSTM_BACK_ROW(NAME, T, SIG, TANH)                                                  \
    EMBER_SIMD static void NAME(const void *const *in, void *const *out, int64_t H)                   \
    {                                                                                      \
        const T *gh_out = in[0], *gc_out = in[1], *a = in[2], *b = in[3], *c = in[4];      \
        const T *cy = in[5];                                                               \
        T *da = out[0], *dc = out[1];                                                      \
        _Pragma("GCC ivdep")                                                               \
        for (int64_t k = 0; k < H; k++) {                                                  \
            T i = SIG(a[k] + b[k]), f = SIG(a[H + k] + b[H + k]);                          \
            T g = TANH(a[2 * H + k] + b[2 * H + k]), o = SIG(a[3 * H + k] + b[3 * H + k]); \
            T tc = TANH(cy[k]);                                                            \
            T d = gc_out[k] + gh_out[k] * o * (1 - tc * tc);                               \
            da[k] = d * g * i * (1 - i);                                                   \
            da[H + k] = d * c[k] * f * (1 - f);                                            \
            da[2 * H + k] = d * i * (1 - g * g);                                           \
            da[3 * H + k] = gh_out[k] * tc * o * (1 - o);                                  \
            dc[k] = d * f;                                                                 \
        }                                                                                  \
    }
LSTM_BACK_ROW(lstm_back_row_f32, float, sigmoidf_, ember__tanhf)
LSTM_BACK_ROW(lstm_back_row_f64, double, sigmoid_, tanh)

/* in: g, gi, gh, h; out: dgi, dgh, dh */
#define GRU_BACK_ROW(NAME, T, SIG, TANH)                                                   \
    EMBER_SIMD static void NAME(const void *const *in, void *const *out, int64_t H)                   \
    {                                                                                      \
        const T *g = in[0], *a = in[1], *b = in[2], *hp = in[3];                           \
        T *da = out[0], *db = out[1], *dh = out[2];                                        \
        _Pragma("GCC ivdep")                                                               \
        for (int64_t k = 0; k < H; k++) {                                                  \
            T r = SIG(a[k] + b[k]), z = SIG(a[H + k] + b[H + k]);                          \
            T nv = TANH(a[2 * H + k] + r * b[2 * H + k]);                                  \
            T dn = g[k] * (1 - z) * (1 - nv * nv);                                         \
            T dz = g[k] * (hp[k] - nv) * z * (1 - z);                                      \
            T dr = dn * b[2 * H + k] * r * (1 - r);                                        \
            da[k] = db[k] = dr;                                                            \
            da[H + k] = db[H + k] = dz;                                                    \
            da[2 * H + k] = dn;                                                            \
            db[2 * H + k] = dn * r;                                                        \
            dh[k] = g[k] * z;                                                              \
        }                                                                                  \
    }
GRU_BACK_ROW(gru_back_row_f32, float, sigmoidf_, ember__tanhf)
GRU_BACK_ROW(gru_back_row_f64, double, sigmoid_, tanh)

typedef struct {
    back_row_fn row;
    int nin, nout;
    const int *in_width, *out_width;   /* in units of H */
    const char *in[6];
    char *out[3];
    int64_t H, esize;
} back_job;

static void back_rows(void *ctx, int64_t begin, int64_t end)
{
    const back_job *j = ctx;
    int64_t row = j->H * j->esize;
    for (int64_t n = begin; n < end; n++) {
        const void *in[6];
        void *out[3];
        for (int i = 0; i < j->nin; i++) in[i] = j->in[i] + n * j->in_width[i] * row;
        for (int o = 0; o < j->nout; o++) out[o] = j->out[o] + n * j->out_width[o] * row;
        j->row(in, out, j->H);
    }
}

/* Runs a backward row function over the N rows of in[] (contiguous copies
   where strided, in the dtype of in[dt_from]); out[] are new (N, width H). */
static int run_back(int nin, ember_tensor *const *in, const int *in_width, int nout, const int *out_width,
                    int dt_from, back_row_fn row32, back_row_fn row64, ember_tensor **out)
{
    int dt = in[dt_from]->dtype, rc = EMBER_OK;
    int64_t N = in[dt_from]->shape[0], H = in[dt_from]->shape[1] / in_width[dt_from];
    ember_tensor *c[6] = {NULL};
    back_job job = {dt == EMBER_FLOAT32 ? row32 : row64, nin, nout, in_width, out_width, {NULL}, {NULL}, H,
                    ember_dtype_size(dt)};
    for (int o = 0; o < nout; o++) out[o] = NULL;
    for (int i = 0; i < nin; i++) {
        EMBER_CHECK(ember__contiguous_as(in[i], dt, &c[i]));
        job.in[i] = ember__ptr(c[i]);
    }
    for (int o = 0; o < nout; o++) {
        int64_t shape[2] = {N, out_width[o] * H};
        EMBER_CHECK(ember__new(2, shape, dt, EMBER_CPU, &out[o]));
        job.out[o] = ember__ptr(out[o]);
    }
    ember__parallel_for(N, CELL_GRAIN / (in_width[dt_from] * H + 1) + 1, back_rows, &job);
done:
    for (int i = 0; i < nin; i++) ember_tensor_release(c[i]);
    for (int o = 0; rc < 0 && o < nout; o++) {
        ember_tensor_release(out[o]);
        out[o] = NULL;
    }
    return rc;
}

int ember__lstm_cell_backward(ember_tensor *const *in, ember_tensor **out)
{
    static const int in_width[6] = {1, 1, 4, 4, 1, 1}, out_width[2] = {4, 1};
    return run_back(6, in, in_width, 2, out_width, 2, lstm_back_row_f32, lstm_back_row_f64, out);
}

int ember__gru_cell_backward(ember_tensor *const *in, ember_tensor **out)
{
    static const int in_width[4] = {1, 3, 3, 1}, out_width[3] = {3, 3, 1};
    return run_back(4, in, in_width, 3, out_width, 1, gru_back_row_f32, gru_back_row_f64, out);
}

int fwd_lstm_cell(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    return run_cell(4, in, 2, lstm_row_f32, lstm_row_f64, out);
}

int fwd_gru_cell(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    return run_cell(3, in, 1, gru_row_f32, gru_row_f64, out);
}

int ember_lstm_cell(ember_tensor *gi, ember_tensor *gh, ember_tensor *c, ember_tensor **h_out,
                    ember_tensor **c_out)
{
    if (!h_out || !c_out) return ember__fail(EMBER_ERR_ARG, "lstm_cell: an output pointer is NULL");
    ember_tensor *in[3] = {gi, gh, c}, *res[2] = {NULL, NULL};
    *h_out = *c_out = NULL;
    if (gi && gh && c) EMBER_TRY(check_cell("lstm_cell", 4, in));
    int rc = ember__dispatch(EMBER_OP_LSTM_CELL, 3, in, NULL, res);
    *h_out = res[0];
    *c_out = res[1];
    return rc;
}

int ember_gru_cell(ember_tensor *gi, ember_tensor *gh, ember_tensor *h, ember_tensor **out)
{
    ember_tensor *in[3] = {gi, gh, h};
    if (out) *out = NULL;
    if (gi && gh && h) EMBER_TRY(check_cell("gru_cell", 3, in));
    return ember__dispatch(EMBER_OP_GRU_CELL, 3, in, NULL, out);
}

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

/* One row of a cell: gi, gh (k H), state (H) -> out0 (H) and, for the LSTM,
   out1 (H). The outputs are fresh tensors that overlap no input (hence
   ivdep), so the loop over H vectorises in float32 (float64 calls libm). */
typedef void (*row_fn)(const void *gi, const void *gh, const void *state, void *out0, void *out1, int64_t H);

/* c' = f c + i g, h = o tanh(c'), (i, f, g, o) = (sigmoid, sigmoid, tanh,
   sigmoid) of gi + gh */
#define LSTM_ROW(NAME, T, SIG, TANH)                                                       \
    static void NAME(const void *gi, const void *gh, const void *state, void *out0,        \
                     void *out1, int64_t H)                                                \
    {                                                                                      \
        const T *a = gi, *b = gh, *c = state;                                              \
        T *h = out0, *cn = out1;                                                           \
        const T *ai = a, *af = a + H, *ag = a + 2 * H, *ao = a + 3 * H;                    \
        const T *bi = b, *bf = b + H, *bg = b + 2 * H, *bo = b + 3 * H;                    \
        _Pragma("GCC ivdep")                                                               \
        for (int64_t k = 0; k < H; k++) {                                                  \
            T i = SIG(ai[k] + bi[k]), f = SIG(af[k] + bf[k]);                              \
            T g = TANH(ag[k] + bg[k]), o = SIG(ao[k] + bo[k]);                             \
            T cy = f * c[k] + i * g;                                                       \
            cn[k] = cy;                                                                    \
            h[k] = o * TANH(cy);                                                           \
        }                                                                                  \
    }
LSTM_ROW(lstm_row_f32, float, sigmoidf_, ember__tanhf)
LSTM_ROW(lstm_row_f64, double, sigmoid_, tanh)

/* h' = (1 - z) n + z h, (r, z) = sigmoid(gi + gh), n = tanh(gi_n + r gh_n):
   r scales gh_n with its bias, as in PyTorch */
#define GRU_ROW(NAME, T, SIG, TANH)                                                        \
    static void NAME(const void *gi, const void *gh, const void *state, void *out0,        \
                     void *out1, int64_t H)                                                \
    {                                                                                      \
        EMBER_UNUSED(out1);                                                                \
        const T *a = gi, *b = gh, *hp = state;                                             \
        T *h = out0;                                                                       \
        const T *ar = a, *az = a + H, *an = a + 2 * H, *br = b, *bz = b + H, *bn = b + 2 * H; \
        _Pragma("GCC ivdep")                                                               \
        for (int64_t k = 0; k < H; k++) {                                                  \
            T r = SIG(ar[k] + br[k]), z = SIG(az[k] + bz[k]);                              \
            T nv = TANH(an[k] + r * bn[k]);                                                \
            h[k] = nv + z * (hp[k] - nv);                                                  \
        }                                                                                  \
    }
GRU_ROW(gru_row_f32, float, sigmoidf_, ember__tanhf)
GRU_ROW(gru_row_f64, double, sigmoid_, tanh)

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

/* Runs a cell with k gates over the N rows, on the pool when large, with
   contiguous copies of strided operands; out[0..nout) are new (N, H) tensors. */
static int run_cell(const char *op, int k, ember_tensor *const *in, int nout, row_fn row32, row_fn row64,
                    ember_tensor **out)
{
    int64_t H;
    EMBER_TRY(check_cell(op, k, in, &H));
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

/* lstm_cell's backward in one pass over a row: from the gradients of h and c'
   (gh_out, gc_out) and what the node keeps (gi, gh, c, c'), the gates'
   gradient da (4H, for gi and gh alike) and c's, dc; the formulas are those
   of grad_lstm_cell */
#define LSTM_BACK_ROW(NAME, T, SIG, TANH)                                                  \
    static void NAME(const T *gh_out, const T *gc_out, const T *a, const T *b, const T *c,  \
                     const T *cy, T *da, T *dc, int64_t H)                                 \
    {                                                                                      \
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

typedef struct {
    const char *p[6];   /* gh_out, gc_out (N, H), gi, gh (N, 4H), c, c' (N, H) */
    char *da, *dc;      /* (N, 4H), (N, H) */
    int64_t H, esize;
    int dt;
} lstm_back_job;

static void lstm_back_rows(void *ctx, int64_t begin, int64_t end)
{
    const lstm_back_job *j = ctx;
    int64_t one = j->H * j->esize, four = 4 * one;
    for (int64_t n = begin; n < end; n++) {
        const char *r[6];
        for (int i = 0; i < 6; i++) r[i] = j->p[i] + n * (i == 2 || i == 3 ? four : one);
        if (j->dt == EMBER_FLOAT32)
            lstm_back_row_f32((const float *)r[0], (const float *)r[1], (const float *)r[2], (const float *)r[3],
                              (const float *)r[4], (const float *)r[5], (float *)(j->da + n * four),
                              (float *)(j->dc + n * one), j->H);
        else
            lstm_back_row_f64((const double *)r[0], (const double *)r[1], (const double *)r[2], (const double *)r[3],
                              (const double *)r[4], (const double *)r[5], (double *)(j->da + n * four),
                              (double *)(j->dc + n * one), j->H);
    }
}

int ember__lstm_cell_backward(ember_tensor *const *in, ember_tensor **da, ember_tensor **dc)
{
    int dt = in[2]->dtype, rc = EMBER_OK;
    int64_t N = in[4]->shape[0], H = in[4]->shape[1], four[2] = {N, 4 * H};
    ember_tensor *c[6] = {NULL};
    *da = *dc = NULL;
    for (int i = 0; i < 6; i++) EMBER_CHECK(ember__contiguous_as(in[i], dt, &c[i]));
    EMBER_CHECK(ember__new(2, four, dt, EMBER_CPU, da));
    EMBER_CHECK(ember__new(2, in[4]->shape, dt, EMBER_CPU, dc));
    lstm_back_job job = {{0}, ember__ptr(*da), ember__ptr(*dc), H, ember_dtype_size(dt), dt};
    for (int i = 0; i < 6; i++) job.p[i] = ember__ptr(c[i]);
    ember__parallel_for(N, CELL_GRAIN / (4 * H + 1) + 1, lstm_back_rows, &job);
done:
    for (int i = 0; i < 6; i++) ember_tensor_release(c[i]);
    if (rc < 0) {
        ember_tensor_release(*da);
        ember_tensor_release(*dc);
        *da = *dc = NULL;
    }
    return rc;
}

int fwd_lstm_cell(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    return run_cell("lstm_cell", 4, in, 2, lstm_row_f32, lstm_row_f64, out);
}

int fwd_gru_cell(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    return run_cell("gru_cell", 3, in, 1, gru_row_f32, gru_row_f64, out);
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

/* matmul.c: matmul with PyTorch's semantics (1-D dot, matrix-vector, batched
   with broadcast batch dims). float32 / float64 go to gemm.c's one product
   entry (oneDNN, AVX-512 loops or OpenBLAS by its policy); a strided matrix
   with a unit stride in either dim is passed as is (as a transposed operand
   when needed), anything else is copied first. float16 and bfloat16 compute
   in float32; integers use a blocked loop with wrapping int64 accumulation. */
#include "ops.h"

#include <string.h>

/* m x k matrix at element offset off with strides (rs, cs) */
static bool as_blas(const char *base, int es, int64_t off, int64_t rows, int64_t cols, int64_t rs, int64_t cs,
                    ember__mat *m)
{
    m->p = base + off * es;
    /* the stride of a dim of size 1 is never stepped: a (3, 1, 1) tensor
       transposed from (1, 1, 3) has strides (1, 3, 3) and is contiguous */
    if (cols == 1) cs = 1;
    if (rows == 1) rs = cols > 1 ? cols : 1;
    if (cs == 1 && (rs >= (cols > 1 ? cols : 1) || rows == 1)) {
        m->trans = false;
        m->ld = rows == 1 ? (cols > 1 ? cols : 1) : rs;
        return true;
    }
    if (rs == 1 && (cs >= (rows > 1 ? rows : 1) || cols == 1)) {
        m->trans = true;
        m->ld = cols == 1 ? (rows > 1 ? rows : 1) : cs;
        return true;
    }
    return false;
}

static void gemm_int(int dt, int64_t M, int64_t N, int64_t K, const ember_tensor *a, int64_t aoff,
                     const ember_tensor *b, int64_t boff, char *c)
{
    int es = ember_dtype_size(dt);
    const char *A = a->storage->data, *B = b->storage->data;
    int64_t ars = a->strides[a->ndim - 2], acs = a->strides[a->ndim - 1];
    int64_t brs = b->strides[b->ndim - 2], bcs = b->strides[b->ndim - 1];
    for (int64_t i = 0; i < M; i++)
        for (int64_t j = 0; j < N; j++) {
            uint64_t s = 0;
            for (int64_t k = 0; k < K; k++) {
                int64_t x = (int64_t)ember__load(A + (aoff + i * ars + k * acs) * es, dt);
                int64_t y = (int64_t)ember__load(B + (boff + k * brs + j * bcs) * es, dt);
                s += (uint64_t)x * (uint64_t)y;
            }
            if (dt == EMBER_INT64) ((int64_t *)c)[i * N + j] = (int64_t)s;
            else ember__store(c + (i * N + j) * es, dt, (double)(int64_t)s);
        }
}

/* *t replaced by a contiguous copy of itself in dtype dt, also left in *copy */
static int make_contiguous(ember_tensor **t, int dt, ember_tensor **copy)
{
    EMBER_TRY(ember__contiguous_as(*t, dt, copy));
    ember_tensor_release(*t);
    *t = *copy;
    return EMBER_OK;
}

int ember__matmul_plan_make(ember_tensor *const *in, ember__matmul_plan *p)
{
    char sa[200], sb[200];
    ember_tensor *A = in[0], *B = in[1];
    memset(p, 0, sizeof *p);
    if (A->ndim == 0 || B->ndim == 0)
        return ember__fail(EMBER_ERR_SHAPE, "matmul: both arguments need at least 1 dim, got shapes %s and %s",
                           ember__tshape(sa, A), ember__tshape(sb, B));
    p->dtype = ember__result_type(2, in);
    int rc = EMBER_OK;
    /* 1-D operands become matrices: a row vector in front, a column vector behind */
    int64_t s1[2], st1[2];
    if (A->ndim == 1) {
        s1[0] = 1; s1[1] = A->shape[0]; st1[0] = A->shape[0] * A->strides[0]; st1[1] = A->strides[0];
        if (st1[0] == 0) st1[0] = 1;
        EMBER_CHECK(ember__make_view(A, 2, s1, st1, A->offset, &p->a));
    } else {
        ember_tensor_retain(A);
        p->a = A;
    }
    if (B->ndim == 1) {
        s1[0] = B->shape[0]; s1[1] = 1; st1[0] = B->strides[0]; st1[1] = 1;
        EMBER_CHECK(ember__make_view(B, 2, s1, st1, B->offset, &p->b));
    } else {
        ember_tensor_retain(B);
        p->b = B;
    }
    const ember_tensor *a = p->a, *b = p->b;
    p->M = a->shape[a->ndim - 2];
    p->K = a->shape[a->ndim - 1];
    p->N = b->shape[b->ndim - 1];
    int64_t K2 = b->shape[b->ndim - 2];
    if (p->K != K2) {
        rc = ember__fail(EMBER_ERR_SHAPE, "matmul: shapes %s and %s cannot be multiplied (%lld != %lld)",
                         ember__tshape(sa, A), ember__tshape(sb, B), (long long)p->K, (long long)K2);
        goto done;
    }
    /* broadcast batch dims */
    int na = a->ndim - 2, nb = b->ndim - 2;
    p->nbatch = na > nb ? na : nb;
    for (int d = 0; d < p->nbatch; d++) {
        int da = d - (p->nbatch - na), db = d - (p->nbatch - nb);
        int64_t x = da >= 0 ? a->shape[da] : 1, y = db >= 0 ? b->shape[db] : 1;
        if (x != y && x != 1 && y != 1) {
            rc = ember__fail(EMBER_ERR_SHAPE, "matmul: batch dims of shapes %s and %s cannot be broadcast",
                             ember__tshape(sa, A), ember__tshape(sb, B));
            goto done;
        }
        p->bshape[d] = x == 1 ? y : x;   /* a 0 against a 1 is 0 */
    }
    /* result shape, with the added 1-D dims dropped */
    for (int d = 0; d < p->nbatch; d++) p->oshape[p->ond++] = p->bshape[d];
    if (A->ndim > 1) p->oshape[p->ond++] = p->M;
    if (B->ndim > 1) p->oshape[p->ond++] = p->N;
    if (p->ond > EMBER_MAX_DIMS) rc = ember__fail(EMBER_ERR_SHAPE, "matmul: result has too many dims");
done:
    if (rc < 0) ember__matmul_plan_release(p);
    return rc;
}

void ember__matmul_plan_release(ember__matmul_plan *p)
{
    ember_tensor_release(p->a);
    ember_tensor_release(p->b);
    p->a = p->b = NULL;
}

int fwd_matmul(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    ember__matmul_plan p;
    EMBER_TRY(ember__matmul_plan_make(in, &p));
    int dt = p.dtype, cdt = dt == EMBER_FLOAT16 || dt == EMBER_BFLOAT16 ? EMBER_FLOAT32 : dt;
    int64_t M = p.M, N = p.N, K = p.K;
    ember_tensor *ca = NULL, *cb = NULL, *o = NULL;
    int rc = EMBER_OK;
    EMBER_CHECK(ember__new(p.ond, p.oshape, dt, EMBER_CPU, &o));
    if (o->numel == 0) goto finish;
    if (K == 0) {
        ember__fill_raw(o, 0);
        goto finish;
    }
    EMBER_CHECK(ember__as_dtype(p.a, cdt, &ca));
    EMBER_CHECK(ember__as_dtype(p.b, cdt, &cb));
    {
        int64_t nbat = 1;
        for (int d = 0; d < p.nbatch; d++) nbat *= p.bshape[d];
        int es = ember_dtype_size(cdt);
        char *obuf = ember__ptr(o);
        char *tmp = NULL;
        if (cdt != dt) {   /* half types: compute into a float32 buffer */
            tmp = ember__alloc((size_t)(o->numel * es));
            if (!tmp) {
                rc = ember__fail(EMBER_ERR_OOM, "matmul: out of memory");
                goto done;
            }
            obuf = tmp;
        }
        ember_tensor *contig_a = NULL, *contig_b = NULL;
        int64_t idx[EMBER_MAX_DIMS] = {0};
        for (int64_t bi = 0; bi < nbat && rc == EMBER_OK; bi++) {
            int64_t aoff, boff;
            ember__matmul_offsets(p.nbatch, idx, ca, cb, &aoff, &boff);
            char *c = obuf + bi * M * N * es;
            if (ember__is_float(cdt)) {
                ember__mat ma, mb;
                bool ok_a = as_blas(ca->storage->data, es, aoff, M, K, ca->strides[ca->ndim - 2],
                                    ca->strides[ca->ndim - 1], &ma);
                bool ok_b = as_blas(cb->storage->data, es, boff, K, N, cb->strides[cb->ndim - 2],
                                    cb->strides[cb->ndim - 1], &mb);
                if (!ok_a || !ok_b) {
                    /* copy the whole operand once into contiguous memory, then go on from there */
                    if ((!ok_a && contig_a) || (!ok_b && contig_b)) {   /* never loop on a copy */
                        char sa[200], sb[200];
                        rc = ember__fail(EMBER_ERR_UNSUPPORTED, "matmul: %s and %s have no BLAS layout",
                                         ember__tshape(sa, in[0]), ember__tshape(sb, in[1]));
                        break;
                    }
                    if (!ok_a && !contig_a) rc = make_contiguous(&ca, cdt, &contig_a);
                    if (rc == EMBER_OK && !ok_b && !contig_b) rc = make_contiguous(&cb, cdt, &contig_b);
                    if (rc != EMBER_OK) break;
                    bi--;   /* redo this batch with the contiguous operands */
                    continue;
                }
                ember__gemm_run(cdt, M, N, K, &ma, &mb, 0, c);
            } else {
                gemm_int(cdt, M, N, K, ca, aoff, cb, boff, c);
            }
            ember__index_next(p.nbatch, p.bshape, idx);
        }
        if (tmp) {
            if (rc == EMBER_OK) ember__convert(ember__ptr(o), dt, 1, tmp, cdt, 1, o->numel);
            ember__free(tmp, (size_t)(o->numel * es));
        }
        if (rc < 0) goto done;
    }
finish:
    *out = ember__take(&o);
done:
    ember__matmul_plan_release(&p);
    EMBER_RELEASE(ca, cb, o);
    return rc;
}

int ember_matmul(ember_tensor *a, ember_tensor *b, ember_tensor **out)
{
    ember_tensor *in[2] = {a, b};
    return ember__dispatch(EMBER_OP_MATMUL, 2, in, NULL, out);
}

/* LINEAR: x (..., in) and w (out, in) -> x w^T (..., out), through matmul on a
   transposed view of w (BLAS reads it as a transposed operand, no copy), on
   whichever device x and w are. */
int fwd_linear(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    char sx[200], sw[200];
    ember_tensor *x = in[0], *w = in[1];
    if (w->ndim != 2 || x->ndim == 0 || x->shape[x->ndim - 1] != w->shape[1])
        return ember__fail(EMBER_ERR_SHAPE, "linear: input %s does not fit weight %s (out, in)",
                           ember__tshape(sx, x), ember__tshape(sw, w));
    int64_t shape[2] = {w->shape[1], w->shape[0]}, strides[2] = {w->strides[1], w->strides[0]};
    ember_tensor *wt = NULL;
    EMBER_TRY(ember__make_view(w, 2, shape, strides, w->offset, &wt));
    ember_tensor *mm[2] = {x, wt};
    int rc = ember__run_nograd(EMBER_OP_MATMUL, 2, mm, at, out);   /* on x's device */
    ember_tensor_release(wt);
    return rc;
}

int ember_linear(ember_tensor *x, ember_tensor *w, ember_tensor **out)
{
    ember_tensor *in[2] = {x, w};
    return ember__dispatch(EMBER_OP_LINEAR, 2, in, NULL, out);
}

/* relu(y + b), y taken (linear_relu's last two steps, composed) */
static int add_relu(ember_tensor *y, ember_tensor *b, ember_tensor **out)
{
    ember_tensor *yb[2] = {y, b}, *z = NULL;
    int rc = ember__run_nograd(EMBER_OP_ADD, 2, yb, NULL, &z);
    ember_tensor_release(y);
    if (rc < 0) return rc;
    rc = ember__run_nograd(EMBER_OP_RELU, 1, &z, NULL, out);
    ember_tensor_release(z);
    return rc;
}

/* LINEAR_RELU through linear, add and relu: any device and dtype, and the
   shape errors */
static int linear_relu_composed(ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    ember_tensor *y = NULL;
    EMBER_TRY(ember__run_nograd(EMBER_OP_LINEAR, 2, in, at, &y));
    return add_relu(y, in[2], out);
}

/* the fused path's operands: float32 or float64 alike on the CPU, b
   contiguous, x (..., in) with rows of in elements (w (out, in) and b (out)
   checked before) */
static bool linear_fusable(ember_tensor *const *in)
{
    const ember_tensor *x = in[0], *w = in[1], *b = in[2];
    int dt = x->dtype;
    return x->storage->device == EMBER_CPU && (dt == EMBER_FLOAT32 || dt == EMBER_FLOAT64) && w->dtype == dt &&
           b->dtype == dt && x->ndim >= 1 && x->shape[x->ndim - 1] == w->shape[1] && w->shape[1] > 0 &&
           b->is_contiguous;
}

/* relu(c + b) in place over m rows of n elements of c, as add then relu
   compute it: one rounding for the sum, and NaN stays NaN */
#define BIAS_RELU(T)                                                                    \
    static void bias_relu_##T(T *c, const T *bias, int64_t m, int64_t n)                \
    {                                                                                   \
        for (int64_t i = 0; i < m; i++, c += n)                                         \
            for (int64_t j = 0; j < n; j++) {                                           \
                T v = c[j] + bias[j];                                                   \
                c[j] = v < 0 ? (T)0 : v;                                                \
            }                                                                           \
    }
BIAS_RELU(float)
BIAS_RELU(double)
#undef BIAS_RELU

static void bias_relu_inplace(int dt, char *c, const char *bias, int64_t m, int64_t n)
{
    if (dt == EMBER_FLOAT32) bias_relu_float((float *)c, (const float *)bias, m, n);
    else bias_relu_double((double *)c, (const double *)bias, m, n);
}

/* LINEAR_RELU: relu(x w^T + b). On the CPU in float32 and float64 the
   product is linear's (the same GEMM, so the same bits), and the bias and
   the ReLU are applied in one pass over it while it is fresh: the bits of
   linear, add and relu one after the other (a plan substitutes this op for
   that chain, docs/plans.md). Anything else goes through linear, add and
   relu. */
int fwd_linear_relu(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    const ember_tensor *w = in[1], *b = in[2];
    if (w->ndim != 2 || b->ndim != 1 || b->shape[0] != w->shape[0]) {
        char sw[200], sb[200];
        return ember__fail(EMBER_ERR_SHAPE, "linear_relu: weight %s and bias %s are not {out, in} and {out}",
                           ember__tshape(sw, w), ember__tshape(sb, b));
    }
    if (!linear_fusable(in)) return linear_relu_composed(in, at, out);
    ember_tensor *o = NULL;
    EMBER_TRY(ember__run_nograd(EMBER_OP_LINEAR, 2, in, at, &o));
    if (!o->is_contiguous || o->is_view || o->refcount != 1 || o->storage->refcount != 1)   /* not ours to write */
        return add_relu(o, in[2], out);
    int64_t n = w->shape[0];
    if (o->numel > 0) bias_relu_inplace(o->dtype, ember__ptr(o), ember__ptr(b), o->numel / n, n);
    *out = o;
    return EMBER_OK;
}

/* RELU_BIAS_BACKWARD through relu_backward and sum_to */
static int relu_bias_backward_composed(ember_tensor *const *in, ember_tensor **out)
{
    const ember_tensor *g = in[0];
    EMBER_TRY(ember__run_nograd(EMBER_OP_RELU_BACKWARD, 2, in, NULL, &out[0]));
    ember_attrs at = {{g->ndim > 0, g->ndim > 0 ? g->shape[g->ndim - 1] : 0}, {0}};
    int rc = ember__run_nograd(EMBER_OP_SUM_TO, 1, &out[0], &at, &out[1]);
    if (rc < 0) {
        ember_tensor_release(out[0]);
        out[0] = NULL;
    }
    return rc;
}

/* gz = 0 where y <= 0, else g (a NaN y passes g, as relu_backward), over rows of n; gb[j] += gz[., j]. Both loads
   are unconditional, so the select compiles to a blend and the loop to
   vector code: a branch per element mispredicts on half of them. */
#define RELU_BIAS_ROWS(T)                                                                                       \
    static void relu_bias_rows_##T(const T *restrict g, const T *restrict y, T *restrict gz, double *restrict gb, \
                                   int64_t rows, int64_t n)                                                    \
    {                                                                                                          \
        for (int64_t i = 0; i < rows; i++, g += n, y += n, gz += n)                                            \
            for (int64_t j = 0; j < n; j++) {                                                                  \
                T gv = g[j], yv = y[j];                                                                        \
                T v = yv <= 0 ? (T)0 : gv;                                                                      \
                gz[j] = v;                                                                                     \
                gb[j] += v;                                                                                    \
            }                                                                                                  \
    }
RELU_BIAS_ROWS(float)
RELU_BIAS_ROWS(double)
#undef RELU_BIAS_ROWS

/* RELU_BIAS_BACKWARD: in one pass over contiguous float32 / float64 g and y
   on the CPU, the bias gradient summed in double while the mask is applied;
   anything else through relu_backward and sum_to */
int fwd_relu_bias_backward(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    ember_tensor *g = in[0], *y = in[1];
    int dt = g->dtype;
    if (g->storage->device != EMBER_CPU || (dt != EMBER_FLOAT32 && dt != EMBER_FLOAT64) || y->dtype != dt ||
        g->ndim == 0 || g->numel == 0 || !g->is_contiguous || !y->is_contiguous || g->ndim != y->ndim ||
        memcmp(g->shape, y->shape, (size_t)g->ndim * sizeof *g->shape) != 0)
        return relu_bias_backward_composed(in, out);
    int64_t n = g->shape[g->ndim - 1], rows = g->numel / n;
    ember_tensor *gz = NULL, *gb = NULL;
    double *acc = NULL;
    int rc = EMBER_OK;
    EMBER_CHECK(ember__new(g->ndim, g->shape, dt, EMBER_CPU, &gz));
    EMBER_CHECK(ember__new(1, &n, dt, EMBER_CPU, &gb));
    acc = ember__alloc((size_t)n * sizeof *acc);
    if (!acc) {
        rc = ember__fail(EMBER_ERR_OOM, "relu_bias_backward: out of memory");
        goto done;
    }
    memset(acc, 0, (size_t)n * sizeof *acc);
    if (dt == EMBER_FLOAT32)
        relu_bias_rows_float((const float *)ember__ptr(g), (const float *)ember__ptr(y), (float *)ember__ptr(gz), acc,
                             rows, n);
    else
        relu_bias_rows_double((const double *)ember__ptr(g), (const double *)ember__ptr(y), (double *)ember__ptr(gz),
                              acc, rows, n);
    ember__convert(ember__ptr(gb), dt, 1, (const char *)acc, EMBER_FLOAT64, 1, n);
    out[0] = ember__take(&gz);
    out[1] = ember__take(&gb);
done:
    ember__free(acc, (size_t)n * sizeof *acc);
    EMBER_RELEASE(gz, gb);
    return rc;
}

int ember_relu_bias_backward(ember_tensor *g, ember_tensor *y, ember_tensor **gz, ember_tensor **gb)
{
    if (!gz || !gb) return ember__fail(EMBER_ERR_ARG, "relu_bias_backward: NULL argument");
    ember_tensor *in[2] = {g, y}, *out[2] = {NULL, NULL};
    int rc = ember__dispatch(EMBER_OP_RELU_BIAS_BACKWARD, 2, in, NULL, out);
    *gz = out[0];
    *gb = out[1];
    return rc;
}

int ember_linear_relu(ember_tensor *x, ember_tensor *w, ember_tensor *b, ember_tensor **out)
{
    ember_tensor *in[3] = {x, w, b};
    return ember__dispatch(EMBER_OP_LINEAR_RELU, 3, in, NULL, out);
}

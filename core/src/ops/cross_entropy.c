/* cross_entropy.c: cross-entropy of logits against class indices, log-softmax
   and the negative log-likelihood in one pass per row, as two ops.

   cross_entropy(x, labels, w) -> (rows, stats): x (M, C) logits, labels (M)
   int64 or int32 class indices counting from the attr i[0] (0 in C, 1 from
   Lua), w (C) class weights. i[1] is ignore_index (in the labels' terms),
   f[0] the label smoothing ls. With lse = log sum_c exp(x_c) of a row and
   l its label, the row's loss is
       (1 - ls) w_l (lse - x_l) + ls / C sum_c w_c (lse - x_c)
   (0 for an ignored row), PyTorch's; stats (2, M) holds each row's lse and
   its weight w_l (0 where ignored), whose sum divides a mean. A label out of
   range fails the op (the first such row's), the check fused into the pass.
   cross_entropy_backward(g, x, labels, w, stats) -> gx (M, C): with p_c =
   exp(x_c - lse),
       gx_c = g ((1 - ls) w_l + ls / C sum(w)) p_c - g ls / C w_c - g (1 - ls) w_l [c = l].

   On the CPU, for float32 / float64 x and w of one dtype (strided ones copied
   first), rows spread over the pool, sums in double (the exps' on
   F64_LANES lanes added in a fixed order). On other devices both ops run on
   the host. The rule (grad_rules_nn.c) runs the adjoint where no recording
   sees the backward and composes softmax with the constant coefficients
   (ember__cross_entropy_coefs) where one does. */
#include "nn.h"
#include "reduce.h"

#include <stdatomic.h>
#include <string.h>

/* ------------------------------------------------------------------ checks */
static int ce_check(const char *op, const ember_tensor *x, const ember_tensor *lab, const ember_tensor *w,
                    double ls)
{
    char sx[200], sl[200], sw[200];
    if (x->ndim != 2 || lab->ndim != 1 || lab->shape[0] != x->shape[0] || w->ndim != 1 ||
        w->shape[0] != x->shape[1])
        return ember__fail(EMBER_ERR_SHAPE, "%s: logits %s, labels %s and weight %s do not match (expected {M, C}, "
                           "{M} and {C})", op, ember__tshape(sx, x), ember__tshape(sl, lab), ember__tshape(sw, w));
    int dt = x->dtype;
    if ((dt != EMBER_FLOAT32 && dt != EMBER_FLOAT64) || w->dtype != dt ||
        (lab->dtype != EMBER_INT64 && lab->dtype != EMBER_INT32))
        return ember__fail(EMBER_ERR_DTYPE, "%s: expected float32 or float64 logits and weight of one dtype and int64 "
                           "or int32 labels, got %s, %s and %s", op, ember_dtype_name(dt), ember_dtype_name(w->dtype),
                           ember_dtype_name(lab->dtype));
    if (!(ls >= 0 && ls <= 1))
        return ember__fail(EMBER_ERR_ARG, "%s: label_smoothing must be in [0, 1], got %g", op, ls);
    return EMBER_OK;
}

/* ------------------------------------------------------------------ CPU kernels */
typedef struct {
    int64_t M, C, first, ignore;
    double ls, wsum;   /* label smoothing, sum of w */
    const char *x, *lab, *w, *g, *st;
    char *out, *stats;
    int lab64;
    _Atomic int64_t bad;   /* the first row with a label out of range, M if none */
} ce_job;

/* row r's label as a 0-based class, -1 where ignored, -2 out of range */
static inline int64_t ce_label(const ce_job *j, int64_t r)
{
    int64_t v = j->lab64 ? ((const int64_t *)j->lab)[r] : ((const int32_t *)j->lab)[r];
    if (v == j->ignore) return -1;
    v -= j->first;
    return v >= 0 && v < j->C ? v : -2;
}

static void ce_flag(ce_job *j, int64_t r)
{
    int64_t was = atomic_load(&j->bad);
    while (r < was && !atomic_compare_exchange_weak(&j->bad, &was, r)) {
    }
}

/* a row's maximum: an unsigned key's (reduce.h), which vectorises */
EMBER_INLINE float ce_max_float(const float *x, int64_t n) { return row_max_f32(x, n, 1.0f); }
static inline double ce_max_double(const double *x, int64_t n)
{
    return ember__row_extreme((const char *)x, EMBER_FLOAT64, n, 1, NULL);
}

#define CE_BLOCK 256   /* a multiple of F64_LANES */

#define CE_FWD(T, EXP)                                                                                        \
    EMBER_SIMD static void ce_fwd_##T(void *vctx, int64_t r0, int64_t r1)                                     \
    {                                                                                                         \
        ce_job *j = vctx;                                                                                     \
        const int64_t C = j->C;                                                                               \
        const T *w = (const T *)j->w;                                                                         \
        T *rows = (T *)j->out, *st = (T *)j->stats;                                                           \
        for (int64_t r = r0; r < r1; r++) {                                                                   \
            const T *x = (const T *)j->x + r * C;                                                             \
            int64_t l = ce_label(j, r);                                                                       \
            if (l == -2) ce_flag(j, r);                                                                       \
            T m = ce_max_##T(x, C);   /* NaN if any is */                                                     \
            if (isinf(m)) m = 0;   /* a row of infinities: exp(x - 0) */                                      \
            double acc[F64_LANES] = {0}, xw[F64_LANES] = {0};                                                 \
            T e[CE_BLOCK];   /* the exps of a block of the row, added in the order of the lanes */            \
            for (int64_t c0 = 0; c0 < C; c0 += CE_BLOCK) {                                                    \
                int64_t n = C - c0 < CE_BLOCK ? C - c0 : CE_BLOCK, i = 0;                                     \
                for (int64_t k = 0; k < n; k++) e[k] = EXP(x[c0 + k] - m);                                    \
                for (; i + F64_LANES <= n; i += F64_LANES)                                                    \
                    for (int k = 0; k < F64_LANES; k++) acc[k] += (double)e[i + k];                           \
                for (; i < n; i++) acc[0] += (double)e[i];                                                    \
            }                                                                                                 \
            double lse = (double)m + log(fold_f64(acc, F64_LANES)), loss = 0, rw = 0;                         \
            int64_t c;                                                                                        \
            if (l >= 0) {                                                                                     \
                rw = (double)w[l];                                                                            \
                loss = rw * (lse - (double)x[l]);                                                             \
                if (j->ls > 0) {                                                                              \
                    for (c = 0; c + F64_LANES <= C; c += F64_LANES)                                           \
                        for (int k = 0; k < F64_LANES; k++) xw[k] += (double)w[c + k] * (double)x[c + k];     \
                    for (; c < C; c++) xw[0] += (double)w[c] * (double)x[c];                                  \
                    double smooth = lse * j->wsum - fold_f64(xw, F64_LANES);                                  \
                    loss = loss * (1 - j->ls) + smooth * (j->ls / (double)C);                                 \
                }                                                                                             \
            }                                                                                                 \
            rows[r] = (T)loss;                                                                                \
            st[r] = (T)lse;                                                                                   \
            st[j->M + r] = (T)rw;                                                                             \
        }                                                                                                     \
    }
CE_FWD(float, ember__expf)
CE_FWD(double, exp)
#undef CE_FWD

#define CE_BWD(T, EXP)                                                                    \
    EMBER_SIMD static void ce_bwd_##T(void *vctx, int64_t r0, int64_t r1)                 \
    {                                                                                     \
        ce_job *j = vctx;                                                                 \
        const int64_t C = j->C;                                                           \
        const T *w = (const T *)j->w, *g = (const T *)j->g, *st = (const T *)j->st;       \
        for (int64_t r = r0; r < r1; r++) {                                               \
            const T *x = (const T *)j->x + r * C;                                         \
            T *gx = (T *)j->out + r * C;                                                  \
            int64_t l = ce_label(j, r);                                                   \
            if (l < 0) {                                                                  \
                if (l == -2) ce_flag(j, r);                                               \
                for (int64_t c = 0; c < C; c++) gx[c] = 0;                                \
                continue;                                                                 \
            }                                                                             \
            double gr = (double)g[r], wl = (double)w[l], s = j->ls / (double)C;           \
            T ta = (T)(gr * ((1 - j->ls) * wl + s * j->wsum)), tb = (T)(gr * s);          \
            T lse = st[r];                                                                \
            if (j->ls > 0)                                                                \
                for (int64_t c = 0; c < C; c++) gx[c] = ta * EXP(x[c] - lse) - tb * w[c]; \
            else                                                                          \
                for (int64_t c = 0; c < C; c++) gx[c] = ta * EXP(x[c] - lse);             \
            gx[l] -= (T)(gr * (1 - j->ls) * wl);                                          \
        }                                                                                 \
    }
CE_BWD(float, ember__expf)
CE_BWD(double, exp)
#undef CE_BWD

static double weight_sum(const ember_tensor *w)
{
    double s = 0;
    const char *p = ember__ptr(w);
    for (int64_t c = 0; c < w->numel; c++) s += at(p, w->dtype, c);
    return s;
}

static void ce_setup(ce_job *j, const ember_attrs *at, ember_tensor *x, ember_tensor *lab, ember_tensor *w)
{
    j->M = x->shape[0];
    j->C = x->shape[1];
    j->first = at->i[0];
    j->ignore = at->i[1];
    j->ls = at->f[0];
    j->wsum = weight_sum(w);
    j->x = ember__ptr(x);
    j->lab = ember__ptr(lab);
    j->w = ember__ptr(w);
    j->lab64 = lab->dtype == EMBER_INT64;
    atomic_init(&j->bad, j->M);
}

static int ce_bad_label(const char *op, ce_job *j)
{
    int64_t r = atomic_load(&j->bad);
    if (r >= j->M) return EMBER_OK;
    int64_t v = j->lab64 ? ((const int64_t *)j->lab)[r] : ((const int32_t *)j->lab)[r];
    return ember__fail(EMBER_ERR_ARG, "%s: label %lld is out of range %lld..%lld", op, (long long)v,
                       (long long)j->first, (long long)(j->first + j->C - 1));
}

static int64_t ce_grain(int64_t C) { return 1 + 65536 / (C > 0 ? C : 1); }

/* ------------------------------------------------------------------ the ops */
int fwd_cross_entropy(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    ember_tensor *x = in[0];
    EMBER_TRY(ce_check("cross_entropy", x, in[1], in[2], at->f[0]));
    if (!ember__nn_on_cpu(3, in)) return ember__on_host(op, nin, in, at, 2, out);
    int64_t M = x->shape[0], two_m[2] = {2, M};
    ember_tensor *c[3], *rows = NULL, *st = NULL;
    EMBER_TRY(ember__nn_contiguous(in, 3, c));
    int rc = EMBER_OK;
    EMBER_CHECK(ember__new(1, &M, x->dtype, EMBER_CPU, &rows));
    EMBER_CHECK(ember__new(2, two_m, x->dtype, EMBER_CPU, &st));
    ce_job j;
    ce_setup(&j, at, c[0], c[1], c[2]);
    j.out = ember__ptr(rows);
    j.stats = ember__ptr(st);
    ember__parallel_for(M, ce_grain(j.C), x->dtype == EMBER_FLOAT32 ? ce_fwd_float : ce_fwd_double, &j);
    EMBER_CHECK(ce_bad_label("cross_entropy", &j));
    out[0] = ember__take(&rows);
    out[1] = ember__take(&st);
done:
    ember__nn_release(c, 3);
    EMBER_RELEASE(rows, st);
    return rc;
}

int fwd_cross_entropy_backward(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    ember_tensor *g = in[0], *x = in[1], *st = in[4];
    char sg[200], ss[200], sx[200];
    EMBER_TRY(ce_check("cross_entropy_backward", x, in[2], in[3], at->f[0]));
    int64_t M = x->shape[0];
    if (g->ndim != 1 || g->shape[0] != M || st->ndim != 2 || st->shape[0] != 2 || st->shape[1] != M)
        return ember__fail(EMBER_ERR_SHAPE, "cross_entropy_backward: gradient %s and stats %s do not fit logits %s "
                           "(expected {%lld} and {2, %lld})", ember__tshape(sg, g), ember__tshape(ss, st),
                           ember__tshape(sx, x), (long long)M, (long long)M);
    if (g->dtype != x->dtype || st->dtype != x->dtype)
        return ember__fail(EMBER_ERR_DTYPE, "cross_entropy_backward: gradient %s and stats %s for logits %s (expected "
                           "one dtype)", ember_dtype_name(g->dtype), ember_dtype_name(st->dtype),
                           ember_dtype_name(x->dtype));
    if (!ember__nn_on_cpu(5, in)) return ember__on_host(op, nin, in, at, 1, out);
    ember_tensor *c[5], *gx = NULL;
    EMBER_TRY(ember__nn_contiguous(in, 5, c));
    int rc = EMBER_OK;
    EMBER_CHECK(ember__new(2, x->shape, x->dtype, EMBER_CPU, &gx));
    ce_job j;
    ce_setup(&j, at, c[1], c[2], c[3]);
    j.g = ember__ptr(c[0]);
    j.st = ember__ptr(c[4]);
    j.out = ember__ptr(gx);
    ember__parallel_for(M, ce_grain(j.C), x->dtype == EMBER_FLOAT32 ? ce_bwd_float : ce_bwd_double, &j);
    EMBER_CHECK(ce_bad_label("cross_entropy_backward", &j));
    out[0] = ember__take(&gx);
done:
    ember__nn_release(c, 5);
    ember_tensor_release(gx);
    return rc;
}

/* The adjoint's coefficients, for the rule's composed form gx = g (a p - b)
   with p = softmax(x): a (M, 1) = (1 - ls) w_l + ls / C sum(w) and b (M, C)
   = (1 - ls) w_l [c = l] + ls / C w_c, both 0 on ignored rows; computed on
   the host, given on x's device. */
int ember__cross_entropy_coefs(ember_tensor *x, ember_tensor *lab, ember_tensor *w, const ember_attrs *attr,
                               ember_tensor **a, ember_tensor **b)
{
    ember_tensor *h[3] = {NULL, NULL, NULL}, *ha = NULL, *hb = NULL, *in[3] = {x, lab, w};
    int dev = x->storage->device, rc = EMBER_OK;
    EMBER_TRY(ce_check("cross_entropy", x, lab, w, attr->f[0]));
    for (int i = 0; i < 3; i++) {
        int dt = in[i]->dtype == EMBER_INT32 ? EMBER_INT64 : in[i]->dtype;
        if (dev == EMBER_CPU) {
            EMBER_CHECK(ember__contiguous_as(in[i], dt, &h[i]));
            continue;
        }
        ember_tensor *t = NULL;
        EMBER_CHECK(ember_to_device(in[i], EMBER_CPU, &t));
        rc = ember__contiguous_as(t, dt, &h[i]);
        ember_tensor_release(t);
        EMBER_CHECK(rc);
    }
    int64_t M = x->shape[0], C = x->shape[1], m1[2] = {M, 1};
    EMBER_CHECK(ember_full(2, m1, 0, EMBER_FLOAT64, EMBER_CPU, &ha));
    EMBER_CHECK(ember_full(2, x->shape, 0, EMBER_FLOAT64, EMBER_CPU, &hb));
    ce_job j;
    ce_setup(&j, attr, h[0], h[1], h[2]);
    double *pa = (double *)ember__ptr(ha), *pb = (double *)ember__ptr(hb), s = j.ls / (double)C;
    for (int64_t r = 0; r < M; r++) {
        int64_t l = ce_label(&j, r);
        if (l == -2) ce_flag(&j, r);
        if (l < 0) continue;
        double wl = at(j.w, w->dtype, l);
        pa[r] = (1 - j.ls) * wl + s * j.wsum;
        for (int64_t c = 0; c < C; c++) pb[r * C + c] = s * at(j.w, w->dtype, c);
        pb[r * C + l] += (1 - j.ls) * wl;
    }
    EMBER_CHECK(ce_bad_label("cross_entropy", &j));
    ember_tensor *ta = NULL, *tb = NULL;
    EMBER_CHECK(ember_to_dtype(ha, x->dtype, &ta));
    ember_tensor_release(ha);
    ha = ta;
    EMBER_CHECK(ember_to_dtype(hb, x->dtype, &tb));
    ember_tensor_release(hb);
    hb = tb;
    if (dev != EMBER_CPU) {
        EMBER_CHECK(ember_to_device(ha, dev, &ta));
        ember_tensor_release(ha);
        ha = ta;
        EMBER_CHECK(ember_to_device(hb, dev, &tb));
        ember_tensor_release(hb);
        hb = tb;
    }
    *a = ember__take(&ha);
    *b = ember__take(&hb);
done:
    ember__nn_release(h, 3);
    EMBER_RELEASE(ha, hb);
    return rc;
}

static ember_attrs ce_attrs(int64_t first_class, int64_t ignore_index, double label_smoothing)
{
    ember_attrs at = {{first_class, ignore_index}, {label_smoothing, 0}};
    return at;
}

int ember_cross_entropy(ember_tensor *x, ember_tensor *labels, ember_tensor *weight, int64_t first_class,
                        int64_t ignore_index, double label_smoothing, ember_tensor **rows, ember_tensor **stats)
{
    if (!rows || !stats) return ember__fail(EMBER_ERR_ARG, "cross_entropy: NULL argument");
    ember_tensor *in[3] = {x, labels, weight}, *out[2] = {NULL, NULL};
    ember_attrs at = ce_attrs(first_class, ignore_index, label_smoothing);
    int rc = ember__dispatch(EMBER_OP_CROSS_ENTROPY, 3, in, &at, out);
    *rows = out[0];
    *stats = out[1];
    return rc;
}

int ember_cross_entropy_backward(ember_tensor *g, ember_tensor *x, ember_tensor *labels, ember_tensor *weight,
                                 ember_tensor *stats, int64_t first_class, int64_t ignore_index,
                                 double label_smoothing, ember_tensor **gx)
{
    ember_tensor *in[5] = {g, x, labels, weight, stats};
    ember_attrs at = ce_attrs(first_class, ignore_index, label_smoothing);
    return ember__dispatch(EMBER_OP_CROSS_ENTROPY_BACKWARD, 5, in, &at, gx);
}

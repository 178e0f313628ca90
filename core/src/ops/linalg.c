/* linalg.c: batched linear algebra through LAPACK (lapack.c): inv, slogdet,
   solve, solve_triangular, cholesky, eigh, qr, svd (ops.def's LINALG_*), on (..., n, n) matrices
   ((..., m, n) for qr and svd) of float32 or float64. A row-major matrix is its transpose to column-major LAPACK, which
   each op uses rather than copy: getrf of A^T gives A's determinant, getri of
   A^T gives (A^-1)^T, that is A^-1 row-major, getrs with 'T' on A^T's factors
   solves A X = B, and potrf of the 'U' triangle of A^T gives L^T, that is L
   row-major; eigh and qr copy into column-major. On another device each op runs on the host (ember__on_host). */
#include "ops.h"
#include "lapack.h"
#include "../backend.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool on_cpu(int nin, ember_tensor *const *in)
{
    for (int i = 0; i < nin; i++)
        if (in[i]->storage->device != EMBER_CPU) return false;
    return true;
}

/* " at batch element {2, 1}": batch element b (0-based, over the flattened
   batch dims) of a, 1-based per dim; "" for a single matrix */
static const char *at_batch(char *buf, size_t len, const ember_tensor *a, int64_t b)
{
    int nb = a->ndim - 2;
    int64_t idx[EMBER_MAX_DIMS];
    if (nb == 0) return "";
    for (int d = nb - 1; d >= 0; d--) {
        idx[d] = a->shape[d] ? b % a->shape[d] : 0;
        b = a->shape[d] ? b / a->shape[d] : 0;
    }
    size_t k = (size_t)snprintf(buf, len, " at batch element {");
    for (int d = 0; d < nb && k < len; d++) k += (size_t)snprintf(buf + k, len - k, d ? ", %lld" : "%lld", (long long)idx[d] + 1);
    if (k < len) snprintf(buf + k, len - k, "}");
    return buf;
}

/* a matrix (a square one when square), or a batch of them, of float32 or float64 */
static int matrix_ok(const char *op, const ember_tensor *a, bool square)
{
    char sa[200];
    if (!a) return ember__fail(EMBER_ERR_ARG, "%s: argument is NULL", op);
    if (!square && a->ndim < 2)
        return ember__fail(EMBER_ERR_SHAPE, "%s: expects a matrix or a batch of them (..., m, n), got shape %s", op,
                           ember__tshape(sa, a));
    if (square && (a->ndim < 2 || a->shape[a->ndim - 1] != a->shape[a->ndim - 2]))
        return ember__fail(EMBER_ERR_SHAPE, "%s: expects a square matrix or a batch of them (..., n, n), got shape %s", op,
                           ember__tshape(sa, a));
    if (a->dtype != EMBER_FLOAT32 && a->dtype != EMBER_FLOAT64)
        return ember__fail(EMBER_ERR_DTYPE, "%s: expects float32 or float64, got %s", op, ember_dtype_name(a->dtype));
    if (a->shape[a->ndim - 1] > INT32_MAX || a->shape[a->ndim - 2] > INT32_MAX ||
        a->shape[a->ndim - 1] * a->shape[a->ndim - 2] > INT32_MAX)
        return ember__fail(EMBER_ERR_SHAPE, "%s: matrices of shape %s exceed LAPACK's 32-bit sizes", op,
                           ember__tshape(sa, a));
    if (!ember__have_lapack())
        return ember__fail(EMBER_ERR_UNSUPPORTED, "%s: no LAPACK: %s", op, ember_blas_info());
    return EMBER_OK;
}

static int square_ok(const char *op, const ember_tensor *a) { return matrix_ok(op, a, true); }

/* The scratch arrays of one op (pivots, LAPACK's work): SCRATCH gives ptr
   count zeroed elements of its type, or fails naming the op ("linalg.qr:
   out of memory"); scratch_free in the done: tail frees them all. */
typedef struct {
    const char *op;
    int n;
    void *p[4];
} scratch;

static void *scratch_get(scratch *s, size_t count, size_t size)
{
    ember__assert(s->n < (int)(sizeof s->p / sizeof s->p[0]));
    void *q = calloc(count ? count : 1, size);
    if (!q) {
        ember__fail(EMBER_ERR_OOM, "%s: out of memory", s->op);
        return NULL;
    }
    return s->p[s->n++] = q;
}

static void scratch_free(scratch *s)
{
    for (int i = 0; i < s->n; i++) free(s->p[i]);
}

#define SCRATCH(s, ptr, count) \
    EMBER_CHECK(((ptr) = scratch_get(&(s), (size_t)(count), sizeof *(ptr))) ? EMBER_OK : EMBER_ERR_OOM)

static int64_t nbatch(const ember_tensor *a)
{
    int64_t b = 1;
    for (int d = 0; d < a->ndim - 2; d++) b *= a->shape[d];
    return b;
}

/* a new contiguous tensor holding x with its last two dims swapped: each of
   its matrices is x's, column-major */
static int new_transposed(const ember_tensor *x, ember_tensor **out)
{
    int nd = x->ndim;
    int64_t ts[EMBER_MAX_DIMS], vst[EMBER_MAX_DIMS];
    ember_tensor *t = NULL, *v = NULL;
    memcpy(ts, x->shape, sizeof ts);
    ts[nd - 2] = x->shape[nd - 1];
    ts[nd - 1] = x->shape[nd - 2];
    EMBER_TRY(ember__new(nd, ts, x->dtype, EMBER_CPU, &t));
    memcpy(vst, t->strides, sizeof vst);
    vst[nd - 2] = t->strides[nd - 1];
    vst[nd - 1] = t->strides[nd - 2];
    int rc = ember__make_view(t, nd, x->shape, vst, t->offset, &v);
    if (rc == EMBER_OK) rc = ember__copy_into(v, x);
    ember_tensor_release(v);
    if (rc < 0) {
        ember_tensor_release(t);
        return rc;
    }
    *out = t;
    return EMBER_OK;
}

/* LINALG_INV: A -> A^-1 */
int fwd_linalg_inv(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 1, out);
    ember_tensor *a = in[0], *r = NULL;
    int n = (int)a->shape[a->ndim - 1], dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int64_t B = nbatch(a);
    scratch ws = {.op = "linalg.inv"};
    int *ipiv;
    char *work;
    SCRATCH(ws, ipiv, n);
    SCRATCH(ws, work, (size_t)n * es);
    EMBER_CHECK(ember__new(a->ndim, a->shape, dt, EMBER_CPU, &r));
    EMBER_CHECK(ember__copy_into(r, a));
    for (int64_t b = 0; b < B && n > 0; b++) {
        char *m = ember__ptr(r) + b * (int64_t)n * n * es;
        int info = ember__lapack_getrf(dt, n, m, ipiv);
        if (info == 0) info = ember__lapack_getri(dt, n, m, ipiv, work, n);
        if (info != 0) {
            char sb[200], sa[200];
            EMBER_CHECK(ember__fail(EMBER_ERR_ARG, "linalg.inv: the matrix%s of shape %s is singular (U[%d,%d] of its LU "
                                    "factorisation is zero)",
                                    at_batch(sb, sizeof sb, a, b), ember__tshape(sa, a), info, info));
        }
    }
    out[0] = ember__take(&r);
done:
    scratch_free(&ws);
    ember_tensor_release(r);
    return rc;
}

/* the sign and log|det| of the matrix m (n x n) in place through getrf: a
   singular matrix gives (0, -inf) */
static void lu_slogdet(int dt, int n, char *m, int *ipiv, double *sign, double *logabs)
{
    int info = n > 0 ? ember__lapack_getrf(dt, n, m, ipiv) : 0;
    *sign = 1;
    *logabs = 0;
    if (info > 0) {
        *sign = 0;
        *logabs = -INFINITY;
        return;
    }
    for (int i = 0; i < n; i++) {
        double u = dt == EMBER_FLOAT32 ? ((float *)m)[(int64_t)i * n + i] : ((double *)m)[(int64_t)i * n + i];
        if (u < 0) *sign = -*sign;
        if (ipiv[i] != i + 1) *sign = -*sign;
        *logabs += log(fabs(u));
    }
}

/* LINALG_SLOGDET: A -> (sign, log|det A|), both of the batch shape; a singular
   matrix gives (0, -inf). LINALG_DET (one output): A -> det A, the product of
   its LU pivots (exactly 0 for a zero pivot) */
int fwd_linalg_slogdet(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    bool det = op == EMBER_OP_LINALG_DET;
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, det ? 1 : 2, out);
    ember_tensor *a = in[0], *lu = NULL, *sg = NULL, *la = NULL;
    int n = (int)a->shape[a->ndim - 1], dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int64_t B = nbatch(a);
    scratch ws = {.op = det ? "linalg.det" : "linalg.slogdet"};
    int *ipiv;
    SCRATCH(ws, ipiv, n);
    EMBER_CHECK(ember__new(a->ndim, a->shape, dt, EMBER_CPU, &lu));
    EMBER_CHECK(ember__copy_into(lu, a));
    EMBER_CHECK(ember__new(a->ndim - 2, a->shape, dt, EMBER_CPU, &sg));
    if (!det) EMBER_CHECK(ember__new(a->ndim - 2, a->shape, dt, EMBER_CPU, &la));
    for (int64_t b = 0; b < B; b++) {
        char *m = ember__ptr(lu) + b * (int64_t)n * n * es;
        double sign, logabs;
        lu_slogdet(dt, n, m, ipiv, &sign, &logabs);
        if (det) {
            double d = sign;
            for (int i = 0; i < n && sign != 0; i++) d *= fabs(ember__load(m + ((int64_t)i * n + i) * es, dt));
            ember__store(ember__ptr(sg) + b * es, dt, d);
            continue;
        }
        ember__store(ember__ptr(sg) + b * es, dt, sign);
        ember__store(ember__ptr(la) + b * es, dt, logabs);
    }
    out[0] = sg;
    if (!det) out[1] = la;
    sg = la = NULL;
done:
    scratch_free(&ws);
    EMBER_RELEASE(lu, sg, la);
    return rc;
}

/* One matrix of a batched solve, in place: m is A^T column-major (A row-major),
   rhs the k columns of B. LINALG_SOLVE factors m by getrf and solves with 'T';
   LINALG_SOLVE_TRIANGULAR solves by trtrs, A's lower triangle being the upper
   one of A^T (uplo, diag from at). */
static int solve_one(int op, const ember_tensor *a, int64_t b, const ember_attrs *at, int n, int k, char *m, char *rhs,
                     int *ipiv)
{
    int dt = a->dtype, info;
    char sb[200], sa[200];
    if (op == EMBER_OP_LINALG_SOLVE) {
        info = ember__lapack_getrf(dt, n, m, ipiv);
        if (info != 0)
            return ember__fail(EMBER_ERR_ARG, "linalg.solve: the matrix A%s of shape %s is singular (U[%d,%d] of its "
                               "LU factorisation is zero)",
                               at_batch(sb, sizeof sb, a, b), ember__tshape(sa, a), info, info);
        if (k > 0) ember__lapack_getrs(dt, 'T', n, k, m, ipiv, rhs);
        return EMBER_OK;
    }
    info = ember__lapack_trtrs(dt, at->i[0] ? 'L' : 'U', 'T', at->i[1] ? 'U' : 'N', n, k > 0 ? k : 0, m, rhs);
    if (info < 0) return ember__fail(EMBER_ERR_UNSUPPORTED, "linalg.solve_triangular: LAPACK's trtrs is not available");
    if (info > 0)
        return ember__fail(EMBER_ERR_ARG, "linalg.solve_triangular: the matrix A%s of shape %s is singular "
                           "(its diagonal element %d is zero)",
                           at_batch(sb, sizeof sb, a, b), ember__tshape(sa, a), info);
    return EMBER_OK;
}

/* LINALG_SOLVE: (A (..., n, n), B (..., n, k)) -> X with A X = B, one batch
   shape. LINALG_SOLVE_TRIANGULAR: the same for a triangular A, by trtrs (i[0]
   upper, i[1] unitriangular) */
int fwd_linalg_solve(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 1, out);
    ember_tensor *a = in[0], *bm = in[1], *lu = NULL, *bt = NULL, *x = NULL;
    int n = (int)a->shape[a->ndim - 1], dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int k = (int)bm->shape[bm->ndim - 1];
    int64_t B = nbatch(a);
    scratch ws = {.op = op == EMBER_OP_LINALG_SOLVE ? "linalg.solve" : "linalg.solve_triangular"};
    int *ipiv;
    SCRATCH(ws, ipiv, n);
    EMBER_CHECK(ember__new(a->ndim, a->shape, dt, EMBER_CPU, &lu));
    EMBER_CHECK(ember__copy_into(lu, a));
    EMBER_CHECK(new_transposed(bm, &bt));   /* B^T: each batch's B column-major */
    for (int64_t b = 0; b < B && n > 0; b++)
        EMBER_CHECK(solve_one(op, a, b, at, n, k, ember__ptr(lu) + b * (int64_t)n * n * es,
                              ember__ptr(bt) + b * (int64_t)n * k * es, ipiv));
    EMBER_CHECK(new_transposed(bt, &x));   /* X = (B^T solved)^T */
    out[0] = ember__take(&x);
done:
    scratch_free(&ws);
    EMBER_RELEASE(lu, bt, x);
    return rc;
}

int fwd_linalg_solve_triangular(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    return fwd_linalg_solve(op, nin, in, at, out);
}

/* LINALG_CHOLESKY: A (symmetric positive-definite; its lower triangle is
   read) -> L lower triangular with A = L L^T */
int fwd_linalg_cholesky(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 1, out);
    ember_tensor *a = in[0], *r = NULL;
    int n = (int)a->shape[a->ndim - 1], dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int64_t B = nbatch(a);
    EMBER_CHECK(ember__new(a->ndim, a->shape, dt, EMBER_CPU, &r));
    EMBER_CHECK(ember__copy_into(r, a));
    for (int64_t b = 0; b < B && n > 0; b++) {
        char *m = ember__ptr(r) + b * (int64_t)n * n * es;
        int info = ember__lapack_potrf(dt, 'U', n, m);
        if (info != 0) {
            char sb[200], sa[200];
            EMBER_CHECK(ember__fail(EMBER_ERR_ARG, "linalg.cholesky: the matrix%s of shape %s is not positive-definite (its "
                                    "leading minor of order %d is not)",
                                    at_batch(sb, sizeof sb, a, b), ember__tshape(sa, a), info));
        }
        for (int i = 0; i < n; i++)   /* zero the upper triangle (row-major) */
            for (int j = i + 1; j < n; j++) ember__store(m + ((int64_t)i * n + j) * es, dt, 0);
    }
    out[0] = ember__take(&r);
done:
    ember_tensor_release(r);
    return rc;
}

/* LINALG_CHOLESKY_INFO: A -> int32 (...): 0 where A (its lower triangle) is
   positive-definite, else the order of its first leading minor that is not
   (potrf's info; no error) */
int fwd_linalg_cholesky_info(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 1, out);
    ember_tensor *a = in[0], *c = NULL, *inf = NULL;
    int n = (int)a->shape[a->ndim - 1], dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int64_t B = nbatch(a);
    EMBER_CHECK(ember__new(a->ndim, a->shape, dt, EMBER_CPU, &c));
    EMBER_CHECK(ember__copy_into(c, a));
    EMBER_CHECK(ember_full(a->ndim - 2, a->shape, 0, EMBER_INT32, EMBER_CPU, &inf));
    for (int64_t b = 0; b < B && n > 0; b++)
        ((int32_t *)ember__ptr(inf))[b] = ember__lapack_potrf(dt, 'U', n, ember__ptr(c) + b * (int64_t)n * n * es);
    out[0] = ember__take(&inf);
done:
    EMBER_RELEASE(c, inf);
    return rc;
}

/* LINALG_EIGH: symmetric A (its lower triangle is read) -> (eigenvalues
   (..., n) ascending, eigenvectors (..., n, n) as columns) */
int fwd_linalg_eigh(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 2, out);
    ember_tensor *a = in[0], *r = NULL, *w = NULL, *v = NULL;
    int n = (int)a->shape[a->ndim - 1], dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int64_t B = nbatch(a);
    scratch ws = {.op = "linalg.eigh"};
    char *work;
    int *iwork;
    EMBER_CHECK(ember__new(a->ndim, a->shape, dt, EMBER_CPU, &r));
    EMBER_CHECK(ember__copy_into(r, a));
    EMBER_CHECK(ember__new(a->ndim - 1, a->shape, dt, EMBER_CPU, &w));
    if (n > 0) {
        union { float f[2]; double d[1]; } q = {{0, 0}};   /* the size query's answer */
        int iq = 0;
        ember__lapack_syevd(dt, 'U', n, ember__ptr(r), ember__ptr(w), q.d, -1, &iq, -1);
        int lwork = (int)(dt == EMBER_FLOAT32 ? q.f[0] : q.d[0]) + 1, liwork = iq + 1;
        SCRATCH(ws, work, (size_t)lwork * es);
        SCRATCH(ws, iwork, liwork);
        for (int64_t b = 0; b < B; b++) {
            int info = ember__lapack_syevd(dt, 'U', n, ember__ptr(r) + b * (int64_t)n * n * es,
                                           ember__ptr(w) + b * (int64_t)n * es, work, lwork, iwork, liwork);
            if (info != 0) {
                char sb[200], sa[200];
                EMBER_CHECK(ember__fail(EMBER_ERR_ARG, "linalg.eigh: the eigenvalues of the matrix%s of shape %s did "
                                        "not converge (LAPACK info %d)",
                                        at_batch(sb, sizeof sb, a, b), ember__tshape(sa, a), info));
            }
        }
    }
    EMBER_CHECK(new_transposed(r, &v));
    out[0] = ember__take(&w);
    out[1] = ember__take(&v);
done:
    scratch_free(&ws);
    EMBER_RELEASE(r, w, v);
    return rc;
}

/* LINALG_QR: A (..., m, n) -> Q (..., m, c) and R (..., c, n), c = k = min(m, n)
   (i[0] 0, reduced; 2, mode "r", the same factors) or c = m (i[0] 1, complete) */
int fwd_linalg_qr(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 2, out);
    ember_tensor *a = in[0], *c = NULL, *q = NULL, *r = NULL;
    int nd = a->ndim, m = (int)a->shape[nd - 2], n = (int)a->shape[nd - 1], k = m < n ? m : n;
    int qc = at->i[0] == 1 ? m : k;   /* Q's columns, R's rows */
    int dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int64_t B = nbatch(a), qs[EMBER_MAX_DIMS], rs[EMBER_MAX_DIMS];
    scratch ws = {.op = "linalg.qr"};
    char *tau, *work, *qb_;
    memcpy(qs, a->shape, sizeof qs);
    memcpy(rs, a->shape, sizeof rs);
    qs[nd - 1] = qc;
    rs[nd - 2] = qc;
    EMBER_CHECK(new_transposed(a, &c));
    EMBER_CHECK(ember__new(nd, qs, dt, EMBER_CPU, &q));
    EMBER_CHECK(ember__new(nd, rs, dt, EMBER_CPU, &r));
    if (m > 0 && qc > 0) {
        union { float f[2]; double d[1]; } wq = {{0, 0}}, tq = {{0, 0}};   /* the size queries' answers */
        int l1 = 0;
        if (k > 0) {
            ember__lapack_geqrf(dt, m, n, ember__ptr(c), tq.d, wq.d, -1);
            l1 = (int)(dt == EMBER_FLOAT32 ? wq.f[0] : wq.d[0]);
        }
        wq.d[0] = 0;
        SCRATCH(ws, qb_, (size_t)m * (size_t)qc * es);
        ember__lapack_orgqr(dt, m, qc, k, qb_, tq.d, wq.d, -1);
        int l2 = (int)(dt == EMBER_FLOAT32 ? wq.f[0] : wq.d[0]);
        int lwork = (l1 > l2 ? l1 : l2) + n + qc + 1;
        SCRATCH(ws, tau, (size_t)k * es);
        SCRATCH(ws, work, (size_t)lwork * es);
        for (int64_t b = 0; b < B; b++) {
            char *ab = ember__ptr(c) + b * (int64_t)m * n * es;
            char *qb = ember__ptr(q) + b * (int64_t)m * qc * es, *rb = ember__ptr(r) + b * (int64_t)qc * n * es;
            if (k > 0) ember__lapack_geqrf(dt, m, n, ab, tau, work, lwork);
            for (int i = 0; i < qc; i++)
                for (int j = 0; j < n; j++)
                    ember__store(rb + ((int64_t)i * n + j) * es, dt, j >= i ? ember__load(ab + ((int64_t)j * m + i) * es, dt) : 0);
            /* the reflectors (the first k columns) into the m x qc buffer orgqr fills */
            memset(qb_, 0, (size_t)m * (size_t)qc * (size_t)es);
            memcpy(qb_, ab, (size_t)m * (size_t)k * (size_t)es);
            ember__lapack_orgqr(dt, m, qc, k, qb_, tau, work, lwork);
            for (int i = 0; i < m; i++)
                for (int j = 0; j < qc; j++)
                    ember__store(qb + ((int64_t)i * qc + j) * es, dt, ember__load(qb_ + ((int64_t)j * m + i) * es, dt));
        }
    }
    out[0] = ember__take(&q);
    out[1] = ember__take(&r);
done:
    scratch_free(&ws);
    EMBER_RELEASE(c, q, r);
    return rc;
}

/* LINALG_SVD: A (..., m, n) -> U (..., m, k), Vh (..., k, n), S (..., k)
   descending, k = min(m, n); with i[0] (full_matrices) U (..., m, m) and Vh
   (..., n, n). LAPACK sees A^T = V S U^T: its U is our V,
   which read row-major is Vh, and its V^T is our U^T, read row-major U */
int fwd_linalg_svd(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 3, out);
    ember_tensor *a = in[0], *c = NULL, *u = NULL, *sv = NULL, *vh = NULL;
    int nd = a->ndim, m = (int)a->shape[nd - 2], n = (int)a->shape[nd - 1], k = m < n ? m : n;
    int uc = at->i[0] ? m : k, vr = at->i[0] ? n : k;   /* U's columns, Vh's rows */
    int dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int64_t B = nbatch(a), us[EMBER_MAX_DIMS], ss[EMBER_MAX_DIMS], vs[EMBER_MAX_DIMS];
    scratch ws = {.op = "linalg.svd"};
    char *work;
    int *iwork;
    memcpy(us, a->shape, sizeof us);
    memcpy(ss, a->shape, sizeof ss);
    memcpy(vs, a->shape, sizeof vs);
    us[nd - 1] = uc;
    ss[nd - 2] = k;
    vs[nd - 2] = vr;
    EMBER_CHECK(ember__new(nd, a->shape, dt, EMBER_CPU, &c));
    EMBER_CHECK(ember__copy_into(c, a));
    EMBER_CHECK(ember__new(nd, us, dt, EMBER_CPU, &u));
    EMBER_CHECK(ember__new(nd - 1, ss, dt, EMBER_CPU, &sv));
    EMBER_CHECK(ember__new(nd, vs, dt, EMBER_CPU, &vh));
    if (k > 0) {
        union { float f[2]; double d[1]; } wq = {{0, 0}};
        SCRATCH(ws, iwork, (size_t)8 * (size_t)k);
        ember__lapack_gesdd(dt, at->i[0] ? 'A' : 'S', n, m, ember__ptr(c), ember__ptr(sv), ember__ptr(vh), n, ember__ptr(u), uc, wq.d,
                            -1, iwork);
        int lwork = (int)(dt == EMBER_FLOAT32 ? wq.f[0] : wq.d[0]) + 1;
        SCRATCH(ws, work, (size_t)lwork * es);
        for (int64_t b = 0; b < B; b++) {
            int info = ember__lapack_gesdd(dt, at->i[0] ? 'A' : 'S', n, m, ember__ptr(c) + b * (int64_t)m * n * es,
                                           ember__ptr(sv) + b * (int64_t)k * es, ember__ptr(vh) + b * (int64_t)vr * n * es, n,
                                           ember__ptr(u) + b * (int64_t)m * uc * es, uc, work, lwork, iwork);
            if (info != 0) {
                char sb[200], sa[200];
                EMBER_CHECK(ember__fail(EMBER_ERR_ARG, "linalg.svd: the matrix%s of shape %s %s (LAPACK info %d)",
                                        at_batch(sb, sizeof sb, a, b), ember__tshape(sa, a),
                                        info > 0 ? "did not converge" : "holds NaN or another bad value", info));
            }
        }
    }
    if (k == 0 && at->i[0])   /* the full factors of an empty matrix: identities */
        for (int64_t b = 0; b < B; b++) {
            for (int i = 0; i < m; i++)
                for (int j = 0; j < m; j++) ember__store(ember__ptr(u) + (b * (int64_t)m * m + (int64_t)i * m + j) * es, dt, i == j);
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++) ember__store(ember__ptr(vh) + (b * (int64_t)n * n + (int64_t)i * n + j) * es, dt, i == j);
        }
    out[0] = ember__take(&u);
    out[1] = ember__take(&vh);
    out[2] = ember__take(&sv);
done:
    scratch_free(&ws);
    EMBER_RELEASE(c, u, sv, vh);
    return rc;
}

/* LINALG_LSTSQ: (A (..., m, n), B (..., m, k), one batch shape) -> X
   (..., n, k) minimising ||A X - B||, the rank (int64, (...)) and the
   singular values (..., min(m, n)) of A, by the driver i[0] (EMBER_LSTSQ_*,
   lapack.h) with cutoff f[0] (rcond); gels leaves the rank at min(m, n), gels
   and gelsy leave the singular values zero */
int fwd_linalg_lstsq(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 3, out);
    ember_tensor *a = in[0], *bm = in[1], *ac = NULL, *bt = NULL, *x = NULL, *rk = NULL, *sv = NULL;
    int nd = a->ndim, m = (int)a->shape[nd - 2], n = (int)a->shape[nd - 1], k = (int)bm->shape[nd - 1];
    int mn = m < n ? m : n, ld = m > n ? m : n, driver = (int)at->i[0];
    int dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int64_t B = nbatch(a), xs[EMBER_MAX_DIMS], ss[EMBER_MAX_DIMS];
    scratch ws = {.op = "linalg.lstsq"};
    char *buf, *work;
    int *iwork;
    if (ld < 1) ld = 1;
    memcpy(xs, bm->shape, sizeof xs);
    memcpy(ss, a->shape, sizeof ss);
    xs[nd - 2] = n;
    ss[nd - 2] = mn;
    EMBER_CHECK(new_transposed(a, &ac));   /* each A column-major (m x n) */
    EMBER_CHECK(new_transposed(bm, &bt));  /* each B column-major (m x k) */
    EMBER_CHECK(ember_full(nd, xs, 0, dt, EMBER_CPU, &x));
    EMBER_CHECK(ember_full(nd - 2, a->shape, 0, EMBER_INT64, EMBER_CPU, &rk));
    EMBER_CHECK(ember_full(nd - 1, ss, 0, dt, EMBER_CPU, &sv));
    SCRATCH(ws, buf, (size_t)ld * (size_t)(k ? k : 1) * es);
    if (mn > 0 && k > 0) {
        union { float f[2]; double d[1]; } wq = {{0, 0}};
        int iq[2] = {0, 0}, r0 = 0;
        ember__lapack_lstsq(dt, driver, m, n, k, ember__ptr(ac), buf, ld, ember__ptr(sv), at->f[0], &r0, wq.d, -1, iq);
        int lwork = (int)(dt == EMBER_FLOAT32 ? wq.f[0] : wq.d[0]) + 1;
        int liwork = (driver == EMBER_LSTSQ_GELSD ? iq[0] : 0) + n + 1;
        SCRATCH(ws, work, (size_t)lwork * es);
        SCRATCH(ws, iwork, liwork);
        for (int64_t b = 0; b < B; b++) {
            for (int j = 0; j < k; j++)
                memcpy(buf + (int64_t)j * ld * es, ember__ptr(bt) + (b * (int64_t)m * k + (int64_t)j * m) * es, (size_t)m * (size_t)es);
            memset(iwork, 0, (size_t)liwork * sizeof *iwork);
            if (driver == EMBER_LSTSQ_GELSD || driver == EMBER_LSTSQ_GELSS) {
                /* their SVD fails on NaN or infinity (LAPACK prints to stdout first): say so */
                const char *ab = ember__ptr(ac) + b * (int64_t)m * n * es;
                for (int64_t i = 0; i < (int64_t)m * n; i++)
                    if (!isfinite(ember__load(ab + i * es, dt))) {
                        char sb[200], sa[200];
                        EMBER_CHECK(ember__fail(EMBER_ERR_ARG, "linalg.lstsq: the matrix A%s of shape %s holds NaN or "
                                                "infinity (the SVD of drivers gelsd and gelss needs finite values)",
                                                at_batch(sb, sizeof sb, a, b), ember__tshape(sa, a)));
                    }
            }
            int rank = mn;
            int info = ember__lapack_lstsq(dt, driver, m, n, k, ember__ptr(ac) + b * (int64_t)m * n * es, buf, ld,
                                           ember__ptr(sv) + b * (int64_t)mn * es, at->f[0], &rank, work, lwork, iwork);
            if (info != 0) {
                char sb[200], sa[200];
                EMBER_CHECK(ember__fail(EMBER_ERR_ARG, "linalg.lstsq: the matrix A%s of shape %s %s (LAPACK info %d)",
                                        at_batch(sb, sizeof sb, a, b), ember__tshape(sa, a),
                                        info < 0 ? "holds a bad value" : driver == EMBER_LSTSQ_GELS
                                        ? "does not have full rank (driver gels needs it; gelsy, gelsd and gelss do not)"
                                        : "did not converge", info));
            }
            ((int64_t *)ember__ptr(rk))[b] = rank;
            for (int i = 0; i < n; i++)
                for (int j = 0; j < k; j++)
                    ember__store(ember__ptr(x) + (b * (int64_t)n * k + (int64_t)i * k + j) * es, dt,
                                 ember__load(buf + ((int64_t)j * ld + i) * es, dt));
        }
    }
    out[0] = ember__take(&x);
    out[1] = ember__take(&rk);
    out[2] = ember__take(&sv);
done:
    scratch_free(&ws);
    EMBER_RELEASE(ac, bt, x, rk, sv);
    return rc;
}

/* LINALG_LU: A (..., m, n) -> the packed LU (..., m, n) (L's strict lower
   part, its unit diagonal implied, and U), the int32 1-based pivots (...,
   k) of getrf's row interchanges (A = P L U) and the int32 info (...):
   0, or i > 0 for U[i, i] = 0 (not an error here) */
int fwd_linalg_lu(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 3, out);
    ember_tensor *a = in[0], *c = NULL, *lu = NULL, *pv = NULL, *inf = NULL;
    int nd = a->ndim, m = (int)a->shape[nd - 2], n = (int)a->shape[nd - 1], k = m < n ? m : n;
    int dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int64_t B = nbatch(a), ps[EMBER_MAX_DIMS];
    memcpy(ps, a->shape, sizeof ps);
    ps[nd - 2] = k;
    EMBER_CHECK(new_transposed(a, &c));   /* each A column-major */
    EMBER_CHECK(ember_full(nd - 1, ps, 0, EMBER_INT32, EMBER_CPU, &pv));
    EMBER_CHECK(ember_full(nd - 2, a->shape, 0, EMBER_INT32, EMBER_CPU, &inf));
    for (int64_t b = 0; b < B && k > 0; b++) {
        int32_t *ip = (int32_t *)ember__ptr(pv) + b * k;
        ((int32_t *)ember__ptr(inf))[b] = ember__lapack_getrf_mn(dt, m, n, ember__ptr(c) + b * (int64_t)m * n * es, ip);
    }
    EMBER_CHECK(new_transposed(c, &lu));
    out[0] = ember__take(&lu);
    out[1] = ember__take(&pv);
    out[2] = ember__take(&inf);
done:
    EMBER_RELEASE(c, lu, pv, inf);
    return rc;
}

/* ------------------------------------------------------------------ the C API */
/* B of A X = B for A (..., m, n): (..., r, k) with A's batch dims, r = m
   (rows: lstsq) or n (solve), A's dtype, k within LAPACK's int */
static int rhs_ok(const char *op, const ember_tensor *a, const ember_tensor *b, bool rows)
{
    char sa[200], sb[200];
    if (!b) return ember__fail(EMBER_ERR_ARG, "%s: B is NULL", op);
    bool ok = b->ndim == a->ndim && b->shape[b->ndim - 2] == a->shape[a->ndim - (rows ? 2 : 1)];
    for (int d = 0; ok && d < a->ndim - 2; d++) ok = a->shape[d] == b->shape[d];
    if (!ok)
        return ember__fail(EMBER_ERR_SHAPE, "%s: A of shape %s and B of shape %s do not fit (B must be (..., %s, k) "
                           "with A's batch dims)", op, ember__tshape(sa, a), ember__tshape(sb, b), rows ? "m" : "n");
    if (b->dtype != a->dtype)
        return ember__fail(EMBER_ERR_DTYPE, "%s: A is %s and B is %s (one dtype expected)", op,
                           ember_dtype_name(a->dtype), ember_dtype_name(b->dtype));
    if (b->shape[b->ndim - 1] > INT32_MAX)
        return ember__fail(EMBER_ERR_SHAPE, "%s: B of shape %s has too many columns for LAPACK", op, ember__tshape(sb, b));
    return EMBER_OK;
}

/* Runs op and hands its outputs to the caller's pointers in dst, in the op's output order;
   every one is NULL when it fails. */
static int dispatch_outs(int op, int nin, ember_tensor *const *in, const ember_attrs *at, int nout,
                         ember_tensor **const *dst)
{
    ember_tensor *o[3];
    int rc = ember__dispatch(op, nin, in, at, o);
    for (int i = 0; i < nout; i++) *dst[i] = rc < 0 ? NULL : o[i];
    return rc;
}

/* an op of one square matrix (or batch of them) with one output */
static int square_op(const char *name, int op, ember_tensor *a, ember_tensor **out)
{
    EMBER_TRY(square_ok(name, a));
    ember_attrs at = {{0}, {0}};
    return ember__dispatch(op, 1, &a, &at, out);
}

/* an op of one square matrix (or batch of them) with two outputs */
static int square_op2(const char *name, int op, ember_tensor *a, ember_tensor **o0, ember_tensor **o1)
{
    EMBER_TRY(square_ok(name, a));
    if (!o0 || !o1) return ember__fail(EMBER_ERR_ARG, "%s: NULL output", name);
    ember_attrs at = {{0}, {0}};
    return dispatch_outs(op, 1, &a, &at, 2, (ember_tensor **const[]){o0, o1});
}

int ember_linalg_inv(ember_tensor *a, ember_tensor **out)
{
    return square_op("linalg.inv", EMBER_OP_LINALG_INV, a, out);
}

int ember_linalg_slogdet(ember_tensor *a, ember_tensor **sign, ember_tensor **logabsdet)
{
    return square_op2("linalg.slogdet", EMBER_OP_LINALG_SLOGDET, a, sign, logabsdet);
}

int ember_linalg_det(ember_tensor *a, ember_tensor **out)
{
    return square_op("linalg.det", EMBER_OP_LINALG_DET, a, out);
}

int ember_linalg_solve(ember_tensor *a, ember_tensor *b, ember_tensor **out)
{
    EMBER_TRY(square_ok("linalg.solve", a));
    EMBER_TRY(rhs_ok("linalg.solve", a, b, false));
    ember_tensor *in[2] = {a, b};
    ember_attrs at = {{0}, {0}};
    return ember__dispatch(EMBER_OP_LINALG_SOLVE, 2, in, &at, out);
}

int ember_linalg_solve_triangular(ember_tensor *a, ember_tensor *b, int upper, int unitriangular, ember_tensor **out)
{
    EMBER_TRY(square_ok("linalg.solve_triangular", a));
    EMBER_TRY(rhs_ok("linalg.solve_triangular", a, b, false));
    ember_tensor *in[2] = {a, b};
    ember_attrs at = {{0}, {0}};
    at.i[0] = upper != 0;
    at.i[1] = unitriangular != 0;
    return ember__dispatch(EMBER_OP_LINALG_SOLVE_TRIANGULAR, 2, in, &at, out);
}

int ember_linalg_cholesky(ember_tensor *a, ember_tensor **out)
{
    return square_op("linalg.cholesky", EMBER_OP_LINALG_CHOLESKY, a, out);
}

int ember_linalg_cholesky_info(ember_tensor *a, ember_tensor **info)
{
    return square_op("linalg.cholesky_ex", EMBER_OP_LINALG_CHOLESKY_INFO, a, info);
}

int ember_linalg_eigh(ember_tensor *a, ember_tensor **eigenvalues, ember_tensor **eigenvectors)
{
    return square_op2("linalg.eigh", EMBER_OP_LINALG_EIGH, a, eigenvalues, eigenvectors);
}

int ember_linalg_qr(ember_tensor *a, ember_tensor **q, ember_tensor **r) { return ember_linalg_qr_mode(a, 0, q, r); }

int ember_linalg_qr_mode(ember_tensor *a, int mode, ember_tensor **q, ember_tensor **r)
{
    EMBER_TRY(matrix_ok("linalg.qr", a, false));
    if (!q || !r) return ember__fail(EMBER_ERR_ARG, "linalg.qr: NULL output");
    if (mode < 0 || mode > 2) return ember__fail(EMBER_ERR_ARG, "linalg.qr: mode must be 0 (reduced), 1 (complete) or 2 (r), got %d", mode);
    ember_attrs at = {{0}, {0}};
    at.i[0] = mode;
    return dispatch_outs(EMBER_OP_LINALG_QR, 1, &a, &at, 2, (ember_tensor **const[]){q, r});
}

int ember_linalg_svd(ember_tensor *a, ember_tensor **u, ember_tensor **s, ember_tensor **vh)
{
    return ember_linalg_svd_full(a, 0, u, s, vh);
}

int ember_linalg_svd_full(ember_tensor *a, int full_matrices, ember_tensor **u, ember_tensor **s, ember_tensor **vh)
{
    EMBER_TRY(matrix_ok("linalg.svd", a, false));
    if (!u || !s || !vh) return ember__fail(EMBER_ERR_ARG, "linalg.svd: NULL output");
    ember_attrs at = {{0}, {0}};
    at.i[0] = full_matrices != 0;
    return dispatch_outs(EMBER_OP_LINALG_SVD, 1, &a, &at, 3, (ember_tensor **const[]){u, vh, s});
}

int ember_linalg_lstsq(ember_tensor *a, ember_tensor *b, int driver, double rcond, ember_tensor **solution,
                       ember_tensor **rank, ember_tensor **singular_values)
{
    EMBER_TRY(matrix_ok("linalg.lstsq", a, false));
    EMBER_TRY(rhs_ok("linalg.lstsq", a, b, true));
    if (!solution || !rank || !singular_values) return ember__fail(EMBER_ERR_ARG, "linalg.lstsq: NULL output");
    if (driver < EMBER_LSTSQ_GELS || driver > EMBER_LSTSQ_GELSS)
        return ember__fail(EMBER_ERR_ARG, "linalg.lstsq: driver must be 0 (gels), 1 (gelsy), 2 (gelsd) or 3 (gelss), got %d", driver);
    if (!(rcond == rcond))
        return ember__fail(EMBER_ERR_ARG, "linalg.lstsq: rcond is NaN");
    ember_tensor *in[2] = {a, b};
    ember_attrs at = {{0}, {0}};
    at.i[0] = driver;
    at.f[0] = rcond;
    return dispatch_outs(EMBER_OP_LINALG_LSTSQ, 2, in, &at, 3, (ember_tensor **const[]){solution, rank, singular_values});
}

int ember_linalg_lu_factor(ember_tensor *a, ember_tensor **lu, ember_tensor **pivots, ember_tensor **info)
{
    EMBER_TRY(matrix_ok("linalg.lu_factor", a, false));
    if (!lu || !pivots || !info) return ember__fail(EMBER_ERR_ARG, "linalg.lu_factor: NULL output");
    ember_attrs at = {{0}, {0}};
    return dispatch_outs(EMBER_OP_LINALG_LU, 1, &a, &at, 3, (ember_tensor **const[]){lu, pivots, info});
}

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
    int *ipiv = malloc((size_t)(n ? n : 1) * sizeof *ipiv);
    void *work = malloc((size_t)(n ? n : 1) * (size_t)es);
    if (!ipiv || !work) EMBER_CHECK(ember__fail(EMBER_ERR_OOM, "linalg.inv: out of memory"));
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
    out[0] = r;
    r = NULL;
done:
    free(ipiv);
    free(work);
    ember_tensor_release(r);
    return rc;
}

/* LINALG_SLOGDET: A -> (sign, log|det A|), both of the batch shape; a singular
   matrix gives (0, -inf) */
int fwd_linalg_slogdet(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 2, out);
    ember_tensor *a = in[0], *lu = NULL, *sg = NULL, *la = NULL;
    int n = (int)a->shape[a->ndim - 1], dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int64_t B = nbatch(a);
    int *ipiv = malloc((size_t)(n ? n : 1) * sizeof *ipiv);
    if (!ipiv) EMBER_CHECK(ember__fail(EMBER_ERR_OOM, "linalg.slogdet: out of memory"));
    EMBER_CHECK(ember__new(a->ndim, a->shape, dt, EMBER_CPU, &lu));
    EMBER_CHECK(ember__copy_into(lu, a));
    EMBER_CHECK(ember__new(a->ndim - 2, a->shape, dt, EMBER_CPU, &sg));
    EMBER_CHECK(ember__new(a->ndim - 2, a->shape, dt, EMBER_CPU, &la));
    for (int64_t b = 0; b < B; b++) {
        char *m = ember__ptr(lu) + b * (int64_t)n * n * es;
        double sign = 1, logabs = 0;
        int info = n > 0 ? ember__lapack_getrf(dt, n, m, ipiv) : 0;
        if (info > 0) {
            sign = 0;
            logabs = -INFINITY;
        } else {
            for (int i = 0; i < n; i++) {
                double u = dt == EMBER_FLOAT32 ? ((float *)m)[(int64_t)i * n + i] : ((double *)m)[(int64_t)i * n + i];
                if (u < 0) sign = -sign;
                if (ipiv[i] != i + 1) sign = -sign;
                logabs += log(fabs(u));
            }
        }
        ember__store(ember__ptr(sg) + b * es, dt, sign);
        ember__store(ember__ptr(la) + b * es, dt, logabs);
    }
    out[0] = sg;
    out[1] = la;
    sg = la = NULL;
done:
    free(ipiv);
    ember_tensor_release(lu);
    ember_tensor_release(sg);
    ember_tensor_release(la);
    return rc;
}

/* LINALG_SOLVE: (A (..., n, n), B (..., n, k)) -> X with A X = B, one batch shape */
int fwd_linalg_solve(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 1, out);
    ember_tensor *a = in[0], *bm = in[1], *lu = NULL, *bt = NULL, *x = NULL;
    int n = (int)a->shape[a->ndim - 1], dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int k = (int)bm->shape[bm->ndim - 1];
    int64_t B = nbatch(a);
    int *ipiv = malloc((size_t)(n ? n : 1) * sizeof *ipiv);
    if (!ipiv) EMBER_CHECK(ember__fail(EMBER_ERR_OOM, "linalg.solve: out of memory"));
    EMBER_CHECK(ember__new(a->ndim, a->shape, dt, EMBER_CPU, &lu));
    EMBER_CHECK(ember__copy_into(lu, a));
    EMBER_CHECK(new_transposed(bm, &bt));   /* B^T: each batch's B column-major */
    for (int64_t b = 0; b < B && n > 0; b++) {
        char *m = ember__ptr(lu) + b * (int64_t)n * n * es;
        int info = ember__lapack_getrf(dt, n, m, ipiv);
        if (info != 0) {
            char sb[200], sa[200];
            EMBER_CHECK(ember__fail(EMBER_ERR_ARG, "linalg.solve: the matrix A%s of shape %s is singular (U[%d,%d] of its "
                                    "LU factorisation is zero)",
                                    at_batch(sb, sizeof sb, a, b), ember__tshape(sa, a), info, info));
        }
        if (k > 0) ember__lapack_getrs(dt, 'T', n, k, m, ipiv, ember__ptr(bt) + b * (int64_t)n * k * es);
    }
    EMBER_CHECK(new_transposed(bt, &x));   /* X = (B^T solved)^T */
    out[0] = x;
    x = NULL;
done:
    free(ipiv);
    ember_tensor_release(lu);
    ember_tensor_release(bt);
    ember_tensor_release(x);
    return rc;
}

/* LINALG_SOLVE_TRIANGULAR: as LINALG_SOLVE for a triangular A, by trtrs. A
   row-major is A^T column-major, so A's lower triangle is the upper one
   there, solved transposed */
int fwd_linalg_solve_triangular(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 1, out);
    ember_tensor *a = in[0], *bm = in[1], *lu = NULL, *bt = NULL, *x = NULL;
    int n = (int)a->shape[a->ndim - 1], dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int k = (int)bm->shape[bm->ndim - 1];
    int64_t B = nbatch(a);
    EMBER_CHECK(ember__new(a->ndim, a->shape, dt, EMBER_CPU, &lu));
    EMBER_CHECK(ember__copy_into(lu, a));
    EMBER_CHECK(new_transposed(bm, &bt));   /* B^T: each batch's B column-major */
    char uplo = at->i[0] ? 'L' : 'U', diag = at->i[1] ? 'U' : 'N';
    for (int64_t b = 0; b < B && n > 0; b++) {
        char *m = ember__ptr(lu) + b * (int64_t)n * n * es;
        int info = ember__lapack_trtrs(dt, uplo, 'T', diag, n, k > 0 ? k : 0, m, ember__ptr(bt) + b * (int64_t)n * k * es);
        if (info < 0) EMBER_CHECK(ember__fail(EMBER_ERR_UNSUPPORTED, "linalg.solve_triangular: LAPACK's trtrs is not available"));
        if (info > 0) {
            char sb[200], sa[200];
            EMBER_CHECK(ember__fail(EMBER_ERR_ARG, "linalg.solve_triangular: the matrix A%s of shape %s is singular "
                                    "(its diagonal element %d is zero)",
                                    at_batch(sb, sizeof sb, a, b), ember__tshape(sa, a), info));
        }
    }
    EMBER_CHECK(new_transposed(bt, &x));   /* X = (B^T solved)^T */
    out[0] = x;
    x = NULL;
done:
    ember_tensor_release(lu);
    ember_tensor_release(bt);
    ember_tensor_release(x);
    return rc;
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
    out[0] = r;
    r = NULL;
done:
    ember_tensor_release(r);
    return rc;
}

/* LINALG_EIGH: symmetric A (its lower triangle is read) -> (eigenvalues
   (..., n) ascending, eigenvectors (..., n, n) as columns) */
int fwd_linalg_eigh(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 2, out);
    ember_tensor *a = in[0], *r = NULL, *w = NULL, *v = NULL;
    int n = (int)a->shape[a->ndim - 1], dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int64_t B = nbatch(a), ws[EMBER_MAX_DIMS];
    void *work = NULL;
    int *iwork = NULL;
    EMBER_CHECK(ember__new(a->ndim, a->shape, dt, EMBER_CPU, &r));
    EMBER_CHECK(ember__copy_into(r, a));
    memcpy(ws, a->shape, sizeof ws);
    EMBER_CHECK(ember__new(a->ndim - 1, ws, dt, EMBER_CPU, &w));
    if (n > 0) {
        union { float f[2]; double d[1]; } q = {{0, 0}};   /* the size query's answer */
        int iq = 0;
        ember__lapack_syevd(dt, 'U', n, ember__ptr(r), ember__ptr(w), q.d, -1, &iq, -1);
        int lwork = (int)(dt == EMBER_FLOAT32 ? q.f[0] : q.d[0]) + 1, liwork = iq + 1;
        work = malloc((size_t)lwork * (size_t)es);
        iwork = malloc((size_t)liwork * sizeof *iwork);
        if (!work || !iwork) EMBER_CHECK(ember__fail(EMBER_ERR_OOM, "linalg.eigh: out of memory"));
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
    out[0] = w;
    out[1] = v;
    w = v = NULL;
done:
    free(work);
    free(iwork);
    ember_tensor_release(r);
    ember_tensor_release(w);
    ember_tensor_release(v);
    return rc;
}

/* LINALG_QR: A (..., m, n) -> the reduced Q (..., m, k) and R (..., k, n), k = min(m, n) */
int fwd_linalg_qr(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 2, out);
    ember_tensor *a = in[0], *c = NULL, *q = NULL, *r = NULL;
    int nd = a->ndim, m = (int)a->shape[nd - 2], n = (int)a->shape[nd - 1], k = m < n ? m : n;
    int dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int64_t B = nbatch(a), qs[EMBER_MAX_DIMS], rs[EMBER_MAX_DIMS];
    void *tau = NULL, *work = NULL;
    memcpy(qs, a->shape, sizeof qs);
    memcpy(rs, a->shape, sizeof rs);
    qs[nd - 1] = k;
    rs[nd - 2] = k;
    EMBER_CHECK(new_transposed(a, &c));
    EMBER_CHECK(ember__new(nd, qs, dt, EMBER_CPU, &q));
    EMBER_CHECK(ember__new(nd, rs, dt, EMBER_CPU, &r));
    if (k > 0) {
        union { float f[2]; double d[1]; } wq = {{0, 0}}, tq = {{0, 0}};   /* the size queries' answers */
        ember__lapack_geqrf(dt, m, n, ember__ptr(c), tq.d, wq.d, -1);
        int l1 = (int)(dt == EMBER_FLOAT32 ? wq.f[0] : wq.d[0]);
        wq.d[0] = 0;
        ember__lapack_orgqr(dt, m, k, k, ember__ptr(c), tq.d, wq.d, -1);
        int l2 = (int)(dt == EMBER_FLOAT32 ? wq.f[0] : wq.d[0]);
        int lwork = (l1 > l2 ? l1 : l2) + n + 1;
        tau = malloc((size_t)k * (size_t)es);
        work = malloc((size_t)lwork * (size_t)es);
        if (!tau || !work) EMBER_CHECK(ember__fail(EMBER_ERR_OOM, "linalg.qr: out of memory"));
        for (int64_t b = 0; b < B; b++) {
            char *ab = ember__ptr(c) + b * (int64_t)m * n * es;
            char *qb = ember__ptr(q) + b * (int64_t)m * k * es, *rb = ember__ptr(r) + b * (int64_t)k * n * es;
            ember__lapack_geqrf(dt, m, n, ab, tau, work, lwork);
            for (int i = 0; i < k; i++)
                for (int j = 0; j < n; j++)
                    ember__store(rb + ((int64_t)i * n + j) * es, dt, j >= i ? ember__load(ab + ((int64_t)j * m + i) * es, dt) : 0);
            ember__lapack_orgqr(dt, m, k, k, ab, tau, work, lwork);
            for (int i = 0; i < m; i++)
                for (int j = 0; j < k; j++)
                    ember__store(qb + ((int64_t)i * k + j) * es, dt, ember__load(ab + ((int64_t)j * m + i) * es, dt));
        }
    }
    out[0] = q;
    out[1] = r;
    q = r = NULL;
done:
    free(tau);
    free(work);
    ember_tensor_release(c);
    ember_tensor_release(q);
    ember_tensor_release(r);
    return rc;
}

/* LINALG_SVD: A (..., m, n) -> U (..., m, k), Vh (..., k, n), S (..., k)
   descending, k = min(m, n). LAPACK sees A^T = V S U^T: its U is our V,
   which read row-major is Vh, and its V^T is our U^T, read row-major U */
int fwd_linalg_svd(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (!on_cpu(nin, in)) return ember__on_host(op, nin, in, at, 3, out);
    ember_tensor *a = in[0], *c = NULL, *u = NULL, *sv = NULL, *vh = NULL;
    int nd = a->ndim, m = (int)a->shape[nd - 2], n = (int)a->shape[nd - 1], k = m < n ? m : n;
    int dt = a->dtype, es = ember_dtype_size(dt), rc = EMBER_OK;
    int64_t B = nbatch(a), us[EMBER_MAX_DIMS], ss[EMBER_MAX_DIMS], vs[EMBER_MAX_DIMS];
    void *work = NULL;
    int *iwork = NULL;
    memcpy(us, a->shape, sizeof us);
    memcpy(ss, a->shape, sizeof ss);
    memcpy(vs, a->shape, sizeof vs);
    us[nd - 1] = k;
    ss[nd - 2] = k;
    vs[nd - 2] = k;
    EMBER_CHECK(ember__new(nd, a->shape, dt, EMBER_CPU, &c));
    EMBER_CHECK(ember__copy_into(c, a));
    EMBER_CHECK(ember__new(nd, us, dt, EMBER_CPU, &u));
    EMBER_CHECK(ember__new(nd - 1, ss, dt, EMBER_CPU, &sv));
    EMBER_CHECK(ember__new(nd, vs, dt, EMBER_CPU, &vh));
    if (k > 0) {
        union { float f[2]; double d[1]; } wq = {{0, 0}};
        iwork = malloc((size_t)8 * (size_t)k * sizeof *iwork);
        if (!iwork) EMBER_CHECK(ember__fail(EMBER_ERR_OOM, "linalg.svd: out of memory"));
        ember__lapack_gesdd(dt, n, m, ember__ptr(c), ember__ptr(sv), ember__ptr(vh), n, ember__ptr(u), k, wq.d, -1, iwork);
        int lwork = (int)(dt == EMBER_FLOAT32 ? wq.f[0] : wq.d[0]) + 1;
        work = malloc((size_t)lwork * (size_t)es);
        if (!work) EMBER_CHECK(ember__fail(EMBER_ERR_OOM, "linalg.svd: out of memory"));
        for (int64_t b = 0; b < B; b++) {
            int info = ember__lapack_gesdd(dt, n, m, ember__ptr(c) + b * (int64_t)m * n * es,
                                           ember__ptr(sv) + b * (int64_t)k * es, ember__ptr(vh) + b * (int64_t)k * n * es, n,
                                           ember__ptr(u) + b * (int64_t)m * k * es, k, work, lwork, iwork);
            if (info != 0) {
                char sb[200], sa[200];
                EMBER_CHECK(ember__fail(EMBER_ERR_ARG, "linalg.svd: the matrix%s of shape %s %s (LAPACK info %d)",
                                        at_batch(sb, sizeof sb, a, b), ember__tshape(sa, a),
                                        info > 0 ? "did not converge" : "holds NaN or another bad value", info));
            }
        }
    }
    out[0] = u;
    out[1] = vh;
    out[2] = sv;
    u = sv = vh = NULL;
done:
    free(work);
    free(iwork);
    ember_tensor_release(c);
    ember_tensor_release(u);
    ember_tensor_release(sv);
    ember_tensor_release(vh);
    return rc;
}

/* ------------------------------------------------------------------ the C API */
int ember_linalg_inv(ember_tensor *a, ember_tensor **out)
{
    EMBER_TRY(square_ok("linalg.inv", a));
    ember_attrs at = {{0}, {0}};
    return ember__dispatch(EMBER_OP_LINALG_INV, 1, &a, &at, out);
}

int ember_linalg_slogdet(ember_tensor *a, ember_tensor **sign, ember_tensor **logabsdet)
{
    EMBER_TRY(square_ok("linalg.slogdet", a));
    if (!sign || !logabsdet) return ember__fail(EMBER_ERR_ARG, "linalg.slogdet: NULL output");
    ember_tensor *o[2];
    ember_attrs at = {{0}, {0}};
    int rc = ember__dispatch(EMBER_OP_LINALG_SLOGDET, 1, &a, &at, o);
    *sign = rc < 0 ? NULL : o[0];
    *logabsdet = rc < 0 ? NULL : o[1];
    return rc;
}

int ember_linalg_solve(ember_tensor *a, ember_tensor *b, ember_tensor **out)
{
    char sa[200], sb[200];
    EMBER_TRY(square_ok("linalg.solve", a));
    if (!b) return ember__fail(EMBER_ERR_ARG, "linalg.solve: B is NULL");
    bool ok = b->ndim == a->ndim && b->shape[b->ndim - 2] == a->shape[a->ndim - 1];
    for (int d = 0; ok && d < a->ndim - 2; d++) ok = a->shape[d] == b->shape[d];
    if (!ok)
        return ember__fail(EMBER_ERR_SHAPE, "linalg.solve: A of shape %s and B of shape %s do not fit (B must be "
                           "(..., n, k) with A's batch dims)", ember__tshape(sa, a), ember__tshape(sb, b));
    if (b->dtype != a->dtype)
        return ember__fail(EMBER_ERR_DTYPE, "linalg.solve: A is %s and B is %s (one dtype expected)",
                           ember_dtype_name(a->dtype), ember_dtype_name(b->dtype));
    if (b->shape[b->ndim - 1] > INT32_MAX)
        return ember__fail(EMBER_ERR_SHAPE, "linalg.solve: B of shape %s has too many columns for LAPACK", ember__tshape(sb, b));
    ember_tensor *in[2] = {a, b};
    ember_attrs at = {{0}, {0}};
    return ember__dispatch(EMBER_OP_LINALG_SOLVE, 2, in, &at, out);
}

int ember_linalg_solve_triangular(ember_tensor *a, ember_tensor *b, int upper, int unitriangular, ember_tensor **out)
{
    char sa[200], sb[200];
    EMBER_TRY(square_ok("linalg.solve_triangular", a));
    if (!b) return ember__fail(EMBER_ERR_ARG, "linalg.solve_triangular: B is NULL");
    bool ok = b->ndim == a->ndim && b->shape[b->ndim - 2] == a->shape[a->ndim - 1];
    for (int d = 0; ok && d < a->ndim - 2; d++) ok = a->shape[d] == b->shape[d];
    if (!ok)
        return ember__fail(EMBER_ERR_SHAPE, "linalg.solve_triangular: A of shape %s and B of shape %s do not fit (B "
                           "must be (..., n, k) with A's batch dims)", ember__tshape(sa, a), ember__tshape(sb, b));
    if (b->dtype != a->dtype)
        return ember__fail(EMBER_ERR_DTYPE, "linalg.solve_triangular: A is %s and B is %s (one dtype expected)",
                           ember_dtype_name(a->dtype), ember_dtype_name(b->dtype));
    if (b->shape[b->ndim - 1] > INT32_MAX)
        return ember__fail(EMBER_ERR_SHAPE, "linalg.solve_triangular: B of shape %s has too many columns for LAPACK",
                           ember__tshape(sb, b));
    ember_tensor *in[2] = {a, b};
    ember_attrs at = {{0}, {0}};
    at.i[0] = upper != 0;
    at.i[1] = unitriangular != 0;
    return ember__dispatch(EMBER_OP_LINALG_SOLVE_TRIANGULAR, 2, in, &at, out);
}

int ember_linalg_cholesky(ember_tensor *a, ember_tensor **out)
{
    EMBER_TRY(square_ok("linalg.cholesky", a));
    ember_attrs at = {{0}, {0}};
    return ember__dispatch(EMBER_OP_LINALG_CHOLESKY, 1, &a, &at, out);
}

int ember_linalg_eigh(ember_tensor *a, ember_tensor **eigenvalues, ember_tensor **eigenvectors)
{
    EMBER_TRY(square_ok("linalg.eigh", a));
    if (!eigenvalues || !eigenvectors) return ember__fail(EMBER_ERR_ARG, "linalg.eigh: NULL output");
    ember_attrs at = {{0}, {0}};
    ember_tensor *o[2];
    int rc = ember__dispatch(EMBER_OP_LINALG_EIGH, 1, &a, &at, o);
    *eigenvalues = rc < 0 ? NULL : o[0];
    *eigenvectors = rc < 0 ? NULL : o[1];
    return rc;
}

int ember_linalg_qr(ember_tensor *a, ember_tensor **q, ember_tensor **r)
{
    EMBER_TRY(matrix_ok("linalg.qr", a, false));
    if (!q || !r) return ember__fail(EMBER_ERR_ARG, "linalg.qr: NULL output");
    ember_attrs at = {{0}, {0}};
    ember_tensor *o[2];
    int rc = ember__dispatch(EMBER_OP_LINALG_QR, 1, &a, &at, o);
    *q = rc < 0 ? NULL : o[0];
    *r = rc < 0 ? NULL : o[1];
    return rc;
}

int ember_linalg_svd(ember_tensor *a, ember_tensor **u, ember_tensor **s, ember_tensor **vh)
{
    EMBER_TRY(matrix_ok("linalg.svd", a, false));
    if (!u || !s || !vh) return ember__fail(EMBER_ERR_ARG, "linalg.svd: NULL output");
    ember_attrs at = {{0}, {0}};
    ember_tensor *o[3];
    int rc = ember__dispatch(EMBER_OP_LINALG_SVD, 1, &a, &at, o);
    *u = rc < 0 ? NULL : o[0];
    *vh = rc < 0 ? NULL : o[1];
    *s = rc < 0 ? NULL : o[2];
    return rc;
}

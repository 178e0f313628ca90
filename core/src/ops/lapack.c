/* lapack.c: the LAPACK entry points linalg.c uses, declared in this one place
   (OpenBLAS ships LAPACK). Each takes a column-major n x n matrix in the
   dtype dt (EMBER_FLOAT32 or EMBER_FLOAT64) and returns LAPACK's info (0,
   or > 0 for a singular / not positive-definite matrix); without BLAS each
   fails (-1), as it does where the BLAS loaded has no LAPACK. */
#include "ops.h"
#include "lapack.h"

#include <pthread.h>
#include <stddef.h>
#include <string.h>

#ifdef EMBER_HAVE_BLAS
/* Fortran LAPACK, 32-bit integers (OpenBLAS's default interface); the
   trailing size_t is the hidden length of a character argument. The
   entry points are looked up in the BLAS that blas.c loaded (libember does
   not link it: blas.c says why), once; a BLAS without LAPACK (a plain
   libblas.so.3) leaves them NULL and ember__have_lapack() false. */
static struct {
    void (*sgetrf)(const int *m, const int *n, float *a, const int *lda, int *ipiv, int *info);
    void (*dgetrf)(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
    void (*sgetri)(const int *n, float *a, const int *lda, const int *ipiv, float *work, const int *lwork, int *info);
    void (*dgetri)(const int *n, double *a, const int *lda, const int *ipiv, double *work, const int *lwork, int *info);
    void (*sgetrs)(const char *trans, const int *n, const int *nrhs, const float *a, const int *lda, const int *ipiv, float *b, const int *ldb, int *info, size_t);
    void (*dgetrs)(const char *trans, const int *n, const int *nrhs, const double *a, const int *lda, const int *ipiv, double *b, const int *ldb, int *info, size_t);
    void (*ssyevd)(const char *jobz, const char *uplo, const int *n, float *a, const int *lda, float *w, float *work, const int *lwork, int *iwork, const int *liwork, int *info, size_t, size_t);
    void (*dsyevd)(const char *jobz, const char *uplo, const int *n, double *a, const int *lda, double *w, double *work, const int *lwork, int *iwork, const int *liwork, int *info, size_t, size_t);
    void (*sgeqrf)(const int *m, const int *n, float *a, const int *lda, float *tau, float *work, const int *lwork, int *info);
    void (*dgeqrf)(const int *m, const int *n, double *a, const int *lda, double *tau, double *work, const int *lwork, int *info);
    void (*sorgqr)(const int *m, const int *n, const int *k, float *a, const int *lda, const float *tau, float *work, const int *lwork, int *info);
    void (*dorgqr)(const int *m, const int *n, const int *k, double *a, const int *lda, const double *tau, double *work, const int *lwork, int *info);
    void (*sgesdd)(const char *jobz, const int *m, const int *n, float *a, const int *lda, float *s, float *u, const int *ldu, float *vt, const int *ldvt, float *work, const int *lwork, int *iwork, int *info, size_t);
    void (*dgesdd)(const char *jobz, const int *m, const int *n, double *a, const int *lda, double *s, double *u, const int *ldu, double *vt, const int *ldvt, double *work, const int *lwork, int *iwork, int *info, size_t);
    void (*sgels)(const char *trans, const int *m, const int *n, const int *nrhs, float *a, const int *lda, float *b, const int *ldb, float *work, const int *lwork, int *info, size_t);
    void (*dgels)(const char *trans, const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b, const int *ldb, double *work, const int *lwork, int *info, size_t);
    void (*sgelsy)(const int *m, const int *n, const int *nrhs, float *a, const int *lda, float *b, const int *ldb, int *jpvt, const float *rcond, int *rank, float *work, const int *lwork, int *info);
    void (*dgelsy)(const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b, const int *ldb, int *jpvt, const double *rcond, int *rank, double *work, const int *lwork, int *info);
    void (*sgelsd)(const int *m, const int *n, const int *nrhs, float *a, const int *lda, float *b, const int *ldb, float *s, const float *rcond, int *rank, float *work, const int *lwork, int *iwork, int *info);
    void (*dgelsd)(const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b, const int *ldb, double *s, const double *rcond, int *rank, double *work, const int *lwork, int *iwork, int *info);
    void (*sgelss)(const int *m, const int *n, const int *nrhs, float *a, const int *lda, float *b, const int *ldb, float *s, const float *rcond, int *rank, float *work, const int *lwork, int *info);
    void (*dgelss)(const int *m, const int *n, const int *nrhs, double *a, const int *lda, double *b, const int *ldb, double *s, const double *rcond, int *rank, double *work, const int *lwork, int *info);
    void (*spotrf)(const char *uplo, const int *n, float *a, const int *lda, int *info, size_t);
    void (*dpotrf)(const char *uplo, const int *n, double *a, const int *lda, int *info, size_t);
    void (*strtrs)(const char *uplo, const char *trans, const char *diag, const int *n, const int *nrhs, const float *a, const int *lda, float *b, const int *ldb, int *info, size_t, size_t, size_t);
    void (*dtrtrs)(const char *uplo, const char *trans, const char *diag, const int *n, const int *nrhs, const double *a, const int *lda, double *b, const int *ldb, int *info, size_t, size_t, size_t);
} lapack;
static bool lapack_found;
static pthread_once_t lapack_once = PTHREAD_ONCE_INIT;

static void find_lapack(void)
{
    bool all = true;
#define LOOKUP(name)                                            \
    do {                                                        \
        void *p_ = ember__blas_symbol(#name "_");              \
        memcpy(&lapack.name, &p_, sizeof p_);   /* ISO C: object to function pointer */ \
        all = all && p_ != NULL;                                \
    } while (0)
    LOOKUP(sgetrf);
    LOOKUP(dgetrf);
    LOOKUP(sgetri);
    LOOKUP(dgetri);
    LOOKUP(sgetrs);
    LOOKUP(dgetrs);
    LOOKUP(ssyevd);
    LOOKUP(dsyevd);
    LOOKUP(sgeqrf);
    LOOKUP(dgeqrf);
    LOOKUP(sorgqr);
    LOOKUP(dorgqr);
    LOOKUP(sgesdd);
    LOOKUP(dgesdd);
    LOOKUP(sgels);
    LOOKUP(dgels);
    LOOKUP(sgelsy);
    LOOKUP(dgelsy);
    LOOKUP(sgelsd);
    LOOKUP(dgelsd);
    LOOKUP(sgelss);
    LOOKUP(dgelss);
    LOOKUP(spotrf);
    LOOKUP(dpotrf);
    LOOKUP(strtrs);
    LOOKUP(dtrtrs);
#undef LOOKUP
    lapack_found = all;
}

bool ember__have_lapack(void)
{
    pthread_once(&lapack_once, find_lapack);
    return lapack_found;
}

int ember__lapack_getrf(int dt, int n, void *a, int *ipiv) { return ember__lapack_getrf_mn(dt, n, n, a, ipiv); }

int ember__lapack_getrf_mn(int dt, int m, int n, void *a, int *ipiv)
{
    if (!ember__have_lapack()) return -1;
    int info = 0, lda = m > 1 ? m : 1;
    if (dt == EMBER_FLOAT32) lapack.sgetrf(&m, &n, a, &lda, ipiv, &info);
    else lapack.dgetrf(&m, &n, a, &lda, ipiv, &info);
    return info;
}

int ember__lapack_getri(int dt, int n, void *a, const int *ipiv, void *work, int lwork)
{
    if (!ember__have_lapack()) return -1;
    int info = 0, lda = n > 1 ? n : 1;
    if (dt == EMBER_FLOAT32) lapack.sgetri(&n, a, &lda, ipiv, work, &lwork, &info);
    else lapack.dgetri(&n, a, &lda, ipiv, work, &lwork, &info);
    return info;
}

int ember__lapack_getrs(int dt, char trans, int n, int nrhs, const void *lu, const int *ipiv, void *b)
{
    if (!ember__have_lapack()) return -1;
    int info = 0, ld = n > 1 ? n : 1;
    if (dt == EMBER_FLOAT32) lapack.sgetrs(&trans, &n, &nrhs, lu, &ld, ipiv, b, &ld, &info, 1);
    else lapack.dgetrs(&trans, &n, &nrhs, lu, &ld, ipiv, b, &ld, &info, 1);
    return info;
}

int ember__lapack_potrf(int dt, char uplo, int n, void *a)
{
    if (!ember__have_lapack()) return -1;
    int info = 0, lda = n > 1 ? n : 1;
    if (dt == EMBER_FLOAT32) lapack.spotrf(&uplo, &n, a, &lda, &info, 1);
    else lapack.dpotrf(&uplo, &n, a, &lda, &info, 1);
    return info;
}

int ember__lapack_trtrs(int dt, char uplo, char trans, char diag, int n, int nrhs, const void *a, void *b)
{
    if (!ember__have_lapack()) return -1;
    int info = 0, ld = n > 1 ? n : 1;
    if (dt == EMBER_FLOAT32) lapack.strtrs(&uplo, &trans, &diag, &n, &nrhs, a, &ld, b, &ld, &info, 1, 1, 1);
    else lapack.dtrtrs(&uplo, &trans, &diag, &n, &nrhs, a, &ld, b, &ld, &info, 1, 1, 1);
    return info;
}

/* workspace sizes: a query (lwork = -1) answers in work[0] / iwork[0] */
int ember__lapack_syevd(int dt, char uplo, int n, void *a, void *w, void *work, int lwork, int *iwork, int liwork)
{
    if (!ember__have_lapack()) return -1;
    int info = 0, lda = n > 1 ? n : 1;
    if (dt == EMBER_FLOAT32) lapack.ssyevd("V", &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, &info, 1, 1);
    else lapack.dsyevd("V", &uplo, &n, a, &lda, w, work, &lwork, iwork, &liwork, &info, 1, 1);
    return info;
}

int ember__lapack_geqrf(int dt, int m, int n, void *a, void *tau, void *work, int lwork)
{
    if (!ember__have_lapack()) return -1;
    int info = 0, lda = m > 1 ? m : 1;
    if (dt == EMBER_FLOAT32) lapack.sgeqrf(&m, &n, a, &lda, tau, work, &lwork, &info);
    else lapack.dgeqrf(&m, &n, a, &lda, tau, work, &lwork, &info);
    return info;
}

int ember__lapack_orgqr(int dt, int m, int n, int k, void *a, const void *tau, void *work, int lwork)
{
    if (!ember__have_lapack()) return -1;
    int info = 0, lda = m > 1 ? m : 1;
    if (dt == EMBER_FLOAT32) lapack.sorgqr(&m, &n, &k, a, &lda, tau, work, &lwork, &info);
    else lapack.dorgqr(&m, &n, &k, a, &lda, tau, work, &lwork, &info);
    return info;
}

int ember__lapack_gesdd(int dt, char jobz, int m, int n, void *a, void *s, void *u, int ldu, void *vt, int ldvt, void *work,
                        int lwork, int *iwork)
{
    if (!ember__have_lapack()) return -1;
    int info = 0, lda = m > 1 ? m : 1;
    if (dt == EMBER_FLOAT32) lapack.sgesdd(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, &info, 1);
    else lapack.dgesdd(&jobz, &m, &n, a, &lda, s, u, &ldu, vt, &ldvt, work, &lwork, iwork, &info, 1);
    return info;
}

int ember__lapack_lstsq(int dt, int driver, int m, int n, int nrhs, void *a, void *b, int ldb, void *s, double rcond,
                        int *rank, void *work, int lwork, int *iwork)
{
    if (!ember__have_lapack()) return -1;
    int info = 0, lda = m > 1 ? m : 1;
    float rf = (float)rcond;
    bool f = dt == EMBER_FLOAT32;
    switch (driver) {
    case EMBER_LSTSQ_GELS:
        if (f) lapack.sgels("N", &m, &n, &nrhs, a, &lda, b, &ldb, work, &lwork, &info, 1);
        else lapack.dgels("N", &m, &n, &nrhs, a, &lda, b, &ldb, work, &lwork, &info, 1);
        break;
    case EMBER_LSTSQ_GELSY:
        if (f) lapack.sgelsy(&m, &n, &nrhs, a, &lda, b, &ldb, iwork, &rf, rank, work, &lwork, &info);
        else lapack.dgelsy(&m, &n, &nrhs, a, &lda, b, &ldb, iwork, &rcond, rank, work, &lwork, &info);
        break;
    case EMBER_LSTSQ_GELSD:
        if (f) lapack.sgelsd(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rf, rank, work, &lwork, iwork, &info);
        else lapack.dgelsd(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, iwork, &info);
        break;
    default:
        if (f) lapack.sgelss(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rf, rank, work, &lwork, &info);
        else lapack.dgelss(&m, &n, &nrhs, a, &lda, b, &ldb, s, &rcond, rank, work, &lwork, &info);
    }
    return info;
}

#else
int ember__lapack_getrf(int dt, int n, void *a, int *ipiv) { (void)dt, (void)n, (void)a, (void)ipiv; return -1; }
int ember__lapack_getrf_mn(int dt, int m, int n, void *a, int *ipiv)
{
    (void)dt, (void)m, (void)n, (void)a, (void)ipiv;
    return -1;
}
int ember__lapack_getri(int dt, int n, void *a, const int *ipiv, void *work, int lwork)
{
    (void)dt, (void)n, (void)a, (void)ipiv, (void)work, (void)lwork;
    return -1;
}
int ember__lapack_getrs(int dt, char trans, int n, int nrhs, const void *lu, const int *ipiv, void *b)
{
    (void)dt, (void)trans, (void)n, (void)nrhs, (void)lu, (void)ipiv, (void)b;
    return -1;
}
int ember__lapack_potrf(int dt, char uplo, int n, void *a) { (void)dt, (void)uplo, (void)n, (void)a; return -1; }
int ember__lapack_trtrs(int dt, char uplo, char trans, char diag, int n, int nrhs, const void *a, void *b)
{
    (void)dt, (void)uplo, (void)trans, (void)diag, (void)n, (void)nrhs, (void)a, (void)b;
    return -1;
}
int ember__lapack_syevd(int dt, char uplo, int n, void *a, void *w, void *work, int lwork, int *iwork, int liwork)
{
    (void)dt, (void)uplo, (void)n, (void)a, (void)w, (void)work, (void)lwork, (void)iwork, (void)liwork;
    return -1;
}
int ember__lapack_geqrf(int dt, int m, int n, void *a, void *tau, void *work, int lwork)
{
    (void)dt, (void)m, (void)n, (void)a, (void)tau, (void)work, (void)lwork;
    return -1;
}
int ember__lapack_orgqr(int dt, int m, int n, int k, void *a, const void *tau, void *work, int lwork)
{
    (void)dt, (void)m, (void)n, (void)k, (void)a, (void)tau, (void)work, (void)lwork;
    return -1;
}
int ember__lapack_gesdd(int dt, char jobz, int m, int n, void *a, void *s, void *u, int ldu, void *vt, int ldvt, void *work,
                        int lwork, int *iwork)
{
    (void)dt, (void)jobz, (void)m, (void)n, (void)a, (void)s, (void)u, (void)ldu, (void)vt, (void)ldvt, (void)work, (void)lwork;
    (void)iwork;
    return -1;
}
int ember__lapack_lstsq(int dt, int driver, int m, int n, int nrhs, void *a, void *b, int ldb, void *s, double rcond,
                        int *rank, void *work, int lwork, int *iwork)
{
    (void)dt, (void)driver, (void)m, (void)n, (void)nrhs, (void)a, (void)b, (void)ldb, (void)s, (void)rcond, (void)rank;
    (void)work, (void)lwork, (void)iwork;
    return -1;
}
bool ember__have_lapack(void) { return false; }
#endif

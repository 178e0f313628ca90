/* lapack.h: the few LAPACK calls of linalg.c (lapack.c), on column-major
   n x n matrices of dtype dt (float32 or float64). Each returns LAPACK's
   info: 0, or k > 0 for a zero pivot U[k,k] (getrf) or a leading minor of
   order k that is not positive-definite (potrf). */
#ifndef EMBER_LAPACK_H
#define EMBER_LAPACK_H

#include <stdbool.h>

bool ember__have_lapack(void);
int ember__lapack_getrf(int dt, int n, void *a, int *ipiv);
/* the LU of the m x n a (ipiv: min(m, n) 1-based row interchanges) */
int ember__lapack_getrf_mn(int dt, int m, int n, void *a, int *ipiv);
/* work of lwork elements of dt (n is enough) */
int ember__lapack_getri(int dt, int n, void *a, const int *ipiv, void *work, int lwork);
/* solves op(A) X = B with getrf's factorisation of A (trans 'N' or 'T'): b
   (n x nrhs, column-major) is overwritten by X */
int ember__lapack_getrs(int dt, char trans, int n, int nrhs, const void *lu, const int *ipiv, void *b);
/* the Cholesky factor of the uplo ('L' or 'U') triangle, in place (the other
   triangle is left as it was) */
int ember__lapack_potrf(int dt, char uplo, int n, void *a);
/* solves op(A) X = B (trans 'N' or 'T') for the triangular A in a's uplo
   triangle (diag 'U': unit diagonal, not read); b (n x nrhs) becomes X.
   info k > 0: A[k,k] is zero */
int ember__lapack_trtrs(int dt, char uplo, char trans, char diag, int n, int nrhs, const void *a, void *b);
/* eigenvalues (ascending, into w) and eigenvectors (over a, as columns) of
   the symmetric matrix in a's uplo triangle; lwork = liwork = -1 asks for the
   workspace sizes (work[0], iwork[0]) */
int ember__lapack_syevd(int dt, char uplo, int n, void *a, void *w, void *work, int lwork, int *iwork, int liwork);
/* QR of the m x n column-major a: R over its upper triangle, the
   reflectors below it and in tau (min(m, n)); orgqr makes the first n
   columns of Q from k reflectors. lwork = -1 asks for the workspace size */
int ember__lapack_geqrf(int dt, int m, int n, void *a, void *tau, void *work, int lwork);
int ember__lapack_orgqr(int dt, int m, int n, int k, void *a, const void *tau, void *work, int lwork);
/* the SVD of the m x n column-major a (destroyed): s (min(m, n)), with
   jobz 'S' the reduced u (m x k, leading dim ldu) and vt (k x n, leading dim
   ldvt), with 'A' the full u (m x m) and vt (n x n); iwork of
   8 min(m, n); lwork = -1 asks for the workspace size */
int ember__lapack_gesdd(int dt, char jobz, int m, int n, void *a, void *s, void *u, int ldu, void *vt, int ldvt, void *work,
                        int lwork, int *iwork);

/* least squares min ||A X - B|| of the m x n column-major a (destroyed) by
   driver (EMBER_LSTSQ_*): b (ldb >= max(m, n), nrhs columns) holds B and
   becomes X in its first n rows; gelsy, gelsd and gelss find the rank
   (singular values below rcond times the largest count as zero), gelsd and
   gelss write the singular values to s (min(m, n)); iwork: gelsy's n column
   pivots (zeroed: all free), gelsd's integer workspace. lwork = -1 asks for
   the workspace size (work[0]; gelsd's iwork size in iwork[0]) */
enum { EMBER_LSTSQ_GELS, EMBER_LSTSQ_GELSY, EMBER_LSTSQ_GELSD, EMBER_LSTSQ_GELSS };
int ember__lapack_lstsq(int dt, int driver, int m, int n, int nrhs, void *a, void *b, int ldb, void *s, double rcond,
                        int *rank, void *work, int lwork, int *iwork);

#endif

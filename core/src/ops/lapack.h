/* lapack.h: the few LAPACK calls of linalg.c (lapack.c), on column-major
   n x n matrices of dtype dt (float32 or float64). Each returns LAPACK's
   info: 0, or k > 0 for a zero pivot U[k,k] (getrf) or a leading minor of
   order k that is not positive-definite (potrf). */
#ifndef EMBER_LAPACK_H
#define EMBER_LAPACK_H

#include <stdbool.h>

bool ember__have_lapack(void);
int ember__lapack_getrf(int dt, int n, void *a, int *ipiv);
/* work of lwork elements of dt (n is enough) */
int ember__lapack_getri(int dt, int n, void *a, const int *ipiv, void *work, int lwork);
/* solves op(A) X = B with getrf's factorisation of A (trans 'N' or 'T'): b
   (n x nrhs, column-major) is overwritten by X */
int ember__lapack_getrs(int dt, char trans, int n, int nrhs, const void *lu, const int *ipiv, void *b);
/* the Cholesky factor of the uplo ('L' or 'U') triangle, in place (the other
   triangle is left as it was) */
int ember__lapack_potrf(int dt, char uplo, int n, void *a);

#endif

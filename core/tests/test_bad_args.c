/* test_bad_args.c: every entry point of ember.h given each kind of bad
   argument it can be given: NULL tensors, NULL output pointers, a released
   tensor, shapes and sizes that overflow, out-of-range dims and indices.
   Each call must return an error status (or, for the functions that cannot
   fail, a neutral value) with a message, and never crash; the library stays
   usable after all of them. Run by ctest, also under ASan + UBSan (where the
   released-tensor calls are left out: there the header really is freed and
   ASan would rightly report the use). */
#include "check.h"
#include "ops/ops.h"

#include <stdint.h>
#include <stdio.h>
#include <math.h>
#include <string.h>

static int calls;

#define BAD(expr)                                                                              \
    do {                                                                                       \
        calls++;                                                                               \
        ember_set_error("");                                                                   \
        int rc_ = (expr);                                                                      \
        if (rc_ >= 0 || ember_last_error()[0] == 0) {                                          \
            fprintf(stderr, "%s:%d: %s returned %d (%s)\n", __FILE__, __LINE__, #expr, rc_,    \
                    ember_last_error());                                                       \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)
/* a call that cannot report a status: it must simply not crash */
#define SAFE(expr)                                                                             \
    do {                                                                                       \
        calls++;                                                                               \
        (void)(expr);                                                                          \
    } while (0)


typedef int (*binary_fn)(ember_tensor *, ember_tensor *, ember_tensor **);
typedef int (*unary_fn)(ember_tensor *, ember_tensor **);
typedef int (*inplace_fn)(ember_tensor *, ember_tensor *);

static void each_binary(binary_fn f, ember_tensor *a, ember_tensor *dead)
{
    ember_tensor *o = NULL;
    BAD(f(a, a, NULL));
    BAD(f(NULL, a, &o));
    BAD(f(a, NULL, &o));
    CHECK(o == NULL);
#ifndef UNDER_ASAN
    BAD(f(dead, a, &o));
    BAD(f(a, dead, &o));
#else
    (void)dead;
#endif
}

static void each_unary(unary_fn f, ember_tensor *a, ember_tensor *dead)
{
    ember_tensor *o = NULL;
    BAD(f(a, NULL));
    BAD(f(NULL, &o));
    CHECK(o == NULL);
#ifndef UNDER_ASAN
    BAD(f(dead, &o));
#else
    (void)dead;
#endif
}

/* the last error says the call needs LAPACK */
static bool no_lapack_named(void) { return strstr(ember_last_error(), "no LAPACK") != NULL; }

int main(void)
{
    /* LAPACK comes with the BLAS libember loads (blas.c): in a BLAS-free build
       (the Windows cross build, docs/platforms.md) the solvers fail cleanly, naming it */
    const bool lapack = strncmp(ember_blas_info(), "none", 4) != 0;
    const int64_t s23[2] = {2, 3};
    ember_tensor *a = NULL, *idx = NULL, *dead = NULL, *o = NULL, *o2 = NULL;
    CHECK(ember_full(2, s23, 1.5, EMBER_FLOAT32, EMBER_CPU, &a) == EMBER_OK);
    const int64_t s2[1] = {2};
    CHECK(ember_full(1, s2, 0, EMBER_INT64, EMBER_CPU, &idx) == EMBER_OK);
    CHECK(ember_full(2, s23, 2, EMBER_FLOAT32, EMBER_CPU, &dead) == EMBER_OK);
    ember_tensor_release(dead);   /* from here on `dead` is a released tensor */

    /* ---- creation: NULL outputs and shapes, bad dtypes, devices, sizes that overflow */
    BAD(ember_empty(2, s23, EMBER_FLOAT32, EMBER_CPU, NULL));
    BAD(ember_empty(2, NULL, EMBER_FLOAT32, EMBER_CPU, &o));
    BAD(ember_full(2, s23, 0, EMBER_FLOAT32, EMBER_CPU, NULL));
    BAD(ember_full(-1, s23, 0, EMBER_FLOAT32, EMBER_CPU, &o));
    BAD(ember_full(9, s23, 0, EMBER_FLOAT32, EMBER_CPU, &o));
    BAD(ember_full(2, s23, 0, 99, EMBER_CPU, &o));
    BAD(ember_full(2, s23, 0, EMBER_FLOAT32, 999, &o));
    const int64_t huge2[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    const int64_t zero_huge[3] = {0, (int64_t)1 << 40, (int64_t)1 << 40};
    const int64_t huge_zero[3] = {(int64_t)1 << 40, (int64_t)1 << 40, 0};
    const int64_t neg[2] = {2, -3};
    BAD(ember_empty(2, huge2, EMBER_FLOAT32, EMBER_CPU, &o));
    BAD(ember_empty(3, zero_huge, EMBER_FLOAT32, EMBER_CPU, &o));
    BAD(ember_empty(3, huge_zero, EMBER_FLOAT32, EMBER_CPU, &o));
    BAD(ember_empty(2, neg, EMBER_FLOAT32, EMBER_CPU, &o));
    {   /* a zero-size tensor refused or made the same way whichever dim is zero */
        const int64_t big_zero[2] = {(int64_t)1 << 52, 0}, zero_big[2] = {0, (int64_t)1 << 52};
        ember_tensor *p = NULL, *q = NULL;
        int r1 = ember_empty(2, big_zero, EMBER_FLOAT32, EMBER_CPU, &p);
        int r2 = ember_empty(2, zero_big, EMBER_FLOAT32, EMBER_CPU, &q);
        CHECK(r1 == r2);
        ember_tensor_release(p);
        ember_tensor_release(q);
    }
    float data[6] = {1, 2, 3, 4, 5, 6};
    BAD(ember_from_data(NULL, EMBER_FLOAT32, 2, s23, EMBER_FLOAT32, EMBER_CPU, &o));
    BAD(ember_from_data(data, EMBER_FLOAT32, 2, s23, EMBER_FLOAT32, EMBER_CPU, NULL));
    BAD(ember_from_data(data, 77, 2, s23, EMBER_FLOAT32, EMBER_CPU, &o));
    BAD(ember_from_blob(NULL, 2, s23, NULL, EMBER_FLOAT32, NULL, NULL, &o));
    BAD(ember_from_blob(data, 2, s23, NULL, EMBER_FLOAT32, NULL, NULL, NULL));
    BAD(ember_from_blob(data, 2, NULL, NULL, EMBER_FLOAT32, NULL, NULL, &o));
    BAD(ember_scalar(1, EMBER_FLOAT32, 0, NULL));
    BAD(ember_scalar(1, 42, 0, &o));
    BAD(ember_arange(0, 10, 1, EMBER_FLOAT32, EMBER_CPU, NULL));
    BAD(ember_arange(0, 10, 0, EMBER_FLOAT32, EMBER_CPU, &o));
    BAD(ember_linspace(0, 1, 5, EMBER_FLOAT32, EMBER_CPU, NULL));
    BAD(ember_linspace(0, 1, -5, EMBER_FLOAT32, EMBER_CPU, &o));
    BAD(ember_eye(3, 3, EMBER_FLOAT32, EMBER_CPU, NULL));
    BAD(ember_eye(-3, 3, EMBER_FLOAT32, EMBER_CPU, &o));
    BAD(ember_eye((int64_t)1 << 40, (int64_t)1 << 40, EMBER_FLOAT32, EMBER_CPU, &o));
    BAD(ember_rand(2, s23, EMBER_FLOAT32, EMBER_CPU, NULL));
    BAD(ember_randn(2, NULL, EMBER_FLOAT32, EMBER_CPU, &o));
    BAD(ember_randint(0, 10, 2, s23, EMBER_INT64, EMBER_CPU, NULL));
    BAD(ember_randint(10, 0, 2, s23, EMBER_INT64, EMBER_CPU, &o));
    BAD(ember_uniform_(NULL, 0, 1));
    BAD(ember_normal_(NULL, 0, 1));
    uint64_t seed = 0, offset = 0;
    BAD(ember_get_rng_state(NULL, &offset));
    BAD(ember_get_rng_state(&seed, NULL));
    BAD(ember_generator_new(1, NULL));
    BAD(ember_generator_get_state(NULL, NULL, &offset));
    BAD(ember_rand_gen(NULL, 2, s23, EMBER_FLOAT32, EMBER_CPU, NULL));
    BAD(ember_exponential_gen_(NULL, NULL, 1));
    BAD(ember_geometric_gen_(NULL, NULL, 0.5));
    BAD(ember_bernoulli_gen_(NULL, NULL, 0.5));
    CHECK(o == NULL);

    /* ---- reading */
    double v;
    BAD(ember_item(NULL, &v));
    BAD(ember_item(a, NULL));
    BAD(ember_copy_to_buffer(NULL, data, EMBER_FLOAT32));
    BAD(ember_copy_to_buffer(a, NULL, EMBER_FLOAT32));
    BAD(ember_copy_to_buffer(a, data, 55));
    char buf[64];
    SAFE(ember_format(NULL, buf, sizeof buf));
    SAFE(ember_format(a, NULL, 0));
    SAFE(ember_memory_stats(NULL));
    BAD(ember_set_memory_limit(-5));
    SAFE(ember_tensor_release(NULL));
    SAFE(ember_tensor_retain(NULL));
    SAFE(ember_tensor_ndim(NULL) + ember_tensor_numel(NULL) + ember_tensor_dtype(NULL) + ember_tensor_device(NULL));
    SAFE(ember_tensor_data(NULL));
    SAFE(ember_tensor_bump_version(NULL));
    SAFE(ember_dtype_name(-7));
    SAFE(ember_dtype_size(1000));
    SAFE(ember_set_error(NULL));

    /* ---- elementwise ops */
    binary_fn binaries[] = {   /* every binary line of ops.def, and the other ops of two tensors */
#define OP(...)
#define UNARY(...)
#define BINARY(E, n, ...) ember_##n,
#include "ops/ops.def"
        ember_matmul, ember_linear, ember_relu_backward};
    for (size_t i = 0; i < sizeof binaries / sizeof *binaries; i++) each_binary(binaries[i], a, dead);
    unary_fn unaries[] = {   /* every UNARY line of ops.def, and the other ops of one tensor */
#define OP(...)
#define BINARY(...)
#define UNARY(E, n, ...) ember_##n,
#include "ops/ops.def"
        ember_clone, ember_contiguous, ember_detach, ember_amax_all, ember_amin_all};
    for (size_t i = 0; i < sizeof unaries / sizeof *unaries; i++) each_unary(unaries[i], a, dead);
    BAD(ember_where(NULL, a, a, &o));
    BAD(ember_linear_relu(a, NULL, a, &o));
    BAD(ember_linear_relu(a, a, NULL, &o));
    BAD(ember_linear_relu(a, a, a, NULL));
    BAD(ember_relu_bias_backward(NULL, a, &o, &o));
    BAD(ember_relu_bias_backward(a, a, &o, NULL));
    BAD(ember_where(a, a, a, NULL));
    BAD(ember_gelu(NULL, 0, &o));
    BAD(ember_gelu(a, 0, NULL));
    BAD(ember_clamp(NULL, 1, 0, 1, 1, &o));
    BAD(ember_clamp(a, 1, 0, 1, 1, NULL));
    BAD(ember_to_dtype(a, EMBER_FLOAT64, NULL));
    BAD(ember_to_dtype(NULL, EMBER_FLOAT64, &o));
    BAD(ember_to_dtype(a, 123, &o));
    BAD(ember_to_device(a, EMBER_CPU, NULL));
    BAD(ember_to_device(a, 12345, &o));

    /* ---- reductions */
    int dims[2] = {0, 7};
    BAD(ember_sum(NULL, 0, NULL, 0, &o));
    BAD(ember_sum(a, 0, NULL, 0, NULL));
    BAD(ember_sum(a, 2, dims, 0, &o));         /* dim 7 of a 2-d tensor */
    BAD(ember_sum(a, 1, NULL, 0, &o));         /* a dim count with no dims */
    BAD(ember_mean(a, -1, dims, 0, &o));
    BAD(ember_var(NULL, 0, NULL, 0, 1, &o));
    BAD(ember_var(a, 0, NULL, 0, 1, NULL));
    BAD(ember_logsumexp(NULL, 0, 0, &o));
    BAD(ember_logsumexp(a, 5, 0, &o));
    BAD(ember_logsumexp(a, 0, 0, NULL));
    BAD(ember_norm(NULL, 2, 0, NULL, 0, &o));
    BAD(ember_norm(a, 2, 0, NULL, 0, NULL));
    BAD(ember_max_dim(a, 0, 0, NULL, &o2));
    BAD(ember_max_dim(a, 0, 0, &o, NULL));
    BAD(ember_max_dim(NULL, 0, 0, &o, &o2));
    BAD(ember_max_dim(a, 9, 0, &o, &o2));
    BAD(ember_min_dim(a, -2, 0, &o, &o2));
    BAD(ember_argmax(a, 0, 0, NULL));
    BAD(ember_argmin(NULL, 0, 0, &o));
    BAD(ember_softmax(a, 4, &o));
    BAD(ember_softmax(a, 1, NULL));
    BAD(ember_log_softmax(NULL, 1, &o));

    /* ---- scans, sort, linear algebra */
    BAD(ember_cumsum(NULL, 0, 0, &o));
    BAD(ember_cumsum(a, 2, 0, &o));
    BAD(ember_cumsum(a, -1, 1, &o));
    BAD(ember_cumsum(a, 0, 0, NULL));
    BAD(ember_cumprod(NULL, 0, &o));
    BAD(ember_cumprod(a, 5, &o));
    BAD(ember_cumprod(a, 1, NULL));
    BAD(ember_sort(NULL, 0, 0, &o, &o2));
    BAD(ember_sort(a, 0, 0, NULL, &o2));
    BAD(ember_sort(a, 0, 1, &o, NULL));
    BAD(ember_sort(a, 7, 0, &o, &o2));
    BAD(ember_topk(a, 4, 1, 1, &o, &o2));                       /* k past dim 2's 3 */
    BAD(ember_topk(a, -1, 1, 1, &o, &o2));
    BAD(ember_topk(NULL, 1, 0, 1, &o, &o2));
    BAD(ember_topk(a, 1, 0, 1, &o, NULL));
    BAD(ember_searchsorted(NULL, a, 0, &o));
    BAD(ember_searchsorted(a, NULL, 0, &o));
    BAD(ember_searchsorted(a, idx, 0, &o));                    /* {2} against the rows of {2, 3} */
    BAD(ember_searchsorted(idx, a, 1, NULL));
    {
        const int64_t s22[2] = {2, 2};
        ember_tensor *sq = NULL, *o3 = NULL;
        CHECK(ember_full(2, s22, 1.5, EMBER_FLOAT64, EMBER_CPU, &sq) == EMBER_OK);   /* singular, not positive-definite */
        BAD(ember_linalg_inv(NULL, &o));
        BAD(ember_linalg_inv(a, &o));                           /* not square */
        BAD(ember_linalg_inv(sq, &o));
        BAD(ember_linalg_inv(sq, NULL));
        BAD(ember_linalg_inv(idx, &o));                         /* 1-D */
        BAD(ember_linalg_slogdet(sq, NULL, &o2));
        BAD(ember_linalg_slogdet(a, &o, &o2));
        BAD(ember_linalg_solve(sq, NULL, &o));
        BAD(ember_linalg_solve(sq, a, &o));                     /* float64 A, float32 B */
        BAD(ember_linalg_solve(a, sq, &o));
        BAD(ember_linalg_solve(sq, sq, NULL));
        BAD(ember_linalg_solve(sq, sq, &o));                    /* singular */
        {
            ember_tensor *z = NULL;
            CHECK(ember_full(2, s22, 0, EMBER_FLOAT64, EMBER_CPU, &z) == EMBER_OK);
            BAD(ember_linalg_solve_triangular(sq, NULL, 0, 0, &o));
            BAD(ember_linalg_solve_triangular(NULL, sq, 1, 0, &o));
            BAD(ember_linalg_solve_triangular(sq, a, 0, 0, &o));      /* float64 A, float32 B */
            BAD(ember_linalg_solve_triangular(a, sq, 0, 0, &o));      /* not square */
            BAD(ember_linalg_solve_triangular(sq, sq, 0, 0, NULL));
            BAD(ember_linalg_solve_triangular(z, sq, 1, 0, &o));      /* a zero diagonal: singular */
            if (lapack) CHECK(ember_linalg_solve_triangular(z, sq, 1, 1, &o) == EMBER_OK);   /* unit diagonal: not read */
            else CHECK(ember_linalg_solve_triangular(z, sq, 1, 1, &o) < 0 && no_lapack_named());
            ember_tensor_release(o);
            o = NULL;
            ember_tensor_release(z);
        }
        BAD(ember_linalg_cholesky(sq, &o));
        BAD(ember_linalg_cholesky(NULL, &o));
        BAD(ember_linalg_eigh(a, &o, &o2));
        BAD(ember_linalg_eigh(sq, NULL, &o2));
        BAD(ember_linalg_qr(idx, &o, &o2));
        BAD(ember_linalg_qr(sq, &o, NULL));
        BAD(ember_linalg_svd(NULL, &o, &o2, &o3));
        BAD(ember_linalg_svd(sq, &o, NULL, &o3));
        BAD(ember_linalg_svd(idx, &o, &o2, &o3));
        BAD(ember_linalg_svd_full(sq, 1, &o, &o2, NULL));
        BAD(ember_linalg_svd_full(idx, 1, &o, &o2, &o3));
        BAD(ember_linalg_det(NULL, &o));
        BAD(ember_linalg_det(a, &o));                           /* not square */
        BAD(ember_linalg_det(sq, NULL));
        BAD(ember_linalg_qr_mode(sq, 3, &o, &o2));
        BAD(ember_linalg_qr_mode(sq, -1, &o, &o2));
        BAD(ember_linalg_qr_mode(idx, 1, &o, &o2));
        BAD(ember_linalg_qr_mode(sq, 1, NULL, &o2));
        BAD(ember_linalg_cholesky_info(NULL, &o));
        BAD(ember_linalg_cholesky_info(a, &o));                 /* not square */
        BAD(ember_linalg_lu_factor(NULL, &o, &o2, &o3));
        BAD(ember_linalg_lu_factor(idx, &o, &o2, &o3));         /* 1-D */
        BAD(ember_linalg_lu_factor(sq, &o, NULL, &o3));
        BAD(ember_linalg_lstsq(NULL, sq, 1, 0, &o, &o2, &o3));
        BAD(ember_linalg_lstsq(sq, NULL, 1, 0, &o, &o2, &o3));
        BAD(ember_linalg_lstsq(sq, a, 1, 0, &o, &o2, &o3));     /* float64 A, float32 B */
        BAD(ember_linalg_lstsq(sq, idx, 1, 0, &o, &o2, &o3));   /* B 1-D */
        BAD(ember_linalg_lstsq(sq, sq, 4, 0, &o, &o2, &o3));    /* no driver 4 */
        BAD(ember_linalg_lstsq(sq, sq, 1, NAN, &o, &o2, &o3));
        BAD(ember_linalg_lstsq(sq, sq, 1, 0, &o, NULL, &o3));
        {   /* gels of a singular matrix: {{1, 0}, {1, 0}}, whose zero column leaves an
               exact 0 on R's diagonal on every kernel (the rank-1 sq leaves a rounding
               residue there with OpenBLAS's SkylakeX kernels, and gels then solves; an
               all-zero matrix is gels's own special case, solved with zeros) */
            const double zcv[4] = {1, 0, 1, 0};
            ember_tensor *zc = NULL;
            CHECK(ember_from_data(zcv, EMBER_FLOAT64, 2, s22, EMBER_FLOAT64, EMBER_CPU, &zc) == EMBER_OK);
            BAD(ember_linalg_lstsq(zc, sq, 0, 0, &o, &o2, &o3));
            ember_tensor_release(zc);
        }
        /* what works: det of the singular sq is exactly 0; gelsd finds its rank 1 */
        if (!lapack) {
            o = o2 = o3 = NULL;
            CHECK(ember_linalg_det(sq, &o) < 0 && no_lapack_named());
            CHECK(ember_linalg_lu_factor(sq, &o, &o2, &o3) < 0 && no_lapack_named());
        } else {
            double d = -1, r = -1;
            CHECK(ember_linalg_det(sq, &o) == EMBER_OK && ember_item(o, &d) == EMBER_OK && d == 0);
            ember_tensor_release(o);
            CHECK(ember_linalg_lstsq(sq, sq, 2, 1e-12, &o, &o2, &o3) == EMBER_OK && ember_item(o2, &r) == EMBER_OK && r == 1);
            ember_tensor_release(o);
            ember_tensor_release(o2);
            ember_tensor_release(o3);
            /* sq (all 1.5) is not positive-definite from order 2 on: info 2, no error */
            CHECK(ember_linalg_cholesky_info(sq, &o2) == EMBER_OK && ember_item(o2, &r) == EMBER_OK && r == 2);
            ember_tensor_release(o2);
            /* LU of the singular sq: not an error, info 2 (U[2,2] = 0) */
            CHECK(ember_linalg_lu_factor(sq, &o, &o2, &o3) == EMBER_OK && ember_item(o3, &r) == EMBER_OK && r == 2);
        }
        ember_tensor_release(o);
        ember_tensor_release(o2);
        ember_tensor_release(o3);
        o = o2 = o3 = NULL;
        ember_tensor_release(sq);
    }

    /* ---- shapes, views, indexing */
    int perm[2] = {1, 0}, badperm[2] = {0, 0};
    BAD(ember_reshape(a, 2, s23, NULL));
    BAD(ember_reshape(a, 2, NULL, &o));
    BAD(ember_reshape(NULL, 2, s23, &o));
    BAD(ember_reshape(a, 2, huge2, &o));
    BAD(ember_view(a, 9, s23, &o));
    BAD(ember_transpose(a, 0, 5, &o));
    BAD(ember_transpose(a, 0, 1, NULL));
    BAD(ember_permute(a, 2, NULL, &o));
    BAD(ember_permute(a, 2, badperm, &o));
    BAD(ember_permute(a, 2, perm, NULL));
    BAD(ember_squeeze(NULL, -1, &o));
    BAD(ember_unsqueeze(a, 5, &o));
    BAD(ember_unsqueeze(a, 0, NULL));
    BAD(ember_expand(a, 2, NULL, &o));
    const int64_t s57[2] = {5, 7};
    BAD(ember_expand(a, 2, s57, &o));          /* {2, 3} cannot expand to {5, 7} */
    BAD(ember_narrow(a, 1, INT64_MAX, 2, &o));                 /* start + length overflows */
    BAD(ember_narrow(a, 1, 1, INT64_MAX, &o));
    BAD(ember_narrow(a, 1, -1, 2, &o));
    BAD(ember_narrow(a, 1, 0, -1, &o));
    BAD(ember_narrow(a, 3, 0, 1, &o));
    BAD(ember_narrow(a, 1, 0, 1, NULL));
    BAD(ember_select(a, 0, INT64_MAX, &o));
    BAD(ember_select(a, 0, -1, &o));
    BAD(ember_select(a, 0, 0, NULL));
    const int64_t st_big[2] = {INT64_MAX, 1}, st_neg[2] = {3, -1}, st_ok[2] = {3, 1}, sz_neg[2] = {-1, 3};
    BAD(ember_as_strided(a, 2, s23, st_big, 0, &o));           /* (2 - 1) * INT64_MAX + ... overflows */
    BAD(ember_as_strided(a, 2, s23, st_ok, INT64_MAX, &o));
    BAD(ember_as_strided(a, 2, s23, st_ok, 1, &o));            /* reaches element 6 of 6 */
    BAD(ember_as_strided(a, 2, s23, st_neg, 0, &o));
    BAD(ember_as_strided(a, 2, sz_neg, st_ok, 0, &o));
    BAD(ember_as_strided(a, 2, s23, st_ok, -1, &o));
    BAD(ember_as_strided(a, 9, s23, st_ok, 0, &o));
    BAD(ember_as_strided(a, 2, s23, NULL, 0, &o));
    BAD(ember_as_strided(a, 2, NULL, st_ok, 0, &o));
    BAD(ember_as_strided(NULL, 2, s23, st_ok, 0, &o));
    BAD(ember_as_strided(a, 2, s23, st_ok, 0, NULL));
    BAD(ember_index_select(a, 0, NULL, &o));
    BAD(ember_index_select(a, 0, idx, NULL));
    BAD(ember_index_select(a, 0, a, &o));                      /* a float index */
    BAD(ember_gather(a, 0, NULL, &o));
    BAD(ember_gather(a, 0, idx, NULL));
    BAD(ember_scatter_add(2, s23, 0, NULL, a, &o));
    BAD(ember_scatter_add(2, NULL, 0, idx, a, &o));
    BAD(ember_scatter_add(9, s23, 0, idx, a, &o));
    BAD(ember_index_add(2, s23, 0, idx, NULL, &o));
    BAD(ember_index_add(2, s23, 0, idx, a, NULL));
    {   /* sources that do not fit the result: added past its end before */
        const int64_t s1x50[2] = {1, 50}, s50[1] = {50};
        ember_tensor *wide = NULL, *idx1 = NULL, *widx = NULL;
        CHECK(ember_full(2, s1x50, 1, EMBER_FLOAT32, EMBER_CPU, &wide) == EMBER_OK);
        CHECK(ember_full(1, s50 + 0, 0, EMBER_INT64, EMBER_CPU, &idx1) == EMBER_OK);
        CHECK(ember_full(2, s1x50, 0, EMBER_INT64, EMBER_CPU, &widx) == EMBER_OK);
        ember_tensor *one = NULL;
        CHECK(ember_narrow(idx1, 0, 0, 1, &one) == EMBER_OK);
        BAD(ember_index_add(2, s23, 0, one, wide, &o));
        CHECK(strstr(ember_last_error(), "do not fit") != NULL);
        BAD(ember_scatter_add(2, s23, 0, widx, wide, &o));
        CHECK(strstr(ember_last_error(), "do not fit") != NULL);
        BAD(ember_scatter_add(2, s23, 0, idx1, wide, &o));
        CHECK(strstr(ember_last_error(), "do not fit") != NULL);
        ember_tensor_release(wide);
        ember_tensor_release(idx1);
        ember_tensor_release(widx);
        ember_tensor_release(one);
    }
    {   /* a (3, 1, 1) view with strides (1, 3, 3), contiguous by its sizes: matmul
           took it for a layout BLAS cannot read, copied it (the same tensor back)
           and tried again forever (found by spec/support/shape_fuzz.lua) */
        const int64_t s113[3] = {1, 1, 3}, s12[2] = {1, 2};
        ember_tensor *z = NULL, *zt = NULL, *w12 = NULL, *w21 = NULL, *y = NULL;
        CHECK(ember_full(3, s113, 2, EMBER_FLOAT32, EMBER_CPU, &z) == EMBER_OK);
        CHECK(ember_transpose(z, 0, 2, &zt) == EMBER_OK);
        CHECK(ember_full(2, s12, 3, EMBER_FLOAT32, EMBER_CPU, &w12) == EMBER_OK);
        CHECK(ember_matmul(zt, w12, &y) == EMBER_OK);
        CHECK(y && ember_tensor_ndim(y) == 3 && ember_tensor_shape(y)[0] == 3 && ember_tensor_shape(y)[2] == 2);
        CHECK(y && ((float *)ember_tensor_data(y))[5] == 6.0f);
        ember_tensor_release(y);
        y = NULL;
        CHECK(ember_transpose(w12, 0, 1, &w21) == EMBER_OK);   /* linear's weight (out 2, in 1) */
        CHECK(ember_linear(zt, w21, &y) == EMBER_OK);
        CHECK(y && ((float *)ember_tensor_data(y))[0] == 6.0f);
        ember_tensor_release(y);
        ember_tensor_release(w21);
        ember_tensor_release(w12);
        ember_tensor_release(zt);
        ember_tensor_release(z);
    }
    ember_tensor *list[2] = {a, NULL};
    BAD(ember_cat(2, list, 0, &o));
    BAD(ember_cat(0, list, 0, &o));
    BAD(ember_cat(1, NULL, 0, &o));
    BAD(ember_cat(1, list, 0, NULL));
    BAD(ember_stack(2, list, 0, &o));
    BAD(ember_stack(1, list, 9, &o));
    BAD(ember_sum_to(a, 1, NULL, &o));
    BAD(ember_sum_to(a, 2, s23, NULL));

    /* ---- nn kernels */
    const int64_t k2[2] = {2, 2}, one2[2] = {1, 1}, zero2[2] = {0, 0};
    BAD(ember_conv2d(NULL, a, one2, zero2, one2, 1, &o));
    BAD(ember_conv2d(a, a, one2, zero2, one2, 1, &o));         /* 2-d tensors */
    BAD(ember_conv2d(a, a, NULL, zero2, one2, 1, &o));
    BAD(ember_conv2d(a, a, one2, zero2, one2, 1, NULL));
    BAD(ember_conv2d_relu(a, a, NULL, one2, zero2, one2, 1, &o));
    BAD(ember_conv2d_relu(a, a, a, one2, zero2, one2, 1, &o));   /* 2-d tensors */
    BAD(ember_conv2d_relu(a, a, a, one2, zero2, one2, 1, NULL));
    {   /* a bias of the wrong length, of another dtype */
        const int64_t s4[4] = {1, 2, 3, 3}, s1[1] = {1};   /* one output channel: a bias of 2 is wrong */
        ember_tensor *x4 = NULL, *b2 = NULL, *b64 = NULL;
        CHECK(ember_full(4, s4, 1, EMBER_FLOAT32, EMBER_CPU, &x4) == EMBER_OK);
        CHECK(ember_full(1, s2, 1, EMBER_FLOAT32, EMBER_CPU, &b2) == EMBER_OK);
        CHECK(ember_full(1, s1, 1, EMBER_FLOAT64, EMBER_CPU, &b64) == EMBER_OK);
        BAD(ember_conv2d_relu(x4, x4, b2, one2, zero2, one2, 1, &o));
        BAD(ember_conv2d_relu(x4, x4, b64, one2, zero2, one2, 1, &o));
        /* the fused pooling: its bias, NULLs, a kernel beyond the
           convolution's 2x2 output, non-positive and huge windows */
        const int64_t k3[2] = {3, 3}, k0[2] = {0, 2}, kneg[2] = {2, -1}, khuge[2] = {(int64_t)1 << 40, 1};
        ember_tensor *w4 = NULL, *b1 = NULL, *p = NULL;
        CHECK(ember_full(4, (const int64_t[4]){1, 2, 2, 2}, 1, EMBER_FLOAT32, EMBER_CPU, &w4) == EMBER_OK);
        CHECK(ember_full(1, s1, 1, EMBER_FLOAT32, EMBER_CPU, &b1) == EMBER_OK);
        BAD(ember_conv2d_relu_max_pool2d(x4, w4, b2, one2, zero2, one2, 1, k2, k2, &p, NULL));
        BAD(ember_conv2d_relu_max_pool2d(x4, w4, b64, one2, zero2, one2, 1, k2, k2, &p, NULL));
        BAD(ember_conv2d_relu_max_pool2d(x4, w4, NULL, one2, zero2, one2, 1, k2, k2, &p, NULL));
        BAD(ember_conv2d_relu_max_pool2d(x4, w4, b1, one2, zero2, one2, 1, NULL, k2, &p, NULL));
        BAD(ember_conv2d_relu_max_pool2d(x4, w4, b1, one2, zero2, one2, 1, k2, NULL, &p, NULL));
        BAD(ember_conv2d_relu_max_pool2d(x4, w4, b1, one2, zero2, one2, 1, k2, k2, NULL, NULL));
        BAD(ember_conv2d_relu_max_pool2d(x4, w4, b1, one2, zero2, one2, 1, k3, k3, &p, NULL));
        BAD(ember_conv2d_relu_max_pool2d(x4, w4, b1, one2, zero2, one2, 1, k0, k2, &p, NULL));
        BAD(ember_conv2d_relu_max_pool2d(x4, w4, b1, one2, zero2, one2, 1, k2, kneg, &p, NULL));
        BAD(ember_conv2d_relu_max_pool2d(x4, w4, b1, one2, zero2, one2, 1, khuge, k2, &p, NULL));
        BAD(ember_conv2d_relu_max_pool2d(a, a, b1, one2, zero2, one2, 1, k2, k2, &p, NULL));   /* 2-d */
        {   /* and a good call: the one window's maximum */
            ember_tensor *ix = NULL;
            CHECK(ember_conv2d_relu_max_pool2d(x4, w4, b1, one2, zero2, one2, 1, k2, k2, &p, &ix) == EMBER_OK);
            CHECK(ember_tensor_numel(p) == 1 && ember_tensor_numel(ix) == 1);
            ember_tensor_release(p);
            ember_tensor_release(ix);
        }
        ember_tensor_release(w4);
        ember_tensor_release(b1);
        ember_tensor_release(x4);
        ember_tensor_release(b2);
        ember_tensor_release(b64);
    }
    {   /* attributes and shapes so large the geometry's sums and products would
           overflow int64 (the shape fuzzer passed a 4-value shape from a shorter
           array: a size of 4.6e18 reached the channel check) */
        const int64_t s4[4] = {1, 2, 3, 3}, w4[4] = {1, 2, 2, 2}, big2[2] = {(int64_t)1 << 40, 1};
        const int64_t huge_ws[4] = {1, (int64_t)1 << 62, 2, 2};
        ember_tensor *x4 = NULL, *w = NULL, *gy = NULL;
        CHECK(ember_full(4, s4, 1, EMBER_FLOAT32, EMBER_CPU, &x4) == EMBER_OK);
        CHECK(ember_full(4, w4, 1, EMBER_FLOAT32, EMBER_CPU, &w) == EMBER_OK);
        CHECK(ember_full(4, w4, 1, EMBER_FLOAT32, EMBER_CPU, &gy) == EMBER_OK);
        BAD(ember_conv2d(x4, w, big2, zero2, one2, 1, &o));
        CHECK(strstr(ember_last_error(), "below 2^31") != NULL);
        BAD(ember_conv2d(x4, w, one2, big2, one2, 1, &o));
        BAD(ember_conv2d(x4, w, one2, zero2, big2, 1, &o));
        BAD(ember_conv2d(x4, w, one2, zero2, one2, (int64_t)1 << 40, &o));
        BAD(ember_conv2d_backward_weight(x4, gy, huge_ws, one2, zero2, one2, 1, &o));
        BAD(ember_max_pool2d(x4, big2, one2, zero2, &o, &o2));
        BAD(ember_avg_pool2d(x4, one2, big2, zero2, &o));
        ember_tensor_release(x4);
        ember_tensor_release(w);
        ember_tensor_release(gy);
    }
    BAD(ember_conv2d_backward_input(NULL, a, NULL, one2, zero2, one2, 1, &o));
    BAD(ember_conv2d_backward_weight(a, NULL, NULL, one2, zero2, one2, 1, &o));
    BAD(ember_max_pool2d(NULL, k2, k2, zero2, &o, &o2));
    BAD(ember_max_pool2d(a, k2, k2, zero2, NULL, &o2));
    BAD(ember_max_pool2d(a, NULL, k2, zero2, &o, &o2));
    BAD(ember_max_pool2d_backward(NULL, idx, NULL, &o));
    BAD(ember_max_pool2d_backward(a, idx, s23, NULL));
    BAD(ember_avg_pool2d(NULL, k2, k2, zero2, &o));
    BAD(ember_avg_pool2d(a, k2, k2, zero2, NULL));
    BAD(ember_avg_pool2d_backward(NULL, NULL, k2, k2, zero2, &o));
    {   /* an empty plane padded into windows: max_pool2d read the first element of a
           window holding none, past the input's end (found by the shape fuzzer) */
        const int64_t s1103[4] = {1, 1, 0, 3}, sg[4] = {1, 1, 1, 2};
        ember_tensor *e = NULL, *g = NULL, *gi = NULL;
        CHECK(ember_full(4, s1103, 0, EMBER_FLOAT32, EMBER_CPU, &e) == EMBER_OK);
        BAD(ember_max_pool2d(e, k2, k2, one2, &o, &o2));
        CHECK(strstr(ember_last_error(), "empty plane") != NULL);
        BAD(ember_avg_pool2d(e, k2, k2, one2, &o));
        CHECK(ember_full(4, sg, 0, EMBER_FLOAT32, EMBER_CPU, &g) == EMBER_OK);
        CHECK(ember_full(4, sg, 0, EMBER_INT64, EMBER_CPU, &gi) == EMBER_OK);
        BAD(ember_max_pool2d_backward(g, gi, s1103, &o));
        BAD(ember_avg_pool2d_backward(g, s1103, k2, k2, one2, &o));
        ember_tensor_release(gi);
        ember_tensor_release(g);
        ember_tensor_release(e);
    }

    /* ---- recurrent cells */
    BAD(ember_lstm_cell(NULL, a, a, &o, &o2));
    BAD(ember_lstm_cell(a, a, a, &o, &o2));   /* gates of 3 do not make 4 gates of a state of 3 */
    BAD(ember_lstm_cell(a, a, a, NULL, &o2));
    BAD(ember_gru_cell(a, idx, a, &o));
    BAD(ember_gru_cell(a, a, a, NULL));

    /* ---- batch normalisation: a is (2, 3), so w and b must be (3) */
    {
        const int64_t s3[1] = {3};
        ember_tensor *w3 = NULL, *st = NULL, *y = NULL;
        CHECK(ember_full(1, s3, 1, EMBER_FLOAT32, EMBER_CPU, &w3) == EMBER_OK);
        BAD(ember_batch_norm(NULL, w3, w3, 1e-5, &o, &o2));
#ifndef UNDER_ASAN   /* a released tensor is freed memory there */
        BAD(ember_batch_norm(a, dead, w3, 1e-5, &o, &o2));
        BAD(ember_batch_norm_backward(a, a, w3, dead, 1e-5, &o, &o2));
#endif
        BAD(ember_batch_norm(a, w3, w3, 1e-5, NULL, &o2));
        BAD(ember_batch_norm(a, w3, w3, 1e-5, &o, NULL));
        BAD(ember_batch_norm(a, a, w3, 1e-5, &o, &o2));       /* weight (2, 3) */
        BAD(ember_batch_norm(a, w3, idx, 1e-5, &o, &o2));     /* bias (2), int64 */
        BAD(ember_batch_norm(idx, w3, w3, 1e-5, &o, &o2));    /* 1-D input */
        BAD(ember_batch_norm(a, w3, w3, -1, &o, &o2));
        BAD(ember_batch_norm(a, w3, w3, NAN, &o, &o2));
        CHECK(ember_batch_norm(a, w3, w3, 1e-5, &y, &st) == EMBER_OK);
        BAD(ember_batch_norm_backward(NULL, a, w3, st, 1e-5, &o, &o2));
        BAD(ember_batch_norm_backward(a, a, w3, st, 1e-5, NULL, &o2));
        BAD(ember_batch_norm_backward(w3, a, w3, st, 1e-5, &o, &o2));   /* gradient (3) for input (2, 3) */
        BAD(ember_batch_norm_backward(a, a, w3, w3, 1e-5, &o, &o2));    /* stats (3) */
        BAD(ember_batch_norm_backward(a, a, w3, st, -2, &o, &o2));
        /* layer norm over a's last dim: w and b (3) */
        BAD(ember_layer_norm(NULL, w3, w3, 1, 0, 1e-5, &o, &o2));
        BAD(ember_layer_norm(a, w3, w3, 1, 0, 1e-5, NULL, &o2));
        BAD(ember_layer_norm(a, w3, w3, 0, 0, 1e-5, &o, &o2));    /* no normalised dim */
        BAD(ember_layer_norm(a, w3, w3, 3, 0, 1e-5, &o, &o2));    /* more dims than a has */
        BAD(ember_layer_norm(a, a, w3, 1, 0, 1e-5, &o, &o2));     /* weight (2, 3) */
        BAD(ember_layer_norm(a, w3, idx, 1, 0, 1e-5, &o, &o2));   /* bias (2), int64 */
        BAD(ember_layer_norm(a, w3, w3, 1, 0, NAN, &o, &o2));
        ember_tensor *lst = NULL, *ly = NULL;
        CHECK(ember_layer_norm(a, w3, w3, 1, 0, 1e-5, &ly, &lst) == EMBER_OK);
        BAD(ember_layer_norm_backward(NULL, a, w3, lst, 1, 0, 1e-5, &o, &o2));
        BAD(ember_layer_norm_backward(a, a, w3, lst, 1, 0, 1e-5, NULL, &o2));
        BAD(ember_layer_norm_backward(w3, a, w3, lst, 1, 0, 1e-5, &o, &o2));   /* gradient (3) for input (2, 3) */
        BAD(ember_layer_norm_backward(a, a, w3, w3, 1, 0, 1e-5, &o, &o2));     /* stats (3) */
        BAD(ember_layer_norm_backward(a, a, w3, lst, 1, 0, -2, &o, &o2));
        ember_tensor_release(lst);
        ember_tensor_release(ly);
        /* softmax's adjoints: g and y of one shape, a dim of theirs */
        BAD(ember_softmax_backward(NULL, a, 1, &o));
        BAD(ember_softmax_backward(w3, a, 1, &o));       /* gradient (3) for output (2, 3) */
        BAD(ember_log_softmax_backward(a, a, 2, &o));    /* dim out of range */
        BAD(ember_log_softmax_backward(idx, idx, 0, &o));   /* int64 */
        /* cross-entropy: a (2, 3) logits, labels (2), weight (3) */
        const int64_t s1[1] = {2};
        ember_tensor *lab = NULL, *rows = NULL, *cst = NULL;
        CHECK(ember_full(1, s1, 1, EMBER_INT64, EMBER_CPU, &lab) == EMBER_OK);
        BAD(ember_cross_entropy(NULL, lab, w3, 0, -100, 0, &o, &o2));
        BAD(ember_cross_entropy(a, lab, w3, 0, -100, 0, NULL, &o2));
        BAD(ember_cross_entropy(a, w3, w3, 0, -100, 0, &o, &o2));    /* float labels (3) */
        BAD(ember_cross_entropy(a, lab, lab, 0, -100, 0, &o, &o2));  /* weight (2), int64 */
        BAD(ember_cross_entropy(a, lab, w3, 2, -100, 0, &o, &o2));   /* label 1 below the first class 2 */
        BAD(ember_cross_entropy(a, lab, w3, 0, -100, NAN, &o, &o2));
        CHECK(ember_cross_entropy(a, lab, w3, 0, -100, 0, &rows, &cst) == EMBER_OK);
        BAD(ember_cross_entropy_backward(NULL, a, lab, w3, cst, 0, -100, 0, &o));
        BAD(ember_cross_entropy_backward(w3, a, lab, w3, cst, 0, -100, 0, &o));   /* gradient (3) for 2 rows */
        BAD(ember_cross_entropy_backward(rows, a, lab, w3, w3, 0, -100, 0, &o));  /* stats (3) */
        ember_tensor_release(lab);
        ember_tensor_release(rows);
        ember_tensor_release(cst);
        BAD(ember_gelu_backward(NULL, a, 0, &o));
        BAD(ember_gelu_backward(w3, a, 0, &o));     /* gradient (3) for input (2, 3) */
        BAD(ember_gelu_backward(idx, idx, 1, &o));  /* int64 */
        /* with an activation (1 relu, 2 hardtanh between lo and hi) */
        BAD(ember_batch_norm_act(NULL, w3, w3, 1e-5, 1, 0, 0, &o, &o2));
        BAD(ember_batch_norm_act(a, w3, w3, 1e-5, 1, 0, 0, NULL, &o2));
        BAD(ember_batch_norm_act(a, w3, w3, 1e-5, 3, 0, 0, &o, &o2));      /* no such activation */
        BAD(ember_batch_norm_act(a, w3, w3, 1e-5, 2, 6, 0, &o, &o2));      /* lo > hi */
        BAD(ember_batch_norm_act(a, w3, w3, 1e-5, 2, NAN, 6, &o, &o2));
        BAD(ember_batch_norm_act(a, a, w3, 1e-5, 1, 0, 0, &o, &o2));
        BAD(ember_batch_norm_act_backward(a, a, w3, st, NULL, 1e-5, 1, 0, 0, &o, &o2));
        BAD(ember_batch_norm_act_backward(a, a, w3, st, w3, 1e-5, 1, 0, 0, &o, &o2));   /* y (3) for input (2, 3) */
        BAD(ember_batch_norm_act_backward(a, a, w3, st, y, 1e-5, 0, 0, 0, &o, &o2));    /* no activation */
        BAD(ember_batch_norm_act_backward(a, a, w3, st, y, 1e-5, 1, 0, 0, NULL, &o2));
        /* eval mode: x (2, 3), scale and shift (3) */
        BAD(ember_channel_affine(NULL, w3, w3, 0, 0, 0, &o));
        BAD(ember_channel_affine(a, w3, w3, 0, 0, 0, NULL));
        BAD(ember_channel_affine(a, a, w3, 0, 0, 0, &o));          /* scale (2, 3) */
        BAD(ember_channel_affine(w3, w3, w3, 0, 0, 0, &o));        /* 1-D input */
        BAD(ember_channel_affine(a, w3, idx, 0, 0, 0, &o));        /* shift (2), int64 */
        BAD(ember_channel_affine(a, w3, w3, -1, 0, 0, &o));
        BAD(ember_channel_affine(a, w3, w3, 2, 1, -1, &o));        /* lo > hi */
        ember_tensor_release(w3);
        ember_tensor_release(st);
        ember_tensor_release(y);
    }

    /* ---- in place */
    inplace_fn inplaces[] = {ember_add_, ember_sub_, ember_mul_, ember_div_, ember_pow_, ember_copy_};
    for (size_t i = 0; i < sizeof inplaces / sizeof *inplaces; i++) {
        BAD(inplaces[i](NULL, a));
        BAD(inplaces[i](a, NULL));
#ifndef UNDER_ASAN
        BAD(inplaces[i](dead, a));
#endif
    }
    BAD(ember_fill_(NULL, 1));
    BAD(ember_unary_(NULL, "exp"));
    BAD(ember_unary_(a, NULL));
    BAD(ember_unary_(a, "nope"));
    BAD(ember_clamp_(NULL, 1, 0, 0, 0));

    /* ---- optimizer steps */
    BAD(ember_sgd_step_(NULL, a, NULL, 0.1, 0, 0, 0, 0, 0, 1));
    BAD(ember_sgd_step_(a, NULL, NULL, 0.1, 0, 0, 0, 0, 0, 1));
    BAD(ember_adam_step_(a, a, NULL, a, NULL, 0.1, 0.9, 0.999, 1e-8, 0, 0, 0, 1));
    BAD(ember_adam_step_(a, a, a, a, NULL, 0.1, 0.9, 0.999, 1e-8, 0, 0, 0, 0));

    /* ---- autograd */
    int key = 0;
    BAD(ember_key_new(0, NULL));
    BAD(ember_key_record(0));
    BAD(ember_key_record(-3));
    BAD(ember_key_record(1 << 30));
    BAD(ember_key_track(1 << 30, a));
    CHECK(ember_key_new(0, &key) == EMBER_OK);
    BAD(ember_key_track(key, NULL));
    BAD(ember_key_track(key, idx));   /* an integer tensor */
    SAFE(ember_key_free(-1));
    SAFE(ember_key_release(1 << 30));
    SAFE(ember_key_set_group(-5, 2));
    SAFE(ember_key_tracks(key, NULL));
    SAFE(ember_is_tracked(NULL));
    SAFE(ember_grad_fn(NULL, NULL));
    SAFE(ember_grad_fn_key(key, NULL, NULL));
    SAFE(ember_gradient_edge(NULL, NULL));
    SAFE(ember_node_name(NULL));
    SAFE(ember_node_id(NULL));
    SAFE(ember_node_num_inputs(NULL) + ember_node_num_outputs(NULL) + ember_node_key(NULL));
    SAFE(ember_node_next(NULL, 0, NULL));
    SAFE(ember_node_needs_input_grad(NULL, 0));
    SAFE(ember_node_input_shape(NULL, 0, NULL));
    SAFE(ember_node_leaf(NULL));
    SAFE(ember_node_saved_input(NULL, 0));
    SAFE(ember_node_saved_output(NULL, 0));
    SAFE(ember_node_set_intercept(NULL, 1));
    BAD(ember_node_set_saved_input(NULL, 0, a));
    BAD(ember_node_set_saved_output(NULL, 0, a));
    SAFE(ember_drain_node_journal(NULL, 4));
    SAFE(ember_drain_freed_ctx(NULL, 4));
    BAD(ember_set_rule_override(NULL, 1));
    BAD(ember_set_rule_override("not_an_op", 1));
    CHECK(ember_key_record(key) == EMBER_OK);
    CHECK(ember_key_track(key, a) == EMBER_OK);
    BAD(ember_record_custom("f", 1, 1, 1, NULL, 1, &a));
    BAD(ember_record_custom("f", 1, 1, 1, &a, 1, NULL));
    BAD(ember_record_custom(NULL, 1, 1, 1, &a, 1, &a));
    ember_backward_run *run = NULL;
    ember_backward_req req;
    BAD(ember_backward_begin(key, 1, &a, NULL, NULL));
    BAD(ember_backward_begin(key, 1, NULL, NULL, &run));
    BAD(ember_backward_begin(key, -1, &a, NULL, &run));
    BAD(ember_backward_begin(1 << 30, 1, &a, NULL, &run));
    BAD(ember_backward_step(NULL, &req));
    BAD(ember_backward_step_until(NULL, &req, 0));
    BAD(ember_backward_supply(NULL, 0, NULL));
    BAD(ember_backward_builtin(NULL, 0, NULL));
    BAD(ember_backward_builtin_grads(NULL, 0, NULL, NULL));
    SAFE((ember_backward_end(NULL), 0));
    CHECK(ember_backward_begin(key, 1, &a, NULL, &run) == EMBER_ERR_SHAPE);   /* a is not one element */
    CHECK(run == NULL);
    BAD(ember_backward_step(run, NULL));
    ember_key_free(key);

    /* ---- the library is still usable */
    ember_tensor *b = NULL, *c = NULL;
    CHECK(ember_full(2, s23, 2, EMBER_FLOAT32, EMBER_CPU, &b) == EMBER_OK);
    CHECK(ember_add(a, b, &c) == EMBER_OK);
    CHECK(ember_item(c, &v) == EMBER_ERR_SHAPE);
    CHECK(((float *)ember_tensor_data(c))[5] == 3.5f);
    ember_tensor_release(b);
    ember_tensor_release(c);
    ember_tensor_release(a);
    ember_tensor_release(idx);
    printf("test_bad_args: %d bad calls, %d without a clean error\n", calls, failures);
    return failures != 0;
}

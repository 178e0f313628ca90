/* gemm_skinny.c: float32 products with a side of 10 or 12 or fewer, on
   AVX-512 CPUs: a classifier's last layer (the CNN recipe's 64 x 1568 by
   1568 x 10 forward and 10 x 64 by 64 x 1568 weight gradient). OpenBLAS
   and oneDNN pack both operands for kernels built for wide products; these
   loops read the operands as they lie, at the two shape classes where they
   measured faster (alternating runs on the 2-core Xeon, docs/nn.md,
   "Matrix products"):

   - dots, C = A B^T with N <= 10 and K >= 256 (a layer's forward x w^T):
     each C(i, j) the dot product of two contiguous rows, four columns at a
     time, in a register per column, then across its lanes. 0.32-0.44 of
     the libraries' time at 64 x 10 x 1568, 1000 x 10 x 256, 4096 x 10 x 784;
   - rows, C = A^T B with M <= 12, 48 <= K <= 256 and N >= 1024 (a layer's
     weight gradient g^T x): 16 columns of four rows of C at a time, the sum
     over k of A(k, i) times 16 columns of B's row k, a register per row.
     0.42-0.84 of their time at 10 or 12 x 1568-4096 x 64-256.

   Elsewhere (12 or 16 columns, a short K, many rows of a thin B: up to 2.7
   times slower) and on CPUs without AVX-512F the libraries keep them, as
   they do with EMBER_NO_SKINNY set. Each C element is one thread's fixed
   sequence of fused multiply-adds, so its bits do not depend on the thread
   count. */
#include "ops.h"

#include <stdatomic.h>
#include <stdlib.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_SKINNY 1

#define TASK_MNK ((int64_t)1 << 16)   /* multiply-adds per task, at least */

typedef struct {
    bool ta;
    int64_t M, N, K, lda, ldb, ldc;
    const float *A, *B;
    float beta, *C;
} skinny_job;

__attribute__((target("avx512f"))) static inline void put(const skinny_job *j, float *c, float v)
{
    *c = j->beta != 0 ? v + j->beta * *c : v;
}

/* rows [r0, r1) of C = A B^T, four columns at a time (the last group
   repeats its last column where N is not a multiple of four) */
__attribute__((target("avx512f"))) static void dots(void *vctx, int64_t r0, int64_t r1)
{
    const skinny_job *j = vctx;
    const int64_t K = j->K, K16 = K & ~(int64_t)15;
    const __mmask16 tail = (__mmask16)((1u << (K - K16)) - 1);
    for (int64_t i = r0; i < r1; i++) {
        const float *a = j->A + i * j->lda;
        for (int64_t n0 = 0; n0 < j->N; n0 += 4) {
            const float *b[4];
            for (int q = 0; q < 4; q++) b[q] = j->B + (n0 + q < j->N ? n0 + q : j->N - 1) * j->ldb;
            __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(),
                   s3 = _mm512_setzero_ps();
            for (int64_t k = 0; k < K16; k += 16) {
                const __m512 av = _mm512_loadu_ps(a + k);
                s0 = _mm512_fmadd_ps(av, _mm512_loadu_ps(b[0] + k), s0);
                s1 = _mm512_fmadd_ps(av, _mm512_loadu_ps(b[1] + k), s1);
                s2 = _mm512_fmadd_ps(av, _mm512_loadu_ps(b[2] + k), s2);
                s3 = _mm512_fmadd_ps(av, _mm512_loadu_ps(b[3] + k), s3);
            }
            if (tail) {
                const __m512 av = _mm512_maskz_loadu_ps(tail, a + K16);
                s0 = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(tail, b[0] + K16), s0);
                s1 = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(tail, b[1] + K16), s1);
                s2 = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(tail, b[2] + K16), s2);
                s3 = _mm512_fmadd_ps(av, _mm512_maskz_loadu_ps(tail, b[3] + K16), s3);
            }
            const float v[4] = {_mm512_reduce_add_ps(s0), _mm512_reduce_add_ps(s1), _mm512_reduce_add_ps(s2),
                                _mm512_reduce_add_ps(s3)};
            for (int q = 0; q < 4 && n0 + q < j->N; q++) put(j, &j->C[i * j->ldc + n0 + q], v[q]);
        }
    }
}

/* 16-column blocks [c0, c1) of C = A B, four rows at a time (the last group
   repeats its last row where M is not a multiple of four) */
__attribute__((target("avx512f"))) static void rows(void *vctx, int64_t c0, int64_t c1)
{
    const skinny_job *j = vctx;
    const int64_t as_i = j->ta ? 1 : j->lda, as_k = j->ta ? j->lda : 1;   /* A(i, k) = A[i * as_i + k * as_k] */
    for (int64_t c = c0; c < c1; c++) {
        const int64_t n0 = c * 16, w = j->N - n0 < 16 ? j->N - n0 : 16;
        const __mmask16 cols = (__mmask16)(w == 16 ? 0xffff : (1u << w) - 1);
        for (int64_t i0 = 0; i0 < j->M; i0 += 4) {
            const float *a[4];
            for (int r = 0; r < 4; r++) a[r] = j->A + (i0 + r < j->M ? i0 + r : j->M - 1) * as_i;
            __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps(), s2 = _mm512_setzero_ps(),
                   s3 = _mm512_setzero_ps();
            for (int64_t k = 0; k < j->K; k++) {
                const __m512 bv = _mm512_maskz_loadu_ps(cols, j->B + k * j->ldb + n0);
                s0 = _mm512_fmadd_ps(_mm512_set1_ps(a[0][k * as_k]), bv, s0);
                s1 = _mm512_fmadd_ps(_mm512_set1_ps(a[1][k * as_k]), bv, s1);
                s2 = _mm512_fmadd_ps(_mm512_set1_ps(a[2][k * as_k]), bv, s2);
                s3 = _mm512_fmadd_ps(_mm512_set1_ps(a[3][k * as_k]), bv, s3);
            }
            const __m512 s[4] = {s0, s1, s2, s3};
            for (int r = 0; r < 4 && i0 + r < j->M; r++) {
                float *cr = j->C + (i0 + r) * j->ldc + n0;
                if (j->beta != 0) {
                    const __m512 old = _mm512_maskz_loadu_ps(cols, cr);
                    _mm512_mask_storeu_ps(cr, cols, _mm512_add_ps(s[r], _mm512_mul_ps(_mm512_set1_ps(j->beta), old)));
                } else {
                    _mm512_mask_storeu_ps(cr, cols, s[r]);
                }
            }
        }
    }
}

/* AVX-512F, and EMBER_NO_SKINNY not set (read once: it leaves every
   product to the libraries, the baseline these loops are measured against) */
static bool usable(void)
{
    static atomic_int state = -1;
    int v = atomic_load_explicit(&state, memory_order_relaxed);
    if (v < 0) {
        v = ember__cpu_avx512f() && !getenv("EMBER_NO_SKINNY");
        atomic_store_explicit(&state, v, memory_order_relaxed);
    }
    return v != 0;
}
#endif

bool ember__sgemm_skinny(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                         const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
#ifdef HAVE_SKINNY
    if (M <= 0 || N <= 0 || K <= 0) return false;
    const bool as_dots = N <= 10 && tb && !ta && K >= 256;
    const bool as_rows = ta && !tb && M <= 12 && K >= 48 && K <= 256 && N >= 1024;
    if (!(as_dots || as_rows) || !usable()) return false;
    skinny_job j = {ta, M, N, K, lda, ldb, ldc, A, B, beta, C};
    if (as_dots) {
        ember__parallel_for(M, (TASK_MNK + N * K - 1) / (N * K), dots, &j);
    } else {
        const int64_t per = M * K * 16;
        ember__parallel_for((N + 15) / 16, (TASK_MNK + per - 1) / per, rows, &j);
    }
    return true;
#else
    EMBER_UNUSED(ta), EMBER_UNUSED(tb), EMBER_UNUSED(M), EMBER_UNUSED(N), EMBER_UNUSED(K), EMBER_UNUSED(A);
    EMBER_UNUSED(lda), EMBER_UNUSED(B), EMBER_UNUSED(ldb), EMBER_UNUSED(beta), EMBER_UNUSED(C), EMBER_UNUSED(ldc);
    return false;
#endif
}

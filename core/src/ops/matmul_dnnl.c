/* matmul_dnnl.c: float32 GEMMs through oneDNN's sgemm, at the shapes where
   it beats OpenBLAS (built when CMake finds oneDNN; gemm.c calls OpenBLAS
   for every other shape, and for all of them without oneDNN).

   oneDNN picks its AVX-512 kernels from the CPU whatever OPENBLAS_CORETYPE
   says, so which library wins depends on OpenBLAS's core too. From
   alternating cblas_sgemm / dnnl_sgemm pairs on the 2-core Xeon (AVX-512)
   of 2026-11-25, 2 threads, oneDNN's time over OpenBLAS's (docs/nn.md,
   "Matrix products", has the table):
   - an output narrower than 16 columns (the 10-class layer's forward):
     1.5-3.8 with either core; 8^3: 5-14 (oneDNN's call costs about 0.3 us).
     Those stay on OpenBLAS (or, on AVX-512 CPUs at the shapes it wins,
     gemm_skinny.c's loops, which gemm.c tries first).
   - OpenBLAS on an AVX2 core (Haswell): oneDNN wins the rest from 32^3 on,
     the MLP's products 0.16-0.93, squares of 256-1024 0.25-1.0.
   - OpenBLAS on an AVX-512 core (SkylakeX): the MLP's products of 64^3 and
     more 0.35-1.06; fewer than 16 output rows (the 10-class layer's weight
     gradient) 2.9-4.5, 32^3 1.6, squares of 512 1.3-1.5: OpenBLAS keeps
     those, and every product whose three sizes reach 512. */
#include "dnnl_inc.h"
#include "ops.h"

#ifdef EMBER_HAVE_DNNL
#include <pthread.h>
#endif

static int dnnl_matmul_enabled = 1;

void ember_set_dnnl_matmul_enabled(int on) { dnnl_matmul_enabled = on != 0; }

int ember_dnnl_matmul_enabled(void) { return dnnl_matmul_enabled && ember_dnnl_enabled(); }

#ifndef EMBER_HAVE_DNNL

bool ember__dnnl_sgemm_wins(int64_t M, int64_t N, int64_t K)
{
    EMBER_UNUSED(M), EMBER_UNUSED(N), EMBER_UNUSED(K);
    return false;
}

bool ember__dnnl_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
    EMBER_UNUSED(ta), EMBER_UNUSED(tb), EMBER_UNUSED(A), EMBER_UNUSED(lda), EMBER_UNUSED(B), EMBER_UNUSED(ldb);
    EMBER_UNUSED(beta), EMBER_UNUSED(C), EMBER_UNUSED(ldc), EMBER_UNUSED(M), EMBER_UNUSED(N), EMBER_UNUSED(K);
    return false;
}

#else

/* libgomp's pool does not survive fork: a forked child's GEMMs stay on
   OpenBLAS. Watched from the library's load, before any OpenMP team exists. */
static volatile int forked_child;
static void on_fork_child(void) { forked_child = 1; }
__attribute__((constructor)) static void watch_fork(void) { pthread_atfork(NULL, NULL, on_fork_child); }

/* the shape classes oneDNN wins (see the top of the file) */
static bool dnnl_wins(int64_t M, int64_t N, int64_t K)
{
    if (N < 16 || M * N * K < 32 * 32 * 32) return false;
    if (!ember__blas_avx512()) return true;
    return M >= 16 && M * N * K >= 64 * 64 * 64 && (M < 512 || N < 512 || K < 512);
}

/* not under deterministic mode (docs/design.md, "Determinism": its
   products run on OpenBLAS there). matmul.c asks for the whole product and
   runs its blocks where the whole wins. */
bool ember__dnnl_sgemm_wins(int64_t M, int64_t N, int64_t K)
{
    return !forked_child && !ember_is_deterministic() && dnnl_wins(M, N, K) && ember_dnnl_matmul_enabled();
}

bool ember__dnnl_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc)
{
#ifdef DNNL_OMP
    /* one thread: oneDNN may split the sum over k between its threads, and
       so round by their number; matmul.c runs a large product's blocks in
       parallel instead. Inside ember's team this is the worker's own count. */
    int omp_before = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    dnnl_status_t st;   /* with the signals held: dnnl_inc.h */
    EMBER_DNNL_SIGNALS_HELD(
        st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc));
#ifdef DNNL_OMP
    omp_set_num_threads(omp_before);
#endif
    return st == dnnl_success;
}

#endif

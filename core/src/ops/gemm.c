/* gemm.c: the one entry for floating-point matrix products on the CPU,
   ember__gemm_run, used by matmul, linear_relu (matmul.c) and conv2d's
   im2col products (conv.c). One policy decides how every product runs:

   1. deterministic mode, more than DET_ROWS rows: fixed blocks of DET_ROWS
      rows, each a product of its own (steps 2-4), spread over ember's pool.
      A block's rows read the same data in the same order whoever runs it;
   2. float32 at the skinny shapes gemm_skinny.c wins on AVX-512 CPUs;
   3. float32 through oneDNN's sgemm at the shapes it beats OpenBLAS
      (matmul_dnnl.c; never in deterministic mode);
   4. OpenBLAS (or blas.c's reference loops), on as many of its threads as
      the thread policy gives a product of this size (parallel.c), and on
      one below BLAS_ONE_THREAD_MNK multiply-adds.

   Inside a task of ember's pool (conv.c runs a product per task) the
   policy's thread count is 1: skinny and oneDNN run on the task's thread.
   OpenBLAS's thread count is process-wide, so it cannot be lowered per
   task: a job whose tasks call products holds it at one thread around the
   whole job with ember__gemm_hold_one_thread. */
#include "ops.h"

/* Products below this many multiply-adds run on one OpenBLAS thread (OpenBLAS
   itself threads from 2^18). Such a product takes 5-20 us on one core; handing
   half of it to OpenBLAS's worker costs that worker's wake-up, and afterwards
   the worker spins for about 0.1 s (OpenBLAS's thread timeout) beside the
   OpenMP team that runs oneDNN and ember's kernels. The CNN recipe's
   10-class weight gradient (10 x 1568 x 64) is one. */
#define BLAS_ONE_THREAD_MNK ((int64_t)1 << 22)

/* steps 2-4 of the policy: C = op(A) op(B) + beta C, C contiguous (M, N) */
static void gemm_direct(int dt, int64_t M, int64_t N, int64_t K, const ember__mat *a, const ember__mat *b,
                        double beta, char *c)
{
    int64_t ldc = N > 0 ? N : 1;
    if (dt == EMBER_FLOAT32 && ember__sgemm_skinny(a->trans, b->trans, M, N, K, (const float *)a->p, a->ld,
                                                   (const float *)b->p, b->ld, (float)beta, (float *)c, ldc))
        return;
    if (dt == EMBER_FLOAT32 && ember__dnnl_sgemm(a->trans, b->trans, M, N, K, (const float *)a->p, a->ld,
                                                 (const float *)b->p, b->ld, (float)beta, (float *)c, ldc))
        return;
    /* as many OpenBLAS threads as the thread policy gives the product, at most */
    int blas_threads = ember__openblas_threads();
    int use = 1;
    if (M * N * K < BLAS_ONE_THREAD_MNK) ember__job_inline();
    else use = ember__job_threads(M * N * K);
    bool capped = use < blas_threads;
    if (capped) ember__openblas_set_threads(use);
    ember__gemm(dt, a->trans, b->trans, M, N, K, a->p, a->ld, b->p, b->ld, beta, c, ldc);
    if (capped) ember__openblas_set_threads(blas_threads);
    ember__team_done(capped ? use : blas_threads, true);
}

/* step 1: deterministic mode's blocks of rows */
#define DET_ROWS 64
typedef struct {
    int dt;
    int64_t M, N, K;
    const ember__mat *a, *b;
    double beta;
    char *c;
} gemm_job;

static void gemm_blocks(void *vctx, int64_t lo, int64_t hi)
{
    const gemm_job *j = vctx;
    int es = ember_dtype_size(j->dt);
    for (int64_t blk = lo; blk < hi; blk++) {
        int64_t r0 = blk * DET_ROWS, rows = j->M - r0 < DET_ROWS ? j->M - r0 : DET_ROWS;
        ember__mat a = *j->a;   /* rows r0.. of op(A): a row offset, or a column offset when A is read transposed */
        a.p = (const char *)a.p + (a.trans ? r0 : r0 * a.ld) * es;
        gemm_direct(j->dt, rows, j->N, j->K, &a, j->b, j->beta, j->c + r0 * j->N * es);
    }
}

void ember__gemm_run(int dt, int64_t M, int64_t N, int64_t K, const ember__mat *a, const ember__mat *b,
                     double beta, char *c)
{
    if (!ember_is_deterministic() || M <= DET_ROWS) {
        gemm_direct(dt, M, N, K, a, b, beta, c);
        return;
    }
    gemm_job j = {dt, M, N, K, a, b, beta, c};
    ember__parallel_for((M + DET_ROWS - 1) / DET_ROWS, 1, gemm_blocks, &j);
}

int ember__gemm_hold_one_thread(bool hold)
{
    if (!hold) return 0;
    int before = ember__openblas_threads();
    ember__openblas_set_threads(1);
    return before;
}

void ember__gemm_release_hold(int before)
{
    if (before > 0) ember__openblas_set_threads(before);
}

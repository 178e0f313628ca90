/* gemm.c: the one entry for floating-point matrix products on the CPU,
   ember__gemm_run, used by matmul, linear_relu (matmul.c) and conv2d's
   im2col products (conv.c). One policy decides how every product runs:

   1. float32 at the skinny shapes gemm_skinny.c wins on AVX-512 CPUs: its
      loops fix their own split (every element of C one thread's sequence);
   2. else a product of PRODUCT_SPLIT_MNK multiply-adds or more is cut into
      blocks fixed by its shape alone (product_blocks), which ember's pool
      runs on however many threads the thread policy gives the job;
   3. each block (or the whole of a smaller product) is one call on the
      calling thread: oneDNN's sgemm at the float32 shapes where it beats
      OpenBLAS (matmul_dnnl.c; never in deterministic mode), else OpenBLAS
      (or blas.c's reference loops).

   Threads and bits. A library that splits one product over its threads may
   change the rounding with their number: OpenBLAS's sgemm does (a 128 x 784
   x 256 product differs in 4840 of its 32768 values between 1 and 2 threads
   on the 2-core Xeon of 2026-11-27, spec/thread_bits_spec.lua), and
   oneDNN's sgemm can split the sum over k between threads. The thread
   policy gives a job as many threads as the machine's load leaves free
   (parallel.c), so ember never lets a library choose a split: OpenBLAS runs
   on one thread (blas.c sets it when it loads OpenBLAS) and oneDNN's sgemm
   on one thread. The same blocks, so the same bits, with any thread count
   and any load. Inside a task of ember's pool (conv.c runs a product per
   task) the blocks run on the task's thread. */
#include "ops.h"

#define PRODUCT_SPLIT_MNK ((int64_t)1 << 18)

/* C = op(A) op(B) + beta C on the calling thread, C (M, N) with row stride
   ldc, through oneDNN where dnnl (it wins at the whole product), else BLAS */
static void gemm_direct(int dt, int64_t M, int64_t N, int64_t K, const ember__mat *a, const ember__mat *b,
                        double beta, char *c, int64_t ldc, bool dnnl)
{
    if (dnnl && ember__dnnl_sgemm(a->trans, b->trans, M, N, K, (const float *)a->p, a->ld, (const float *)b->p,
                                  b->ld, (float)beta, (float *)c, ldc))
        return;
    ember__gemm(dt, a->trans, b->trans, M, N, K, a->p, a->ld, b->p, b->ld, beta, c, ldc);
}

/* The blocks of a product, from its shape alone. A block's call packs the
   operand it shares with the others again, so the product is cut along the
   larger of M and N (rows of C repack B, K x N; columns repack A, M x K),
   into a power of two of blocks, at most 16, each of at least 64 (128 from
   256 on): a product with fewer than 128 rows and columns is one block.
   The cut side is counted in pieces of 16, dealt out as evenly as whole
   pieces go (block b starts at piece b U / n of U), so that blocks differ
   by 16 at most and a power-of-two team takes equal shares: the MLP
   recipe's weight gradient (256 x 784 x 128) is 4 blocks of 192-208
   columns, where 7 blocks of 112 left one of 2 threads a block more than
   the other. */
typedef struct {
    int dt;
    int64_t M, N, K, n;   /* n blocks */
    bool by_rows;         /* blocks of rows of C, else of columns */
    bool dnnl;
    const ember__mat *a, *b;
    double beta;
    char *c;
} gemm_job;

static int64_t product_blocks(int64_t M, int64_t N)
{
    int64_t D = M >= N ? M : N;
    if (D < 128) return 1;
    int64_t least = D >= 256 ? 128 : 64, n = 1;
    while (n < 16 && D / (2 * n) >= least) n *= 2;
    return n;
}

/* where block b of n starts on a side of D */
static int64_t block_start(int64_t D, int64_t n, int64_t b)
{
    int64_t at = (D + 15) / 16 * b / n * 16;
    return at < D ? at : D;
}

static void gemm_blocks(void *vctx, int64_t lo, int64_t hi)
{
    const gemm_job *j = vctx;
    int es = ember_dtype_size(j->dt);
    for (int64_t blk = lo; blk < hi; blk++) {
        ember__mat a = *j->a, b = *j->b;
        char *c = j->c;
        int64_t rows = j->M, cols = j->N;
        if (j->by_rows) {   /* rows r0.. of op(A): a row offset, or a column offset when A is read transposed */
            int64_t r0 = block_start(j->M, j->n, blk);
            rows = block_start(j->M, j->n, blk + 1) - r0;
            a.p = a.p + (a.trans ? r0 : r0 * a.ld) * es;
            c += r0 * j->N * es;
        } else {            /* columns c0.. of op(B) */
            int64_t c0 = block_start(j->N, j->n, blk);
            cols = block_start(j->N, j->n, blk + 1) - c0;
            b.p = b.p + (b.trans ? c0 * b.ld : c0) * es;
            c += c0 * es;
        }
        if (rows > 0 && cols > 0)
            gemm_direct(j->dt, rows, cols, j->K, &a, &b, j->beta, c, j->N > 0 ? j->N : 1, j->dnnl);
    }
}

void ember__gemm_run(int dt, int64_t M, int64_t N, int64_t K, const ember__mat *a, const ember__mat *b,
                     double beta, char *c)
{
    int64_t ldc = N > 0 ? N : 1;
    if (dt == EMBER_FLOAT32 && ember__sgemm_skinny(a->trans, b->trans, M, N, K, (const float *)a->p, a->ld,
                                                   (const float *)b->p, b->ld, (float)beta, (float *)c, ldc))
        return;
    int64_t nblocks = M * N * K < PRODUCT_SPLIT_MNK ? 1 : product_blocks(M, N);
    gemm_job j = {dt, M, N, K, nblocks, M >= N, dt == EMBER_FLOAT32 && ember__dnnl_sgemm_wins(M, N, K), a, b, beta, c};
    if (nblocks < 2) {
        ember__job_inline();
        gemm_direct(dt, M, N, K, a, b, beta, c, ldc, j.dnnl);
        return;
    }
    /* the policy times each shape as its own kind of job */
    uint64_t kind = ((uint64_t)M * 0x9E3779B97F4A7C15ULL) ^ ((uint64_t)N * 0xC2B2AE3D27D4EB4FULL) ^
                    ((uint64_t)K * 0x165667B19E3779F9ULL) ^ (uint64_t)(dt * 4 + a->trans * 2 + b->trans);
    ember__parallel_for_kind(nblocks, 1, gemm_blocks, &j, kind | 1);
}

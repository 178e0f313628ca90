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
   larger of M and N (rows of C repack B, K x N; columns repack A, M x K):
   blocks of at least 64 (128 from 256 on) and at most 16 of them, of even
   sizes, multiples of 16; a product with fewer than 128 rows and columns is
   one block. */
typedef struct {
    int dt;
    int64_t M, N, K, rows, cols;   /* rows < M: row blocks, else column blocks */
    bool dnnl;
    const ember__mat *a, *b;
    double beta;
    char *c;
} gemm_job;

static int64_t round16(int64_t v) { return (v + 15) / 16 * 16; }

static int64_t product_blocks(int64_t M, int64_t N, int64_t *rows, int64_t *cols)
{
    *rows = M, *cols = N;
    int64_t D = M >= N ? M : N;
    if (D < 128) return 1;
    int64_t least = D >= 256 ? 128 : 64, size = round16((D + 15) / 16);
    if (size < least) size = least;
    int64_t n = (D + size - 1) / size;
    size = round16((D + n - 1) / n);   /* even blocks */
    if (M >= N) *rows = size;
    else *cols = size;
    return (D + size - 1) / size;
}

static void gemm_blocks(void *vctx, int64_t lo, int64_t hi)
{
    const gemm_job *j = vctx;
    int es = ember_dtype_size(j->dt);
    for (int64_t blk = lo; blk < hi; blk++) {
        ember__mat a = *j->a, b = *j->b;
        char *c = j->c;
        int64_t rows = j->M, cols = j->N;
        if (j->rows < j->M) {   /* rows r0.. of op(A): a row offset, or a column offset when A is read transposed */
            int64_t r0 = blk * j->rows;
            rows = j->M - r0 < j->rows ? j->M - r0 : j->rows;
            a.p = a.p + (a.trans ? r0 : r0 * a.ld) * es;
            c += r0 * j->N * es;
        } else {                /* columns c0.. of op(B) */
            int64_t c0 = blk * j->cols;
            cols = j->N - c0 < j->cols ? j->N - c0 : j->cols;
            b.p = b.p + (b.trans ? c0 * b.ld : c0) * es;
            c += c0 * es;
        }
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
    gemm_job j = {dt, M, N, K, M, N, dt == EMBER_FLOAT32 && ember__dnnl_sgemm_wins(M, N, K), a, b, beta, c};
    int64_t nblocks = M * N * K < PRODUCT_SPLIT_MNK ? 1 : product_blocks(M, N, &j.rows, &j.cols);
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

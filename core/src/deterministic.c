/* deterministic.c: ember_set_deterministic. Most kernels already split their
   work into pieces that do not depend on the thread count (parallel.c); two
   did not, and follow the flag:
   - matrix products: OpenBLAS splits a product over its own threads, and the
     split changes the rounding. Under the flag OpenBLAS runs on one thread and
     ember splits each product into fixed blocks of rows (gemm.c), which its
     own pool runs in parallel: the same blocks, so the same bits, for any
     number of threads.
   - conv2d: a weight gradient is summed over per-task partial sums, one task
     per thread; under the flag the number of tasks is fixed (conv.c). */
#include "internal.h"

static int deterministic;
static int blas_threads_before;

void ember_set_deterministic(int on)
{
    on = on != 0;
    if (on == deterministic) return;
    if (on) {
        blas_threads_before = ember__openblas_threads();
        ember__openblas_set_threads(1);
    } else {
        ember__openblas_set_threads(blas_threads_before);
    }
    deterministic = on;
}

int ember_is_deterministic(void) { return deterministic; }

/* ember_set_num_threads sets OpenBLAS's threads too (as torch.set_num_threads
   does for its BLAS); in deterministic mode the count waits until it ends. */
void ember__set_blas_threads(int n)
{
    if (deterministic) blas_threads_before = n;
    else ember__openblas_set_threads(n);
}

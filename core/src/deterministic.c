/* deterministic.c: ember_set_deterministic. Every kernel splits its work
   into pieces fixed by the shapes, never by the thread count, so results do
   not depend on how many threads run them, under any setting (parallel.c,
   and docs/frame_loop.md, "Threads"): matrix products are cut into fixed
   blocks, each one single-threaded library call (gemm.c); conv2d's weight
   gradient sums a fixed number of per-task partial sums (conv.c) and
   oneDNN's a fixed number of per-sample-group ones (conv_dnnl_wgrad.c). The flag
   also keeps oneDNN's products and convolutions off, so that the bits are
   those of ember's own kernels and OpenBLAS. */
#include "internal.h"

static int deterministic;

void ember_set_deterministic(int on) { deterministic = on != 0; }

int ember_is_deterministic(void) { return deterministic; }

/* matmul_int.h: one element of an integer matrix product, as the CPU's
   gemm_int (core/src/ops/matmul.c) computes it: each operand element loaded
   through ember__load and truncated to int64, the products summed wrapping
   in uint64, the sum stored with the CPU's rules. */
#ifndef EMBER_CUDA_KERNELS_MATMUL_INT_H
#define EMBER_CUDA_KERNELS_MATMUL_INT_H

#include "dtype.h"

/* one batch matrix: C (M x N, contiguous) = A (M x K) B (K x N); a and b
   point at element [0][0], strides in elements */
typedef struct ecu_int_gemm {
    const char *a, *b;
    char *c;
    int64_t M, N, K, ars, acs, brs, bcs;
    int dt, es;
} ecu_int_gemm;

namespace ember_cuda {

/* C's element e = i N + j */
EMBER_HD void int_gemm_at(const ecu_int_gemm &g, int64_t e)
{
    int64_t i = e / g.N, j = e % g.N;
    uint64_t s = 0;
    for (int64_t k = 0; k < g.K; k++) {
        int64_t x = (int64_t)ember__load(g.a + (i * g.ars + k * g.acs) * g.es, g.dt);
        int64_t y = (int64_t)ember__load(g.b + (k * g.brs + j * g.bcs) * g.es, g.dt);
        s += (uint64_t)x * (uint64_t)y;
    }
    char *out = g.c + e * g.es;
    if (g.dt == EMBER_INT64) *(int64_t *)out = (int64_t)s;
    else ember__store(out, g.dt, (double)(int64_t)s);
}

}   // namespace ember_cuda

#endif

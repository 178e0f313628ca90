/* info.c: the version string and the CPU's features (ember_blas_info: blas.c). */
#include "internal.h"

const char *ember_version(void) { return EMBER_VERSION; }

/* The CPU has AVX-512F: the kernels of ember's own written with its
   intrinsics (conv_dnnl.c's pooling, gemm_skinny.c) may run */
bool ember__cpu_avx512f(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

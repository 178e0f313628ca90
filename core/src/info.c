/* info.c: version strings. */
#include "internal.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#ifdef EMBER_HAVE_BLAS
#include <cblas.h>
extern char *openblas_get_config(void);
extern char *openblas_get_corename(void);
#endif

const char *ember_version(void) { return EMBER_VERSION; }

#ifdef EMBER_HAVE_BLAS
/* OpenBLAS's configuration and core do not change once it is loaded: the text
   is written once, into a plain buffer. libember's thread-locals all live in
   glibc's static TLS, which holds only a little more than they and libgomp
   (oneDNN's OpenMP runtime) take: a thread-local buffer here would not fit. */
static char blas_info[256];
static pthread_once_t blas_info_once = PTHREAD_ONCE_INIT;

static void write_blas_info(void)
{
    snprintf(blas_info, sizeof blas_info, "%s (core %s)", openblas_get_config(), openblas_get_corename());
}
#endif

const char *ember_blas_info(void)
{
#ifdef EMBER_HAVE_BLAS
    pthread_once(&blas_info_once, write_blas_info);
    return blas_info;
#else
    return "none (reference loops)";
#endif
}

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

/* OpenBLAS's core runs AVX-512 kernels (matmul_dnnl.c's choice depends on it) */
bool ember__blas_avx512(void)
{
    static const char *const cores[] = {"(core SkylakeX)", "(core Cooperlake)", "(core SapphireRapids)"};
    const char *info = ember_blas_info();
    for (size_t i = 0; i < sizeof cores / sizeof *cores; i++)
        if (strstr(info, cores[i])) return true;
    return false;
}

/* blas.c: the BLAS, which libember loads itself.

   OpenBLAS as Debian builds it (DYNAMIC_ARCH) picks its kernels once, in a
   constructor that runs when it is loaded: the core OPENBLAS_CORETYPE names,
   else one chosen from the CPU model. 0.3.21 does not know the models many
   virtual machines report (the generic "Intel Xeon Processor", model 207,
   with AVX-512) and falls back to its SSE3 Prescott kernels: a third of the
   speed, and other sums. Where it knows the model it may choose otherwise
   than from the CPU's flags (an AMD EPYC of family 26 here gets Cooperlake).
   Linked at load time, OpenBLAS's constructor runs before any code of
   libember's, so only the process's environment could choose, and each kind
   of host (the Lua package, the ember command, a C program) had to set it
   itself, or got other kernels and other numbers.

   So libember does not link OpenBLAS: its own constructor (below) chooses
   the core from the CPU's feature flags when the user has not set
   OPENBLAS_CORETYPE, sets it there for as long as it dlopens OpenBLAS (the
   one input OpenBLAS reads; it is unset again, so the host's environment
   and its child processes' stay as they were) and looks up the few entry
   points ember calls. Every host that loads libember
   runs the same kernels for the same CPU flags, with no environment variable
   and no re-exec, and ember_blas_info() says which core runs and why.
     - AVX-512 F/BW/VL/DQ: SkylakeX (Cooperlake, which 0.3.21 picks for CPUs
       with AVX-512 BF16, adds only bfloat16 kernels ember does not call)
     - AVX2 and FMA: Haswell
     - AVX: Sandybridge
     - older CPUs, and other architectures: OpenBLAS's own choice (it knows
       every model without AVX; ember still loads it, so all hosts agree)
   If the process already has OpenBLAS when libember loads (the host linked
   or loaded it first), its kernels were chosen then: ember uses that copy
   (one OpenBLAS, one thread pool per process) and ember_blas_info() says so.
   Looked for, in order: libopenblas.so.0 (Debian's alternatives pick its
   pthread, OpenMP or serial build), the OpenBLAS the build was configured
   with (EMBER_BLAS_BUILD_LIB), and libblas.so.3 (any CBLAS; one that is not
   OpenBLAS has no core or thread count to set). With none, the products run
   on reference loops and ember_blas_info() says why. */
#include "internal.h"
#include "platform.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

/* CBLAS's enum values (cblas.h; the same in every CBLAS) */
enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                         float *, int);
typedef void (*dgemm_fn)(int, int, int, int, int, int, double, const double *, int, const double *, int, double,
                         double *, int);

static struct {
    sgemm_fn sgemm;
    dgemm_fn dgemm;
    int (*get_threads)(void);   /* OpenBLAS only */
    void (*set_threads)(int);
    char *(*config)(void);
    char *(*corename)(void);
} blas;

/* "<config> (core <name>); <how>; <file>" or "none (...)": written once, by
   load_blas, into a plain buffer (libember's thread-locals must stay small:
   internal.h, EMBER_TLS) */
static char blas_info[768];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

#ifdef EMBER_HAVE_BLAS
static void *blas_handle;   /* the library loaded, for ember__blas_symbol */
#ifndef EMBER_BLAS_BUILD_LIB   /* the OpenBLAS CMake found (blas.c's last but one try) */
#define EMBER_BLAS_BUILD_LIB ""
#endif
#ifdef _WIN32   /* the names OpenBLAS's Windows builds and other CBLAS DLLs go by */
#define OPENBLAS_LIB "libopenblas.dll"
#define CBLAS_LIB "cblas.dll"
#elif defined(__APPLE__)   /* untested: Homebrew's OpenBLAS, Accelerate's CBLAS (docs/platforms.md) */
#define OPENBLAS_LIB "libopenblas.dylib"
#define CBLAS_LIB "libblas.dylib"
#else
#define OPENBLAS_LIB "libopenblas.so.0"
#define CBLAS_LIB "libblas.so.3"
#endif

/* the core for this CPU's flags, or NULL to leave the choice to OpenBLAS */
static const char *core_for_cpu(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    /* __builtin_cpu_supports counts AVX and AVX-512 only where the OS saves
       their registers (XCR0), as OpenBLAS's own checks do */
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        return "SkylakeX";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
    if (__builtin_cpu_supports("avx")) return "Sandybridge";
#endif
    return NULL;
}

static void *sym(void *h, const char *name) { return ember__lib_symbol(h, name); }

/* the loader's error, appended to the list of tries */
static void note_failure(char *buf, size_t cap, const char *e)
{
    size_t n = strlen(buf);
    if (n < cap) snprintf(buf + n, cap - n, "%s%s", n ? "; " : "", e);
}

static void load_blas(void)
{
    char how[160], tried[512] = "";
    void *h = ember__lib_loaded(OPENBLAS_LIB);
    const char *user = getenv("OPENBLAS_CORETYPE"), *chosen = NULL;
    if (h) {
        if (user && *user) snprintf(how, sizeof how, "OpenBLAS was loaded before ember, with OPENBLAS_CORETYPE=%s", user);
        else snprintf(how, sizeof how, "OpenBLAS was loaded before ember and chose its core itself");
    } else {
        if (user && *user) {
            snprintf(how, sizeof how, "OPENBLAS_CORETYPE=%s", user);
        } else if ((chosen = core_for_cpu()) != NULL && ember__env_set("OPENBLAS_CORETYPE", chosen) == 0) {
            snprintf(how, sizeof how, "ember chose %s from the CPU's flags", chosen);
        } else {
            chosen = NULL;
            snprintf(how, sizeof how, "OpenBLAS's own choice for this CPU");
        }
        /* the choice lasts while OpenBLAS's constructor reads it */
        static const char *const names[] = {OPENBLAS_LIB, EMBER_BLAS_BUILD_LIB, CBLAS_LIB};
        for (size_t i = 0; i < sizeof names / sizeof *names && !h; i++) {
            if (!*names[i]) continue;
            char err[256];
            h = ember__lib_open(names[i], err, sizeof err);
            if (!h) note_failure(tried, sizeof tried, err);
            else if (!sym(h, "cblas_sgemm") || !sym(h, "cblas_dgemm")) {
                snprintf(tried + strlen(tried), sizeof tried - strlen(tried), "%s%s has no cblas_sgemm",
                         *tried ? "; " : "", names[i]);
                ember__lib_close(h);
                h = NULL;
            }
        }
        if (chosen) ember__env_set("OPENBLAS_CORETYPE", NULL);
    }
    if (!h) {
        snprintf(blas_info, sizeof blas_info, "none (reference loops: no BLAS could be loaded: %s)", tried);
        return;
    }
    blas_handle = h;
    /* ISO C does not convert dlsym's object pointer to a function pointer:
       the bits are copied */
#define LOOKUP(field, name)                                                                \
    do {                                                                                   \
        void *p_ = sym(h, name);                                                           \
        memcpy(&blas.field, &p_, sizeof p_);                                               \
    } while (0)
    LOOKUP(sgemm, "cblas_sgemm");
    LOOKUP(dgemm, "cblas_dgemm");
    LOOKUP(get_threads, "openblas_get_num_threads");
    LOOKUP(set_threads, "openblas_set_num_threads");
    LOOKUP(config, "openblas_get_config");
    LOOKUP(corename, "openblas_get_corename");
#undef LOOKUP
    void *fn;
    char file[256];   /* with how and differs, within blas_info whole */
    memcpy(&fn, &blas.sgemm, sizeof fn);
    if (!ember__lib_path_of(fn, file, sizeof file)) snprintf(file, sizeof file, "?");
    if (blas.config && blas.corename) {
        const char *core = blas.corename();
        char differs[96] = "";
        if (chosen && strcmp(core, chosen) != 0)
            snprintf(differs, sizeof differs, ", but OpenBLAS runs %s", core);
        snprintf(blas_info, sizeof blas_info, "%s (core %s); %s%s; %s", blas.config(), core, how, differs, file);
        /* one thread: its split of a product over threads changes the
           rounding; ember splits large products itself (matmul.c) */
        if (blas.set_threads) blas.set_threads(1);
    } else {
        blas.get_threads = NULL;   /* not OpenBLAS: its thread control is not ours to guess */
        blas.set_threads = NULL;
        snprintf(blas_info, sizeof blas_info, "CBLAS, not OpenBLAS (no core or thread count to set); %s", file);
    }
}
#else
static void load_blas(void) { snprintf(blas_info, sizeof blas_info, "none (reference loops)"); }
#endif

/* at libember's load, before a host can call it and (in the usual case of a
   host loading libember before its threads start) while one thread runs */
__attribute__((constructor)) static void load_at_start(void) { pthread_once(&load_once, load_blas); }

static void ensure_loaded(void) { pthread_once(&load_once, load_blas); }

const char *ember_blas_info(void)
{
    ensure_loaded();
    return blas_info;
}

/* OpenBLAS's core runs AVX-512 kernels (matmul_dnnl.c's choice depends on it) */
bool ember__blas_avx512(void)
{
    static const char *const cores[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
    ensure_loaded();
    if (!blas.corename) return false;
    const char *core = blas.corename();
    for (size_t i = 0; i < sizeof cores / sizeof *cores; i++)
        if (strcmp(core, cores[i]) == 0) return true;
    return false;
}

void *ember__blas_symbol(const char *name)
{
    ensure_loaded();
#ifdef EMBER_HAVE_BLAS
    return sym(blas_handle, name);
#else
    (void)name;
    return NULL;
#endif
}

int ember__openblas_threads(void)
{
    ensure_loaded();
    return blas.get_threads ? blas.get_threads() : 1;
}

void ember__openblas_set_threads(int n)
{
    ensure_loaded();
    if (blas.set_threads) blas.set_threads(n);
}

/* C = op(A) op(B) + beta C without a BLAS, the products summed in double */
#define REF_GEMM(SUFFIX, T)                                                                                     \
    static void ref_gemm_##SUFFIX(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const T *A, int64_t lda,  \
                                  const T *B, int64_t ldb, T beta, T *C, int64_t ldc)                          \
    {                                                                                                          \
        for (int64_t i = 0; i < M; i++)                                                                        \
            for (int64_t j = 0; j < N; j++) {                                                                  \
                double s = beta != 0 ? (double)beta * C[i * ldc + j] : 0;                                      \
                for (int64_t k = 0; k < K; k++)                                                                \
                    s += (double)(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]); \
                C[i * ldc + j] = (T)s;                                                                         \
            }                                                                                                  \
    }
REF_GEMM(f64, double)
REF_GEMM(f32, float)
#undef REF_GEMM

void ember__gemm(int dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                 const void *B, int64_t ldb, double beta, void *C, int64_t ldc)
{
    if (M == 0 || N == 0) return;
    ensure_loaded();
    if (dt == EMBER_FLOAT32) {
        if (blas.sgemm)
            blas.sgemm(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, (int)M, (int)N, (int)K, 1.0f,
                       (const float *)A, (int)lda, (const float *)B, (int)ldb, (float)beta, (float *)C, (int)ldc);
        else
            ref_gemm_f32(ta, tb, M, N, K, (const float *)A, lda, (const float *)B, ldb, (float)beta, (float *)C,
                         ldc);
    } else {
        if (blas.dgemm)
            blas.dgemm(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, (int)M, (int)N, (int)K, 1.0,
                       (const double *)A, (int)lda, (const double *)B, (int)ldb, beta, (double *)C, (int)ldc);
        else
            ref_gemm_f64(ta, tb, M, N, K, (const double *)A, lda, (const double *)B, ldb, beta, (double *)C, ldc);
    }
}

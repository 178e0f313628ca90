/* internal.h: the structs and ember__* helpers shared inside core/. Nothing here is
   part of the public API; ember.h is. */
#ifndef EMBER_INTERNAL_H
#define EMBER_INTERNAL_H

#include "ember.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define EMBER_UNUSED(x) ((void)(x))
/* Per-thread state on hot paths: the initial-exec model reads it with one
   instruction instead of a __tls_get_addr call. It uses glibc's small static
   TLS surplus (kept for dlopen'ed libraries), so only small scalars and
   pointers are declared with it; larger per-thread state lives on the heap
   behind one such pointer. */
#define EMBER_TLS _Thread_local __attribute__((tls_model("initial-exec")))
/* printf-style checking of a function's format; mingw-w64's printf archetype
   is msvcrt's, but ember builds there with its C99 printf (CMakeLists.txt) */
#ifdef __MINGW32__
#define EMBER_PRINTF(f, a) __attribute__((format(gnu_printf, f, a)))
#else
#define EMBER_PRINTF(f, a) __attribute__((format(printf, f, a)))
#endif
#define EMBER_LIKELY(x) __builtin_expect(!!(x), 1)
#define EMBER_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Propagate a failing status; the message is already set. */
#define EMBER_TRY(expr)                                                                    \
    do {                                                                                   \
        int ember__rc = (expr);                                                            \
        if (EMBER_UNLIKELY(ember__rc < 0)) return ember__rc;                               \
    } while (0)

/* Same, but jump to the function's `done:` label with rc set. */
#define EMBER_CHECK(expr)                                                                  \
    do {                                                                                   \
        rc = (expr);                                                                       \
        if (EMBER_UNLIKELY(rc < 0)) goto done;                                             \
    } while (0)

/* The end of a function with a `done:` label: hand the results over with
   ember__take (the local is left NULL, so the tail does not release it) and
   release every tensor the function held with one EMBER_RELEASE (NULL ones
   are skipped):
       *out = ember__take(&o);
   done:
       EMBER_RELEASE(a, b, o);
       return rc; */
static inline ember_tensor *ember__take(ember_tensor **t)
{
    ember_tensor *v = *t;
    *t = NULL;
    return v;
}
void ember__release_list(ember_tensor *const *ts, int n);
#define EMBER_RELEASE(...)                                                                 \
    ember__release_list((ember_tensor *[]){__VA_ARGS__},                                   \
                        (int)(sizeof((ember_tensor *[]){__VA_ARGS__}) / sizeof(ember_tensor *)))

/* A per-thread free list of blocks of one size (tensor headers, storages,
   autograd metas, small nodes): a loop of small ops reuses them rather than
   calling malloc for each. A list is two thread-locals, its head and its
   length (apart, not in a padded struct: static TLS is scarce, docs/design.md
   "Thread-local storage"), and runs through a pointer at offset `link` of
   each block. ember__freelist_put keeps at most max blocks (none in an
   EMBER_NO_CACHE build, so ASan sees every block freed) and says whether it
   kept b; ember__freelist_drain frees them all (thread exit). */
static inline void *ember__freelist_get(void **head, int *len, size_t link)
{
    void *b = *head;
    if (b) {
        memcpy(head, (char *)b + link, sizeof *head);
        --*len;
    }
    return b;
}

static inline bool ember__freelist_put(void **head, int *len, size_t link, void *b, int max)
{
#ifdef EMBER_NO_CACHE
    EMBER_UNUSED(head), EMBER_UNUSED(len), EMBER_UNUSED(link), EMBER_UNUSED(b), EMBER_UNUSED(max);
    return false;
#else
    if (*len >= max) return false;
    memcpy((char *)b + link, head, sizeof *head);
    *head = b;
    ++*len;
    return true;
#endif
}

void ember__freelist_drain(void **head, int *len, size_t link);   /* tensor.c */

/* Invariants no user input can reach. Compiled out in release builds. */
#ifdef EMBER_DEBUG
#include <stdio.h>
#include <stdlib.h>
#define ember__assert(c)                                                                   \
    do {                                                                                   \
        if (!(c)) {                                                                        \
            fprintf(stderr, "ember: invariant failed %s:%d: %s\n", __FILE__, __LINE__, #c); \
            abort();                                                                       \
        }                                                                                  \
    } while (0)
#else
#define ember__assert(c) ((void)0)
#endif

/* ------------------------------------------------------------------ errors (error.c) */
int ember__fail(int status, const char *fmt, ...) EMBER_PRINTF(2, 3);
/* Prefixes the current message with "<op>: " unless it already starts with it. */
int ember__fail_prefix(int status, const char *op);
/* "{2,3}" into buf (at least 160 bytes). */
const char *ember__shape_str(char *buf, int ndim, const int64_t *shape);
const char *ember__tshape(char *buf, const ember_tensor *t);

/* ------------------------------------------------------------------ libraries (blas.c, info.c) */
bool ember__blas_avx512(void);   /* OpenBLAS's core runs AVX-512 kernels */
bool ember__cpu_avx512f(void);   /* the CPU runs AVX-512F (ember's own intrinsics kernels may run) */
/* C = op(A) op(B) + beta C, row-major, dt EMBER_FLOAT32 or EMBER_FLOAT64: the
   BLAS libember loaded (sgemm/dgemm), or reference loops without one. Kernels
   call ops/gemm.c's ember__gemm_run, which decides how a product runs. */
void ember__gemm(int dt, bool ta, bool tb, int64_t M, int64_t N, int64_t K, const void *A, int64_t lda,
                 const void *B, int64_t ldb, double beta, void *C, int64_t ldc);
/* a symbol of the BLAS blas.c loaded (LAPACK's: ops/lapack.c); NULL without it */
void *ember__blas_symbol(const char *name);
int ember__openblas_threads(void);          /* OpenBLAS's thread count; 1 without OpenBLAS */
void ember__openblas_set_threads(int n);    /* nothing without OpenBLAS */

/* ------------------------------------------------------------------ storage, tensors */
/* What an op derived from a storage's contents and keeps for later calls (a
   convolution's weight in oneDNN's layout: ops/conv_dnnl_wcache.c; its live
   taps: ops/conv_taps.c), in a list on the storage, each with the view it was
   made from and the storage's version then; the list is freed, each by its
   own free (which names its kind), when the storage is. */
typedef struct ember__derived {
    struct ember__derived *next;
    void (*free)(struct ember__derived *d);
    int64_t version, offset;
    int dtype, ndim;
    int64_t shape[EMBER_MAX_DIMS], strides[EMBER_MAX_DIMS];
} ember__derived;

typedef struct ember_storage {
    int refcount;
    int device;
    void *data;
    size_t nbytes;
    int64_t version;          /* bumped by every in-place write through any view */
    int32_t pins;             /* unfinished nodes of open backward runs that saved it */
    void (*release)(void *ctx, void *data);   /* for wrapped host memory; NULL = ours */
    void *release_ctx;
    struct ember__dtr_entry *dtr;   /* how to remake it (dtr.c); data NULL while evicted */
    int32_t dtr_holds;        /* headers on it that DTR's recipes hold */
    int32_t dtr_locks;        /* being read now: not to be evicted */
    ember__derived *derived;  /* NULL but where an op keeps something derived */
} ember_storage;

/* Whether something derived from w's contents may be kept on its storage:
   memory ember owns (an ember_from_blob owner may write it without a version
   bump), on the host, read by no recording (in a training step the version
   moves every step), and DTR off (a kept copy would take DTR's budget). */
bool ember__derived_keepable(const ember_tensor *w);
/* d's view and version set from w (before ember__derived_add) */
void ember__derived_key(ember__derived *d, const ember_tensor *w);
/* The first of w's storage's entries of the kind `kind` (their free) made
   from w's view, at any version, that same(d, ctx) accepts (same NULL: any);
   NULL where none. *others, unless NULL, counts that kind's other entries.
   The caller serialises the list's users where it needs to. */
ember__derived *ember__derived_find(const ember_tensor *w, void (*kind)(ember__derived *),
                                    bool (*same)(const ember__derived *d, const void *ctx), const void *ctx,
                                    int *others);
void ember__derived_add(ember_storage *s, ember__derived *d);      /* into s's list */
void ember__derived_remove(ember_storage *s, ember__derived *d);   /* out of it; not freed */

struct ember_autograd_meta;

struct ember_tensor {
    int refcount;
    int8_t dtype;
    int8_t ndim;
    uint8_t wrapped_number;   /* a 0-d tensor made from a Lua/C number */
    uint8_t is_contiguous;
    uint8_t is_view;          /* made by ember__make_view: shares memory another tensor owns */
    int32_t lua_slot;         /* the binding's handle slot (0: none); see tensor.lua */
    int64_t numel;
    int64_t offset;           /* in elements */
    ember_storage *storage;
    struct ember_autograd_meta *ag;   /* NULL unless some recording tracks it (ember__on_release) */
    /* A differentiable view (narrow, select, transpose, view, ...) holds the
       tensor it views: the root, never another view. An in-place write through
       the view moves the root's history; ag_epoch counts such moves on a root,
       and on a view it is the root's count when the view's history was made,
       so a view whose root moved since is re-derived before it is used. */
    ember_tensor *base;
    uint32_t ag_epoch;
    int64_t shape[EMBER_MAX_DIMS];
    int64_t strides[EMBER_MAX_DIMS];
};

/* Allocates a tensor header; storage is NULL. */
int ember__tensor_alloc(ember_tensor **out);
/* A new contiguous tensor with fresh storage. */
int ember__new(int ndim, const int64_t *shape, int dtype, int device, ember_tensor **out);
/* A view: shares a's storage with the given geometry. */
int ember__make_view(const ember_tensor *a, int ndim, const int64_t *shape, const int64_t *strides,
                     int64_t offset, ember_tensor **out);
/* Fails, naming op (an in-place op, without its "_"), when writing into t
   would write some memory location twice (an expand() view). */
int ember__check_writable(const char *op, const ember_tensor *t);
/* Fills without bumping the version (for tensors being created). */
int ember__fill_raw(ember_tensor *a, double value);
/* The release function of wrapped memory the caller keeps owning. */
void ember__noop_release(void *ctx, void *data);
/* The dtype a unary op computes in for an input of dtype dt. */
int ember__unary_dtype(int op, int dt);
void ember__contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
void ember__refresh_geometry(ember_tensor *t);   /* numel, is_contiguous from shape/strides */
int ember__check_shape(const char *op, int ndim, const int64_t *shape, int64_t *numel);
/* ember__ptr(t): the address of t's first element (after element.h below) */

/* ------------------------------------------------------------------ threads (deterministic.c) */
/* The calling thread has per-thread state to free when it exits (caches,
   pools, autograd): registers the exit hook once per thread (threads.c). */
void ember__thread_uses_state(void);
void ember__free_thread_caches(void);      /* alloc.c */
void ember__flush_stats(void);             /* alloc.c: this thread's batched counters */
void ember__free_thread_pools(void);       /* tensor.c */
void ember__free_thread_autograd(void);    /* autograd.c */
/* The one way the tensor layer tells the tape of a release: a tensor whose
   ag is set calls this hook as it is freed. autograd.c registers its own
   (before it tracks any tensor); tensor.c knows nothing else of autograd. */
typedef void (*ember__release_hook)(ember_tensor *t);
void ember__on_release(ember__release_hook hook);

/* ------------------------------------------------------------------ files (io/) */
/* ember_st_open over a whole safetensors file held in memory (the fuzzer's
   entry); `what` names it in errors. */
int ember__st_open_mem(const unsigned char *buf, size_t len, const char *what, ember_st_file **out);

/* ------------------------------------------------------------------ allocator (alloc.c) */
void *ember__alloc(size_t nbytes);        /* 64-byte aligned; NULL on failure */
void ember__free(void *p, size_t nbytes);
void ember__stats_tensor(int delta);
/* Fails (EMBER_ERR_OOM, naming the bytes and the limit) when a storage of
   nbytes would pass ember_set_memory_limit's ceiling. */
int ember__reserve(size_t nbytes);
void ember__stats_bytes(int64_t delta);

/* ------------------------------------------------------------------ vector width
   EMBER_SIMD before a hot kernel builds it three times, for baseline x86-64
   (SSE2), x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512, 512-bit vectors:
   CMakeLists.txt sets -mprefer-vector-width=512), and the loader picks the
   widest the CPU has (GCC's target_clones, an ifunc resolved once). These
   levels are picked by the CPU's features; a clone for "arch=haswell" would
   be picked only on that CPU model.
   The helpers such a kernel calls per element are EMBER_INLINE: GCC inlines
   a function compiled for the default target into a copy for another only
   when it is always_inline, and a call per element would keep the loop from
   vectorising. With -ffp-contract=off no copy fuses a multiply and an add,
   so every width rounds each operation alike and gives the same bits (see
   docs/dtypes.md). EMBER_SIMD is empty where target_clones is unavailable
   (compilers other than GCC, C libraries other than glibc, whose ifuncs pick
   the copy), under EMBER_NATIVE, whose -march=native already fixes the
   width, and in the ThreadSanitizer build (EMBER_ONE_WIDTH), where an
   instrumented ifunc resolver runs before the sanitizer's runtime. */
#define EMBER_INLINE static inline __attribute__((always_inline))
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(EMBER_NATIVE_BUILD) && \
    !defined(EMBER_ONE_WIDTH) && defined(__GLIBC__)
#define EMBER_SIMD __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define EMBER_SIMD
#endif

/* ------------------------------------------------------------------ fast float math
   exp for float32 kernels (exp, sigmoid, silu, softmax): Cephes' expf
   (x = n ln2 + r with n the nearest integer, |r| <= ln2 / 2, and a degree-5
   polynomial for exp(r)), written without calls or branches so the compiler
   vectorises the loops around it at every width. Within 1 ulp of libm's exp
   in double (core/tests/test_fast_math.c, docs/dtypes.md);
   results that would fall below FLT_MIN (inputs under -87.34) are 0, so the
   scale 2^n is always a normal float built from its exponent field; inf
   above 88.72; NaN stays NaN, and is kept out of the float-to-int
   conversion, so no step is undefined. */
#define EMBER_EXPF_LO -87.3365479f   /* ln(FLT_MIN) */

/* exp(c) = y 2^n for c in [EMBER_EXPF_LO, 88.72]: *n, in [-126, 128], the
   nearest integer to c / ln 2, rounded by adding and taking away 1.5 2^23
   ((float)(int32_t), with SSE4.1 a round instruction, would leave a branch
   that keeps the AVX2 and AVX-512 copies from vectorising); y returned */
EMBER_INLINE float ember__expf_reduced(float c, float *n_out)
{
    float n = (c * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = c - n * 0.693359375f + n * 2.12194440e-4f;
    float z = r * r;
    float y = ((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r + 4.1665795894e-2f) * r +
               1.6666665459e-1f) * r + 5.0000001201e-1f;
    *n_out = n;
    return y * z + r + 1.0f;
}

EMBER_INLINE float ember__expf(float x)
{
    const float hi = 88.7228391f, lo = EMBER_EXPF_LO;
    float c = x > hi ? hi : x;
    c = c < lo ? lo : c;
    c = x != x ? 0.0f : c;
    float n, y = ember__expf_reduced(c, &n);
    /* y 2^n, as 2 y 2^127 for n = 128, 2^n built from its exponent field
       (memcpy, not a union or a pointer cast: it vectorises at every width) */
    float e = n > 127.0f ? 127.0f : n;
    uint32_t bits = (uint32_t)((int32_t)e + 127) << 23;
    float scale;
    memcpy(&scale, &bits, 4);
    float v = y * (n - e + 1.0f) * scale;
    v = x < lo ? 0.0f : v;
    v = x > hi ? __builtin_inff() : v;
    return x != x ? x : v;
}

/* tanh for float32 kernels, Cephes' tanhf written without branches: an odd
   polynomial below |x| = 0.625, 1 - 2 / (exp(2|x|) + 1) above, the sign put
   back. Within 1.3 ulp (relative error below 1.4e-7; libm's tanhf is
   slower by 7x and not vectorised); +-1 beyond |x| = 44, NaN stays NaN. */
EMBER_INLINE float ember__tanhf(float x)
{
    float ax = x < 0 ? -x : x;
    float e = ember__expf(2.0f * ax);
    float big = 1.0f - 2.0f / (e + 1.0f);
    float z = x * x;
    float small = ((((-5.70498872745e-3f * z + 2.06390887954e-2f) * z - 5.37397155531e-2f) * z +
                    1.33314422036e-1f) * z - 3.33332819422e-1f) * z * ax + ax;
    float r = ax < 0.625f ? small : big;
    r = __builtin_copysignf(r, x);   /* also -0 for -0 */
    return x != x ? x : r;
}

/* erf for float32 kernels (erf, gelu), written without branches so it
   vectorises: x P(x^2) below |x| = 1, and 1 - exp(-x^2) R(1/|x|) up to 4
   (1 beyond), with the sign put back. P (degree 6) and R (degree 7) are
   least-squares fits to erf(x)/x and erfc(x) exp(x^2) in relative error.
   Within 2.6 ulp, relative error below 1.8e-7 (libm's erff is within 1 ulp
   but runs one element at a time, calling expf); NaN stays NaN. */
EMBER_INLINE float ember__erff(float x)
{
    float z = x * x;
    float small = x * ((((((7.898066372680201e-05f * z - 8.024311698459768e-04f) * z + 5.19004882084656e-03f) * z -
                           2.685480601783563e-02f) * z + 1.1283612364857773e-01f) * z - 3.7612628836743056e-01f) * z +
                       1.1283791665082508f);
    float ax = x < 0 ? -x : x;
    float a = ax < 1.0f ? 1.0f : ax > 4.0f ? 4.0f : ax;   /* the large form's range */
    float u = 1.0f / a;
    float r = ((((((-1.6696129459930126e-02f * u + 1.1607250219844628e-01f) * u - 3.465742082289567e-01f) * u +
                  5.689649071105648e-01f) * u - 5.023705772924989e-01f) * u + 4.993518904799743e-02f) * u +
               5.57913802321234e-01f) * u + 3.3825328018545616e-04f;
    float large = 1.0f - ember__expf(-a * a) * r;
    large = ax > 4.0f ? 1.0f : large;
    float res = ax < 1.0f ? small : __builtin_copysignf(large, x);
    return x != x ? x : res;
}

/* ------------------------------------------------------------------ dtypes (dtype.c) */
static inline bool ember__is_float(int dt)
{
    return dt == EMBER_FLOAT32 || dt == EMBER_FLOAT64 || dt == EMBER_FLOAT16 ||
           dt == EMBER_BFLOAT16;
}
static inline bool ember__is_int(int dt)
{
    return dt == EMBER_INT32 || dt == EMBER_INT64 || dt == EMBER_UINT8;
}
bool ember__valid_dtype(int dt);
/* PyTorch's result_type over n operands (dimensioned > 0-d > wrapped numbers). */
int ember__result_type(int n, ember_tensor *const *ts);
int ember__promote(int a, int b);
/* ember__half_to_float, ember__float_to_half, ember__bf16_to_float,
   ember__float_to_bf16; ember__load reads an element as double, ember__store
   writes one */
#include "element.h"
static inline char *ember__ptr(const ember_tensor *t)
{
    return (char *)t->storage->data + t->offset * ember__dtype_bytes(t->dtype);
}
/* Fails, naming op, the value and the dtype, when an integer dtype cannot
   hold v (NaN, infinite or out of range), as PyTorch's fill and full do. */
int ember__check_value(const char *op, double v, int dtype);
/* ember__check_value for each of the n operands that is a wrapped number on
   the host (a Lua or C number) when the op computes in the integer dtype:
   uint8 + 300 raises instead of wrapping to 44. */
int ember__check_numbers(const char *op, int n, ember_tensor *const *ts, int dtype);
/* Converts n elements between dtypes, strided in elements. */
void ember__convert(void *dst, int ddt, int64_t dstride, const void *src, int sdt,
                    int64_t sstride, int64_t n);

/* ------------------------------------------------------------------ devices (device.c) */
const char *ember__device_name(char *buf, int device);   /* "cpu", "cuda:0" */
/* A wrapped number (a Lua or C number made a 0-d tensor) still on the host:
   it goes with tensors of any device (the dispatch copies it to theirs). */
static inline bool ember__host_number(const ember_tensor *t)
{
    return t->wrapped_number && t->storage->device == EMBER_CPU;
}
/* Fails naming op unless the tensors other than host numbers share a device. */
int ember__same_device(const char *op, int n, ember_tensor *const *ts);

/* ------------------------------------------------------------------ thread pool (parallel.c) */
/* Runs fn(ctx, begin, end) over [0, n) in chunks of at least `grain`, on the
   pool's threads when n is large enough, else inline. fn must not fail. */
typedef void (*ember__range_fn)(void *ctx, int64_t begin, int64_t end);
void ember__parallel_for(int64_t n, int64_t grain, ember__range_fn fn, void *ctx);
/* The same, naming the job's kind for the thread policy's times (nonzero;
   0: the kernel, n and grain name it): a product's shape, say. */
void ember__parallel_for_kind(int64_t n, int64_t grain, ember__range_fn fn, void *ctx, uint64_t kind);
/* The threads a job of `work` multiply-adds or element operations may take
   now (1: run it on the calling thread), by the thread policy (parallel.c);
   work 0: large enough. What oneDNN's convolutions are sized by. */
int ember__job_threads(int64_t work);
void ember__job_inline(void);   /* a job run on the calling thread by its own rule (counted as small) */
/* A job just ran on `threads` of the OpenMP team (oneDNN's): their workers
   spin on for a while, which the policy's load samples must not take for
   another process's threads. */
void ember__team_done(int threads);
/* Elements below which elementwise work stays on the calling thread. */
#define EMBER_PARALLEL_GRAIN 131072

#endif /* EMBER_INTERNAL_H */

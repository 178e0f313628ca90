/*
 * ember.h: the public C API of ember's tensor and autograd core.
 *
 * This header is the manual. Conventions for every function below:
 *   - Tensor arguments are borrowed. A tensor returned through `ember_tensor **out`
 *     carries one new reference the caller owns (release it with
 *     ember_tensor_release); on failure *out is left NULL.
 *   - Every function that can fail returns a status: EMBER_OK (0) or a negative
 *     EMBER_ERR_* code, and leaves a message for ember_last_error() that names
 *     the op and the shapes, dtypes or values involved. Nothing here aborts,
 *     exits or longjmps; an allocation failure is reported as EMBER_ERR_OOM.
 *   - Dimensions are 0-based (the Lua layer converts from its 1-based dims).
 *     Negative dims are NOT accepted here; callers normalise them. Error
 *     messages name dims and indices 1-based, as the Lua API takes them
 *     ("narrow: start 5 ... for dim 2").
 *   - Bad arguments are an error status, never a crash: NULL tensors and NULL
 *     output pointers, shapes whose sizes multiply past 2^50 elements (a zero
 *     size counting as one), ranges that overflow, and a tensor already
 *     released (as long as its header was not reused for a new tensor;
 *     releasing one twice is ignored). core/tests/test_bad_args.c makes such
 *     calls at every entry point. Passing a shape array shorter than ndim
 *     cannot be detected.
 *   - Threads. Several host threads may call ember at the same time, each on
 *     its own tensors, and each may own an ember_lua state. What is shared,
 *     and safe to share: the allocator's counters (ember_memory_stats), the
 *     memory limit, the random generator (threads draw disjoint blocks of
 *     one Philox stream, so which thread draws first decides who gets which
 *     numbers), the kernel thread pool (a second thread's op runs on its own
 *     while the pool is busy), deterministic mode and the thread count.
 *     What is per thread: ember_last_error(), grad mode, the recordings
 *     (GradManager keys, nodes, hooks' interception, saved-tensor modes) and
 *     the caches of freed blocks and tensor headers (ember_empty_cache
 *     returns the calling thread's). What may NOT be shared without your own
 *     lock: a tensor that one thread writes (in-place ops, fills, .grad)
 *     while another reads it, and any tensor a recording of one thread
 *     tracks, which another thread must not use as an op's input while that
 *     recording is live. Reading the same untracked tensor from several
 *     threads is fine. core/tests/test_threads.c runs 8 threads under
 *     ThreadSanitizer.
 *
 * Everything between the ffi markers is plain C that the LuaJIT FFI parses:
 * the build copies that region into lua/ember/cdef.lua. No #define, #if or
 * #include may appear there.
 */
#ifndef EMBER_H
#define EMBER_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define EMBER_API __declspec(dllexport)
#else
#define EMBER_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ffi:begin */
typedef struct ember_tensor ember_tensor;   /* opaque, refcounted */

/* Status codes: < 0 an error, > 0 a control signal of the backward pull loop. */
enum {
    EMBER_OK = 0,
    EMBER_ERR_ARG = -1,          /* a bad argument: a NULL, a dim out of range, ... */
    EMBER_ERR_SHAPE = -2,        /* shapes that do not fit together */
    EMBER_ERR_DTYPE = -3,        /* a dtype the op does not take */
    EMBER_ERR_DEVICE = -4,       /* devices that differ, or a device that lacks the op */
    EMBER_ERR_OOM = -5,          /* an allocation failed */
    EMBER_ERR_UNSUPPORTED = -6,  /* a valid request that is not implemented */
    EMBER_ERR_VERSION = -7,      /* a saved tensor was modified in place */
    EMBER_ERR_STATE = -8,        /* a call out of order (e.g. backward twice) */
    EMBER_ERR_IO = -9,           /* a file that cannot be read or written */
    EMBER_NEED_LUA = 1,
    EMBER_DONE = 2,
    EMBER_PAUSED = 3             /* ember_backward_step_until: the deadline passed */
};

/* dtypes; the order is part of the ABI. */
typedef enum {
    EMBER_FLOAT32 = 0,
    EMBER_FLOAT64 = 1,
    EMBER_FLOAT16 = 2,
    EMBER_BFLOAT16 = 3,
    EMBER_INT32 = 4,
    EMBER_INT64 = 5,
    EMBER_UINT8 = 6,
    EMBER_BOOL = 7,
    EMBER_DTYPE_COUNT = 8
} ember_dtype;

/* Devices: 0 is the CPU, k + 1 is cuda:k. */
enum { EMBER_CPU = 0, EMBER_CUDA0 = 1 };

enum { EMBER_MAX_DIMS = 8 };

/* ---------------------------------------------------------------- errors */
/* The message of the last failure on this thread ("add: shapes {2,3} and {4} ..."). */
EMBER_API const char *ember_last_error(void);
/* Sets the message (used by bindings that report their own errors through the core). */
EMBER_API void ember_set_error(const char *msg);

/* ---------------------------------------------------------------- info */
EMBER_API const char *ember_version(void);
EMBER_API const char *ember_blas_info(void);       /* e.g. "OpenBLAS 0.3.21 ... (core Haswell); <why>; <file>" */
EMBER_API const char *ember_dtype_name(int dtype);   /* "float32", ...; "?" if out of range */
EMBER_API int ember_dtype_size(int dtype);           /* bytes per element; 0 if out of range */
EMBER_API int ember_num_threads(void);
/* CUDA devices usable through the run-time backend (0 without one), and why not. */
EMBER_API int ember_cuda_device_count(void);
EMBER_API const char *ember_cuda_status(void);
/* The CUDA caching allocator's counters (docs/cuda.md): bytes in blocks
   tensors hold and the most ever held, bytes in freed blocks kept for reuse,
   cudaMalloc calls made, and requests served from the cache. */
typedef struct {
    int64_t bytes_in_use;
    int64_t peak_bytes;
    int64_t bytes_cached;
    int64_t device_allocs;
    int64_t cache_hits;
} ember_cuda_memory_stats_t;
/* Each fails with EMBER_ERR_DEVICE, saying why, when CUDA is not available. */
EMBER_API int ember_cuda_memory_stats(ember_cuda_memory_stats_t *out);
EMBER_API int ember_cuda_empty_cache(void);   /* gives the cached blocks back to CUDA */
EMBER_API int ember_cuda_synchronize(void);   /* waits for all queued device work */
/* Whether float32 convolutions on CUDA may use TF32 tensor cores (faster,
   10-bit mantissa products; off by default, so results agree with the CPU).
   Sets it and returns the previous setting; works without CUDA. */
EMBER_API int ember_cuda_set_allow_tf32(int allow);
EMBER_API int ember_cuda_allow_tf32(void);
EMBER_API void ember_set_num_threads(int n);         /* 1 disables the pool */
/* The thread policy (docs/frame_loop.md, "Threads"). By default ("auto") a
   job takes up to ember_num_threads() threads but runs on the calling
   thread when it is small, when the machine has no core to spare (another
   busy thread or process) or while workers have lately come late to jobs.
   ember_set_num_threads(n), and EMBER_NUM_THREADS=n (a whole number >= 1;
   "auto" or any other value leaves the default), fix every job at n
   threads; ember_set_num_threads_auto() goes back to the default (as many
   threads as the CPUs the process may use, or EMBER_NUM_THREADS). No
   result depends on the count: every setting gives the same bits. */
EMBER_API void ember_set_num_threads_auto(void);
EMBER_API int ember_threads_auto(void);
EMBER_API int ember_max_threads(void);   /* the most ember_set_num_threads takes */
typedef struct {
    int auto_policy;              /* 1: auto, 0: fixed by ember_set_num_threads */
    int threads;                  /* ember_num_threads() */
    int max_threads;
    int spare;                    /* cores the last load sample left ember, itself included */
    int online_cpus;
    int64_t jobs_parallel;        /* jobs given more than one thread under auto */
    int64_t jobs_inline_small;    /* run on the caller as too small */
    int64_t jobs_inline_busy;     /* run on the caller as no core was spare or workers came late */
    int64_t late_jobs;            /* parallel jobs whose workers came late */
    int64_t load_samples;         /* reads of the machine's load */
    double inline_seconds_left;   /* of the back-off after late jobs */
    double backoff_seconds;       /* the next back-off's length */
} ember_thread_stats_t;
EMBER_API void ember_thread_stats(ember_thread_stats_t *out);
/* oneDNN (when built with it) runs float32 convolutions, and the float32
   matrix products of the shapes where it beats OpenBLAS; ember's own kernels
   and OpenBLAS run them when it is off, absent or declines, and under
   deterministic mode. ember_dnnl_enabled() is 1 when oneDNN is built in,
   works and is switched on; ember_set_dnnl_matmul_enabled(0) keeps the
   matrix products alone on OpenBLAS. */
EMBER_API const char *ember_dnnl_info(void);         /* "oneDNN 2.6.3 (...)" or "none (...)" */
EMBER_API void ember_set_dnnl_enabled(int on);       /* on by default */
EMBER_API int ember_dnnl_enabled(void);
EMBER_API void ember_set_dnnl_matmul_enabled(int on);   /* on by default */
EMBER_API int ember_dnnl_matmul_enabled(void);          /* and ember_dnnl_enabled() */
/* ember's direct convolution kernels (depthwise convolutions, docs/nn.md
   "Kernels"), on by default; off, those convolutions run as the others do
   (oneDNN, else im2col + GEMM). */
EMBER_API void ember_set_conv_kernels_enabled(int on);
EMBER_API int ember_conv_kernels_enabled(void);

/* The op profiler (off by default): while on, each op's time (its forward,
   backward's ops included; for a GPU tensor the launch) is added to the
   op's account, less that of the ops it runs inside. ember_profile_read
   copies the first n accounts (seconds and calls, either may be NULL), in
   ops.def's order, and returns the number of ops. */
EMBER_API void ember_profile_enable(int on);
EMBER_API void ember_profile_reset(void);
EMBER_API int ember_profile_read(int n, double *seconds, int64_t *calls);

/* ---------------------------------------------------------------- lifetime */
EMBER_API void ember_tensor_retain(ember_tensor *t);
EMBER_API void ember_tensor_release(ember_tensor *t);   /* NULL is a no-op */
EMBER_API int ember_tensor_refcount(const ember_tensor *t);
/* A slot number a language binding may keep in the tensor (0 when unset), so it
   can find its own wrapper object from a pointer without a hash lookup. */
EMBER_API int32_t ember_tensor_lua_slot(const ember_tensor *t);
EMBER_API void ember_tensor_set_lua_slot(ember_tensor *t, int32_t slot);

/* ---------------------------------------------------------------- accessors */
EMBER_API int ember_tensor_ndim(const ember_tensor *t);
EMBER_API const int64_t *ember_tensor_shape(const ember_tensor *t);     /* ndim entries */
EMBER_API const int64_t *ember_tensor_strides(const ember_tensor *t);   /* in elements */
EMBER_API int64_t ember_tensor_offset(const ember_tensor *t);           /* in elements */
EMBER_API int64_t ember_tensor_numel(const ember_tensor *t);
EMBER_API int ember_tensor_dtype(const ember_tensor *t);
EMBER_API int ember_tensor_device(const ember_tensor *t);
EMBER_API int ember_tensor_is_contiguous(const ember_tensor *t);
/* Address of element 0 (storage data + offset). CPU tensors only; NULL otherwise. */
EMBER_API void *ember_tensor_data(const ember_tensor *t);
/* Address of element 0 in the memory of the tensor's device: a CUDA device
   pointer for a cuda tensor (for libraries such as NCCL that take one). */
EMBER_API void *ember_tensor_device_data(const ember_tensor *t);
/* Whether two tensors share one storage (views of one base). */
EMBER_API int ember_tensor_same_storage(const ember_tensor *a, const ember_tensor *b);
/* The version counter of the tensor's storage; every in-place op bumps it. */
EMBER_API int64_t ember_tensor_version(const ember_tensor *t);
EMBER_API void ember_tensor_bump_version(ember_tensor *t);

/* ---------------------------------------------------------------- creation */
/* Uninitialised tensor of the given shape (ndim 0..EMBER_MAX_DIMS). */
EMBER_API int ember_empty(int ndim, const int64_t *shape, int dtype, int device,
                          ember_tensor **out);
EMBER_API int ember_full(int ndim, const int64_t *shape, double value, int dtype, int device,
                         ember_tensor **out);
/* A tensor holding a copy of n elements of `src`, which are of dtype `src_dtype`,
   converted to `dtype`. n must equal the product of shape. */
EMBER_API int ember_from_data(const void *src, int src_dtype, int ndim, const int64_t *shape,
                              int dtype, int device, ember_tensor **out);
/* Wraps host memory the caller owns, without copying. `strides` may be NULL
   (contiguous). When the last reference goes, release(ctx, data) is called
   (release may be NULL). */
EMBER_API int ember_from_blob(void *data, int ndim, const int64_t *shape, const int64_t *strides,
                              int dtype, void (*release)(void *ctx, void *data), void *ctx,
                              ember_tensor **out);
/* 0-d tensor of a Lua/C number. A "wrapped number" takes part in type
   promotion with the lowest priority (as a Python scalar does in PyTorch). */
EMBER_API int ember_scalar(double value, int dtype, int wrapped, ember_tensor **out);
EMBER_API int ember_arange(double start, double end, double step, int dtype, int device,
                           ember_tensor **out);
EMBER_API int ember_linspace(double start, double end, int64_t steps, int dtype, int device,
                             ember_tensor **out);
EMBER_API int ember_eye(int64_t n, int64_t m, int dtype, int device, ember_tensor **out);

/* ---------------------------------------------------------------- random */
/* Philox-4x32-10: a seed and a running counter give the same numbers on
   every run, thread count and platform. */
EMBER_API void ember_manual_seed(uint64_t seed);
EMBER_API uint64_t ember_initial_seed(void);
/* The whole generator state: the seed and the next unused counter block.
   Setting a state got earlier makes the draws after it repeat exactly. */
EMBER_API int ember_get_rng_state(uint64_t *seed, uint64_t *offset);
EMBER_API void ember_set_rng_state(uint64_t seed, uint64_t offset);
EMBER_API int ember_rand(int ndim, const int64_t *shape, int dtype, int device, ember_tensor **out);
EMBER_API int ember_randn(int ndim, const int64_t *shape, int dtype, int device, ember_tensor **out);
EMBER_API int ember_randint(int64_t low, int64_t high, int ndim, const int64_t *shape, int dtype,
                            int device, ember_tensor **out);
EMBER_API int ember_uniform_(ember_tensor *t, double low, double high);
EMBER_API int ember_normal_(ember_tensor *t, double mean, double std);
/* Generators: a Philox stream each (seed and next counter block). A NULL
   generator is the default one, which ember_manual_seed and the functions
   above use; drawing from a private one leaves every other stream where it
   was. A generator may be shared by threads (each draw claims its blocks
   atomically). The default generator is never freed. */
typedef struct ember_generator ember_generator;
EMBER_API ember_generator *ember_default_generator(void);
EMBER_API int ember_generator_new(uint64_t seed, ember_generator **out);
EMBER_API void ember_generator_free(ember_generator *g);
EMBER_API void ember_generator_manual_seed(ember_generator *g, uint64_t seed);
EMBER_API uint64_t ember_generator_initial_seed(ember_generator *g);
EMBER_API int ember_generator_get_state(ember_generator *g, uint64_t *seed, uint64_t *offset);
EMBER_API void ember_generator_set_state(ember_generator *g, uint64_t seed, uint64_t offset);
EMBER_API int ember_rand_gen(ember_generator *g, int ndim, const int64_t *shape, int dtype, int device,
                             ember_tensor **out);
EMBER_API int ember_randn_gen(ember_generator *g, int ndim, const int64_t *shape, int dtype, int device,
                              ember_tensor **out);
EMBER_API int ember_randint_gen(ember_generator *g, int64_t low, int64_t high, int ndim,
                                const int64_t *shape, int dtype, int device, ember_tensor **out);
EMBER_API int ember_uniform_gen_(ember_generator *g, ember_tensor *t, double low, double high);
EMBER_API int ember_normal_gen_(ember_generator *g, ember_tensor *t, double mean, double std);
/* t filled with exponential draws of rate lambd (float dtypes), geometric
   draws (the trial of the first success, 1, 2, ..., of probability p; any
   numeric dtype), or bernoulli draws (1 with probability p, else 0). */
EMBER_API int ember_exponential_gen_(ember_generator *g, ember_tensor *t, double lambd);
EMBER_API int ember_geometric_gen_(ember_generator *g, ember_tensor *t, double p);
EMBER_API int ember_bernoulli_gen_(ember_generator *g, ember_tensor *t, double p);

/* ---------------------------------------------------------------- reading values */
/* The value of a one-element tensor. */
EMBER_API int ember_item(const ember_tensor *t, double *out);
/* Copies the elements in row-major order into dst, converted to `dst_dtype`
   (n = numel elements of that dtype). */
EMBER_API int ember_copy_to_buffer(const ember_tensor *t, void *dst, int dst_dtype);
/* Writes a readable summary ("tensor([[1, 2], ...], dtype=float32, shape={2,3})")
   into buf (NUL-terminated, truncated to cap). Returns the length it needed. */
EMBER_API int64_t ember_format(const ember_tensor *t, char *buf, int64_t cap);

/* ---------------------------------------------------------------- memory */
typedef struct {
    int64_t live_tensors;
    int64_t bytes_in_use;    /* bytes of live storages */
    int64_t peak_bytes;      /* the most bytes_in_use ever reached (since reset) */
    int64_t bytes_cached;    /* freed blocks kept by the calling thread's cache */
    int64_t limit;           /* ember_set_memory_limit's ceiling; 0: none */
    int64_t cache_hits, cache_misses, cache_evictions, cache_limit;   /* that cache's: docs/performance.md */
} ember_memory_stats_t;
EMBER_API void ember_memory_stats(ember_memory_stats_t *out);
/* A ceiling on bytes_in_use (0: none). A tensor whose storage would pass it is
   not made: the op fails with EMBER_ERR_OOM, naming the op, the bytes asked
   and the limit, and nothing is half-written. Scratch buffers kernels use
   for the length of one call are not counted. */
EMBER_API int ember_set_memory_limit(int64_t bytes);
EMBER_API int64_t ember_bytes_in_use(void);          /* the hot subset, for GC pressure */
EMBER_API void ember_reset_peak(void);
EMBER_API void ember_empty_cache(void);

/* Dynamic tensor rematerialization (DTR, docs/dtr.md): while it is on and a
   recording is open, storages ops make remember how to be remade; when an
   allocation would take bytes_in_use past `budget`, they are evicted by the
   heuristic cost / (size x staleness), never one under min_size bytes (< 0:
   MegEngine's 1 MiB, or budget / 1024 when smaller), and remade from their
   inputs when read. Training gives
   the same bits as without it. When nothing more can be evicted the
   allocation fails with EMBER_ERR_OOM naming the op, the bytes and the
   budget. enable again changes the budget and zeroes the counters; disable
   remakes what is still evicted and held, then forgets every recipe.
   For one training thread: enable, train and disable on it (other threads'
   allocations and ops pass DTR by; the tensors it tracks must be released
   on that thread). */
typedef struct ember_dtr_stats_t {
    int enabled;
    int64_t budget, min_size;
    int64_t evictions;       /* storages evicted to stay under the budget */
    int64_t drops;           /* freed as soon as only recipes held them */
    int64_t recomputes;      /* storages remade (parents included) */
    double recompute_s;      /* seconds spent remaking */
    int64_t peak_bytes;      /* the most bytes_in_use any allocation reached since enable */
    int64_t tracked;         /* recipes alive now */
    int64_t evicted;         /* of them, evicted now */
} ember_dtr_stats_t;
EMBER_API int ember_dtr_enable(int64_t budget, int64_t min_size);
EMBER_API int ember_dtr_disable(void);
EMBER_API int ember_dtr_stats(ember_dtr_stats_t *out);

/* ---------------------------------------------------------------- ops
   Every op below records on the autograd tape when an input is tracked by an
   active recording. Binary ops broadcast as numpy does and promote dtypes as
   PyTorch does. */

/* elementwise, binary */
EMBER_API int ember_add(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_sub(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_mul(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_div(ember_tensor *a, ember_tensor *b, ember_tensor **out);   /* true division */
EMBER_API int ember_pow(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_maximum(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_minimum(ember_tensor *a, ember_tensor *b, ember_tensor **out);
/* comparisons give bool tensors */
EMBER_API int ember_eq(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_ne(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_lt(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_le(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_gt(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_ge(ember_tensor *a, ember_tensor *b, ember_tensor **out);
/* cond ? a : b, all three broadcast; cond is bool (or any dtype, nonzero = true) */
EMBER_API int ember_where(ember_tensor *cond, ember_tensor *a, ember_tensor *b, ember_tensor **out);

/* elementwise, unary (float ops promote integer inputs to float32) */
EMBER_API int ember_neg(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_exp(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_log(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_log1p(ember_tensor *a, ember_tensor **out);   /* log(1 + a), exact near 0 */
EMBER_API int ember_sqrt(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_rsqrt(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_abs(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_sign(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_sin(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_cos(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_tanh(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_sigmoid(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_relu(ember_tensor *a, ember_tensor **out);
/* relu's adjoint: g where y > 0, else 0, with y = relu(x) (0 also where g is NaN) */
EMBER_API int ember_relu_backward(ember_tensor *g, ember_tensor *y, ember_tensor **out);
EMBER_API int ember_gelu(ember_tensor *a, int approximate_tanh, ember_tensor **out);
/* gelu's adjoint: g gelu'(x) for g and x of one shape (differentiable) */
EMBER_API int ember_gelu_backward(ember_tensor *g, ember_tensor *x, int approximate_tanh, ember_tensor **out);
EMBER_API int ember_silu(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_erf(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_lgamma(ember_tensor *a, ember_tensor **out);     /* log|Gamma(a)| */
EMBER_API int ember_digamma(ember_tensor *a, ember_tensor **out);    /* Gamma'(a) / Gamma(a) */
EMBER_API int ember_trigamma(ember_tensor *a, ember_tensor **out);   /* digamma'(a), polygamma(1, a) */
/* mish: a tanh(log(1 + e^a)) */
EMBER_API int ember_mish(ember_tensor *a, ember_tensor **out);
/* clamp to [lo, hi]; has_lo / has_hi say which bounds apply */
EMBER_API int ember_clamp(ember_tensor *a, int has_lo, double lo, int has_hi, double hi,
                          ember_tensor **out);
/* Converts to another dtype (a new tensor, also when the dtype is the same). */
EMBER_API int ember_to_dtype(ember_tensor *a, int dtype, ember_tensor **out);
/* Moves to another device (a new tensor; a reference to a when already there). */
EMBER_API int ember_to_device(ember_tensor *a, int device, ember_tensor **out);
/* As ember_to_device, except that a copy from pinned host memory to a GPU is
   queued without waiting for it: work queued on the device after it sees the
   data; the host must not write the source until ember_cuda_synchronize().
   Other copies wait, as ember_to_device's do. */
EMBER_API int ember_to_device_async(ember_tensor *a, int device, ember_tensor **out);
/* A contiguous copy of a CPU tensor in pinned (page-locked) host memory from
   the CUDA backend (a itself, a new reference, when it is pinned already);
   fails with the backend's reason without CUDA. Not recorded by autograd. */
EMBER_API int ember_pin_memory(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_is_pinned(const ember_tensor *a);
/* A contiguous copy. */
EMBER_API int ember_clone(ember_tensor *a, ember_tensor **out);
/* a itself (new reference) when contiguous, else a contiguous copy. */
EMBER_API int ember_contiguous(ember_tensor *a, ember_tensor **out);
/* A tensor sharing a's storage that no recording tracks. */
EMBER_API int ember_detach(ember_tensor *a, ember_tensor **out);

/* reductions: `dims` lists ndims distinct dims (0-based); dims == NULL or
   ndims == 0 reduces every dim. keepdim keeps reduced dims with size 1. */
EMBER_API int ember_sum(ember_tensor *a, int ndims, const int *dims, int keepdim, ember_tensor **out);
EMBER_API int ember_mean(ember_tensor *a, int ndims, const int *dims, int keepdim, ember_tensor **out);
EMBER_API int ember_var(ember_tensor *a, int ndims, const int *dims, int keepdim, int unbiased,
                        ember_tensor **out);
EMBER_API int ember_logsumexp(ember_tensor *a, int dim, int keepdim, ember_tensor **out);
/* p-norm over dims (p = 2 by default in the Lua API; p = inf is the max of |a|) */
EMBER_API int ember_norm(ember_tensor *a, double p, int ndims, const int *dims, int keepdim,
                         ember_tensor **out);
/* The max / min of every element (0-d). */
EMBER_API int ember_amax_all(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_amin_all(ember_tensor *a, ember_tensor **out);
/* Max / min along dim: values and int64 0-based indices. */
EMBER_API int ember_max_dim(ember_tensor *a, int dim, int keepdim, ember_tensor **values,
                            ember_tensor **indices);
EMBER_API int ember_min_dim(ember_tensor *a, int dim, int keepdim, ember_tensor **values,
                            ember_tensor **indices);
/* int64 0-based index of the max / min along dim; dim = -1 means of the flattened tensor. */
EMBER_API int ember_argmax(ember_tensor *a, int dim, int keepdim, ember_tensor **out);
EMBER_API int ember_argmin(ember_tensor *a, int dim, int keepdim, ember_tensor **out);
/* Cumulative sum / product along dim (reverse: the sums from the end);
   integer and bool inputs give int64. */
EMBER_API int ember_cumsum(ember_tensor *a, int dim, int reverse, ember_tensor **out);
EMBER_API int ember_cumprod(ember_tensor *a, int dim, ember_tensor **out);
/* The product of every element (dim -1) or along dim (0-based), keepdim
   keeping it as size 1; integers and bools give int64 (wrapping), floats
   their dtype. The product of nothing is 1. */
EMBER_API int ember_prod(ember_tensor *a, int dim, int keepdim, ember_tensor **out);
/* The n-th derivative of digamma (n >= 0), elementwise: floats keep their
   dtype, integers and bools give float32. */
EMBER_API int ember_polygamma(int n, ember_tensor *a, ember_tensor **out);
/* Stable sort along dim: values and int64 0-based indices; NaN sorts largest. */
EMBER_API int ember_sort(ember_tensor *a, int dim, int descending, ember_tensor **values,
                         ember_tensor **indices);
/* The first k values along dim in sort's order (descending when largest)
   and their int64 0-based indices. */
EMBER_API int ember_topk(ember_tensor *a, int64_t k, int dim, int largest, ember_tensor **values,
                         ember_tensor **indices);
/* int64 0-based insertion points of values in the last dim of sorted
   ((..., n) with values (..., m), or (n) with values of any shape): the
   count of elements < v, or <= v when right. */
EMBER_API int ember_searchsorted(ember_tensor *sorted, ember_tensor *values, int right, ember_tensor **out);
/* Batched linear algebra on (..., n, n) float32/float64 matrices (LAPACK);
   a singular or not positive-definite matrix fails naming its batch element.
   solve: B is (..., n, k) with A's batch dims. */
EMBER_API int ember_linalg_inv(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_linalg_slogdet(ember_tensor *a, ember_tensor **sign, ember_tensor **logabsdet);
/* det A (exactly 0 where an LU pivot is); its gradient is the adjugate's
   transpose, correct at singular matrices too */
EMBER_API int ember_linalg_det(ember_tensor *a, ember_tensor **out);
EMBER_API int ember_linalg_solve(ember_tensor *a, ember_tensor *b, ember_tensor **out);
EMBER_API int ember_linalg_cholesky(ember_tensor *a, ember_tensor **out);
/* int32 (...): 0 where A (its lower triangle) is positive-definite, else the
   order of its first leading minor that is not (no error) */
EMBER_API int ember_linalg_cholesky_info(ember_tensor *a, ember_tensor **info);
/* X with A X = B (B (..., n, k), A's batch dims) for the triangular A read
   from its upper (upper != 0) or lower triangle; unitriangular != 0 takes its
   diagonal as ones. A zero on the diagonal fails naming the batch element. */
EMBER_API int ember_linalg_solve_triangular(ember_tensor *a, ember_tensor *b, int upper, int unitriangular,
                                            ember_tensor **out);
/* eigh: eigenvalues (..., n) ascending and eigenvectors (..., n, n) as columns
   of a symmetric matrix (its lower triangle is read); qr: the reduced Q
   (..., m, k) and R (..., k, n) of (..., m, n), k = min(m, n). */
EMBER_API int ember_linalg_eigh(ember_tensor *a, ember_tensor **eigenvalues, ember_tensor **eigenvectors);
EMBER_API int ember_linalg_qr(ember_tensor *a, ember_tensor **q, ember_tensor **r);
/* mode 0: as ember_linalg_qr; 1 (complete): Q (..., m, m), R (..., m, n);
   2 ("r"): the reduced factors, whose backward fails as PyTorch's */
EMBER_API int ember_linalg_qr_mode(ember_tensor *a, int mode, ember_tensor **q, ember_tensor **r);
/* The reduced SVD A = U diag(S) Vh: U (..., m, k), S (..., k) descending,
   Vh (..., k, n), k = min(m, n). */
EMBER_API int ember_linalg_svd(ember_tensor *a, ember_tensor **u, ember_tensor **s, ember_tensor **vh);
/* full_matrices != 0: U (..., m, m) and Vh (..., n, n) */
EMBER_API int ember_linalg_svd_full(ember_tensor *a, int full_matrices, ember_tensor **u, ember_tensor **s,
                                    ember_tensor **vh);
/* The LU factorisation with partial pivoting A = P L U of A (..., m, n):
   the packed LU (..., m, n) (L's strict lower part, its unit diagonal
   implied, and U), the int32 1-based pivots (..., min(m, n)) (row i was
   swapped with row pivots[i], in order) and the int32 info (...): 0, or i >
   0 where U[i, i] is zero (not an error). */
EMBER_API int ember_linalg_lu_factor(ember_tensor *a, ember_tensor **lu, ember_tensor **pivots, ember_tensor **info);
/* least squares: X (..., n, k) minimising ||A X - B|| for A (..., m, n), B
   (..., m, k) (A's batch dims), the rank (int64 (...)) and singular values
   (..., min(m, n)) of A; driver 0 gels (full rank; rank min(m, n)), 1 gelsy,
   2 gelsd, 3 gelss (singular values from gelsd and gelss only, else zero);
   singular values below rcond times the largest count as zero */
EMBER_API int ember_linalg_lstsq(ember_tensor *a, ember_tensor *b, int driver, double rcond, ember_tensor **solution,
                                 ember_tensor **rank, ember_tensor **singular_values);
EMBER_API int ember_softmax(ember_tensor *a, int dim, ember_tensor **out);
EMBER_API int ember_log_softmax(ember_tensor *a, int dim, ember_tensor **out);
/* their adjoints: g, the gradient of y = softmax(a, dim) (log_softmax(a, dim)),
   and y -> y (g - sum(g y)) (g - exp(y) sum(g)), sums along dim; g and y of one
   shape. Differentiable (second derivatives go through them). */
EMBER_API int ember_softmax_backward(ember_tensor *g, ember_tensor *y, int dim, ember_tensor **out);
EMBER_API int ember_log_softmax_backward(ember_tensor *g, ember_tensor *y, int dim, ember_tensor **out);

/* linear algebra: matmul of 1-D, 2-D and batched (broadcast) operands */
EMBER_API int ember_matmul(ember_tensor *a, ember_tensor *b, ember_tensor **out);
/* x (..., in) w^T for w (out, in): nn's linear layer without the bias */
EMBER_API int ember_linear(ember_tensor *x, ember_tensor *w, ember_tensor **out);
/* relu(x w^T + b) with b (out): the bias and the ReLU in the product's output
   pass (float32 / float64 on the CPU) */
EMBER_API int ember_linear_relu(ember_tensor *x, ember_tensor *w, ember_tensor *b, ember_tensor **out);
/* linear_relu's adjoint from its output y: gz = g where y > 0, else 0 (as
   ember_relu_backward), and gb = gz summed over all dims but the last */
EMBER_API int ember_relu_bias_backward(ember_tensor *g, ember_tensor *y, ember_tensor **gz, ember_tensor **gb);

/* shape and views (views share storage with their base) */
EMBER_API int ember_reshape(ember_tensor *a, int ndim, const int64_t *shape, ember_tensor **out);
EMBER_API int ember_view(ember_tensor *a, int ndim, const int64_t *shape, ember_tensor **out);
EMBER_API int ember_transpose(ember_tensor *a, int d0, int d1, ember_tensor **out);
EMBER_API int ember_permute(ember_tensor *a, int ndim, const int *perm, ember_tensor **out);
EMBER_API int ember_squeeze(ember_tensor *a, int dim, ember_tensor **out);   /* dim -1: all size-1 */
EMBER_API int ember_unsqueeze(ember_tensor *a, int dim, ember_tensor **out);
EMBER_API int ember_expand(ember_tensor *a, int ndim, const int64_t *shape, ember_tensor **out);
EMBER_API int ember_narrow(ember_tensor *a, int dim, int64_t start, int64_t length, ember_tensor **out);
EMBER_API int ember_select(ember_tensor *a, int dim, int64_t index, ember_tensor **out);
/* A view of a's elements taken in row-major order (a's contiguous layout):
   size[d] elements `stride[d]` apart along dim d, from element `offset`;
   strides and offset >= 0 and every element reached inside a. Of a
   contiguous a it shares a's memory, as PyTorch's as_strided with the
   storage offset counted from a's; of a non-contiguous a too where those
   steps are a strided pattern of a's memory (else EMBER_ERR_UNSUPPORTED). */
EMBER_API int ember_as_strided(ember_tensor *a, int ndim, const int64_t *size, const int64_t *stride,
                               int64_t offset, ember_tensor **out);
/* idx: int64 or int32, 0-based */
EMBER_API int ember_index_select(ember_tensor *a, int dim, ember_tensor *idx, ember_tensor **out);
EMBER_API int ember_gather(ember_tensor *a, int dim, ember_tensor *idx, ember_tensor **out);
/* Adds src into a zero tensor of `shape` at the positions idx names along dim
   (the adjoint of gather / index_select). */
EMBER_API int ember_scatter_add(int ndim, const int64_t *shape, int dim, ember_tensor *idx,
                                ember_tensor *src, ember_tensor **out);
EMBER_API int ember_index_add(int ndim, const int64_t *shape, int dim, ember_tensor *idx,
                              ember_tensor *src, ember_tensor **out);
/* The same four with the indices counted from base (Lua's are 1-based: base
   1 reads them as they are, with no shifted copy) */
EMBER_API int ember_index_select_base(ember_tensor *a, int dim, ember_tensor *idx, int64_t base,
                                      ember_tensor **out);
EMBER_API int ember_gather_base(ember_tensor *a, int dim, ember_tensor *idx, int64_t base, ember_tensor **out);
EMBER_API int ember_scatter_add_base(int ndim, const int64_t *shape, int dim, ember_tensor *idx, int64_t base,
                                     ember_tensor *src, ember_tensor **out);
EMBER_API int ember_index_add_base(int ndim, const int64_t *shape, int dim, ember_tensor *idx, int64_t base,
                                   ember_tensor *src, ember_tensor **out);
EMBER_API int ember_cat(int n, ember_tensor *const *ts, int dim, ember_tensor **out);
EMBER_API int ember_stack(int n, ember_tensor *const *ts, int dim, ember_tensor **out);
/* Sums a (broadcast) tensor back down to `shape` (the adjoint of expand). */
EMBER_API int ember_sum_to(ember_tensor *a, int ndim, const int64_t *shape, ember_tensor **out);

/* neural-network kernels. x (N, C, H, W), w (O, C/groups, kH, kW) -> (N, O, H', W').
   stride, padding and dilation are {h, w} pairs; groups divides C and O. */
EMBER_API int ember_conv2d(ember_tensor *x, ember_tensor *w, const int64_t *stride,
                           const int64_t *padding, const int64_t *dilation, int64_t groups,
                           ember_tensor **out);
/* relu(conv2d(x, w) + b), b of shape (O): conv2d, its bias and a ReLU in one op
   (and one pass over the output where oneDNN runs it) */
EMBER_API int ember_conv2d_relu(ember_tensor *x, ember_tensor *w, ember_tensor *b, const int64_t *stride,
                                const int64_t *padding, const int64_t *dilation, int64_t groups,
                                ember_tensor **out);
/* max_pool2d(relu(conv2d(x, w) + b)) in one op, the pool's windows of
   `kernel` at `pool_stride` with no padding: values and indices as
   ember_max_pool2d gives them over the convolution's output, the indices
   int32 (may be NULL; a plane of 2^31 positions or more is refused). Backward keeps x, w and the pooled results, not the convolution's
   output; on the CPU in float32 with pool_stride equal to kernel the output
   is pooled in the layout oneDNN writes it in. */
EMBER_API int ember_conv2d_relu_max_pool2d(ember_tensor *x, ember_tensor *w, ember_tensor *b,
                                           const int64_t *stride, const int64_t *padding,
                                           const int64_t *dilation, int64_t groups, const int64_t *kernel,
                                           const int64_t *pool_stride, ember_tensor **values,
                                           ember_tensor **indices);
/* The adjoints of conv2d: the gradient for x of shape x_shape given g and w,
   and the gradient for w of shape w_shape given x and g. */
EMBER_API int ember_conv2d_backward_input(ember_tensor *g, ember_tensor *w, const int64_t *x_shape,
                                          const int64_t *stride, const int64_t *padding,
                                          const int64_t *dilation, int64_t groups, ember_tensor **out);
EMBER_API int ember_conv2d_backward_weight(ember_tensor *x, ember_tensor *g, const int64_t *w_shape,
                                           const int64_t *stride, const int64_t *padding,
                                           const int64_t *dilation, int64_t groups,
                                           ember_tensor **out);
/* x (N, C, H, W) -> values and int64 indices (flat h * W + w within each plane). */
EMBER_API int ember_max_pool2d(ember_tensor *x, const int64_t *kernel, const int64_t *stride,
                               const int64_t *padding, ember_tensor **values, ember_tensor **indices);
EMBER_API int ember_max_pool2d_backward(ember_tensor *g, ember_tensor *indices, const int64_t *x_shape,
                                        ember_tensor **out);
/* averages count the padding as zeros (PyTorch's count_include_pad = true) */
EMBER_API int ember_avg_pool2d(ember_tensor *x, const int64_t *kernel, const int64_t *stride,
                               const int64_t *padding, ember_tensor **out);
EMBER_API int ember_avg_pool2d_backward(ember_tensor *g, const int64_t *x_shape, const int64_t *kernel,
                                        const int64_t *stride, const int64_t *padding,
                                        ember_tensor **out);

/* recurrent cells (nn.LSTM, nn.GRU), one step for a batch of N with hidden size H:
   gi and gh are the gate pre-activations from the input and from the hidden
   state (x W_ih^T + b_ih and h W_hh^T + b_hh), one dtype, float32 or float64.
   lstm_cell: gi, gh (N, 4H) in PyTorch's gate order i, f, g, o, c (N, H) ->
   h = o tanh(c'), c' = f c + i g. gru_cell: gi, gh (N, 3H), order r, z, n, h (N, H)
   -> h' = (1 - z) n + z h with n = tanh(gi_n + r gh_n). Fail with EMBER_ERR_SHAPE
   or EMBER_ERR_DTYPE. */
EMBER_API int ember_lstm_cell(ember_tensor *gi, ember_tensor *gh, ember_tensor *c, ember_tensor **h_out,
                              ember_tensor **c_out);
EMBER_API int ember_gru_cell(ember_tensor *gi, ember_tensor *gh, ember_tensor *h, ember_tensor **out);

/* batch normalisation in training (nn.BatchNorm*d, F.batch_norm): x (N, C, ...),
   w and b (C) -> y = (x - mean) / sqrt(var + eps) w + b and stats (2, C): the
   mean and the biased variance over every dim but 1. The adjoint takes the
   gradient of y, x, w and those stats -> gx and gwb (2, C): w's gradient and
   b's (the adjoint records no node of its own: it is not differentiable). */
EMBER_API int ember_batch_norm(ember_tensor *x, ember_tensor *w, ember_tensor *b, double eps, ember_tensor **y,
                               ember_tensor **stats);
EMBER_API int ember_batch_norm_backward(ember_tensor *g, ember_tensor *x, ember_tensor *w, ember_tensor *stats,
                                        double eps, ember_tensor **gx, ember_tensor **gwb);
/* batch_norm with an activation applied to y as it is written: activation
   1 relu (NaN and -0 kept), 2 hardtanh between lo and hi (relu6: 0, 6),
   as where(y <= lo, lo, where(y >= hi, hi, y)); the adjoint takes y too
   and passes g where relu's (y > 0 or NaN) or hardtanh's (lo < y < hi or
   NaN) gradient is 1, 0 elsewhere, before batch_norm_backward's formulas.
   nn.Sequential runs it for a BatchNorm in training followed by ReLU or
   ReLU6; results are batch_norm's then the activation's, bit for bit. */
EMBER_API int ember_batch_norm_act(ember_tensor *x, ember_tensor *w, ember_tensor *b, double eps, int activation,
                                   double lo, double hi, ember_tensor **y, ember_tensor **stats);
EMBER_API int ember_batch_norm_act_backward(ember_tensor *g, ember_tensor *x, ember_tensor *w, ember_tensor *stats,
                                            ember_tensor *y, double eps, int activation, double lo, double hi,
                                            ember_tensor **gx, ember_tensor **gwb);
/* y = act(x scale[c] + shift[c]) over x (N, C, ...), scale and shift (C),
   act 0 (none) or as ember_batch_norm_act's: batch normalisation in eval
   mode (F.batch_norm with running statistics) in one pass. */
EMBER_API int ember_channel_affine(ember_tensor *x, ember_tensor *scale, ember_tensor *shift, int activation,
                                   double lo, double hi, ember_tensor **out);

/* layer normalisation (nn.LayerNorm, F.layer_norm) over x's last k =
   normalized_dims dims, w and b of their shape -> y = (x - mean) rstd w + b
   and stats (2, R) for R rows of normalised values: each row's mean and
   rstd = 1 / sqrt(var + eps), var biased. With rms set (F.rms_norm) no mean
   is subtracted (row 0 of stats is zeros) and var is the mean of x^2. One
   float dtype, float32 or float64. The adjoint takes the gradient of y, x, w
   and those stats -> gx and, where gwb is not NULL, gwb (2, w's shape): w's
   gradient and b's (it records no node of its own: it is not differentiable). */
EMBER_API int ember_layer_norm(ember_tensor *x, ember_tensor *w, ember_tensor *b, int normalized_dims, int rms,
                               double eps, ember_tensor **y, ember_tensor **stats);
EMBER_API int ember_layer_norm_backward(ember_tensor *g, ember_tensor *x, ember_tensor *w, ember_tensor *stats,
                                        int normalized_dims, int rms, double eps, ember_tensor **gx,
                                        ember_tensor **gwb);
/* cross-entropy of logits x (M, C) against labels (M), int64 or int32 class
   indices counting from first_class (0 here, 1 from Lua), with class weights
   w (C) and label smoothing ls in [0, 1] -> rows (M), each row's
   (1 - ls) w_l (lse - x_l) + ls / C sum_c w_c (lse - x_c) with lse its
   log-sum-exp and l its label (0 where the label is ignore_index), and stats
   (2, M): each row's lse and weight w_l (0 where ignored; a mean divides by
   their sum). A label out of range fails (EMBER_ERR_ARG, naming it). The
   adjoint takes the rows' gradient g (M) -> gx (M, C); it records no node
   of its own (it is not differentiable); w gets no gradient. */
EMBER_API int ember_cross_entropy(ember_tensor *x, ember_tensor *labels, ember_tensor *w, int64_t first_class,
                                  int64_t ignore_index, double label_smoothing, ember_tensor **rows,
                                  ember_tensor **stats);
EMBER_API int ember_cross_entropy_backward(ember_tensor *g, ember_tensor *x, ember_tensor *labels, ember_tensor *w,
                                           ember_tensor *stats, int64_t first_class, int64_t ignore_index,
                                           double label_smoothing, ember_tensor **gx);

/* in place: write into a, bump its version. b broadcasts to a's shape and its
   dtype must cast to a's. */
EMBER_API int ember_add_(ember_tensor *a, ember_tensor *b);
EMBER_API int ember_sub_(ember_tensor *a, ember_tensor *b);
EMBER_API int ember_mul_(ember_tensor *a, ember_tensor *b);
EMBER_API int ember_div_(ember_tensor *a, ember_tensor *b);
EMBER_API int ember_pow_(ember_tensor *a, ember_tensor *b);
EMBER_API int ember_copy_(ember_tensor *a, ember_tensor *src);
EMBER_API int ember_fill_(ember_tensor *a, double value);
/* unary in place: op is the name of a unary op ("exp", "relu", "neg", ...) */
EMBER_API int ember_unary_(ember_tensor *a, const char *op);
EMBER_API int ember_clamp_(ember_tensor *a, int has_lo, double lo, int has_hi, double hi);
/* ---------------------------------------------------------------- autograd
   A "key" is one recording of a GradManager (MegEngine's GradKey): while it
   records, every op on a tensor it tracks adds a node to its tape. Keys are
   small integers. While key K runs backward, its grad rules' ops are recorded
   by the active keys that started recording before K and are not in K's
   group, so an outer manager differentiates an inner one's backward. */
typedef struct ember_node ember_node;   /* a grad function; owned by its key's tape */

EMBER_API void ember_set_grad_enabled(int enabled);
EMBER_API int ember_is_grad_enabled(void);
/* How many keys record on this thread now (0 while grad mode is off): with
   one, nothing will record the backward of what is recorded now. */
EMBER_API int ember_num_recording(void);
/* A number that changes whenever what a new op would record may change on
   this thread: grad mode, a key starting or stopping to record or running
   backward, a tensor attached while recording. A result made while it had
   one value is recorded as a new one would be for as long as it keeps it
   (autocast's cast cache relies on this). */
EMBER_API uint64_t ember_autograd_serial(void);
/* A new key in `group` (0: a group of its own). */
EMBER_API int ember_key_new(int group, int *key);
EMBER_API void ember_key_free(int key);
/* Puts a key in a group (group > 0): members do not record each other's backward. */
EMBER_API void ember_key_set_group(int key, int group);
/* Starts recording (fails with EMBER_ERR_STATE when already recording). */
EMBER_API int ember_key_record(int key);
EMBER_API int ember_key_is_recording(int key);
/* Drops the tape and stops recording; safe to call any number of times. */
EMBER_API void ember_key_release(int key);
/* Tracks t from now on (attach): its gradient is accumulated by an
   AccumulateGrad node. t must be floating point. */
EMBER_API int ember_key_track(int key, ember_tensor *t);
EMBER_API int ember_key_tracks(int key, const ember_tensor *t);
/* Whether any active recording tracks t. */
EMBER_API int ember_is_tracked(const ember_tensor *t);
/* The node that produced t under the most recently started key tracking it
   (NULL for leaves and untracked tensors); output_nr gets the 0-based output. */
EMBER_API ember_node *ember_grad_fn(const ember_tensor *t, int *output_nr);
EMBER_API ember_node *ember_grad_fn_key(int key, const ember_tensor *t, int *output_nr);

/* The node t's gradient flows into under the most recent key tracking it:
   its grad_fn, or the AccumulateGrad node of an attached tensor. */
EMBER_API ember_node *ember_gradient_edge(const ember_tensor *t, int *output_nr);
/* A node stays valid while its key's generation is unchanged. */
EMBER_API int ember_node_key(const ember_node *n);
EMBER_API uint32_t ember_key_generation(int key);
/* While on, every node created is also appended to a journal the caller drains
   (saved-tensor hooks and anomaly mode look at each new node). */
EMBER_API void ember_set_node_journal(int on);
EMBER_API int ember_drain_node_journal(ember_node **nodes, int cap);

/* Node inspection. */
EMBER_API const char *ember_node_name(const ember_node *n);   /* "MulBackward", "AccumulateGrad" */
/* The op's or Function's own name, as written, then the node's name:
   "log_softmax (LogSoftmaxBackward)", "my_op (MyOpBackward)", "AccumulateGrad".
   Error messages name a node by it. */
EMBER_API const char *ember_node_label(const ember_node *n);
EMBER_API uint64_t ember_node_id(const ember_node *n);         /* unique for the process */
EMBER_API int ember_node_num_inputs(const ember_node *n);
EMBER_API int ember_node_num_outputs(const ember_node *n);
/* Input i's edge: the node its gradient flows to (NULL for untracked inputs). */
EMBER_API ember_node *ember_node_next(const ember_node *n, int i, int *output_nr);
EMBER_API int ember_node_needs_input_grad(const ember_node *n, int i);
/* The shape input i had when the op ran; returns its ndim. */
EMBER_API int ember_node_input_shape(const ember_node *n, int i, int64_t *shape);
/* The leaf tensor of an AccumulateGrad node (borrowed; NULL once freed). */
EMBER_API ember_tensor *ember_node_leaf(const ember_node *n);
/* Saved input i / output k of a node whose rule kept it (borrowed; NULL otherwise). */
EMBER_API ember_tensor *ember_node_saved_input(const ember_node *n, int i);
EMBER_API ember_tensor *ember_node_saved_output(const ember_node *n, int k);
/* Marks a node so backward stops at it and asks the caller (hooks). */
EMBER_API void ember_node_set_intercept(ember_node *n, int on);
/* Every node stops and asks the caller (debug logging, anomaly detection). */
EMBER_API void ember_set_intercept_all(int on);
/* Replaces a node's saved input i / output k (saved-tensor hooks: NULL drops
   it after packing; a tensor puts the unpacked value back, version unchecked). */
EMBER_API int ember_node_set_saved_input(ember_node *n, int i, ember_tensor *t);
EMBER_API int ember_node_set_saved_output(ember_node *n, int k, ember_tensor *t);
/* While on, nodes save copies of what they keep, so later in-place writes do
   not affect backward (allow_mutation_on_saved_tensors). */
EMBER_API void ember_set_save_copies(int on);
EMBER_API int ember_get_save_copies(void);

/* Lua rules: ops whose rule is replaced (register_grad_rule) and custom
   Functions. rule_id > 0 names the caller's rule; 0 restores the built-in. */
EMBER_API int ember_set_rule_override(const char *op, int rule_id);
/* Records a custom op on every visible key that tracks one of the inputs.
   ctx_id identifies the caller's saved state; the node's rule is rule_id.
   Returns the number of nodes made (one per such key, all holding ctx_id),
   or a status < 0. The node keeps a copy of name, at most
   EMBER_NODE_NAME_MAX bytes (a longer one is an error). */
enum { EMBER_NODE_NAME_MAX = 48 };
EMBER_API int ember_record_custom(const char *name, int rule_id, int ctx_id, int nin,
                                  ember_tensor *const *in, int nout, ember_tensor *const *out);
/* ctx ids of nodes freed since the last call (up to cap): an id comes back
   once for each node ember_record_custom made with it. */
EMBER_API int ember_drain_freed_ctx(int *ids, int cap);

/* Backward is a pull loop: begin, then step until EMBER_DONE; a step that
   returns EMBER_NEED_LUA leaves a request in *req for the caller. */
typedef struct ember_backward_run ember_backward_run;
enum { EMBER_REQ_NODE = 1, EMBER_REQ_LEAF = 2 };
typedef struct ember_backward_req {
    int kind;               /* EMBER_REQ_NODE: compute a node's input grads;
                               EMBER_REQ_LEAF: an attached tensor's gradient is complete */
    int rule_id;            /* NODE: the Lua rule (0: built-in, intercepted for hooks);
                               LEAF: nonzero when the AccumulateGrad node is intercepted
                               (node hooks, debug logging, anomaly mode) */
    int ctx_id;
    ember_node *node;
    int num_grads;          /* NODE: one per output (NULL where none); LEAF: 1 */
    ember_tensor **grads;   /* borrowed */
    ember_tensor *tensor;   /* LEAF: the attached tensor (borrowed) */
} ember_backward_req;

/* ys and dys: n tensors each; a dy may be NULL for a one-element y (ones). */
EMBER_API int ember_backward_begin(int key, int n, ember_tensor *const *ys, ember_tensor *const *dys,
                                   ember_backward_run **run);
EMBER_API int ember_backward_step(ember_backward_run *run, ember_backward_req *req);
/* ember_backward_step with a deadline on ember_clock() (a host's frame
   budget): it runs at least one node (or hands out one request), then returns
   EMBER_PAUSED once the deadline has passed; call it again to go on. While a
   run is open, an in-place write into a tensor one of its unfinished nodes
   saved fails (EMBER_ERR_STATE) instead of spoiling the run. */
EMBER_API int ember_backward_step_until(ember_backward_run *run, ember_backward_req *req, double deadline);
/* Seconds on a monotonic clock: what deadlines are measured on. */
EMBER_API double ember_clock(void);

/* Deterministic mode (off by default): every op's result is the same to the
   bit for any ember_set_num_threads and from run to run. It costs speed in
   matrix products and convolutions (docs/design.md has the figures); every
   op of the CPU backend is covered, none has to refuse. */
EMBER_API void ember_set_deterministic(int on);
EMBER_API int ember_is_deterministic(void);
/* Answers a NODE request with one gradient per input (NULL: none). */
EMBER_API int ember_backward_supply(ember_backward_run *run, int n, ember_tensor *const *grads);
/* Runs the built-in rule of the request's node on the given output grads
   without routing: grad_in gets one new reference per input (NULL: none). */
EMBER_API int ember_backward_builtin_grads(ember_backward_run *run, int n, ember_tensor *const *grads,
                                           ember_tensor **grad_in);
/* Answers a NODE request with the built-in rule on the given output grads. */
EMBER_API int ember_backward_builtin(ember_backward_run *run, int n, ember_tensor *const *grads);
/* Ends the run (also after an error) and releases the key's history. */
EMBER_API void ember_backward_end(ember_backward_run *run);

typedef struct {
    int64_t live_nodes;
    int64_t saved_tensors;
    int64_t bwd_cache_hits;
    int64_t bwd_cache_misses;
} ember_autograd_stats_t;
EMBER_API void ember_autograd_stats(ember_autograd_stats_t *out);
/* ---- fused optimizer updates ----
   One pass per parameter, in place, PyTorch's formulas (see docs/optim.md).
   p, g and the state tensors: one float32/float64 dtype, one shape,
   contiguous, on the CPU, not sharing memory; anything else returns
   EMBER_ERR_UNSUPPORTED (compose tensor ops instead). Not recorded by
   autograd; the versions of the written tensors are bumped.
   SGD: buf NULL means no momentum; first_step copies d into buf. */
EMBER_API int ember_sgd_step_(ember_tensor *p, ember_tensor *g, ember_tensor *buf, double lr, double momentum,
                              double dampening, double weight_decay, int nesterov, int maximize,
                              int first_step);
/* Adam (decoupled = 0: L2 added to g) and AdamW (decoupled = 1: p *= 1 - lr wd).
   vmax non-NULL turns on amsgrad. step counts from 1. */
EMBER_API int ember_adam_step_(ember_tensor *p, ember_tensor *g, ember_tensor *m, ember_tensor *v,
                               ember_tensor *vmax, double lr, double beta1, double beta2, double eps,
                               double weight_decay, int decoupled, int maximize, int64_t step);
/* ---- io ---- */
/* Reads an IDX file (gzip'd or plain): big-endian magic 0 0 type ndim, the
   dims, then the data. uint8 stays uint8; int8 and int16 become int32. */
EMBER_API int ember_load_idx(const char *path, ember_tensor **out);
/* safetensors files: ember's one codec (core/src/io/; ember.save and
   ember.load go through it). The reader checks every length, offset, shape
   and string of a file (strict JSON, ranges that tile the data exactly)
   before it reads or allocates tensor data; messages read "load: <path>:
   <what>". The writer writes a temporary beside the file, fsyncs it and
   renames it over it (temporaries left by a writer that was killed are
   removed first); messages read "save: <path>: <what>".
   ember_save / ember_load: a list of named tensors. ember_load reads every
   tensor to the CPU, in file order; the list owns them: ember_named_tensor
   borrows one (retain it to keep it past ember_named_free). */
typedef struct ember_named_tensors ember_named_tensors;
EMBER_API int ember_save(const char *path, int n, const char *const *names, ember_tensor *const *tensors);
EMBER_API int ember_load(const char *path, ember_named_tensors **out);
EMBER_API int ember_named_count(const ember_named_tensors *list);
EMBER_API const char *ember_named_name(const ember_named_tensors *list, int i);
EMBER_API ember_tensor *ember_named_tensor(const ember_named_tensors *list, int i);
EMBER_API void ember_named_free(ember_named_tensors *list);
/* Removes `<path>.tmp.<pid>.*` files whose writing process is gone; returns
   how many (ember_save calls it too). */
EMBER_API int ember_remove_stale_temps(const char *path);
/* The whole codec: names and strings with their lengths (they may hold any
   UTF-8, a NUL included), metadata (a string map), the header alone.
   ember_st_save writes "__metadata__" (nmeta >= 0; nmeta = 0 an empty one,
   nmeta < 0 none) and then the entries, each in the given order; names and
   metadata must be valid UTF-8 and distinct, "__metadata__" names no tensor.
   Tensors on another device are copied to the CPU one at a time. */
enum { EMBER_ST_MAX_HEADER = 100000000 };   /* the largest header a reader takes, in bytes */
typedef struct ember_st_named {
    const char *name;
    size_t name_len;
    ember_tensor *tensor;
} ember_st_named;
typedef struct ember_st_kv {
    const char *key;
    size_t key_len;
    const char *value;
    size_t value_len;
} ember_st_kv;
EMBER_API int ember_st_save(const char *path, int n, const ember_st_named *entries, int nmeta, const ember_st_kv *meta);
/* ember_st_open reads and checks the header (the file stays open until
   ember_st_close); entries are in file order. ember_st_entry's outputs may
   be NULL; the strings and shape belong to the file. ember_st_read reads
   entry i into a new CPU tensor (bool bytes other than 0 become 1). */
typedef struct ember_st_file ember_st_file;
EMBER_API int ember_st_open(const char *path, ember_st_file **out);
EMBER_API int ember_st_count(const ember_st_file *f);
EMBER_API int ember_st_entry(const ember_st_file *f, int i, const char **name, size_t *name_len, int *dtype, int *ndim,
                             const int64_t **shape, uint64_t *begin, uint64_t *end);
EMBER_API int ember_st_meta_count(const ember_st_file *f);
EMBER_API int ember_st_meta(const ember_st_file *f, int i, const char **key, size_t *key_len, const char **value,
                            size_t *value_len);
EMBER_API int ember_st_read(ember_st_file *f, int i, ember_tensor **out);
EMBER_API void ember_st_close(ember_st_file *f);
/* The safetensors name of a dtype ("F32", "BOOL", ...), NULL for none. */
EMBER_API const char *ember_st_dtype_name(int dtype);
/* ---- plans: trace to a plan, replay (docs/plans.md) ----
   ember_trace_begin opens a trace on the calling thread: every op run on it
   until ember_trace_end (the ops of the dispatch funnel, the ones backward's
   rules run, in-place writes, fused optimizer steps, random draws of the
   default generator) is recorded over slots: the n example inputs, the
   tensors that existed before the trace (live: a replay reads and writes
   them in place), constants made during the trace (their value when first
   used) and temporaries. Reading a value (ember_item, ember_copy_to_buffer)
   while tracing fails. ember_trace_end makes the plan, whose outputs are
   the given tensors; ember_trace_abort drops an open trace. One trace at a
   time. A plan replays the recorded ops in C: ember_plan_run, or a run
   opened by ember_plan_start, advanced by ember_plan_step (at least one op,
   then until `seconds` have passed; seconds < 0: to the end) and read by
   ember_plan_result (nout new references). Inputs must have the example's
   shape, dtype and device. */
typedef struct ember_plan ember_plan;
typedef struct {
    int64_t ops;           /* entries replayed */
    int64_t fused;         /* of them, fused ones */
    int64_t removed;       /* entries dropped as dead */
    int64_t arena_bytes;   /* bytes of the plan's arena, its CPU temporaries' memory (0: none, as a loaded plan's) */
    int64_t peak_bytes;    /* the most bytes of temporaries a run holds at once */
    int64_t inputs, outputs;
    int64_t patterns;      /* of the fused ones, existing fused ops chosen by pattern (linear_relu) */
    int64_t hoisted;       /* entries reading only weights and constants: run once, results kept while the
                              weights keep their versions (a forward's plan) */
} ember_plan_stats_t;
EMBER_API int ember_trace_begin(int n, ember_tensor *const *inputs);
EMBER_API int ember_trace_end(int nout, ember_tensor *const *outputs, ember_plan **out);
EMBER_API void ember_trace_abort(void);
EMBER_API int ember_is_tracing(void);
/* +1 / -1 around a library's check whose value reads only decide whether it
   raises (a label out of range): they are allowed while tracing. */
EMBER_API void ember_trace_allow_reads(int delta);
EMBER_API int ember_plan_run(ember_plan *p, ember_tensor *const *in, int nin, ember_tensor **out, int nout);
EMBER_API int ember_plan_start(ember_plan *p, ember_tensor *const *in, int nin);
EMBER_API int ember_plan_step(ember_plan *p, double seconds, int *done);
EMBER_API int ember_plan_result(ember_plan *p, ember_tensor **out, int nout);
EMBER_API void ember_plan_cancel(ember_plan *p);
EMBER_API void ember_plan_free(ember_plan *p);
EMBER_API void ember_plan_stats(const ember_plan *p, ember_plan_stats_t *out);
/* A plan in one safetensors file: the live tensors and constants as
   entries, the graph in the metadata ("ember.plan", JSON) with its format
   version ("ember.plan.version", "1"). The ops of a forward and of an SGD
   training step are saved (docs/plans.md lists them); a loaded plan runs on
   the CPU, its weights its own copies, updated in place by a saved training
   step's runs. The reader refuses, naming what, a file that is truncated,
   of another version, with an unknown op, a slot read before it is
   written, absurd sizes; each op's attributes are checked against its
   inputs before it runs. */
EMBER_API int ember_plan_save(const ember_plan *p, const char *path);
EMBER_API int ember_plan_load(const char *path, ember_plan **out);
/* Names the plan's live tensor t (a parameter, optimizer state) for
   ember_plan_save, which writes it under that name (unnamed ones as
   w<slot>, constants as c<slot>): 1 to 200 printable ASCII characters, no
   quote or backslash, not of the form w<digits> or c<digits>, one tensor a
   name. t may be another header of the same memory (a detached one, as a
   state_dict gives). Returns 1 when named, 0 when the plan does not hold t. */
EMBER_API int ember_plan_name(ember_plan *p, const ember_tensor *t, const char *name);
/* A new reference to the plan's tensor of that name (a loaded plan's: the
   file's names): a weight a saved training step's runs update in place. */
EMBER_API int ember_plan_tensor(ember_plan *p, const char *name, ember_tensor **out);
/* The step counts of the plan's Adam updates, one per update in trace order:
   the step the next run uses (each completed run adds one). */
EMBER_API int64_t *ember_plan_counters(ember_plan *p, int *n);
/* ffi:end */

#ifdef __cplusplus
}
#endif
#endif /* EMBER_H */

/* ember/tensor.h: tensors: lifetime, accessors, creation, random draws and generators, reading
   values, memory counters and the memory limit.
   A part of ember.h, which includes the parts in order (its conventions hold
   here): include <ember.h>, not this file. */
#ifndef EMBER_H
#error "ember/tensor.h is a part of ember.h: include <ember.h>"
#endif

/* ffi:begin */
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
/* Dropout's keep mask: a new contiguous bool tensor of x's shape on x's
   device, true where a uniform draw in [0, 1) of x's (floating point) dtype
   is >= p (compared as ge compares them). The bits and the place in g's stream are those
   of rand(x's shape, x's dtype) >= p, the blocks claimed the same; on the
   CPU it is one kernel writing the mask, with no float draw in between. */
EMBER_API int ember_dropout_mask_gen(ember_generator *g, const ember_tensor *x, double p, ember_tensor **out);

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
    int64_t huge_bytes;      /* in blocks on huge pages, in use or cached, all threads (EMBER_HUGEPAGES) */
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
/* ffi:end */

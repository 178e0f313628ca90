/* ember/runtime.h: the build and the machine: version, BLAS, CUDA's devices and caching allocator,
   the thread policy, oneDNN and the direct convolution kernels, the op profiler.
   A part of ember.h, which includes the parts in order (its conventions hold
   here): include <ember.h>, not this file. */
#ifndef EMBER_H
#error "ember/runtime.h is a part of ember.h: include <ember.h>"
#endif

/* ffi:begin */
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
    /* the measured choice between running large jobs as the sample says
       ("sampled", 0) and on the whole team (1) */
    int winner;                   /* the arm that won the last comparison */
    int trial;                    /* 1: a trial of the other arm runs now */
    int kinds;                    /* kinds of large job whose times are kept */
    int64_t jobs_sampled;         /* large jobs timed under each arm */
    int64_t jobs_team;
    int64_t trials;               /* trials of the other arm: */
    int64_t trials_won;           /*   won (the arms changed places), */
    int64_t trials_stopped;       /*   ended early as far slower */
    int64_t team_cuts;            /* team phases ended as the machine got busier */
    double last_trial_ratio;      /* the last trial's time over the winner's (0: nothing compared) */
    int64_t trials_postponed;     /* trials of the team put off while the cores were crowded */
    int crowded;                  /* 1: the last two load samples found others' threads on every core */
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
/* ffi:end */

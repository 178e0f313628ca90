/* backend.h: the device abstraction. The CPU kernels are reached directly by
   the op layer; every other device is a backend library loaded at run time
   (cuda/ builds libember_cuda) that fills this table. A NULL slot makes the op
   fail with "<op> is not implemented for cuda". */
#ifndef EMBER_BACKEND_H
#define EMBER_BACKEND_H

#include "ops/ops.h"

/* What the core lends a backend: it never links against the core. */
typedef struct ember_core_services {
    int abi_version;
    int (*fail)(int status, const char *fmt, ...);
    int (*new_tensor)(int ndim, const int64_t *shape, int dtype, int device, ember_tensor **out);
    void (*release)(ember_tensor *t);
    int (*broadcast_shape)(const char *op, int n, ember_tensor *const *ts, int *ndim,
                           int64_t *shape);
    int (*dtype_size)(int dtype);
    const char *(*dtype_name)(int dtype);
    int (*result_type)(int n, ember_tensor *const *ts);   /* PyTorch's promotion */
    int (*unary_dtype)(int op, int dt);                   /* what a unary op computes in */
    /* what a binary op computes in (*compute) and its result's dtype (returned) */
    int (*binary_types)(int op, ember_tensor *a, ember_tensor *b, int *compute);
    int (*matmul_plan)(ember_tensor *const *in, ember__matmul_plan *p);   /* matmul's shapes */
    int (*reduce_plan)(int op, const ember_tensor *a, const ember_attrs *at, ember__reduce_plan *p);
    /* conv2d's and pooling's geometry and result shape */
    int (*conv_plan)(int op, ember_tensor *const *in, const ember_attrs *at, ember__conv_geom *g, int64_t *rshape);
    int (*pool_plan)(int op, ember_tensor *const *in, const ember_attrs *at, ember__pool_geom *p, int64_t *rshape);
    int (*allow_tf32)(void);      /* ember_cuda_allow_tf32 */
    int (*deterministic)(void);   /* ember_set_deterministic's flag: ops that cannot honour it refuse */
    /* ops.def's op names in enum order: a backend built from another ops.def
       refuses to load rather than run the wrong kernel for an op */
    int op_count;
    const char *const *op_names;
} ember_core_services;

#define EMBER_BACKEND_ABI 4

struct ember__draw;   /* philox.h */

/* The scalars of a fused SGD step (ember_sgd_step_) and an Adam or AdamW step
   (ember_adam_step_; bc1 = 1 - beta1^step, bc2_sqrt = sqrt(1 - beta2^step)). */
typedef struct ember__sgd_args {
    double lr, momentum, dampening, weight_decay;
    int nesterov, maximize, first;
} ember__sgd_args;

typedef struct ember__adam_args {
    double lr, beta1, beta2, eps, weight_decay, bc1, bc2_sqrt;
    int decoupled, maximize;
} ember__adam_args;

typedef struct ember_backend {
    const char *name;            /* "cuda" */
    int device_count;
    void *(*alloc)(size_t nbytes);
    void (*free)(void *p, size_t nbytes);
    /* dst and src are contiguous buffers of nbytes; kind: 0 h2d, 1 d2h, 2 d2d,
       3 h2d from host_alloc's memory, queued without waiting */
    int (*memcpy)(void *dst, const void *src, size_t nbytes, int kind);
    int (*read_scalar)(const ember_tensor *t, double *out);
    int (*fill)(ember_tensor *t, double value);
    int (*copy)(ember_tensor *dst, const ember_tensor *src);   /* same shape, may convert */
    int (*synchronize)(void);
    int (*memory_stats)(ember_cuda_memory_stats_t *out);
    int (*empty_cache)(void);
    /* pinned host memory (NULL when there is none); a freed block is not
       reused before the copies queued from it have finished */
    void *(*host_alloc)(size_t nbytes);
    void (*host_free)(void *p);
    /* draws into a contiguous t (random.c's streams, one element at a time) */
    int (*random)(ember_tensor *t, const struct ember__draw *d);
    /* the fused optimizer steps over contiguous operands of one dtype, shape
       and device, checked by the core (optim.c); buf and vmax may be NULL */
    int (*sgd_step)(ember_tensor *p, const ember_tensor *g, ember_tensor *buf, const ember__sgd_args *a);
    int (*adam_step)(ember_tensor *p, const ember_tensor *g, ember_tensor *m, ember_tensor *v,
                     ember_tensor *vmax, const ember__adam_args *a);
    ember__fwd_fn fwd[EMBER_OP_COUNT];
} ember_backend;

/* The backend of a non-CPU device, loading it on first use; fails with a clear
   message when it cannot be loaded or the device does not exist. */
int ember__backend_get(int device, const ember_backend **out);
/* The backend of a device some tensor already lives on. */
const ember_backend *ember__backend(int device);
/* Copies src into dst (one shape; src may broadcast) with dtype conversion,
   by the kernels of dst's device; src is on that device too, or for a device
   dst a contiguous host tensor. */
int ember__copy_into(ember_tensor *dst, const ember_tensor *src);

#endif

/* cuda_backend.h: what the parts of libember_cuda share. The host side is
   C++ over the core's headers (it reads ember_tensor's fields, and calls the
   core only through the services it lends); the kernels are in the .cu files,
   reached through the ecu_launch_* functions. */
#ifndef EMBER_CUDA_BACKEND_H
#define EMBER_CUDA_BACKEND_H

#include <cuda_runtime_api.h>

#include "kernels/hd.h"   /* before the core's headers */
#include "backend.h"
#include "kernels/iter.h"

/* the core's services, set once when the backend loads */
extern const ember_core_services *ecu_core;

/* Fails with EMBER_ERR_DEVICE naming `what` and CUDA's message unless err is
   cudaSuccess (clearing CUDA's sticky last error). */
int ecu_check(cudaError_t err, const char *what);

/* ------------------------------------------------------------------ memory (alloc.cpp) */
void *ecu_alloc(size_t nbytes);          /* NULL when the device is out of memory */
void ecu_free(void *p, size_t nbytes);   /* nbytes as allocated */
int ecu_memory_stats(ember_cuda_memory_stats_t *out);   /* bytes counted in whole size classes */
int ecu_empty_cache(void);                               /* returns the cached blocks to CUDA */
void *ecu_host_alloc(size_t nbytes);   /* pinned host memory (pinned.cpp); NULL when there is none */
void ecu_host_free(void *p);           /* reused once the copies queued before this have finished */

/* ------------------------------------------------------------------ copies (memory.cpp) */
int ecu_memcpy(void *dst, const void *src, size_t nbytes, int kind);
int ecu_read_scalar(const ember_tensor *t, double *out);
int ecu_fill(ember_tensor *t, double value);
int ecu_copy(ember_tensor *dst, const ember_tensor *src);
int ecu_synchronize(void);

/* ------------------------------------------------------------------ the iterator (iter.cpp)
   Describes n operands (output first, the others broadcast to its shape). */
void ecu_iter_init(ecu_iter *it, int n, ember_tensor *const *ts);
/* Merges what dims it can and picks the index width, for a description
   filled by hand (ecu_iter_init calls it). */
void ecu_iter_finish(ecu_iter *it);

/* ------------------------------------------------------------------ kernels (elementwise.cu)
   compute: an ecu_compute. Each returns the launch's cudaError_t. */
extern "C" {
cudaError_t ecu_launch_unary(const ecu_iter *it, int op, const struct ecu_unary_attrs *a, int compute);
cudaError_t ecu_launch_binary(const ecu_iter *it, int op, int compute);
cudaError_t ecu_launch_convert(const ecu_iter *it);
cudaError_t ecu_launch_fill(const ecu_iter *it, double value);
cudaError_t ecu_launch_where(const ecu_iter *it);
cudaError_t ecu_launch_reduce(const struct ecu_reduce *r, int op, int compute);   /* reduce.cu */
cudaError_t ecu_launch_softmax(const struct ecu_reduce *r, int op);
/* reduce_dim.cu: var, logsumexp, norm; max/min along a dim (values: NULL for argmax, argmin) */
cudaError_t ecu_launch_stat(const struct ecu_reduce *r, const struct ecu_stat *s);
cudaError_t ecu_launch_arg_reduce(const struct ecu_reduce *r, int sign, int compute, char *values, int esize);
/* cells.cu: lstm_cell (lstm) or gru_cell, in float or (f64) double */
cudaError_t ecu_launch_cell(const struct ecu_cell *c, bool lstm, bool f64);
/* matmul_int.cu: one batch matrix of an integer product */
cudaError_t ecu_launch_int_gemm(const struct ecu_int_gemm *g);
/* index.cu */
cudaError_t ecu_launch_gather(const struct ecu_index *x);
cudaError_t ecu_launch_scatter_add(const struct ecu_index *x);
/* *first becomes the least linear position of an element outside [0, max], if any is */
cudaError_t ecu_launch_find_outside(const ecu_iter *t, int64_t max, unsigned long long *first);
}

/* ------------------------------------------------------------------ random draws, optimizer steps
   (random.cu, optim.cu): the backend's slots of the same names */
int ecu_random(ember_tensor *t, const struct ember__draw *d);
int ecu_sgd_step(ember_tensor *p, const ember_tensor *g, ember_tensor *buf, const ember__sgd_args *a);
int ecu_adam_step(ember_tensor *p, const ember_tensor *g, ember_tensor *m, ember_tensor *v, ember_tensor *vmax,
                  const ember__adam_args *a);

/* ------------------------------------------------------------------ ops (ops.cpp) */
int ecu_fwd_unary(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);
int ecu_fwd_binary(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);
int ecu_fwd_where(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);
int ecu_fwd_to_dtype(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);
int ecu_fwd_matmul(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);   /* matmul.cpp */
int ecu_fwd_reduce(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);   /* reduce.cpp */
int ecu_fwd_softmax(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);
int ecu_fwd_arg_reduce(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);
int ecu_fwd_gather(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);   /* index.cpp */
int ecu_fwd_scatter_add(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);
int ecu_fwd_cell(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);   /* cells.cpp */
/* The first element (in t's row-major order) of the integer tensor t outside
   [0, max] on the device: *pos its position and *value its value, or *pos -1
   when there is none. Synchronises; name: the op, for errors. */
int ecu_find_outside(const char *name, ember_tensor *t, int64_t max, int64_t *pos, int64_t *value);
/* The slices of a along the dims in mask, described for the kernels: reduced
   into a contiguous o, or (rowwise) each written to the same place in o, a
   tensor of a's shape. */
void ecu_reduce_init(struct ecu_reduce *r, const ember_tensor *a, unsigned mask, ember_tensor *o, bool rowwise);
/* The walk of an index op over `shape` (res's ndim): res and src step over
   it, one of them indexed along dim by idx (res for the scatters, src for
   index_select and gather); idx has the walk's shape (gather_like: gather,
   scatter_add) or is 1-D or 0-d, stepping along dim only. */
void ecu_index_init(struct ecu_index *x, const int64_t *shape, ember_tensor *res, ember_tensor *src,
                    ember_tensor *idx, int dim, bool gather_like, bool scatter);

/* ------------------------------------------------------------------ conv2d (conv.cpp, cuDNN), pooling (pool.cpp) */
int ecu_fwd_conv(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);
int ecu_fwd_pool(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);

/* t's first element on the device */
inline char *ecu_data(const ember_tensor *t)
{
    return (char *)t->storage->data + t->offset * ecu_core->dtype_size(t->dtype);
}

/* a tensor reference released with its scope */
struct ecu_owned {
    ember_tensor *t = nullptr;
    ecu_owned() = default;
    ecu_owned(const ecu_owned &) = delete;
    ecu_owned &operator=(const ecu_owned &) = delete;
    ~ecu_owned()
    {
        if (t) ecu_core->release(t);
    }
};

/* A tensor's elements in the contiguous row-major layout a kernel or a
   library call reads: its own, or a contiguous copy (on the device) that
   lives as long as the operand. */
struct ecu_operand {
    ecu_owned copy;
    const char *data = nullptr;
};
int ecu_operand_init(ecu_operand *o, ember_tensor *t);   /* pool.cpp */

namespace ember_cuda {
struct pool_args;
}
extern "C" {
/* op's kernel over the contiguous src into dst (max_pool2d: and the indices into idx) */
cudaError_t ecu_launch_pool(int op, const ember_cuda::pool_args *a, const char *src, char *dst, int64_t *idx);
/* max_pool2d_backward: g added at its indices into gx (float, or double for
   float64), the smallest k with a bad index into *bad (left as is when none) */
cudaError_t ecu_launch_max_pool_backward(const ember_cuda::pool_args *a, const char *g, const int64_t *idx, void *gx,
                                         unsigned long long *bad);
}

#endif

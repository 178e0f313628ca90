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
cudaError_t ecu_launch_unary(const ecu_iter *it, int op, int compute);
cudaError_t ecu_launch_binary(const ecu_iter *it, int op, int compute);
cudaError_t ecu_launch_convert(const ecu_iter *it);
cudaError_t ecu_launch_fill(const ecu_iter *it, double value);
cudaError_t ecu_launch_where(const ecu_iter *it);
cudaError_t ecu_launch_reduce(const struct ecu_reduce *r, int op, int compute);   /* reduce.cu */
cudaError_t ecu_launch_softmax(const struct ecu_reduce *r, int op);
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
/* The slices of a along the dims in mask, described for the kernels: reduced
   into a contiguous o, or (rowwise) each written to the same place in o, a
   tensor of a's shape. */
void ecu_reduce_init(struct ecu_reduce *r, const ember_tensor *a, unsigned mask, ember_tensor *o, bool rowwise);

#endif

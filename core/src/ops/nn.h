/* nn.h: what the neural-network kernels (conv.c, pool.c) share: argument
   checks, window geometry, the attrs of their public entry points, and the
   dtype rule: float32 and float64 compute natively; float16 and bfloat16
   compute in float32 and round once at the end; integer inputs are an error.
   N batch, C channels, H x W spatial. */
#ifndef EMBER_NN_H
#define EMBER_NN_H

#include "ops.h"

/* The dtype kernels compute in: float32 for the half types. */
static inline int nn_compute_dtype(int dt) { return dt == EMBER_FLOAT64 ? EMBER_FLOAT64 : EMBER_FLOAT32; }

/* output extent of a window sweep, or a negative number when the window does not fit */
/* Strides, paddings, dilations, kernel sizes and groups must be below 2^31
   (cuDNN's int): with sizes bounded by ember__check_shape (2^50) that keeps
   every sum and product of the geometry below in int64. True when the n
   values of v are. */
static inline bool nn_attrs_in_range(int n, const int64_t *v)
{
    for (int i = 0; i < n; i++)
        if (v[i] > INT32_MAX) return false;
    return true;
}

static inline int64_t nn_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil)
{
    int64_t span = dil * (k - 1) + 1;
    if (in + 2 * pad < span) return -1;
    return (in + 2 * pad - span) / stride + 1;
}

/* Converts a float32/float64 result into the caller's dtype (steals res). */
int ember__nn_finish(ember_tensor *res, int dt, ember_tensor **out);
int ember__nn_need_float(const char *op, const char *what, const ember_tensor *t);
int ember__nn_need_4d(const char *op, const char *what, const ember_tensor *t);
/* The operands of a CPU kernel (layer_norm.c, cross_entropy.c): true when all
   n are on the CPU; contiguous copies of those that are not (in their own
   dtype, the others retained), released by ember__nn_release. */
bool ember__nn_on_cpu(int n, ember_tensor *const *in);
int ember__nn_contiguous(ember_tensor *const *in, int n, ember_tensor **c);
void ember__nn_release(ember_tensor **c, int n);
/* nhwc.c, the channels_last layout (ember__nhwc_dense in ops.h; a tensor
   may be both it and contiguous): whether t is so and not also contiguous,
   on the CPU (the layout a kernel then follows); a new uninitialised tensor of shape
   (N, C, H, W) so laid out; t in dtype and (nhwc) that layout or else
   contiguous, t itself where it already is; and nn_finish into the layout. */
bool ember__is_nhwc(const ember_tensor *t);
int ember__new_nhwc(const int64_t *shape, int dtype, ember_tensor **out);
int ember__layout_as(ember_tensor *t, int dtype, bool nhwc, ember_tensor **out);
int ember__nn_finish_layout(ember_tensor *res, int dt, bool nhwc, ember_tensor **out);
/* grain in rows so a task moves at least ~32K elements */
int64_t ember__nn_rows_grain(int64_t row_elems);

/* max pooling of planes [q0, q1) of x (float32 or float64) into y and the
   positions ix (or, ix NULL, the values only) at the vector width, for any
   window (pool_window.c); false, having done nothing, when its workspace is
   not to be had */
bool ember__maxpool_sweeps(const ember__pool_geom *p, int dt, const void *x, void *y, int64_t *ix, int64_t q0,
                           int64_t q1);
/* average pooling of planes [q0, q1) of src into dst, or with bwd its adjoint
   added into dst (zeroed), the same way */
bool ember__avgpool_sweeps(const ember__pool_geom *p, int dt, const void *src, void *dst, int64_t q0, int64_t q1,
                           bool bwd);

/* pool_nhwc.c: pooling of channels_last tensors (ember__is_nhwc), the
   results channels_last: max_pool2d's values and indices into out[0] and
   out[1] (ys their shape; out[1] left NULL with values_only); its adjoint from g and the indices into a
   gradient of shape xs; average pooling of src, or (bwd) its adjoint, into
   a tensor of shape `shape`. */
int ember__max_pool2d_nhwc(const ember__pool_geom *p, ember_tensor *x, const int64_t *ys, bool values_only,
                           ember_tensor **out);
int ember__max_pool2d_backward_nhwc(const ember__pool_geom *p, ember_tensor *g, ember_tensor *idx, const int64_t *xs,
                                    ember_tensor **out);
int ember__avg_pool2d_nhwc(const ember__pool_geom *p, bool bwd, ember_tensor *src, const int64_t *shape,
                           ember_tensor **out);

/* attrs: i[0..1], i[2..3] and i[4..5] from three pairs (c may be NULL) */
void ember__nn_set_pairs(ember_attrs *at, const int64_t *a, const int64_t *b, const int64_t *c);
/* attrs i[7] ndim and i[8..11]: the shape a backward op produces */
int ember__nn_set_shape(ember_attrs *at, const char *op, const int64_t *shape);
int ember__nn_attr_shape(const char *op, const ember_attrs *at, int64_t *shape);

#define NEED_ARGS(op, ...)                                                                     \
    do {                                                                                       \
        const void *args_[] = {__VA_ARGS__};                                                   \
        for (size_t k_ = 0; k_ < sizeof args_ / sizeof args_[0]; k_++)                         \
            if (!args_[k_]) return ember__fail(EMBER_ERR_ARG, "%s: an argument is NULL", op);  \
    } while (0)

#endif

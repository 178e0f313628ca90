/* nhwc.c: the channels_last layout (PyTorch's model) as the nn kernels see
   it: a 4-D tensor of shape (N, C, H, W) whose strides are those of a
   row-major (N, H, W, C), so a pixel's channels are adjacent. Such a tensor
   is an ordinary strided tensor to every other op; the kernels that have an
   NHWC path (oneDNN's convolutions, batch norm, pooling) take it and give
   their results in it, the others convert once (docs/nn.md).
   N batch, C channels, H x W spatial. */
#include "nn.h"

/* ops.h: PyTorch's is_contiguous(channels_last), dims 1, 3, 2, 0 dense in
   that order */
bool ember__nhwc_dense(const ember_tensor *t)
{
    if (t->ndim != 4) return false;
    static const int order[4] = {1, 3, 2, 0};
    int64_t expect = 1;
    for (int i = 0; i < 4; i++) {
        int d = order[i];
        if (t->shape[d] == 1) continue;
        if (t->strides[d] != expect) return false;
        expect *= t->shape[d];
    }
    return true;
}

/* nn.h */
bool ember__is_nhwc(const ember_tensor *t)
{
    return t->ndim == 4 && !t->is_contiguous && t->storage->device == EMBER_CPU && ember__nhwc_dense(t);
}

/* nn.h */
int ember__new_nhwc(const int64_t *shape, int dtype, ember_tensor **out)
{
    const int64_t C = shape[1], H = shape[2], W = shape[3];
    EMBER_TRY(ember__new(4, shape, dtype, EMBER_CPU, out));
    ember_tensor *t = *out;
    t->strides[1] = 1;
    t->strides[3] = C;
    t->strides[2] = W * C;
    t->strides[0] = H * W * C;
    ember__refresh_geometry(t);
    return EMBER_OK;
}

/* nn.h */
int ember__layout_as(ember_tensor *t, int dtype, bool nhwc, ember_tensor **out)
{
    if (!nhwc || t->ndim != 4) return ember__contiguous_as(t, dtype, out);
    if (t->dtype == dtype && ember__nhwc_dense(t)) {
        ember_tensor_retain(t);
        *out = t;
        return EMBER_OK;
    }
    ember_tensor *c = NULL;
    EMBER_TRY(ember__new_nhwc(t->shape, dtype, &c));
    int rc = ember__copy_kernel(c, t);
    if (rc < 0) {
        ember_tensor_release(c);
        return rc;
    }
    *out = c;
    return EMBER_OK;
}

/* nn.h */
int ember__nn_finish_layout(ember_tensor *res, int dt, bool nhwc, ember_tensor **out)
{
    int rc = ember__layout_as(res, dt, nhwc, out);
    ember_tensor_release(res);
    return rc;
}

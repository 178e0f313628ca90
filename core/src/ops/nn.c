/* nn.c: the helpers conv.c and pool.c share (nn.h). */
#include "nn.h"

#include <string.h>

int ember__nn_finish(ember_tensor *res, int dt, ember_tensor **out)
{
    int rc = ember__contiguous_as(res, dt, out);
    ember_tensor_release(res);
    return rc;
}

int ember__nn_need_float(const char *op, const char *what, const ember_tensor *t)
{
    if (ember__is_float(t->dtype)) return EMBER_OK;
    char s[200];
    return ember__fail(EMBER_ERR_DTYPE, "%s: %s must be a floating tensor, got %s %s", op, what,
                       ember_dtype_name(t->dtype), ember__tshape(s, t));
}

int ember__nn_need_4d(const char *op, const char *what, const ember_tensor *t)
{
    if (t->ndim == 4) return EMBER_OK;
    char s[200];
    return ember__fail(EMBER_ERR_SHAPE, "%s: %s must be 4-D (N, C, H, W), got shape %s", op, what,
                       ember__tshape(s, t));
}

int64_t ember__nn_rows_grain(int64_t row_elems)
{
    int64_t gr = row_elems > 0 ? EMBER_PARALLEL_GRAIN / row_elems : 1;
    return gr < 1 ? 1 : gr;
}

void ember__nn_set_pairs(ember_attrs *at, const int64_t *a, const int64_t *b, const int64_t *c)
{
    memset(at, 0, sizeof *at);
    at->i[0] = a[0], at->i[1] = a[1];
    at->i[2] = b[0], at->i[3] = b[1];
    if (c) at->i[4] = c[0], at->i[5] = c[1];
}

int ember__nn_set_shape(ember_attrs *at, const char *op, const int64_t *shape)
{
    if (!shape) return ember__fail(EMBER_ERR_ARG, "%s: the result shape is NULL", op);
    at->i[7] = 4;
    for (int d = 0; d < 4; d++) at->i[8 + d] = shape[d];
    return EMBER_OK;
}

int ember__nn_attr_shape(const char *op, const ember_attrs *at, int64_t *shape)
{
    if (at->i[7] != 4)
        return ember__fail(EMBER_ERR_SHAPE, "%s: the result shape must be 4-D, got %lld dims", op,
                           (long long)at->i[7]);
    for (int d = 0; d < 4; d++) {
        shape[d] = at->i[8 + d];
        if (shape[d] < 0) return ember__fail(EMBER_ERR_SHAPE, "%s: negative size in the result shape", op);
    }
    return ember__check_shape(op, 4, shape, NULL);
}

bool ember__nn_on_cpu(int n, ember_tensor *const *in)
{
    for (int i = 0; i < n; i++)
        if (in[i]->storage->device != EMBER_CPU) return false;
    return true;
}

int ember__nn_contiguous(ember_tensor *const *in, int n, ember_tensor **c)
{
    for (int i = 0; i < n; i++) {
        int rc = ember__contiguous_as(in[i], in[i]->dtype, &c[i]);
        if (rc < 0) {
            ember__nn_release(c, i);
            return rc;
        }
    }
    return EMBER_OK;
}

void ember__nn_release(ember_tensor **c, int n)
{
    for (int i = 0; i < n; i++) ember_tensor_release(c[i]);
}

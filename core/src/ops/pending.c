/* pending.c: TEMPORARY weak placeholders so the library links while op families are
 * being written in parallel; each family file defines the strong symbol. Deleted once
 * every family has landed. */
#include "ops.h"






















__attribute__((weak)) int fwd_conv2d(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_conv2d_backward_input(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_conv2d_backward_weight(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_max_pool2d(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_max_pool2d_backward(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_avg_pool2d(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_avg_pool2d_backward(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

/* public nn entry points, until ops/nn.c lands */
__attribute__((weak)) int ember_conv2d(ember_tensor *x, ember_tensor *w, const int64_t *stride, const int64_t *padding,
                                       const int64_t *dilation, int64_t groups, ember_tensor **out)
{
    (void)x; (void)w; (void)stride; (void)padding; (void)dilation; (void)groups; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "conv2d is not implemented yet");
}
__attribute__((weak)) int ember_conv2d_backward_input(ember_tensor *g, ember_tensor *w, const int64_t *x_shape,
                                                      const int64_t *stride, const int64_t *padding,
                                                      const int64_t *dilation, int64_t groups, ember_tensor **out)
{
    (void)g; (void)w; (void)x_shape; (void)stride; (void)padding; (void)dilation; (void)groups; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "conv2d_backward_input is not implemented yet");
}
__attribute__((weak)) int ember_conv2d_backward_weight(ember_tensor *x, ember_tensor *g, const int64_t *w_shape,
                                                       const int64_t *stride, const int64_t *padding,
                                                       const int64_t *dilation, int64_t groups, ember_tensor **out)
{
    (void)x; (void)g; (void)w_shape; (void)stride; (void)padding; (void)dilation; (void)groups; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "conv2d_backward_weight is not implemented yet");
}
__attribute__((weak)) int ember_max_pool2d(ember_tensor *x, const int64_t *kernel, const int64_t *stride,
                                           const int64_t *padding, ember_tensor **values, ember_tensor **indices)
{
    (void)x; (void)kernel; (void)stride; (void)padding; (void)values; (void)indices;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "max_pool2d is not implemented yet");
}
__attribute__((weak)) int ember_max_pool2d_backward(ember_tensor *g, ember_tensor *indices, const int64_t *x_shape,
                                                    ember_tensor **out)
{
    (void)g; (void)indices; (void)x_shape; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "max_pool2d_backward is not implemented yet");
}
__attribute__((weak)) int ember_avg_pool2d(ember_tensor *x, const int64_t *kernel, const int64_t *stride,
                                           const int64_t *padding, ember_tensor **out)
{
    (void)x; (void)kernel; (void)stride; (void)padding; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "avg_pool2d is not implemented yet");
}
__attribute__((weak)) int ember_avg_pool2d_backward(ember_tensor *g, const int64_t *x_shape, const int64_t *kernel,
                                                    const int64_t *stride, const int64_t *padding, ember_tensor **out)
{
    (void)g; (void)x_shape; (void)kernel; (void)stride; (void)padding; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "avg_pool2d_backward is not implemented yet");
}

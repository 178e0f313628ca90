/* pending.c: TEMPORARY weak placeholders so the library links while op families are
 * being written in parallel; each family file defines the strong symbol. Deleted once
 * every family has landed. */
#include "ops.h"

__attribute__((weak)) int fwd_arg_reduce(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_cat(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_expand(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_gather(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_index_add(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_index_select(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_matmul(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_minmax_dim(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_narrow(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_permute(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_reduce(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_reshape(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_scatter_add(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_select(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_softmax(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_squeeze(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_stack(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_sum_to(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_transpose(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_unsqueeze(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

__attribute__((weak)) int fwd_view(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    (void)nin; (void)in; (void)at; (void)out;
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s is not implemented yet", ember__ops[op].name);
}

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

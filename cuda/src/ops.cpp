/* ops.cpp: the forwards of the elementwise ops on the device (BINARY and
   UNARY lines, gelu, clamp, relu_backward, where, to(dtype), clone): each
   checks its operands and picks dtypes as the CPU forward does
   (core/src/ops/elementwise.c), makes the output and launches one kernel
   over the iterator. */
#include "cuda_backend.h"
#include "kernels/elementwise.h"

using ember_cuda::is_float_dtype;

static int launched(cudaError_t err, int op) { return ecu_check(err, ecu_core->op_names[op]); }

/* an op the elementwise kernels do not compute (a table entry pointing here by mistake) */
static int no_kernel(int op)
{
    return ecu_core->fail(EMBER_ERR_UNSUPPORTED, "%s: no elementwise device kernel computes it",
                          ecu_core->op_names[op]);
}

/* UNARY lines, GELU (i[0] tanh form) and CLAMP (i[0] has_lo, i[1] has_hi, f[0] lo, f[1] hi) */
int ecu_fwd_unary(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const ember_tensor *a = in[0];
    if (!ember__is_unary_op(op)) return no_kernel(op);
    int dt = ecu_core->unary_dtype(op, a->dtype);
    EMBER_TRY(ecu_core->new_tensor(a->ndim, a->shape, dt, a->storage->device, out));
    ember_tensor *ts[2] = {*out, in[0]};
    ecu_iter it;
    ecu_iter_init(&it, 2, ts);
    ecu_unary_attrs ua = {};
    if (op == EMBER_OP_GELU) ua.approx = (int32_t)at->i[0];
    if (op == EMBER_OP_CLAMP) ua = {0, (int32_t)at->i[0], (int32_t)at->i[1], at->f[0], at->f[1]};
    return launched(ecu_launch_unary(&it, op, &ua, ember_cuda::unary_compute(op, dt)), op);
}

/* PyTorch's rule, as the CPU's ember__no_negative_exponent: an integer to a
   negative integer power is an error, naming the first such exponent */
static int no_negative_exponent(ember_tensor *e, int ct)
{
    int64_t pos, v;
    EMBER_TRY(ecu_find_outside("pow", e, INT64_MAX, &pos, &v));
    if (pos < 0) return EMBER_OK;
    return ecu_core->fail(EMBER_ERR_ARG, "pow: integers to negative integer powers are not allowed "
                          "(exponent %lld, dtype %s)", (long long)v, ecu_core->dtype_name(ct));
}

int ecu_fwd_binary(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    const char *name = ecu_core->op_names[op];
    int nd;
    int64_t shape[EMBER_MAX_DIMS];
    EMBER_TRY(ecu_core->broadcast_shape(name, 2, in, &nd, shape));
    if (!ember_cuda::has_binary(op)) return no_kernel(op);
    int ct, odt;   /* relu_backward: its operands' common dtype, as the CPU's */
    if (op == EMBER_OP_RELU_BACKWARD) odt = ct = ecu_core->result_type(2, in);
    else odt = ecu_core->binary_types(op, in[0], in[1], &ct);
    if (op == EMBER_OP_POW && !is_float_dtype(ct)) EMBER_TRY(no_negative_exponent(in[1], ct));
    EMBER_TRY(ecu_core->new_tensor(nd, shape, odt, in[0]->storage->device, out));
    ember_tensor *ts[3] = {*out, in[0], in[1]};
    ecu_iter it;
    ecu_iter_init(&it, 3, ts);
    return launched(ecu_launch_binary(&it, op, ember_cuda::binary_compute(ct)), op);
}

/* where(cond, a, b): a and b promoted to one dtype, cond any dtype */
int ecu_fwd_where(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    int nd;
    int64_t shape[EMBER_MAX_DIMS];
    EMBER_TRY(ecu_core->broadcast_shape("where", 3, in, &nd, shape));
    EMBER_TRY(ecu_core->new_tensor(nd, shape, ecu_core->result_type(2, in + 1), in[0]->storage->device, out));
    ember_tensor *ts[4] = {*out, in[0], in[1], in[2]};
    ecu_iter it;
    ecu_iter_init(&it, 4, ts);
    return launched(ecu_launch_where(&it), op);
}

/* to(dtype) and clone: i[0] = dtype (clone: the input's) */
int ecu_fwd_to_dtype(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const ember_tensor *a = in[0];
    int dt = op == EMBER_OP_CLONE ? a->dtype : (int)at->i[0];
    if (ecu_core->dtype_size(dt) == 0)
        return ecu_core->fail(EMBER_ERR_DTYPE, "to: unknown dtype %d", dt);
    EMBER_TRY(ecu_core->new_tensor(a->ndim, a->shape, dt, a->storage->device, out));
    return ecu_copy(*out, a);
}

/* reduce.cpp: sum, mean, var, logsumexp, norm, max and min on the device,
   max/min along a dim with indices, argmax and argmin, and softmax and
   log_softmax along a dim. The core plans a reduction's result
   (ember__reduce_plan_make: shape, dtype, the empty cases, the errors); one
   kernel reduces every slice, or normalises every row (kernels/reduce.h,
   kernels/reduce_dim.h). */
#include "cuda_backend.h"
#include "kernels/reduce_dim.h"

static bool is_stat(int op) { return op == EMBER_OP_VAR || op == EMBER_OP_LOGSUMEXP || op == EMBER_OP_NORM; }

/* the launch of op's kernel over r */
static cudaError_t launch_reduce(int op, const ecu_reduce &r, const ember__reduce_plan &p, int dtype)
{
    if (!is_stat(op)) return ecu_launch_reduce(&r, op, ember_cuda::reduce_compute(op, dtype));
    ecu_stat s = {op, p.unbiased, p.p};
    return ecu_launch_stat(&r, &s);
}

/* SUM, MEAN, VAR, LOGSUMEXP, NORM, AMAX_ALL, AMIN_ALL (attrs: core/src/ops/reduce.c) */
int ecu_fwd_reduce(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    if (!is_stat(op) && !ember_cuda::has_combine(op))
        return ecu_core->fail(EMBER_ERR_UNSUPPORTED, "%s: no device reduction kernel computes it",
                              ecu_core->op_names[op]);
    ember__reduce_plan p;
    const ember_tensor *a = in[0];
    EMBER_TRY(ecu_core->reduce_plan(op, a, at, &p));
    EMBER_TRY(ecu_core->new_tensor(p.ndim, p.shape, p.dtype, a->storage->device, out));
    if ((*out)->numel == 0) return EMBER_OK;
    if (p.len == 0) return ecu_fill(*out, p.empty);
    ecu_reduce r;
    ecu_reduce_init(&r, a, p.mask, *out, false);
    return ecu_check(launch_reduce(op, r, p, a->dtype), ecu_core->op_names[op]);
}

/* MAX_DIM, MIN_DIM (outputs: values, int64 indices), ARGMAX, ARGMIN (the
   indices): i[0] dim (-1: all), i[1] keepdim */
int ecu_fwd_arg_reduce(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const ember_tensor *a = in[0];
    ember__reduce_plan p;
    EMBER_TRY(ecu_core->reduce_plan(op, a, at, &p));
    bool with_values = op == EMBER_OP_MAX_DIM || op == EMBER_OP_MIN_DIM;
    int device = a->storage->device;
    ember_tensor **idx = &out[with_values ? 1 : 0];
    if (with_values) EMBER_TRY(ecu_core->new_tensor(p.ndim, p.shape, a->dtype, device, &out[0]));
    EMBER_TRY(ecu_core->new_tensor(p.ndim, p.shape, EMBER_INT64, device, idx));
    if ((*idx)->numel == 0) return EMBER_OK;
    ecu_reduce r;
    ecu_reduce_init(&r, a, p.mask, *idx, false);
    int sign = op == EMBER_OP_MAX_DIM || op == EMBER_OP_ARGMAX ? 1 : -1;
    char *values = with_values ? (char *)out[0]->storage->data : NULL;   /* new: contiguous from 0 */
    int compute = ember_cuda::reduce_compute(EMBER_OP_AMAX_ALL, a->dtype);
    return ecu_check(ecu_launch_arg_reduce(&r, sign, compute, values, ecu_core->dtype_size(a->dtype)),
                     ecu_core->op_names[op]);
}

/* SOFTMAX, LOG_SOFTMAX: i[0] dim. Integer inputs give float32, as on the CPU. */
int ecu_fwd_softmax(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const ember_tensor *a = in[0];
    int dt = ember_cuda::is_float_dtype(a->dtype) ? a->dtype : (int)EMBER_FLOAT32;
    EMBER_TRY(ecu_core->new_tensor(a->ndim, a->shape, dt, a->storage->device, out));
    if ((*out)->numel == 0) return EMBER_OK;
    if (a->ndim == 0) return ecu_fill(*out, op == EMBER_OP_SOFTMAX ? 1 : 0);   /* one element: 1, log 0 */
    ecu_reduce r;
    ecu_reduce_init(&r, a, 1u << at->i[0], *out, true);
    return ecu_check(ecu_launch_softmax(&r, op), ecu_core->op_names[op]);
}

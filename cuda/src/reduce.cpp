/* reduce.cpp: sum, mean, max and min on the device, and softmax and
   log_softmax along a dim. The core plans a reduction's result
   (ember__reduce_plan_make: shape, dtype, the empty cases, the errors); one
   kernel reduces every slice, or normalises every row (kernels/reduce.h). */
#include "cuda_backend.h"
#include "kernels/reduce.h"

/* SUM, MEAN, AMAX_ALL, AMIN_ALL (attrs: core/src/ops/reduce.c) */
int ecu_fwd_reduce(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    ember__reduce_plan p;
    const ember_tensor *a = in[0];
    EMBER_TRY(ecu_core->reduce_plan(op, a, at, &p));
    EMBER_TRY(ecu_core->new_tensor(p.ndim, p.shape, p.dtype, a->storage->device, out));
    if ((*out)->numel == 0) return EMBER_OK;
    if (p.len == 0) return ecu_fill(*out, p.empty);
    ecu_reduce r;
    ecu_reduce_init(&r, a, p.mask, *out, false);
    return ecu_check(ecu_launch_reduce(&r, op, ember_cuda::reduce_compute(op, a->dtype)), ecu_core->op_names[op]);
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

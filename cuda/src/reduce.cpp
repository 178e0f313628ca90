/* reduce.cpp: sum, mean, max and min on the device. The core plans the
   result (ember__reduce_plan_make: shape, dtype, the empty cases, the
   errors); one kernel reduces every slice (kernels/reduce.h). */
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
    ecu_reduce_init(&r, a, p.mask, *out);
    return ecu_check(ecu_launch_reduce(&r, op, ember_cuda::reduce_compute(op, a->dtype)), ecu_core->op_names[op]);
}

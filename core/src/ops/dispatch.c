/* dispatch.c: the op info table and the one funnel every op goes through:
   argument checks, device routing, the forward, then autograd recording. */
#include "ops.h"
#include "../autograd.h"
#include "../backend.h"
#include "../dtr.h"
#include "../profile.h"
#include "../plan/plan.h"

#include <string.h>

const ember__op_info ember__ops[EMBER_OP_COUNT] = {
#define OP(E, n, ni, no, fwd, grad, flags, save) [EMBER_OP_##E] = {#n, ni, no, flags, save, fwd},
#include "ops.def"
};

/* The forward of op on device: the core's, or the device backend's. */
static int forward(int op, int device, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    const ember__op_info *info = &ember__ops[op];
    if (device == EMBER_CPU || (info->flags & OPF_ANY_DEVICE)) return info->fwd(op, nin, in, at, out);
    const ember_backend *be = ember__backend(device);
    if (!be->fwd[op]) {
        char dev[32];
        return ember__fail(EMBER_ERR_DEVICE, "%s is not implemented for %s", info->name,
                           ember__device_name(dev, device));
    }
    return be->fwd[op](op, nin, in, at, out);
}

/* forward, its time added to op's account (the op profiler is on) */
static int profiled_forward(int op, int device, int nin, ember_tensor *const *in, const ember_attrs *at,
                            ember_tensor **out)
{
    ember__profile_mark m = ember__profile_enter();
    int rc = forward(op, device, nin, in, at, out);
    ember__profile_leave(op, m);
    return rc;
}

/* A number operand of a binary op or of where that the integer dtype the op
   computes in cannot hold raises (ember__check_numbers) instead of wrapping:
   int32 == 2^40 would compare 0 and uint8 + 300 give 44. run calls it when
   some operand is an integer number. */
static int number_operands(int op, int nin, ember_tensor *const *in)
{
    int ct;
    if (nin == 2 && ember__ops[op].fwd == ember__ops[EMBER_OP_ADD].fwd) {
        ember__binary_types(op, in[0], in[1], &ct);
        return ember__check_numbers(ember__ops[op].name, 2, in, ct);
    }
    if (nin == 3 && op == EMBER_OP_WHERE) {
        ct = ember__result_type(2, in + 1);
        return ember__check_numbers("where", 2, in + 1, ct);
    }
    return EMBER_OK;
}

static int dispatch(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);

static int run(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    const ember__op_info *info = &ember__ops[op];
    int nout = info->nout;
    if (!out) return ember__fail(EMBER_ERR_ARG, "%s: the output pointer is NULL", info->name);
    for (int k = 0; k < nout; k++) out[k] = NULL;
    if (nin > 0 && !in) return ember__fail(EMBER_ERR_ARG, "%s: inputs are NULL", info->name);
    /* one pass: the checks, the device the op runs on (its first input's that
       is not a wrapped number, a Lua or C number made a 0-d CPU tensor, else
       its first input's), whether the others share it, and integer numbers */
    int device = -1, first = EMBER_CPU, rc = EMBER_OK;
    bool int_numbers = false, one_device = true;
    for (int i = 0; i < nin; i++) {
        const ember_tensor *t = in[i];
        if (!t) return ember__fail(EMBER_ERR_ARG, "%s: argument %d is NULL", info->name, i + 1);
        if (t->refcount <= 0)
            return ember__fail(EMBER_ERR_ARG, "%s: argument %d is a tensor that was released", info->name, i + 1);
        int dev = t->storage->device;
        if (i == 0) first = dev;
        if (ember__host_number(t)) {
            int_numbers |= !ember__is_float(t->dtype);
            continue;
        }
        if (device < 0) device = dev;
        else one_device &= dev == device;
    }
    if (EMBER_UNLIKELY(int_numbers)) EMBER_TRY(number_operands(op, nin, in));
    if (device < 0) device = first;
    /* wrapped numbers go to the op's device, as PyTorch's CPU scalars do */
    ember_tensor *moved[ITER_MAX], *use[ITER_MAX];
    bool moving = device != EMBER_CPU && op != EMBER_OP_TO_DEVICE && nin <= ITER_MAX;
    if (moving) {
        ember_attrs to = {{device}, {0}};
        for (int i = 0; i < nin; i++) moved[i] = NULL;
        for (int i = 0; i < nin && rc == EMBER_OK; i++) {
            use[i] = in[i];
            if (ember__host_number(in[i])) rc = run(EMBER_OP_TO_DEVICE, 1, &in[i], &to, &moved[i]);
            if (moved[i]) {
                moved[i]->wrapped_number = 1;   /* it still promotes as a number does */
                use[i] = moved[i];
            }
        }
        in = use;
    }
    if (rc == EMBER_OK && op != EMBER_OP_TO_DEVICE && (moving || !one_device))
        rc = ember__same_device(info->name, nin, in);
    if (rc == EMBER_OK)
        rc = ember__profiling ? profiled_forward(op, device, nin, in, at, out) : forward(op, device, nin, in, at, out);
    for (int i = 0; moving && i < nin; i++) ember_tensor_release(moved[i]);
    if (rc < 0) {
        for (int k = 0; k < nout; k++) {
            ember_tensor_release(out[k]);
            out[k] = NULL;
        }
        if (rc == EMBER_ERR_OOM) ember__fail_prefix(rc, info->name);   /* name the op that ran out */
    }
    return rc;
}

/* run, then autograd's record where a recording sees the op */
static int dispatch(int op, int nin, ember_tensor *const *in, const ember_attrs *at,
                    ember_tensor **out)
{
    EMBER_TRY(run(op, nin, in, at, out));
    if (EMBER_LIKELY(!ember__ag_active)) return EMBER_OK;
    int tracked = 0;
    for (int i = 0; i < nin; i++) tracked |= ember__ag_involved(in[i]);
    if (!tracked) return EMBER_OK;
    int rc = ember__ag_record(op, nin, in, at, ember__ops[op].nout, out);
    if (rc < 0) {
        for (int k = 0; k < ember__ops[op].nout; k++) {
            ember_tensor_release(out[k]);
            out[k] = NULL;
        }
    }
    return rc;
}

/* dispatch, through DTR's bookkeeping while it is on (dtr.h) */
static int dispatch_dtr(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    if (EMBER_UNLIKELY(ember__dtr_on)) return ember__dtr_dispatch(op, nin, in, at, out, dispatch);
    return dispatch(op, nin, in, at, out);
}

/* Under a trace (plan.h) the outermost op is recorded: the ops its forward
   or recording runs in turn are not. */
static int traced(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out, bool grad)
{
    int depth = ember__trace_enter();
    int rc = grad ? dispatch_dtr(op, nin, in, at, out) : run(op, nin, in, at, out);
    return ember__trace_leave(depth, rc, PE_OP, op, nin, in, ember__ops[op].nout, out, at, NULL);
}

int ember__run_nograd(int op, int nin, ember_tensor *const *in, const ember_attrs *at,
                      ember_tensor **out)
{
    if (EMBER_UNLIKELY(ember__trace_on)) return traced(op, nin, in, at, out, false);
    return run(op, nin, in, at, out);
}

int ember__dispatch(int op, int nin, ember_tensor *const *in, const ember_attrs *at,
                    ember_tensor **out)
{
    if (EMBER_UNLIKELY(ember__trace_on)) return traced(op, nin, in, at, out, true);
    return dispatch_dtr(op, nin, in, at, out);
}

int ember__broadcast_shape(const char *op, int n, ember_tensor *const *ts, int *ndim,
                           int64_t *shape)
{
    int nd = 0;
    for (int i = 0; i < n; i++)
        if (ts[i]->ndim > nd) nd = ts[i]->ndim;
    for (int d = 0; d < nd; d++) shape[d] = 1;
    for (int i = 0; i < n; i++) {
        const ember_tensor *t = ts[i];
        for (int d = 0; d < t->ndim; d++) {
            int64_t s = t->shape[d];
            int64_t *o = &shape[nd - t->ndim + d];
            if (s == *o || s == 1) continue;
            if (*o == 1) {
                *o = s;
                continue;
            }
            char b[8][200];
            char msg[900] = "";
            for (int k = 0; k < n; k++) {
                strcat(msg, k == 0 ? "" : k == n - 1 ? " and " : ", ");
                strcat(msg, ember__tshape(b[k & 7], ts[k]));
            }
            return ember__fail(EMBER_ERR_SHAPE, "%s: shapes %s cannot be broadcast", op, msg);
        }
    }
    *ndim = nd;
    return EMBER_OK;
}

int ember__dims_mask(const char *op, const ember_tensor *t, int ndims, const int *dims,
                     unsigned *mask)
{
    char buf[200];
    *mask = 0;
    if (ndims < 0 || (ndims > 0 && !dims))
        return ember__fail(EMBER_ERR_ARG, "%s: %d dims given%s", op, ndims, ndims > 0 ? " but the list is NULL" : "");
    if (ndims == 0) {
        *mask = (1u << t->ndim) - 1;
        return EMBER_OK;
    }
    for (int k = 0; k < ndims; k++) {
        int d = dims[k];
        if (d < 0 || d >= t->ndim)
            return ember__fail(EMBER_ERR_ARG, "%s: dim %d out of range for shape %s", op, d + 1,
                               ember__tshape(buf, t));
        if (*mask & (1u << d))
            return ember__fail(EMBER_ERR_ARG, "%s: dim %d repeated", op, d + 1);
        *mask |= 1u << d;
    }
    return EMBER_OK;
}

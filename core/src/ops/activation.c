/* activation.c: gelu's adjoint as an op, gelu_backward(g, x) = g gelu'(x),
   i[0] the tanh form (formulas.h's slopes). One pass over g and x where
   the rule (grad_rules.c) composed about ten ops before. On the CPU, g and
   x in their common float dtype (strided or broadcast ones copied first):
   float32 in float over formulas.h's float forms, float64 in double at the
   vector width, float16 and bfloat16 through double; on other devices it
   runs on the host (gelu's rule composes public ops there instead). Its own
   rule makes it differentiable. */
#include "ops.h"
#include "../formulas.h"

#include <string.h>

typedef struct {
    int dt, approx;
    const char *g, *x;
    char *out;
} gb_ctx;

EMBER_SIMD static void gb_range(void *vctx, int64_t i0, int64_t i1)
{
    const gb_ctx *c = vctx;
    if (c->dt == EMBER_FLOAT32) {   /* one loop per form, so each vectorises */
        const float *restrict g = (const float *)c->g + i0, *restrict x = (const float *)c->x + i0;
        float *restrict o = (float *)c->out + i0;
        int64_t n = i1 - i0;
        if (c->approx)
            for (int64_t i = 0; i < n; i++) o[i] = g[i] * ember__gelu_slope_tanh_f32(x[i]);
        else
            for (int64_t i = 0; i < n; i++) o[i] = g[i] * ember__gelu_slope_erf_f32(x[i]);
        return;
    }
    if (c->dt == EMBER_FLOAT64) {
        const double *restrict g = (const double *)c->g, *restrict x = (const double *)c->x;
        double *restrict o = (double *)c->out;
        for (int64_t i = i0; i < i1; i++) o[i] = g[i] * ember__gelu_slope_f64(x[i], c->approx);
        return;
    }
    size_t es = (size_t)ember_dtype_size(c->dt);
    for (int64_t i = i0; i < i1; i++)
        ember__store(c->out + (size_t)i * es, c->dt,
                     ember__load(c->g + (size_t)i * es, c->dt) *
                         ember__gelu_slope_f64(ember__load(c->x + (size_t)i * es, c->dt), c->approx));
}

int fwd_gelu_backward(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    ember_tensor *g = in[0], *x = in[1];
    char sg[200], sx[200];
    if (g->ndim != x->ndim || memcmp(g->shape, x->shape, (size_t)x->ndim * sizeof *x->shape) != 0)
        return ember__fail(EMBER_ERR_SHAPE, "gelu_backward: gradient %s and input %s differ in shape",
                           ember__tshape(sg, g), ember__tshape(sx, x));
    if (!ember__is_float(g->dtype) || !ember__is_float(x->dtype))
        return ember__fail(EMBER_ERR_DTYPE, "gelu_backward: expected floating tensors, got gradient %s and input %s",
                           ember_dtype_name(g->dtype), ember_dtype_name(x->dtype));
    if (g->storage->device != EMBER_CPU || x->storage->device != EMBER_CPU)
        return ember__on_host(op, nin, in, at, 1, out);
    int dt = ember__promote(g->dtype, x->dtype), rc = EMBER_OK;
    ember_tensor *gc = NULL, *xc = NULL, *o = NULL;
    EMBER_CHECK(ember__contiguous_as(g, dt, &gc));
    EMBER_CHECK(ember__contiguous_as(x, dt, &xc));
    EMBER_CHECK(ember__new(x->ndim, x->shape, dt, EMBER_CPU, &o));
    gb_ctx c = {dt, at->i[0] != 0, ember__ptr(gc), ember__ptr(xc), ember__ptr(o)};
    ember__parallel_for(x->numel, EMBER_PARALLEL_GRAIN / 8, gb_range, &c);
    *out = ember__take(&o);
done:
    EMBER_RELEASE(gc, xc, o);
    return rc;
}

int ember_gelu_backward(ember_tensor *g, ember_tensor *x, int approximate_tanh, ember_tensor **out)
{
    ember_tensor *in[2] = {g, x};
    ember_attrs at = {{approximate_tanh != 0}, {0}};
    return ember__dispatch(EMBER_OP_GELU_BACKWARD, 2, in, &at, out);
}

/* special.c: the polygamma functions of any order (ops.def's POLYGAMMA;
   digamma and trigamma, orders 0 and 1, are also UNARY ops of their own).
   Computed in double (polygamma.h) and rounded once into the result's dtype:
   floats keep theirs, integers and bools give float32, as PyTorch's. It runs
   on the CPU; on another device it copies its input to the host and back
   (ember__on_host). */
#include "ops.h"
#include "../backend.h"
#include "../polygamma.h"

typedef struct {
    const double *x;
    double *y;
    int n;
} poly_job;

static void poly_range(void *ctx, int64_t b, int64_t e)
{
    const poly_job *j = ctx;
    for (int64_t i = b; i < e; i++) j->y[i] = ember__polygamma(j->n, j->x[i]);
}

/* POLYGAMMA: i[0] the order n >= 0 */
int fwd_polygamma(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    ember_tensor *a = in[0], *c = NULL, *y = NULL;
    if (a->storage->device != EMBER_CPU) return ember__on_host(op, nin, in, at, 1, out);
    int rdt = ember__is_float(a->dtype) ? a->dtype : EMBER_FLOAT32;
    EMBER_TRY(ember__kernel_result(a->ndim, a->shape, rdt, EMBER_FLOAT64, out, &y));
    int rc = ember__contiguous_as(a, EMBER_FLOAT64, &c);
    if (rc == EMBER_OK) {
        poly_job j = {(const double *)ember__ptr(c), (double *)ember__ptr(y), (int)at->i[0]};
        /* a term costs some tens of operations: a smaller grain than elementwise work */
        ember__parallel_for(a->numel, EMBER_PARALLEL_GRAIN / 32, poly_range, &j);
    }
    return ember__kernel_result_end(rc, y, c, out);
}

int ember_polygamma(int n, ember_tensor *a, ember_tensor **out)
{
    if (!a || !out) return ember__fail(EMBER_ERR_ARG, "polygamma: NULL argument");
    if (n < 0) return ember__fail(EMBER_ERR_ARG, "polygamma: the order n must be >= 0, got %d", n);
    ember_attrs at = {{n}, {0}};
    return ember__dispatch(EMBER_OP_POLYGAMMA, 1, &a, &at, out);
}

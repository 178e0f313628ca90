/* norm_act.c: what batch_norm_act and channel_affine share about their
   activation (norm_act.h): its attrs, its check, and its composed form. */
#include "norm_act.h"

#include "../autograd_ops.h"

#include <string.h>

double ember__act_bound(const ember_attrs *at, int k)
{
    double v;
    memcpy(&v, &at->i[k], sizeof v);
    return v;
}

void ember__act_set_bounds(ember_attrs *at, double lo, double hi)
{
    memcpy(&at->i[1], &lo, sizeof lo);
    memcpy(&at->i[2], &hi, sizeof hi);
}

int ember__act_check(const char *op, const ember_attrs *at, bool none_ok)
{
    double lo = ember__act_bound(at, 1), hi = ember__act_bound(at, 2);
    if ((none_ok && at->i[0] == 0) || at->i[0] == BN_RELU || (at->i[0] == BN_HARDTANH && lo <= hi)) return EMBER_OK;
    return ember__fail(EMBER_ERR_ARG, "%s: activation must be %s1 (relu) or 2 (hardtanh with lo <= hi), got %lld "
                       "(lo %g, hi %g)", op, none_ok ? "0 (none), " : "", (long long)at->i[0], lo, hi);
}

int ember__act_composed(const ember_attrs *at, ember_tensor *y, ember_tensor *g, ember_tensor **out)
{
    ember_tensor *lo = NULL, *hi = NULL, *zero = NULL, *c1 = NULL, *c2 = NULL, *t = NULL;
    int paused = ember__ag_pause(), rc = EMBER_OK;
    if (at->i[0] == 0) {   /* none: y itself, or g */
        *out = g ? g : y;
        ember_tensor_retain(*out);
        goto done;
    }
    if (at->i[0] == BN_RELU) {
        rc = g ? ember_relu_backward(g, y, out) : ember_relu(y, out);
        goto done;
    }
    EMBER_CHECK(ember_scalar(ember__act_bound(at, 1), EMBER_FLOAT64, 1, &lo));
    EMBER_CHECK(ember_scalar(ember__act_bound(at, 2), EMBER_FLOAT64, 1, &hi));
    EMBER_CHECK(ember_scalar(0, EMBER_FLOAT64, 1, &zero));
    EMBER_CHECK(ember_le(y, lo, &c1));
    EMBER_CHECK(ember_ge(y, hi, &c2));
    EMBER_CHECK(ember_where(c2, g ? zero : hi, g ? g : y, &t));
    rc = ember_where(c1, g ? zero : lo, t, out);
done:
    ember__ag_resume(paused);
    ember_tensor *all[6] = {lo, hi, zero, c1, c2, t};
    for (int i = 0; i < 6; i++) ember_tensor_release(all[i]);
    return rc;
}

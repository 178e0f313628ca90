/* grad_rules.c: the built-in gradient rules, one per differentiable op in
   ops.def, written with ember's public ops so that a recording started earlier
   differentiates them again (higher-order gradients). A rule fills grad_in[i]
   for each input i that needs a gradient; the engine sums it back to the
   input's shape (broadcasting), casts it to the input's dtype, skips inputs
   that need none and checks what came back.

   Each rule is a few lines over a small arena `S` that owns the temporaries:
   every helper returns NULL once an op has failed, and S.rc keeps the status
   (grad_rules_impl.h). This file has the elementwise, reduction and shape
   rules and the table; grad_rules_nn.c and grad_rules_linalg.c the rest. */
#include "grad_rules_impl.h"
#include "dtr.h"
#include "formulas.h"   /* gelu's constants */


RULE(add)
{
    RULE_LOCALS;
    give(s, &gi[0], g);
    give(s, &gi[1], g);
}

RULE(sub)
{
    RULE_LOCALS;
    give(s, &gi[0], g);
    if (NEED(1)) give(s, &gi[1], t_neg(s, g));
}

RULE(mul)
{
    RULE_LOCALS;
    if (NEED(0)) give(s, &gi[0], t_mul(s, g, IN(1)));
    if (NEED(1)) give(s, &gi[1], t_mul(s, g, IN(0)));
}

/* d(a/b) = g/b, -g*a/b^2 */
RULE(div)
{
    RULE_LOCALS;
    ember_tensor *q = t_div(s, g, IN(1));
    if (NEED(0)) give(s, &gi[0], q);
    if (NEED(1)) give(s, &gi[1], t_neg(s, t_div(s, t_mul(s, q, IN(0)), IN(1))));
}

/* d(a^b) = g*b*a^(b-1), g*a^b*log(a) (0 where a == 0 and b >= 0) */
RULE(pow)
{
    RULE_LOCALS;
    ember_tensor *a = IN(0), *b = IN(1);
    if (NEED(0)) give(s, &gi[0], t_mul(s, g, t_mul(s, b, t_pow(s, a, t_sub(s, b, num(s, 1))))));
    if (NEED(1)) {
        ember_tensor *v = t_mul(s, g, t_mul(s, OUT(0), t_log(s, a)));
        ember_tensor *zero_base = t_mul(s, as(s, t_eq(s, a, num(s, 0)), g), as(s, t_ge(s, b, num(s, 0)), g));
        give(s, &gi[1], where3(s, t_gt(s, zero_base, num(s, 0)), num(s, 0), v));
    }
}

/* ties split the gradient evenly, as PyTorch does */
RULE(maximum)
{
    RULE_LOCALS;
    ember_tensor *a = IN(0), *b = IN(1);
    ember_tensor *win = op == EMBER_OP_MAXIMUM ? t_gt(s, a, b) : t_lt(s, a, b);
    ember_tensor *w = t_add(s, as(s, win, g), t_mul(s, as(s, t_eq(s, a, b), g), num(s, 0.5)));
    if (NEED(0)) give(s, &gi[0], t_mul(s, g, w));
    if (NEED(1)) give(s, &gi[1], t_mul(s, g, t_sub(s, num(s, 1), w)));
}

RULE(where)
{
    RULE_LOCALS;
    ember_tensor *z = num(s, 0);
    if (NEED(1)) give(s, &gi[1], where3(s, IN(0), g, z));
    if (NEED(2)) give(s, &gi[2], where3(s, IN(0), z, g));
}

RULE(neg)
{
    RULE_LOCALS;
    give(s, &gi[0], t_neg(s, g));
}

RULE(exp)
{
    RULE_LOCALS;
    give(s, &gi[0], t_mul(s, g, OUT(0)));
}

RULE(log)
{
    RULE_LOCALS;
    give(s, &gi[0], t_div(s, g, IN(0)));
}

/* d log1p(x) = g / (1 + x) */
RULE(log1p)
{
    RULE_LOCALS;
    give(s, &gi[0], t_div(s, g, t_add(s, IN(0), num(s, 1))));
}

RULE(sqrt)
{
    RULE_LOCALS;
    give(s, &gi[0], t_div(s, g, t_mul(s, OUT(0), num(s, 2))));
}

/* d a^-1/2 = -1/2 a^-3/2 = -1/2 y^3 */
RULE(rsqrt)
{
    RULE_LOCALS;
    ember_tensor *y = OUT(0);
    give(s, &gi[0], t_mul(s, g, t_mul(s, t_mul(s, y, t_mul(s, y, y)), num(s, -0.5))));
}

RULE(abs)
{
    RULE_LOCALS;
    give(s, &gi[0], t_mul(s, g, t_sign(s, IN(0))));
}

RULE(sign)
{
    RULE_LOCALS;
    give(s, &gi[0], t_mul(s, g, num(s, 0)));
}

RULE(sin)
{
    RULE_LOCALS;
    give(s, &gi[0], t_mul(s, g, t_cos(s, IN(0))));
}

RULE(cos)
{
    RULE_LOCALS;
    give(s, &gi[0], t_neg(s, t_mul(s, g, t_sin(s, IN(0)))));
}

/* 1 - y^2 */
RULE(tanh)
{
    RULE_LOCALS;
    ember_tensor *y = OUT(0);
    give(s, &gi[0], t_mul(s, g, t_sub(s, num(s, 1), t_mul(s, y, y))));
}

/* y (1 - y) */
RULE(sigmoid)
{
    RULE_LOCALS;
    give(s, &gi[0], t_mul(s, g, sigmoid_slope(s, OUT(0))));
}

/* a select, not g * mask: 0 where the input was cut even if g is NaN (as PyTorch), in one pass */
RULE(relu)
{
    RULE_LOCALS;
    give(s, &gi[0], relu_bwd(s, g, OUT(0)));
}

/* linear in g; piecewise constant in y, so y gets no gradient */
RULE(relu_backward)
{
    RULE_LOCALS;
    if (NEED(0)) give(s, &gi[0], relu_bwd(s, g, IN(1)));
}

/* gelu's slope as recorded ops: Phi(x) + x phi(x), or for the tanh form
   (k = sqrt(2/pi), c = 0.044715, t = tanh(k (x + c x^3)))
   0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2) */
static ember_tensor *gelu_slope(arena *s, ember_tensor *x, int tanh_form)
{
    if (tanh_form) {
        const double k = EMBER_SQRT_2_OVER_PI, c = 0.044715;
        ember_tensor *x2 = t_mul(s, x, x);
        ember_tensor *t = t_tanh(s, t_mul(s, num(s, k), t_add(s, x, t_mul(s, num(s, c), t_mul(s, x2, x)))));
        ember_tensor *dt = t_mul(s, t_sub(s, num(s, 1), t_mul(s, t, t)),
                               t_mul(s, num(s, k), t_add(s, num(s, 1), t_mul(s, num(s, 3 * c), x2))));
        return t_add(s, t_mul(s, num(s, 0.5), t_add(s, num(s, 1), t)), t_mul(s, t_mul(s, num(s, 0.5), x), dt));
    }
    ember_tensor *cdf = t_mul(s, num(s, 0.5), t_add(s, num(s, 1), t_erf(s, t_mul(s, x, num(s, EMBER_SQRT_HALF)))));
    ember_tensor *pdf = t_mul(s, num(s, EMBER_INV_SQRT_2PI), t_exp(s, t_mul(s, t_mul(s, x, x), num(s, -0.5))));
    return t_add(s, cdf, t_mul(s, x, pdf));
}

static ember_tensor *gelu_adjoint(arena *s, ember_tensor *g, ember_tensor *x, int tanh_form)
{
    ember_tensor *o = NULL;
    if (!have(s, g, x)) return NULL;
    return keep(s, ember_gelu_backward(g, x, tanh_form, &o), &o);
}

/* the adjoint op on the CPU; on a device, where it would run on the host,
   the slope as recorded ops */
RULE(gelu)
{
    RULE_LOCALS;
    ember_tensor *x = IN(0);
    if (x && ember_tensor_device(x) == EMBER_CPU) give(s, &gi[0], gelu_adjoint(s, g, x, (int)at->i[0]));
    else give(s, &gi[0], t_mul(s, g, gelu_slope(s, x, (int)at->i[0])));
}

/* out = gy gelu'(x): gy's gradient is the same adjoint of G, x's G gy
   gelu''(x), with gelu'' = phi(x) (2 - x^2) for the exact form and
   (1 - t^2) (u' + 0.5 x (u'' - 2 t u'^2)) for the tanh form (u = k (x + c
   x^3), u' = k (1 + 3 c x^2), u'' = 6 k c x) */
RULE(gelu_backward)
{
    RULE_LOCALS;
    ember_tensor *gy = IN(0), *x = IN(1), *d2;
    if (NEED(0)) give(s, &gi[0], gelu_adjoint(s, g, x, (int)at->i[0]));
    if (!NEED(1)) return;
    ember_tensor *x2 = t_mul(s, x, x);
    if (at->i[0]) {
        const double k = EMBER_SQRT_2_OVER_PI, c = 0.044715;
        ember_tensor *t = t_tanh(s, t_mul(s, num(s, k), t_add(s, x, t_mul(s, num(s, c), t_mul(s, x2, x)))));
        ember_tensor *u1 = t_mul(s, num(s, k), t_add(s, num(s, 1), t_mul(s, num(s, 3 * c), x2)));
        ember_tensor *inner = t_sub(s, t_mul(s, num(s, 6 * k * c), x), t_mul(s, t_mul(s, num(s, 2), t), t_mul(s, u1, u1)));
        d2 = t_mul(s, t_sub(s, num(s, 1), t_mul(s, t, t)), t_add(s, u1, t_mul(s, t_mul(s, num(s, 0.5), x), inner)));
    } else {
        ember_tensor *pdf = t_mul(s, num(s, EMBER_INV_SQRT_2PI), t_exp(s, t_mul(s, x2, num(s, -0.5))));
        d2 = t_mul(s, pdf, t_sub(s, num(s, 2), x2));
    }
    give(s, &gi[1], t_mul(s, t_mul(s, g, gy), d2));
}

/* s (1 + x (1 - s)) */
RULE(silu)
{
    RULE_LOCALS;
    ember_tensor *x = IN(0), *sg = t_sigmoid(s, x);
    give(s, &gi[0], t_mul(s, g, t_mul(s, sg, t_add(s, num(s, 1), t_mul(s, x, t_sub(s, num(s, 1), sg))))));
}

/* t + x sg (1 - t^2) with sg = sigmoid(x), t = tanh(log(1 + e^x)) = sg (2 - sg) / (1 + (1 - sg)^2)
   (PyTorch's mish_backward; the forward's form of t) */
RULE(mish)
{
    RULE_LOCALS;
    ember_tensor *x = IN(0), *sg = t_sigmoid(s, x), *one = num(s, 1), *c = t_sub(s, one, sg);
    ember_tensor *t = t_div(s, t_mul(s, sg, t_add(s, one, c)), t_add(s, one, t_mul(s, c, c)));
    ember_tensor *slope = t_mul(s, t_mul(s, x, sg), t_sub(s, one, t_mul(s, t, t)));
    give(s, &gi[0], t_mul(s, g, t_add(s, t, slope)));
}

/* 2/sqrt(pi) exp(-x^2) */
RULE(erf)
{
    RULE_LOCALS;
    ember_tensor *x = IN(0);
    give(s, &gi[0], t_mul(s, g, t_mul(s, num(s, 1.12837916709551257390), t_exp(s, t_neg(s, t_mul(s, x, x))))));
}

/* lgamma' = digamma, digamma' = trigamma (polygamma(1)), as PyTorch's */
RULE(lgamma)
{
    RULE_LOCALS;
    give(s, &gi[0], t_mul(s, g, t_digamma(s, IN(0))));
}

RULE(digamma)
{
    RULE_LOCALS;
    give(s, &gi[0], t_mul(s, g, t_trigamma(s, IN(0))));
}

static ember_tensor *t_polygamma(arena *s, int n, ember_tensor *a)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_polygamma(n, a, &o), &o);
}

/* trigamma' = polygamma(2), polygamma(n)' = polygamma(n + 1) */
RULE(trigamma)
{
    RULE_LOCALS;
    give(s, &gi[0], t_mul(s, g, t_polygamma(s, 2, IN(0))));
}

RULE(polygamma)
{
    RULE_LOCALS;
    give(s, &gi[0], t_mul(s, g, t_polygamma(s, (int)at->i[0] + 1, IN(0))));
}

/* passes where lo <= x <= hi */
RULE(clamp)
{
    RULE_LOCALS;
    ember_tensor *x = IN(0), *m = g;
    if (at->i[0]) m = t_mul(s, m, as(s, t_ge(s, x, num(s, at->f[0])), g));
    if (at->i[1]) m = t_mul(s, m, as(s, t_le(s, x, num(s, at->f[1])), g));
    give(s, &gi[0], m);
}

RULE(to_dtype)
{
    RULE_LOCALS;
    give(s, &gi[0], g);
}

RULE(to_device)
{
    RULE_LOCALS;
    ember_tensor *o = NULL;
    give(s, &gi[0], keep(s, ember_to_device(g, ember__node_in_device(n, 0), &o), &o));
}

RULE(sum)
{
    RULE_LOCALS;
    give(s, &gi[0], expand_back(s, g, nd, in, (unsigned)at->i[1]));
}

RULE(mean)
{
    RULE_LOCALS;
    unsigned m = (unsigned)at->i[1];
    give(s, &gi[0], t_div(s, expand_back(s, g, nd, in, m), num(s, count_of(nd, in, m))));
}

/* 2 (x - mean) / (N - unbiased) */
RULE(var)
{
    RULE_LOCALS;
    unsigned m = (unsigned)at->i[1];
    int dims[EMBER_MAX_DIMS], k = mask_list(m, nd, dims);
    ember_tensor *x = IN(0), *mean = NULL;
    if (OK(s)) keep(s, ember_mean(x, k, dims, 1, &mean), &mean);
    double denom = count_of(nd, in, m) - (at->i[2] ? 1 : 0);
    ember_tensor *d = t_mul(s, t_sub(s, x, mean), num(s, 2.0 / denom));
    give(s, &gi[0], t_mul(s, expand_back(s, g, nd, in, m), d));
}

/* g exp(x - y) */
RULE(logsumexp)
{
    RULE_LOCALS;
    unsigned m = (unsigned)at->i[1];
    ember_tensor *y = expand_back(s, OUT(0), nd, in, m);
    give(s, &gi[0], t_mul(s, expand_back(s, g, nd, in, m), t_exp(s, t_sub(s, IN(0), y))));
}

RULE(norm)
{
    RULE_LOCALS;
    unsigned m = (unsigned)at->i[1];
    double p = at->f[0];
    ember_tensor *x = IN(0), *y = expand_back(s, OUT(0), nd, in, m), *ge_ = expand_back(s, g, nd, in, m);
    ember_tensor *d;
    if (isinf(p)) {   /* the max |x| entries share the gradient */
        ember_tensor *hit = as(s, t_eq(s, t_abs(s, x), y), x);
        int dims[EMBER_MAX_DIMS], k = mask_list(m, nd, dims);
        ember_tensor *cnt = expand_back(s, sum_dims(s, hit, k, dims, 1), nd, in, m);
        d = t_div(s, t_mul(s, t_sign(s, x), hit), cnt);
    } else if (p == 2) {   /* x / y, 0 where y == 0 */
        d = where3(s, t_eq(s, y, num(s, 0)), num(s, 0), t_div(s, x, y));
    } else if (p == 1) {
        d = t_sign(s, x);
    } else {   /* sign(x) |x|^(p-1) / y^(p-1) */
        d = t_div(s, t_mul(s, t_sign(s, x), t_pow(s, t_abs(s, x), num(s, p - 1))), t_pow(s, y, num(s, p - 1)));
        d = where3(s, t_eq(s, y, num(s, 0)), num(s, 0), d);
    }
    give(s, &gi[0], t_mul(s, ge_, d));
}

/* ties share the gradient evenly */
RULE(amax_all)
{
    RULE_LOCALS;
    ember_tensor *hit = as(s, t_eq(s, IN(0), OUT(0)), IN(0));
    ember_tensor *cnt = sum_dims(s, hit, 0, NULL, 0);
    give(s, &gi[0], t_mul(s, hit, t_div(s, g, cnt)));
}

/* the values' gradient goes to the chosen indices */
RULE(max_dim)
{
    RULE_LOCALS;
    int dim = (int)at->i[0];
    ember_tensor *idx = OUT(1), *gv = g;
    if (!at->i[1]) {
        ember_tensor *o = NULL, *o2 = NULL;
        if (OK(s)) idx = keep(s, ember_unsqueeze(idx, dim, &o), &o);
        if (OK(s)) gv = keep(s, ember_unsqueeze(g, dim, &o2), &o2);
    }
    ember_tensor *o = NULL;
    if (OK(s) && idx && gv) give(s, &gi[0], keep(s, ember_scatter_add(nd, in, dim, idx, gv, &o), &o));
}

/* y (g - sum(g y)) */
/* softmax's and log_softmax's adjoints, ops of their own (ops/softmax.c) */
static ember_tensor *sm_adjoint(arena *s, int log, ember_tensor *g, ember_tensor *y, int dim)
{
    ember_tensor *o = NULL;
    if (!have(s, g, y)) return NULL;
    return keep(s, (log ? ember_log_softmax_backward : ember_softmax_backward)(g, y, dim, &o), &o);
}

RULE(softmax)
{
    RULE_LOCALS;
    give(s, &gi[0], sm_adjoint(s, 0, g, OUT(0), (int)at->i[0]));
}

RULE(log_softmax)
{
    RULE_LOCALS;
    give(s, &gi[0], sm_adjoint(s, 1, g, OUT(0), (int)at->i[0]));
}

/* out = y (gy - sum(gy y)): linear in gy, whose gradient is the same adjoint
   of G; y's is G (gy - sum(gy y)) - gy sum(G y) */
RULE(softmax_backward)
{
    RULE_LOCALS;
    int dim = (int)at->i[0], k = nd > 0;
    ember_tensor *gy = IN(0), *y = IN(1);
    if (NEED(0)) give(s, &gi[0], sm_adjoint(s, 0, g, y, dim));
    if (NEED(1)) {
        ember_tensor *a = t_mul(s, g, t_sub(s, gy, sum_dims(s, t_mul(s, gy, y), k, &dim, 1)));
        give(s, &gi[1], t_sub(s, a, t_mul(s, gy, sum_dims(s, t_mul(s, g, y), k, &dim, 1))));
    }
}

/* out = gy - exp(y) sum(gy): gy's gradient is G - sum(G exp(y)), y's
   -G exp(y) sum(gy) */
RULE(log_softmax_backward)
{
    RULE_LOCALS;
    int dim = (int)at->i[0], k = nd > 0;
    ember_tensor *gy = IN(0), *e = t_exp(s, IN(1));
    if (NEED(0)) give(s, &gi[0], t_sub(s, g, sum_dims(s, t_mul(s, g, e), k, &dim, 1)));
    if (NEED(1)) give(s, &gi[1], t_neg(s, t_mul(s, t_mul(s, g, e), sum_dims(s, gy, k, &dim, 1))));
}

RULE(sum_to)
{
    RULE_LOCALS;
    give(s, &gi[0], expand(s, g, nd, in));
}

/* the engine sums g back to the input's shape */
RULE(expand)
{
    RULE_LOCALS;
    give(s, &gi[0], g);
}

/* y = x w^T with output gradient g: gx = g w, gw = g^T x over all leading dims */
RULE(reshape)
{
    RULE_LOCALS;
    give(s, &gi[0], reshape(s, g, nd, in));
}

RULE(transpose)
{
    RULE_LOCALS;
    ember_tensor *o = NULL;
    if (OK(s)) give(s, &gi[0], keep(s, ember_transpose(g, (int)at->i[0], (int)at->i[1], &o), &o));
}

RULE(permute)
{
    RULE_LOCALS;
    int pn = (int)at->i[0], inv[EMBER_MAX_DIMS];
    for (int d = 0; d < pn; d++) inv[at->i[1 + d]] = d;
    ember_tensor *o = NULL;
    if (OK(s)) give(s, &gi[0], keep(s, ember_permute(g, pn, inv, &o), &o));
}

/* pad with zeros: cat(zeros, g, zeros) along dim */
RULE(narrow)
{
    RULE_LOCALS;
    int dim = (int)at->i[0];
    int64_t start = at->i[1], len = op == EMBER_OP_NARROW ? at->i[2] : 1;
    ember_tensor *gg = g;
    if (op == EMBER_OP_SELECT) {
        ember_tensor *o = NULL;
        if (OK(s)) gg = keep(s, ember_unsqueeze(g, dim, &o), &o);
    }
    ember_tensor *parts[3];
    int np = 0;
    int64_t shp[EMBER_MAX_DIMS];
    memcpy(shp, in, sizeof shp);
    if (start > 0) {
        shp[dim] = start;
        parts[np++] = zeros(s, nd, shp, g);
    }
    parts[np++] = gg;
    if (start + len < in[dim]) {
        shp[dim] = in[dim] - start - len;
        parts[np++] = zeros(s, nd, shp, g);
    }
    ember_tensor *o = NULL;
    if (OK(s)) give(s, &gi[0], np == 1 ? gg : keep(s, ember_cat(np, parts, dim, &o), &o));
}

/* the region of zeros shaped like the input; dims that repeat one element
   (stride 0, from ember_as_strided) add up first */
RULE(as_strided)
{
    RULE_LOCALS;
    ember_attrs geo = *at;
    int dims[EMBER_MAX_DIMS], k = 0;
    for (int d = 0; d < (int)at->i[0]; d++)
        if (at->i[2 + EMBER_MAX_DIMS + d] == 0 && at->i[2 + d] > 1) {
            dims[k++] = d;
            geo.i[2 + d] = 1;
        }
    ember_tensor *o = NULL, *z = zeros(s, nd, in, g), *gg = k ? sum_dims(s, g, k, dims, 1) : g;
    if (OK(s)) give(s, &gi[0], keep(s, ember__as_strided_scatter(z, gg, &geo, &o), &o));
}

/* the region goes to the source, the rest to the input */
RULE(as_strided_scatter)
{
    RULE_LOCALS;
    ember_tensor *o = NULL;
    if (NEED(0) && OK(s)) {
        int64_t rs[EMBER_MAX_DIMS];
        int rnd = ember__node_in_shape(n, 1, rs);
        ember_tensor *z = zeros(s, rnd, rs, g);
        if (OK(s)) give(s, &gi[0], keep(s, ember__as_strided_scatter(g, z, at, &o), &o));
    }
    if (NEED(1) && OK(s)) give(s, &gi[1], keep(s, ember__as_strided(g, at, &o), &o));
}

/* the indexing ops count their indices from this base (0 or 1) */
#define BASE at->i[EMBER_INDEX_BASE_ATTR]

RULE(index_select)
{
    RULE_LOCALS;
    ember_tensor *o = NULL;
    if (OK(s)) give(s, &gi[0], keep(s, ember_index_add_base(nd, in, (int)at->i[0], IN(1), BASE, g, &o), &o));
}

RULE(gather)
{
    RULE_LOCALS;
    ember_tensor *o = NULL;
    if (OK(s)) give(s, &gi[0], keep(s, ember_scatter_add_base(nd, in, (int)at->i[0], IN(1), BASE, g, &o), &o));
}

RULE(scatter_add)
{
    RULE_LOCALS;
    ember_tensor *o = NULL;
    if (OK(s) && NEED(1)) give(s, &gi[1], keep(s, ember_gather_base(g, (int)at->i[0], IN(0), BASE, &o), &o));
}

RULE(index_add)
{
    RULE_LOCALS;
    ember_tensor *o = NULL;
    if (OK(s) && NEED(1)) give(s, &gi[1], keep(s, ember_index_select_base(g, (int)at->i[0], IN(0), BASE, &o), &o));
}
#undef BASE

/* slices of g, one per input, handed straight to the engine: a list may be
   longer than the arena */
RULE(cat)
{
    RULE_LOCALS;
    int dim = (int)at->i[0], nin = ember__node_num_inputs(n);
    int64_t off = 0;
    for (int i = 0; i < nin && OK(s); i++) {
        int64_t shp[EMBER_MAX_DIMS];
        ember__node_in_shape(n, i, shp);
        int64_t len = op == EMBER_OP_CAT ? shp[dim] : 1;
        if (NEED(i))
            s->rc = op == EMBER_OP_CAT ? ember_narrow(g, dim, off, len, &gi[i]) : ember_select(g, dim, off, &gi[i]);
        off += len;
    }
}

/* x's and w's gradients from gy, the gradient of conv2d(x, w): both adjoints
   are ops of their own */
/* The rule of each op, from ops.def (NULL: not differentiable). */
#define NO_GRAD NULL
static void (*const RULES[EMBER_OP_COUNT])(rule_ctx *) = {
#define OP(E, n, ni, no, fwd, grad, ...) [EMBER_OP_##E] = grad,
#include "ops/ops.def"
};

static int rule(const ember_node *n, ember_tensor *const *go, ember_tensor **gi, arena *s)
{
    int op = ember__node_op(n);
    if (op < 0 || op >= EMBER_OP_COUNT || !RULES[op])
        return ember__fail(EMBER_ERR_UNSUPPORTED, "backward: no grad rule for %s", op >= 0 ? ember__ops[op].name : "?");
    rule_ctx r = {n, gi, s, ember__node_attrs(n), go[0], go, {0}, 0, op};
    r.nd = ember__node_in_shape(n, 0, r.in);
    RULES[op](&r);
    return s->rc;
}

int ember__grad_rule(const ember_node *n, ember_tensor *const *grad_out, ember_tensor **grad_in)
{
    arena s = {.who = "backward: a grad rule", .rc = EMBER_OK};
    ember_tensor *held[EMBER__DTR_HELD] = {NULL};
    if (EMBER_UNLIKELY(ember__dtr_on)) EMBER_TRY(ember__dtr_hold_node(n, grad_out, held));   /* what it reads resident */
    int rc = rule(n, grad_out, grad_in, &s);
    ember__dtr_let_go(held);
    arena_end(&s);
    if (rc < 0) {
        for (int i = 0; i < ember__node_num_inputs(n); i++) {
            ember_tensor_release(grad_in[i]);
            grad_in[i] = NULL;
        }
    }
    return rc;
}

/* grad_rules.c: the built-in gradient rules, one per differentiable op in
   ops.def, written with ember's public ops so that a recording started earlier
   differentiates them again (higher-order gradients). A rule fills grad_in[i]
   for each input i that needs a gradient; the engine sums it back to the
   input's shape (broadcasting), casts it to the input's dtype, skips inputs
   that need none and checks what came back.

   Each rule is a few lines over a small arena `S` that owns the temporaries:
   every helper returns NULL once an op has failed, and S.rc keeps the status. */
#include "grad_rules.h"
#include "autograd.h"
#include "node.h"
#include "ops/nn.h"

#include <math.h>
#include <string.h>

typedef struct {
    ember_tensor *t[48];
    int n;
    int rc;
} arena;

/* Takes the address of the result: argument evaluation order is unspecified,
   so the result is read only once the op has run. */
static ember_tensor *keep(arena *s, int rc, ember_tensor **out)
{
    ember_tensor *t = *out;
    if (rc < 0) {
        s->rc = rc;
        return NULL;
    }
    if (s->n == (int)(sizeof s->t / sizeof s->t[0])) {
        ember_tensor_release(t);
        s->rc = ember__fail(EMBER_ERR_OOM, "backward: a grad rule used too many temporaries");
        return NULL;
    }
    s->t[s->n++] = t;
    return t;
}

static void arena_end(arena *s)
{
    for (int i = 0; i < s->n; i++) ember_tensor_release(s->t[i]);
}

#define OK(s) ((s)->rc >= 0)
/* false (and the arena failed) when an operand is missing: a saved tensor that
   a hook dropped and did not give back, say */
static bool have(arena *s, const void *a, const void *b)
{
    if (!OK(s)) return false;
    if (a && b) return true;
    s->rc = ember__fail(EMBER_ERR_STATE, "backward: a tensor saved for this node is missing");
    return false;
}
#define BIN(name)                                                                          \
    static ember_tensor *t_##name(arena *s, ember_tensor *a, ember_tensor *b)                  \
    {                                                                                      \
        ember_tensor *o = NULL;                                                            \
        if (!have(s, a, b)) return NULL;                                                   \
        return keep(s, ember_##name(a, b, &o), &o);                                         \
    }
#define UN(name)                                                                           \
    static ember_tensor *t_##name(arena *s, ember_tensor *a)                                   \
    {                                                                                      \
        ember_tensor *o = NULL;                                                            \
        if (!have(s, a, a)) return NULL;                                                   \
        return keep(s, ember_##name(a, &o), &o);                                            \
    }
BIN(add) BIN(sub) BIN(mul) BIN(div) BIN(pow) BIN(eq) BIN(gt) BIN(lt) BIN(ge) BIN(le) BIN(matmul)
UN(neg) UN(exp) UN(log) UN(sign) UN(sin) UN(cos) UN(tanh) UN(sigmoid) UN(erf) UN(abs)
UN(digamma) UN(trigamma)

static ember_tensor *num(arena *s, double v)
{
    ember_tensor *o = NULL;
    if (!OK(s)) return NULL;
    return keep(s, ember_scalar(v, EMBER_FLOAT64, 1, &o), &o);
}

/* bool mask -> the dtype of `like` */
static ember_tensor *as(arena *s, ember_tensor *a, const ember_tensor *like)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_to_dtype(a, ember_tensor_dtype(like), &o), &o);
}

static ember_tensor *relu_bwd(arena *s, ember_tensor *g, ember_tensor *y)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !g || !y) return NULL;
    return keep(s, ember_relu_backward(g, y, &o), &o);
}

static ember_tensor *where3(arena *s, ember_tensor *c, ember_tensor *a, ember_tensor *b)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !c || !a || !b) return NULL;
    return keep(s, ember_where(c, a, b, &o), &o);
}

static ember_tensor *reshape(arena *s, ember_tensor *a, int nd, const int64_t *shape)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_reshape(a, nd, shape, &o), &o);
}

static ember_tensor *expand(arena *s, ember_tensor *a, int nd, const int64_t *shape)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_expand(a, nd, shape, &o), &o);
}

static ember_tensor *sum_dims(arena *s, ember_tensor *a, int nd, const int *dims, int keepdim)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_sum(a, nd, dims, keepdim, &o), &o);
}

/* zeros of the given shape, in like's dtype and on its device */
static ember_tensor *zeros(arena *s, int nd, const int64_t *shape, const ember_tensor *like)
{
    ember_tensor *o = NULL;
    if (!OK(s)) return NULL;
    return keep(s, ember_full(nd, shape, 0, ember_tensor_dtype(like), ember_tensor_device(like), &o), &o);
}

static ember_tensor *transpose_last(arena *s, ember_tensor *a)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    int nd = ember_tensor_ndim(a);
    return keep(s, ember_transpose(a, nd - 2, nd - 1, &o), &o);
}

static ember_tensor *slice(arena *s, ember_tensor *a, int dim, int64_t start, int64_t len)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_narrow(a, dim, start, len, &o), &o);
}

static ember_tensor *cat_of(arena *s, int k, ember_tensor *const *parts, int dim)
{
    ember_tensor *o = NULL;
    for (int i = 0; i < k; i++)
        if (!parts[i]) return NULL;
    if (!OK(s)) return NULL;
    return keep(s, ember_cat(k, parts, dim, &o), &o);
}

/* sigmoid's slope from its output: y (1 - y) */
static ember_tensor *sigmoid_slope(arena *s, ember_tensor *y)
{
    return t_mul(s, y, t_sub(s, num(s, 1), y));
}

/* hands a temporary to the engine (one more reference) */
static void give(arena *s, ember_tensor **slot, ember_tensor *t)
{
    if (!OK(s) || !t) return;
    ember_tensor_retain(t);
    *slot = t;
}

/* The keepdim shape of a reduction over `mask` of an input of shape in. */
static int keepdim_shape(int nd, const int64_t *in, unsigned mask, int64_t *out)
{
    for (int d = 0; d < nd; d++) out[d] = (mask >> d) & 1 ? 1 : in[d];
    return nd;
}

/* g of a reduction, broadcast back to the input's shape */
static ember_tensor *expand_back(arena *s, ember_tensor *g, int nd, const int64_t *in, unsigned mask)
{
    int64_t kd[EMBER_MAX_DIMS];
    keepdim_shape(nd, in, mask, kd);
    return expand(s, reshape(s, g, nd, kd), nd, in);
}

static int mask_list(unsigned mask, int nd, int *dims)
{
    int k = 0;
    for (int d = 0; d < nd; d++)
        if ((mask >> d) & 1) dims[k++] = d;
    return k;
}

static double count_of(int nd, const int64_t *in, unsigned mask)
{
    double c = 1;
    for (int d = 0; d < nd; d++)
        if ((mask >> d) & 1) c *= (double)in[d];
    return c;
}

/* A matmul gradient for a 1-D operand comes out with a trailing size-1 dim. */
static ember_tensor *reshape_to_in(arena *s, ember_tensor *t, const ember_node *n, int i)
{
    int64_t shp[EMBER_MAX_DIMS];
    if (!OK(s) || !t || ember__node_in_shape(n, i, shp) != 1 || i != 1) return t;
    int nd = ember_tensor_ndim(t);
    int64_t ts[EMBER_MAX_DIMS];
    memcpy(ts, ember_tensor_shape(t), (size_t)nd * sizeof *ts);
    return reshape(s, t, nd - 1, ts);
}

#define NEED(i) ember__node_needs(n, i)
#define IN(i) ember__node_saved_in(n, i)
#define OUT(k) ember__node_saved_out(n, k)

/* Everything a rule reads: the node, its output gradients, where input
   gradients go, the arena, and the node's attrs and first input's shape. */
typedef struct {
    const ember_node *n;
    ember_tensor **gi;
    arena *s;
    const ember_attrs *at;
    ember_tensor *g;   /* the gradient of output 1 */
    ember_tensor *const *go;   /* every output's gradient (zeros where none came) */
    int64_t in[EMBER_MAX_DIMS];   /* input 1's shape */
    int nd;
    int op;
} rule_ctx;

/* One function per rule (grad_<op>); ops.def names each op's rule. */
#define RULE(name) static void grad_##name(rule_ctx *r)
#define RULE_LOCALS                                                                        \
    const ember_node *n = r->n;                                                            \
    ember_tensor **gi = r->gi;                                                             \
    arena *s = r->s;                                                                       \
    const ember_attrs *at = r->at;                                                         \
    ember_tensor *g = r->g;                                                                \
    const int64_t *in = r->in;                                                             \
    int nd = r->nd, op = r->op;                                                            \
    (void)n, (void)gi, (void)s, (void)at, (void)g, (void)in, (void)nd, (void)op

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

RULE(gelu)
{
    RULE_LOCALS;
    ember_tensor *x = IN(0), *d;
    if (at->i[0]) {   /* tanh form: k = sqrt(2/pi), c = 0.044715 */
        const double k = 0.79788456080286535588, c = 0.044715;
        ember_tensor *x2 = t_mul(s, x, x);
        ember_tensor *t = t_tanh(s, t_mul(s, num(s, k), t_add(s, x, t_mul(s, num(s, c), t_mul(s, x2, x)))));
        ember_tensor *dt = t_mul(s, t_sub(s, num(s, 1), t_mul(s, t, t)),
                               t_mul(s, num(s, k), t_add(s, num(s, 1), t_mul(s, num(s, 3 * c), x2))));
        d = t_add(s, t_mul(s, num(s, 0.5), t_add(s, num(s, 1), t)), t_mul(s, t_mul(s, num(s, 0.5), x), dt));
    } else {          /* Phi(x) + x phi(x) */
        ember_tensor *cdf = t_mul(s, num(s, 0.5), t_add(s, num(s, 1), t_erf(s, t_mul(s, x, num(s, 0.70710678118654752440)))));
        ember_tensor *pdf = t_mul(s, num(s, 0.39894228040143267794), t_exp(s, t_mul(s, t_mul(s, x, x), num(s, -0.5))));
        d = t_add(s, cdf, t_mul(s, x, pdf));
    }
    give(s, &gi[0], t_mul(s, g, d));
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
RULE(softmax)
{
    RULE_LOCALS;
    int dim = (int)at->i[0];
    ember_tensor *y = OUT(0);
    give(s, &gi[0], t_mul(s, y, t_sub(s, g, sum_dims(s, t_mul(s, g, y), 1, &dim, 1))));
}

/* g - exp(y) sum(g) */
RULE(log_softmax)
{
    RULE_LOCALS;
    int dim = (int)at->i[0];
    give(s, &gi[0], t_sub(s, g, t_mul(s, t_exp(s, OUT(0)), sum_dims(s, g, 1, &dim, 1))));
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
static void linear_grads(rule_ctx *r, ember_tensor *g)
{
    const ember_node *n = r->n;
    arena *s = r->s;
    int64_t ws[EMBER_MAX_DIMS];
    ember__node_in_shape(n, 1, ws);
    if (NEED(0)) give(s, &r->gi[0], t_matmul(s, g, IN(1)));
    if (NEED(1)) {
        int64_t g2s[2] = {-1, ws[0]}, x2s[2] = {-1, ws[1]};
        ember_tensor *g2 = reshape(s, g, 2, g2s), *x2 = reshape(s, IN(0), 2, x2s);
        give(s, &r->gi[1], t_matmul(s, transpose_last(s, g2), x2));
    }
}

RULE(linear) { linear_grads(r, r->g); }

/* y = relu(x w^T + b): the linear rule on relu's adjoint of g, whose sums
   over the leading dims, b's gradient, come out of the same pass */
RULE(linear_relu)
{
    RULE_LOCALS;
    ember_tensor *gzb[2] = {NULL, NULL};
    if (!have(s, g, OUT(0))) return;
    int rc = ember_relu_bias_backward(g, OUT(0), &gzb[0], &gzb[1]);
    ember_tensor *gz = keep(s, rc, &gzb[0]), *gb = rc < 0 ? NULL : keep(s, rc, &gzb[1]);
    linear_grads(r, gz);
    give(s, &gi[2], gb);
}

/* linear in g, piecewise constant in y: both outputs' gradients back through
   the mask, gb's broadcast over the rows */
RULE(relu_bias_backward)
{
    RULE_LOCALS;
    if (NEED(0)) give(s, &gi[0], relu_bwd(s, t_add(s, r->go[0], r->go[1]), IN(1)));
}

RULE(matmul)
{
    RULE_LOCALS;
    /* promote 1-D operands to matrices, then ga = g b^T, gb = a^T g */
    ember_tensor *a = IN(0), *b = IN(1);
    int64_t bs[EMBER_MAX_DIMS], gs[EMBER_MAX_DIMS];
    int nb = ember__node_in_shape(n, 1, bs);
    int ng = ember_tensor_ndim(g);
    memcpy(gs, ember_tensor_shape(g), (size_t)ng * sizeof *gs);
    ember_tensor *g2 = g;
    if (nd == 1 && nb == 1) {   /* dot */
        if (NEED(0)) give(s, &gi[0], t_mul(s, g, b));
        if (NEED(1)) give(s, &gi[1], t_mul(s, g, a));
        return;
    }
    if (nd == 1) {   /* g lacks the row dim */
        int64_t t[EMBER_MAX_DIMS];
        memcpy(t, gs, (size_t)ng * sizeof *t);
        t[ng] = t[ng - 1];
        t[ng - 1] = 1;
        g2 = reshape(s, g2, ng + 1, t);
        ng++;
        memcpy(gs, t, (size_t)ng * sizeof *gs);
    }
    if (nb == 1) {   /* g lacks the column dim */
        gs[ng] = 1;
        g2 = reshape(s, g2, ng + 1, gs);
        ng++;
    }
    if (NEED(0)) {
        ember_tensor *b2 = b;
        if (nb == 1) {
            int64_t t[2] = {1, bs[0]};
            b2 = reshape(s, b, 2, t);   /* b^T as a row */
            give(s, &gi[0], reshape_to_in(s, t_matmul(s, g2, b2), n, 0));
        } else {
            give(s, &gi[0], reshape_to_in(s, t_matmul(s, g2, transpose_last(s, b2)), n, 0));
        }
    }
    if (NEED(1)) {
        ember_tensor *a2 = a;
        if (nd == 1) {
            int64_t t[2] = {in[0], 1};
            a2 = reshape(s, a, 2, t);   /* a^T as a column */
            give(s, &gi[1], reshape_to_in(s, t_matmul(s, a2, g2), n, 1));
        } else {
            give(s, &gi[1], reshape_to_in(s, t_matmul(s, transpose_last(s, a2), g2), n, 1));
        }
    }
}

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

/* the region of zeros shaped like the input */
RULE(as_strided)
{
    RULE_LOCALS;
    ember_tensor *o = NULL, *z = zeros(s, nd, in, g);
    if (OK(s)) give(s, &gi[0], keep(s, ember__as_strided_scatter(z, g, at, &o), &o));
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

RULE(index_select)
{
    RULE_LOCALS;
    ember_tensor *o = NULL;
    if (OK(s)) give(s, &gi[0], keep(s, ember_index_add(nd, in, (int)at->i[0], IN(1), g, &o), &o));
}

RULE(gather)
{
    RULE_LOCALS;
    ember_tensor *o = NULL;
    if (OK(s)) give(s, &gi[0], keep(s, ember_scatter_add(nd, in, (int)at->i[0], IN(1), g, &o), &o));
}

RULE(scatter_add)
{
    RULE_LOCALS;
    ember_tensor *o = NULL;
    if (OK(s) && NEED(1)) give(s, &gi[1], keep(s, ember_gather(g, (int)at->i[0], IN(0), &o), &o));
}

RULE(index_add)
{
    RULE_LOCALS;
    ember_tensor *o = NULL;
    if (OK(s) && NEED(1)) give(s, &gi[1], keep(s, ember_index_select(g, (int)at->i[0], IN(0), &o), &o));
}

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
static void conv2d_adjoints(rule_ctx *r, ember_tensor *gy)
{
    RULE_LOCALS;
    const int64_t *st = &at->i[0], *pd = &at->i[2], *dl = &at->i[4];
    int64_t ws[EMBER_MAX_DIMS];
    ember__node_in_shape(n, 1, ws);
    ember_tensor *o = NULL, *o2 = NULL;
    if (!have(s, gy, gy)) return;
    if (NEED(0)) give(s, &gi[0], keep(s, ember_conv2d_backward_input(gy, IN(1), in, st, pd, dl, at->i[6], &o), &o));
    if (OK(s) && NEED(1))
        give(s, &gi[1], keep(s, ember_conv2d_backward_weight(IN(0), gy, ws, st, pd, dl, at->i[6], &o2), &o2));
}

RULE(conv2d) { conv2d_adjoints(r, r->g); }

/* Where no recording sees this backward, x's, w's and b's gradients of a
   fused convolution in one op, bwd_op on seen[0..nin), with the node's
   attrs and i[want_gx] whether x's is wanted; false, having done nothing,
   where a recording sees it (the rule then records the ops it is made of) */
static bool conv_grads_in_one_op(rule_ctx *r, int bwd_op, int nin, ember_tensor *const *seen, int want_gx)
{
    RULE_LOCALS;
    if (ember__ag_would_record(nin, seen)) return false;
    ember_attrs a = *at;
    ember_tensor *o[3] = {NULL, NULL, NULL};
    a.i[want_gx] = NEED(0);
    int rc = ember__run_nograd(bwd_op, nin, seen, &a, o);
    if (rc < 0) {
        s->rc = rc;
        return true;
    }
    for (int i = 0; i < 3; i++) {
        ember_tensor *t = o[i] ? keep(s, rc, &o[i]) : NULL;
        if (t && NEED(i)) give(s, &gi[i], t);
    }
    return true;
}

/* y = relu(conv2d(x, w) + b): gy is relu's adjoint of g (from y), b's
   gradient gy summed over all but the channels */
RULE(conv2d_relu)
{
    RULE_LOCALS;
    static const int not_channels[3] = {0, 2, 3};
    ember_tensor *seen[4] = {g, OUT(0), IN(0), IN(1)};
    if (have(s, g, OUT(0)) && have(s, IN(0), IN(1)) &&
        conv_grads_in_one_op(r, EMBER_OP_CONV2D_RELU_BACKWARD, 4, seen, 12))
        return;
    ember_tensor *gy = relu_bwd(s, g, OUT(0));
    conv2d_adjoints(r, gy);
    if (NEED(2)) give(s, &gi[2], sum_dims(s, gy, 3, not_channels, 0));
}

/* (p, idx) = max_pool2d(relu(conv2d(x, w) + b)): relu's mask is p > 0 (a
   pooled value is the convolution's output at its position), so the
   convolution's gradient is max_pool2d's adjoint of g masked by p; b's is
   the masked g summed over all but the channels */
RULE(conv2d_relu_pool)
{
    RULE_LOCALS;
    static const int not_channels[3] = {0, 2, 3};
    ember_tensor *seen[5] = {g, OUT(0), OUT(1), IN(0), IN(1)};
    if (!have(s, g, OUT(0)) || !have(s, OUT(1), IN(0)) || !have(s, IN(1), IN(1))) return;
    if (conv_grads_in_one_op(r, EMBER_OP_CONV2D_RELU_POOL_BACKWARD, 5, seen, 16)) return;
    const int64_t *st = &at->i[0], *pd = &at->i[2];
    int64_t ys[4] = {in[0], 0, 0, 0}, ws[EMBER_MAX_DIMS];
    ember__node_in_shape(n, 1, ws);
    ys[1] = ws[0];
    ys[2] = nn_out_size(in[2], ws[2], st[0], pd[0], at->i[4]);
    ys[3] = nn_out_size(in[3], ws[3], st[1], pd[1], at->i[5]);
    ember_tensor *gq = relu_bwd(s, g, OUT(0)), *o = NULL, *o2 = NULL;
    ember_tensor *ix = OK(s) ? keep(s, ember_to_dtype(OUT(1), EMBER_INT64, &o2), &o2) : NULL;   /* the int32 positions */
    ember_tensor *gy = OK(s) && ix ? keep(s, ember_max_pool2d_backward(gq, ix, ys, &o), &o) : NULL;
    conv2d_adjoints(r, gy);
    if (NEED(2)) give(s, &gi[2], sum_dims(s, gq, 3, not_channels, 0));
}

/* the adjoints are bilinear in their two inputs, so their own gradients are
   convolutions again: <G, bi(g, w)> = <conv2d(G, w), g> = <bw(G, g), w> and
   <G, bw(x, g)> = <bi(g, G), x> = <conv2d(x, G), g> */
/* (g, w) -> gx */
RULE(conv2d_backward_input)
{
    RULE_LOCALS;
    const int64_t *st = &at->i[0], *pd = &at->i[2], *dl = &at->i[4];
    int64_t ws[EMBER_MAX_DIMS];
    ember__node_in_shape(n, 1, ws);
    ember_tensor *o = NULL, *o2 = NULL;
    if (OK(s) && NEED(0)) give(s, &gi[0], keep(s, ember_conv2d(g, IN(1), st, pd, dl, at->i[6], &o), &o));
    if (OK(s) && NEED(1))
        give(s, &gi[1], keep(s, ember_conv2d_backward_weight(g, IN(0), ws, st, pd, dl, at->i[6], &o2), &o2));
}

/* (x, g) -> gw */
RULE(conv2d_backward_weight)
{
    RULE_LOCALS;
    const int64_t *st = &at->i[0], *pd = &at->i[2], *dl = &at->i[4];
    ember_tensor *o = NULL, *o2 = NULL;
    if (OK(s) && NEED(0))
        give(s, &gi[0], keep(s, ember_conv2d_backward_input(IN(1), g, in, st, pd, dl, at->i[6], &o), &o));
    if (OK(s) && NEED(1)) give(s, &gi[1], keep(s, ember_conv2d(IN(0), g, st, pd, dl, at->i[6], &o2), &o2));
}

RULE(max_pool2d)
{
    RULE_LOCALS;
    ember_tensor *o = NULL;
    if (OK(s)) give(s, &gi[0], keep(s, ember_max_pool2d_backward(g, OUT(1), in, &o), &o));
}

/* linear in g: read the pooled positions back */
RULE(max_pool2d_backward)
{
    RULE_LOCALS;
    if (!NEED(0)) return;
    int64_t xs[EMBER_MAX_DIMS], ps[EMBER_MAX_DIMS];
    ember__node_out_shape(n, 0, xs);            /* (N, C, H, W) */
    int np = ember__node_in_shape(n, 1, ps);    /* (N, C, H', W') */
    int64_t fx[3] = {xs[0], xs[1], xs[2] * xs[3]}, fp[3] = {ps[0], ps[1], ps[2] * ps[3]};
    ember_tensor *o = NULL, *v = NULL;
    ember_tensor *gf = reshape(s, g, 3, fx), *idx = reshape(s, IN(1), 3, fp);
    if (OK(s) && gf && idx) v = keep(s, ember_gather(gf, 2, idx, &o), &o);
    give(s, &gi[0], reshape(s, v, np, ps));
}

RULE(avg_pool2d)
{
    RULE_LOCALS;
    ember_tensor *o = NULL;
    if (OK(s))
        give(s, &gi[0], keep(s, ember_avg_pool2d_backward(g, in, &at->i[0], &at->i[2], &at->i[4], &o), &o));
}

/* avg_pool2d is its own adjoint's adjoint */
RULE(avg_pool2d_backward)
{
    RULE_LOCALS;
    ember_tensor *o = NULL;
    if (OK(s)) give(s, &gi[0], keep(s, ember_avg_pool2d(g, &at->i[0], &at->i[2], &at->i[4], &o), &o));
}

/* A one-pass kernel's results: take[i] becomes input i's gradient where it
   needs one; then the kernel's nd references in made are released. */
static void hand_over(arena *s, ember_tensor **gi, int nin, const ember_node *n, ember_tensor *const *take, int nd,
                      ember_tensor *const *made)
{
    for (int i = 0; i < nin && OK(s); i++)
        if (NEED(i)) give(s, &gi[i], take[i]);
    for (int k = 0; k < nd; k++) ember_tensor_release(made[k]);
}

/* The cells' one-pass backward kernels are the CPU's (rnn.c); on a device
   the rules compose public ops, which run there. */
static bool on_cpu(const ember_tensor *t) { return t && t->storage->device == EMBER_CPU; }

/* lstm_cell: with a = gi + gh and (i, f, u, o) = (sigmoid, sigmoid, tanh,
   sigmoid) of its four blocks, c' = f c + i u and h = o tanh(c'). Given gh' and
   gc' for h and c': dc = gc' + gh' o (1 - tanh^2 c'); da = (dc u i (1 - i),
   dc c f (1 - f), dc i (1 - u^2), gh' tanh(c') o (1 - o)) for both gi and gh;
   dc_prev = dc f. When no recording would see these ops (a first-order
   backward) one kernel computes them in a pass; else they are public ops, so
   an outer manager differentiates them. */
RULE(lstm_cell)
{
    RULE_LOCALS;
    ember_tensor *kept[6] = {r->go[0], r->go[1], IN(0), IN(1), IN(2), OUT(1)};
    if (!have(s, kept[2], kept[3]) || !have(s, kept[4], kept[5])) return;
    if (on_cpu(IN(0)) && !ember__ag_would_record(6, kept)) {   /* one pass; nothing differentiates it */
        ember_tensor *d[2];
        s->rc = ember__lstm_cell_backward(kept, d);
        ember_tensor *take[3] = {d[0], d[0], d[1]};
        hand_over(s, gi, 3, n, take, 2, d);
        return;
    }
    int64_t H = in[1] / 4;
    ember_tensor *a = t_add(s, IN(0), IN(1)), *sg = t_sigmoid(s, a), *one = num(s, 1);
    ember_tensor *i = slice(s, sg, 1, 0, H), *f = slice(s, sg, 1, H, H), *o = slice(s, sg, 1, 3 * H, H);
    ember_tensor *u = t_tanh(s, slice(s, a, 1, 2 * H, H)), *tc = t_tanh(s, OUT(1));
    ember_tensor *gh = r->go[0];
    ember_tensor *dc = t_add(s, r->go[1], t_mul(s, t_mul(s, gh, o), t_sub(s, one, t_mul(s, tc, tc))));
    ember_tensor *parts[4] = {t_mul(s, t_mul(s, dc, u), sigmoid_slope(s, i)),
                              t_mul(s, t_mul(s, dc, IN(2)), sigmoid_slope(s, f)),
                              t_mul(s, t_mul(s, dc, i), t_sub(s, one, t_mul(s, u, u))),
                              t_mul(s, t_mul(s, gh, tc), sigmoid_slope(s, o))};
    ember_tensor *da = NEED(0) || NEED(1) ? cat_of(s, 4, parts, 1) : NULL;
    if (NEED(0)) give(s, &gi[0], da);
    if (NEED(1)) give(s, &gi[1], da);
    if (NEED(2)) give(s, &gi[2], t_mul(s, dc, f));
}

/* gru_cell: (r, z) = sigmoid of the first two blocks of gi + gh, n =
   tanh(gi_n + r gh_n), h' = (1 - z) n + z h. Given g: dn = g (1 - z) (1 - n^2),
   dz = g (h - n) z (1 - z), dr = dn gh_n r (1 - r); gi gets (dr, dz, dn), gh
   (dr, dz, dn r), h g z. One kernel pass when no recording would see the
   ops, as for lstm_cell. */
RULE(gru_cell)
{
    RULE_LOCALS;
    ember_tensor *kept[4] = {g, IN(0), IN(1), IN(2)};
    if (!have(s, kept[1], kept[2]) || !have(s, kept[3], kept[3])) return;
    if (on_cpu(IN(0)) && !ember__ag_would_record(4, kept)) {   /* one pass; nothing differentiates it */
        ember_tensor *d[3];
        s->rc = ember__gru_cell_backward(kept, d);
        hand_over(s, gi, 3, n, d, 3, d);
        return;
    }
    int64_t H = in[1] / 3;
    ember_tensor *xi = IN(0), *xh = IN(1), *hp = IN(2), *one = num(s, 1);
    ember_tensor *rz = t_sigmoid(s, slice(s, t_add(s, xi, xh), 1, 0, 2 * H));
    ember_tensor *rg = slice(s, rz, 1, 0, H), *z = slice(s, rz, 1, H, H), *hn = slice(s, xh, 1, 2 * H, H);
    ember_tensor *nv = t_tanh(s, t_add(s, slice(s, xi, 1, 2 * H, H), t_mul(s, rg, hn)));
    ember_tensor *dn = t_mul(s, t_mul(s, g, t_sub(s, one, z)), t_sub(s, one, t_mul(s, nv, nv)));
    ember_tensor *dz = t_mul(s, t_mul(s, g, t_sub(s, hp, nv)), sigmoid_slope(s, z));
    ember_tensor *dr = t_mul(s, t_mul(s, dn, hn), sigmoid_slope(s, rg));
    if (NEED(0)) {
        ember_tensor *parts[3] = {dr, dz, dn};
        give(s, &gi[0], cat_of(s, 3, parts, 1));
    }
    if (NEED(1)) {
        ember_tensor *parts[3] = {dr, dz, t_mul(s, dn, rg)};
        give(s, &gi[1], cat_of(s, 3, parts, 1));
    }
    if (NEED(2)) give(s, &gi[2], t_mul(s, g, z));
}

/* true when t is known to hold only zeros: a missing output gradient, which
   the engine fills with zeros (only CPU tensors are looked at) */
static bool all_zero(const ember_tensor *t)
{
    if (!t || ember_tensor_device(t) != EMBER_CPU || !ember_tensor_is_contiguous(t)) return false;
    int64_t n = ember_tensor_numel(t);
    const char *p = ember_tensor_data(t);
    size_t es = (size_t)ember_dtype_size(ember_tensor_dtype(t));
    for (size_t i = 0; i < (size_t)n * es; i++)
        if (p[i]) return false;
    return true;
}

/* y = (x - mean) invstd w + b with stats = (mean, var) an output too. Where
   no recording sees this backward and stats got no gradient, the fused
   adjoint batch_norm_backward; else its formulas as recorded ops, plus what
   the stats' gradient adds: gmean / M + gvar 2 (x - mean) / M. */
RULE(batch_norm)
{
    RULE_LOCALS;
    ember_tensor *x = IN(0), *w = IN(1), *st = OUT(1), *gst = r->go[1];
    if (!have(s, x, w) || !have(s, st, g)) return;
    double eps = at->f[0];
    ember_tensor *gx = NULL, *gwb = NULL;
    ember_tensor *seen[5] = {g, x, w, st, gst};
    bool stats_quiet = all_zero(gst);
    int rc = !ember__ag_would_record(5, seen) && stats_quiet
                 ? ember_batch_norm_backward(g, x, w, st, eps, &gx, &gwb)
                 : ember__batch_norm_backward_composed(g, x, w, st, eps, &gx, &gwb);
    ember_tensor *dx = keep(s, rc, &gx), *dwb = rc < 0 ? NULL : keep(s, rc, &gwb);
    if (!OK(s)) return;
    int64_t cs[EMBER_MAX_DIMS], C = in[1];
    for (int d = 0; d < nd; d++) cs[d] = d == 1 ? C : 1;
    if (NEED(0) && !stats_quiet) {
        double M = (double)ember_tensor_numel(x) / (double)C;
        ember_tensor *gmean = reshape(s, slice(s, gst, 0, 0, 1), nd, cs), *gvar = reshape(s, slice(s, gst, 0, 1, 1), nd, cs);
        ember_tensor *mean = reshape(s, slice(s, st, 0, 0, 1), nd, cs);
        ember_tensor *extra = t_add(s, gmean, t_mul(s, t_mul(s, gvar, num(s, 2)), t_sub(s, x, mean)));
        dx = t_add(s, dx, t_mul(s, extra, num(s, 1 / M)));
    }
    if (NEED(0)) give(s, &gi[0], dx);
    if (NEED(1)) give(s, &gi[1], reshape(s, slice(s, dwb, 0, 0, 1), 1, &C));
    if (NEED(2)) give(s, &gi[2], reshape(s, slice(s, dwb, 0, 1, 1), 1, &C));
}

/* ------------------------------------------------------------------ scans, sort, linalg */
static ember_tensor *t_cumsum(arena *s, ember_tensor *a, int dim, int reverse)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_cumsum(a, dim, reverse, &o), &o);
}

static ember_tensor *t_cumprod(arena *s, ember_tensor *a, int dim)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_cumprod(a, dim, &o), &o);
}

static ember_tensor *t_inv(arena *s, ember_tensor *a)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_linalg_inv(a, &o), &o);
}

/* the n x n lower-triangular mask (ones on and below the diagonal, or below
   only when strict) in like's dtype and on its device */
static ember_tensor *lower_mask(arena *s, int64_t n, bool strict, const ember_tensor *like)
{
    ember_tensor *o = NULL, *d = NULL;
    int64_t sh[2] = {n, n};
    if (!OK(s)) return NULL;
    ember_tensor *m = keep(s, ember_full(2, sh, 0, EMBER_FLOAT64, EMBER_CPU, &o), &o);
    if (!m) return NULL;
    double *p = (double *)ember__ptr(m);
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < n; j++) p[i * n + j] = j < i || (!strict && j == i);
    m = keep(s, ember_to_dtype(m, ember_tensor_dtype(like), &d), &d);
    if (m && ember_tensor_device(like) != EMBER_CPU) {
        ember_tensor *dv = NULL;
        m = keep(s, ember_to_device(m, ember_tensor_device(like), &dv), &dv);
    }
    return m;
}

RULE(cumsum)
{
    RULE_LOCALS;
    give(s, &gi[0], t_cumsum(s, g, (int)at->i[0], !at->i[1]));
}

/* x_i != 0: sum_{j >= i} g_j y_j / x_i. At a zero x_i, the products that
   skip it: with the zeros made ones (y' = cumprod of x'), the sum of g_j y'_j
   over the j from i on that see no other zero, which is nonzero only at a
   row's first zero (exact with any number of zeros) */
RULE(cumprod)
{
    RULE_LOCALS;
    int dim = (int)at->i[0];
    ember_tensor *x = IN(0), *y = OUT(0);
    if (!have(s, x, y)) return;
    ember_tensor *z = t_eq(s, x, num(s, 0));
    ember_tensor *xs = where3(s, z, num(s, 1), x);
    ember_tensor *nonzero = t_div(s, t_cumsum(s, t_mul(s, g, y), dim, 1), xs);
    ember_tensor *first = as(s, t_eq(s, t_cumsum(s, z, dim, 0), num(s, 1)), g);
    ember_tensor *zero = t_mul(s, t_cumsum(s, t_mul(s, t_mul(s, g, t_cumprod(s, xs, dim)), first), dim, 1), first);
    give(s, &gi[0], where3(s, z, zero, nonzero));
}

/* the values' gradient goes back to where each came from */
RULE(sort)
{
    RULE_LOCALS;
    ember_tensor *o = NULL, *idx = OUT(1);
    if (!have(s, idx, g)) return;
    give(s, &gi[0], keep(s, ember_scatter_add(nd, in, (int)at->i[0], idx, g, &o), &o));
}

/* -Y^T g Y^T, Y = A^-1 */
RULE(linalg_inv)
{
    RULE_LOCALS;
    ember_tensor *yt = transpose_last(s, OUT(0));
    give(s, &gi[0], t_neg(s, t_matmul(s, t_matmul(s, yt, g), yt)));
}

/* g_logabsdet A^-T (the sign has no gradient) */
RULE(linalg_slogdet)
{
    RULE_LOCALS;
    ember_tensor *gl = r->go[1];
    int64_t sh[EMBER_MAX_DIMS];
    memcpy(sh, in, sizeof sh);
    sh[nd - 1] = sh[nd - 2] = 1;
    give(s, &gi[0], t_mul(s, reshape(s, gl, nd, sh), transpose_last(s, t_inv(s, IN(0)))));
}

/* gB = solve(A^T, g), gA = -gB X^T */
RULE(linalg_solve)
{
    RULE_LOCALS;
    ember_tensor *o = NULL, *gb = NULL, *at_ = transpose_last(s, IN(0));
    if (OK(s) && at_) gb = keep(s, ember_linalg_solve(at_, g, &o), &o);
    if (NEED(0)) give(s, &gi[0], t_neg(s, t_matmul(s, gb, transpose_last(s, OUT(0)))));
    if (NEED(1)) give(s, &gi[1], gb);
}

/* PyTorch's: X = tril(L^T g), made symmetric with its diagonal halved,
   then L^-T X L^-1 */
RULE(linalg_cholesky)
{
    RULE_LOCALS;
    ember_tensor *L = OUT(0);
    if (!have(s, L, g)) return;
    int64_t sz = in[nd - 1];
    ember_tensor *x = t_mul(s, t_matmul(s, transpose_last(s, L), g), lower_mask(s, sz, false, g));
    x = t_mul(s, t_add(s, x, transpose_last(s, t_mul(s, x, lower_mask(s, sz, true, g)))), num(s, 0.5));
    ember_tensor *li = t_inv(s, L);
    give(s, &gi[0], t_matmul(s, t_matmul(s, transpose_last(s, li), x), li));
}

/* gB = solve_triangular(A^T, g) (the other triangle), gA = -gB X^T in the
   triangle read (strictly, for a unit diagonal), as PyTorch's */
RULE(linalg_solve_triangular)
{
    RULE_LOCALS;
    ember_tensor *o = NULL, *gb = NULL, *at_ = transpose_last(s, IN(0));
    bool upper = at->i[0] != 0, unit = at->i[1] != 0;
    if (OK(s) && at_) gb = keep(s, ember_linalg_solve_triangular(at_, g, !upper, unit, &o), &o);
    if (NEED(0)) {
        ember_tensor *mask = lower_mask(s, in[nd - 1], unit, g);
        if (upper) mask = transpose_last(s, mask);
        give(s, &gi[0], t_mul(s, t_neg(s, t_matmul(s, gb, transpose_last(s, OUT(0)))), mask));
    }
    if (NEED(1)) give(s, &gi[1], gb);
}

/* the n x n identity in like's dtype and on its device */
static ember_tensor *eye_like(arena *s, int64_t n, const ember_tensor *like)
{
    ember_tensor *o = NULL;
    if (!OK(s)) return NULL;
    return keep(s, ember_eye(n, n, ember_tensor_dtype(like), ember_tensor_device(like), &o), &o);
}

static ember_tensor *unsqueeze_at(arena *s, ember_tensor *a, int dim)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_unsqueeze(a, dim, &o), &o);
}

/* PyTorch's: with the skew part K of V^T gV, E_ij = L_j - L_i,
   gA = V (K / E off the diagonal, gL on it) V^T */
RULE(linalg_eigh)
{
    RULE_LOCALS;
    ember_tensor *L = OUT(0), *V = OUT(1), *gL = r->go[0], *gV = r->go[1];
    if (!have(s, L, V) || !have(s, gL, gV)) return;
    int64_t sz = in[nd - 1];
    ember_tensor *I = eye_like(s, sz, V), *off = t_sub(s, num(s, 1), I);
    ember_tensor *vg = t_matmul(s, transpose_last(s, V), gV);
    ember_tensor *k = t_mul(s, t_sub(s, vg, transpose_last(s, vg)), num(s, 0.5));
    ember_tensor *e = t_add(s, t_sub(s, unsqueeze_at(s, L, nd - 2), unsqueeze_at(s, L, nd - 1)), I);
    ember_tensor *mid = t_add(s, t_mul(s, t_div(s, k, e), off), t_mul(s, I, unsqueeze_at(s, gL, nd - 2)));
    give(s, &gi[0], t_matmul(s, t_matmul(s, V, mid), transpose_last(s, V)));
}

/* m >= n (Liao et al. 2019): M = R gR^T - gQ^T Q, gA = (gQ + Q copyltu(M)) R^-T,
   copyltu(M) the symmetric matrix of M's lower triangle */
RULE(linalg_qr)
{
    RULE_LOCALS;
    ember_tensor *Q = OUT(0), *R = OUT(1), *gQ = r->go[0], *gR = r->go[1];
    if (!have(s, Q, R) || !have(s, gQ, gR)) return;
    int64_t m = in[nd - 2], sz = in[nd - 1];
    if (m < sz) {
        s->rc = ember__fail(EMBER_ERR_UNSUPPORTED, "backward: the gradient of linalg.qr is implemented for m >= n, "
                            "got a %lld x %lld matrix", (long long)m, (long long)sz);
        return;
    }
    ember_tensor *M = t_sub(s, t_matmul(s, R, transpose_last(s, gR)), t_matmul(s, transpose_last(s, gQ), Q));
    ember_tensor *c = t_add(s, t_mul(s, M, lower_mask(s, sz, false, M)),
                            transpose_last(s, t_mul(s, M, lower_mask(s, sz, true, M))));
    ember_tensor *lhs = t_add(s, gQ, t_matmul(s, Q, c));
    give(s, &gi[0], t_matmul(s, lhs, transpose_last(s, t_inv(s, R))));
}

/* PyTorch's svd_backward, with S = diag(U^T A Vh^T) read from the input:
   only gS: U diag(gS) Vh; else with skew(X) = X - X^T and E_jk = S_k^2 - S_j^2,
   G = (skew(U^T gU) S + S skew(Vh gV)) / E + diag(gS), gA = U G Vh plus, for
   m > n, (I - U U^T) gU S^-1 Vh, for m < n, U S^-1 gVh (I - V Vh) */
RULE(linalg_svd)
{
    RULE_LOCALS;
    ember_tensor *A = IN(0), *U = OUT(0), *Vh = OUT(1), *gU = r->go[0], *gVh = r->go[1], *gS = r->go[2];
    if (!have(s, A, U) || !have(s, Vh, gS) || !have(s, gU, gVh)) return;
    int64_t m = in[nd - 2], sz = in[nd - 1], k = m < sz ? m : sz;
    int last = nd - 1;
    ember_tensor *S = sum_dims(s, t_mul(s, t_matmul(s, transpose_last(s, U), A), Vh), 1, &last, 0);
    if (all_zero(gU) && all_zero(gVh)) {
        give(s, &gi[0], t_matmul(s, U, t_mul(s, unsqueeze_at(s, gS, nd - 1), Vh)));
        return;
    }
    ember_tensor *I = eye_like(s, k, U), *V = transpose_last(s, Vh), *gV = transpose_last(s, gVh);
    ember_tensor *x = t_matmul(s, transpose_last(s, U), gU), *y = t_matmul(s, Vh, gV);
    ember_tensor *uu = t_sub(s, x, transpose_last(s, x)), *vv = t_sub(s, y, transpose_last(s, y));
    ember_tensor *s2 = t_mul(s, S, S);
    ember_tensor *e = t_add(s, t_sub(s, unsqueeze_at(s, s2, nd - 2), unsqueeze_at(s, s2, nd - 1)), I);
    ember_tensor *G = t_div(s, t_add(s, t_mul(s, uu, unsqueeze_at(s, S, nd - 2)), t_mul(s, unsqueeze_at(s, S, nd - 1), vv)), e);
    G = t_add(s, G, t_mul(s, I, unsqueeze_at(s, gS, nd - 2)));
    ember_tensor *gA;
    if (m > sz) {
        ember_tensor *gus = t_div(s, gU, unsqueeze_at(s, S, nd - 2));
        gA = t_add(s, t_matmul(s, U, G), t_sub(s, gus, t_matmul(s, U, t_matmul(s, transpose_last(s, U), gus))));
        gA = t_matmul(s, gA, Vh);
    } else if (m < sz) {
        ember_tensor *sgv = t_div(s, gVh, unsqueeze_at(s, S, nd - 1));
        gA = t_add(s, t_matmul(s, G, Vh), t_sub(s, sgv, t_matmul(s, t_matmul(s, sgv, V), Vh)));
        gA = t_matmul(s, U, gA);
    } else {
        gA = t_matmul(s, U, t_matmul(s, G, Vh));
    }
    give(s, &gi[0], gA);
}

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
    arena s = {{0}, 0, EMBER_OK};
    int rc = rule(n, grad_out, grad_in, &s);
    arena_end(&s);
    if (rc < 0) {
        for (int i = 0; i < ember__node_num_inputs(n); i++) {
            ember_tensor_release(grad_in[i]);
            grad_in[i] = NULL;
        }
    }
    return rc;
}

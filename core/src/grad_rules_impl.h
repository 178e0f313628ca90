/* grad_rules_impl.h: what the built-in grad rules share (grad_rules.c,
   grad_rules_nn.c, grad_rules_linalg.c): the ops written over the arena
   (arena.h) that owns a rule's temporaries, and the rule context. Private
   to those three files. */
#ifndef EMBER_GRAD_RULES_IMPL_H
#define EMBER_GRAD_RULES_IMPL_H

#include "arena.h"
#include "grad_rules.h"
#include "autograd.h"
#include "node.h"
#include "ops/nn.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

/* false (and the arena failed) when an operand is missing: a saved tensor that
   a hook dropped and did not give back, say */
static inline bool have(arena *s, const void *a, const void *b)
{
    if (!OK(s)) return false;
    if (a && b) return true;
    s->rc = ember__fail(EMBER_ERR_STATE, "backward: a tensor saved for this node is missing");
    return false;
}
#define BIN(name)                                                                          \
    static inline ember_tensor *t_##name(arena *s, ember_tensor *a, ember_tensor *b)                  \
    {                                                                                      \
        ember_tensor *o = NULL;                                                            \
        if (!have(s, a, b)) return NULL;                                                   \
        return keep(s, ember_##name(a, b, &o), &o);                                         \
    }
#define UN(name)                                                                           \
    static inline ember_tensor *t_##name(arena *s, ember_tensor *a)                                   \
    {                                                                                      \
        ember_tensor *o = NULL;                                                            \
        if (!have(s, a, a)) return NULL;                                                   \
        return keep(s, ember_##name(a, &o), &o);                                            \
    }
BIN(add) BIN(sub) BIN(mul) BIN(div) BIN(pow) BIN(eq) BIN(gt) BIN(lt) BIN(ge) BIN(le) BIN(matmul)
UN(neg) UN(exp) UN(log) UN(sign) UN(sin) UN(cos) UN(tanh) UN(sigmoid) UN(erf) UN(abs)
UN(digamma) UN(trigamma)

static inline ember_tensor *num(arena *s, double v)
{
    ember_tensor *o = NULL;
    if (!OK(s)) return NULL;
    return keep(s, ember_scalar(v, EMBER_FLOAT64, 1, &o), &o);
}

/* bool mask -> the dtype of `like` */
static inline ember_tensor *as(arena *s, ember_tensor *a, const ember_tensor *like)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_to_dtype(a, ember_tensor_dtype(like), &o), &o);
}

static inline ember_tensor *relu_bwd(arena *s, ember_tensor *g, ember_tensor *y)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !g || !y) return NULL;
    return keep(s, ember_relu_backward(g, y, &o), &o);
}

static inline ember_tensor *where3(arena *s, ember_tensor *c, ember_tensor *a, ember_tensor *b)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !c || !a || !b) return NULL;
    return keep(s, ember_where(c, a, b, &o), &o);
}

static inline ember_tensor *reshape(arena *s, ember_tensor *a, int nd, const int64_t *shape)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_reshape(a, nd, shape, &o), &o);
}

static inline ember_tensor *expand(arena *s, ember_tensor *a, int nd, const int64_t *shape)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_expand(a, nd, shape, &o), &o);
}

static inline ember_tensor *sum_dims(arena *s, ember_tensor *a, int nd, const int *dims, int keepdim)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_sum(a, nd, dims, keepdim, &o), &o);
}

/* zeros of the given shape, in like's dtype and on its device */
static inline ember_tensor *zeros(arena *s, int nd, const int64_t *shape, const ember_tensor *like)
{
    ember_tensor *o = NULL;
    if (!OK(s)) return NULL;
    return keep(s, ember_full(nd, shape, 0, ember_tensor_dtype(like), ember_tensor_device(like), &o), &o);
}

static inline ember_tensor *transpose_last(arena *s, ember_tensor *a)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    int nd = ember_tensor_ndim(a);
    return keep(s, ember_transpose(a, nd - 2, nd - 1, &o), &o);
}

static inline ember_tensor *slice(arena *s, ember_tensor *a, int dim, int64_t start, int64_t len)
{
    ember_tensor *o = NULL;
    if (!OK(s) || !a) return NULL;
    return keep(s, ember_narrow(a, dim, start, len, &o), &o);
}

static inline ember_tensor *cat_of(arena *s, int k, ember_tensor *const *parts, int dim)
{
    ember_tensor *o = NULL;
    for (int i = 0; i < k; i++)
        if (!parts[i]) return NULL;
    if (!OK(s)) return NULL;
    return keep(s, ember_cat(k, parts, dim, &o), &o);
}

/* sigmoid's slope from its output: y (1 - y) */
static inline ember_tensor *sigmoid_slope(arena *s, ember_tensor *y)
{
    return t_mul(s, y, t_sub(s, num(s, 1), y));
}

/* hands a temporary to the engine (one more reference) */
static inline void give(arena *s, ember_tensor **slot, ember_tensor *t)
{
    if (!OK(s) || !t) return;
    ember_tensor_retain(t);
    *slot = t;
}

/* The keepdim shape of a reduction over `mask` of an input of shape in. */
static inline int keepdim_shape(int nd, const int64_t *in, unsigned mask, int64_t *out)
{
    for (int d = 0; d < nd; d++) out[d] = (mask >> d) & 1 ? 1 : in[d];
    return nd;
}

/* g of a reduction, broadcast back to the input's shape */
static inline ember_tensor *expand_back(arena *s, ember_tensor *g, int nd, const int64_t *in, unsigned mask)
{
    int64_t kd[EMBER_MAX_DIMS] = {0};
    keepdim_shape(nd, in, mask, kd);
    return expand(s, reshape(s, g, nd, kd), nd, in);
}

static inline int mask_list(unsigned mask, int nd, int *dims)
{
    int k = 0;
    for (int d = 0; d < nd; d++)
        if ((mask >> d) & 1) dims[k++] = d;
    return k;
}

static inline double count_of(int nd, const int64_t *in, unsigned mask)
{
    double c = 1;
    for (int d = 0; d < nd; d++)
        if ((mask >> d) & 1) c *= (double)in[d];
    return c;
}

/* A matmul gradient for a 1-D operand comes out with a trailing size-1 dim. */
static inline ember_tensor *reshape_to_in(arena *s, ember_tensor *t, const ember_node *n, int i)
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
#define RULE(name) void grad_##name(rule_ctx *r)
#define RULE_LOCALS                                                                        \
    const ember_node *n = r->n;                                                            \
    ember_tensor **gi = r->gi;                                                             \
    arena *s = r->s;                                                                       \
    const ember_attrs *at = r->at;                                                         \
    ember_tensor *g = r->g;                                                                \
    const int64_t *in = r->in;                                                             \
    int nd = r->nd, op = r->op;                                                            \
    (void)n, (void)gi, (void)s, (void)at, (void)g, (void)in, (void)nd, (void)op

/* true when t is known to hold only zeros: a missing output gradient, which
   the engine fills with zeros (only CPU tensors are looked at) */
static inline bool all_zero(const ember_tensor *t)
{
    if (!t || ember_tensor_device(t) != EMBER_CPU || !ember_tensor_is_contiguous(t)) return false;
    int64_t n = ember_tensor_numel(t);
    const char *p = ember_tensor_data(t);
    size_t es = (size_t)ember_dtype_size(ember_tensor_dtype(t));
    for (size_t i = 0; i < (size_t)n * es; i++)
        if (p[i]) return false;
    return true;
}

/* Every rule named in ops.def, for the table in grad_rules.c. */
#define NO_GRAD ember__no_grad_rule
#define OP(E, n, ni, no, fwd, grad, ...) void grad(rule_ctx *r);
#include "ops/ops.def"
#undef OP
#undef NO_GRAD

#endif

/* conv_fused.c: the fused convolutions' other ops on the CPU: conv2d_relu's
   backward and conv2d_relu_max_pool2d with its backward. float32 runs
   oneDNN's primitives with the fusions conv_dnnl_fused.c writes; anything
   else, and any shape those decline, is composed from conv.c's ops,
   relu_backward, max pooling and the sums, without recording.
   Dtypes: nn.h. */
#include "conv.h"

#include <string.h>

/* The oneDNN path of the fused backward ops: their n inputs contiguous in
   c (in[int_at] as int32, int_at -1 for none; the rest float32) and their
   gradients allocated, gw as w, gb {O} and, wanted, gx as x */
typedef struct {
    int n;
    ember_tensor *c[5], *gx, *gw, *gb;
} dnnl_grads;

#define CF(t) ((const float *)ember__ptr(t))
#define FP(t) ((float *)ember__ptr(t))

static int dnnl_grads_begin(dnnl_grads *d, int n, ember_tensor *const *in, int int_at, const ember_tensor *x,
                            const ember_tensor *w, int64_t O, bool want_gx)
{
    memset(d, 0, sizeof *d);
    d->n = n;
    int rc = EMBER_OK;
    for (int i = 0; i < n; i++)
        EMBER_CHECK(ember__contiguous_as(in[i], i == int_at ? EMBER_INT32 : EMBER_FLOAT32, &d->c[i]));
    EMBER_CHECK(ember__new(4, w->shape, EMBER_FLOAT32, EMBER_CPU, &d->gw));
    EMBER_CHECK(ember__new(1, &O, EMBER_FLOAT32, EMBER_CPU, &d->gb));
    if (want_gx) EMBER_CHECK(ember__new(4, x->shape, EMBER_FLOAT32, EMBER_CPU, &d->gx));
done:
    return rc;
}

/* the backward ops' n inputs all 4-D (named as names), and the geometry of
   the convolution of in[n - 2] (x) by in[n - 1] (w) with conv2d's attrs at */
static int backward_geom(const char *name, int n, ember_tensor *const *in, const char *const *names,
                         const ember_attrs *at, conv_geom *g)
{
    for (int i = 0; i < n; i++) EMBER_TRY(ember__nn_need_4d(name, names[i], in[i]));
    const int64_t *st, *pd, *dl;
    ember__conv_attrs_unpack(at, &st, &pd, &dl);
    return ember__conv_geom_init(name, in[n - 2]->shape, in[n - 1]->shape, st, pd, dl, at->i[6], g);
}

/* hands the gradients to out[0..2] when oneDNN ran (out[0] NULL where gx
   was not wanted) and releases the rest */
static void dnnl_grads_end(dnnl_grads *d, bool ran, ember_tensor **out)
{
    if (ran) out[0] = ember__take(&d->gx), out[1] = ember__take(&d->gw), out[2] = ember__take(&d->gb);
    ember__release_list(d->c, d->n);
    EMBER_RELEASE(d->gx, d->gw, d->gb);
}

/* CONV2D_RELU_BACKWARD (g, y, x, w) -> (gx, gw, gb): conv2d_relu's gradient
   from g and its output y, with conv2d's attrs and i[12] whether gx is
   wanted (else out[0] stays NULL). On the CPU in float32 through oneDNN,
   relu's mask is applied as the gradient is written in the layout both
   adjoints read (conv_dnnl.c); otherwise relu_backward, its sums per
   channel and the two adjoint ops. Not differentiable: conv2d_relu's rule
   runs it only where no recording sees the backward. */
/* The composed tail of the fused convolutions' backward ops: b's gradient
   out[2], the sums of gb_of over all but the channels, then conv2d's
   adjoints of gz, w's into out[1] and, wanted, x's into out[0]; at is the
   convolution's attrs, name the op for errors about the result shapes */
static int conv_grads_composed(const char *name, ember_tensor *gb_of, ember_tensor *gz, ember_tensor *x,
                               ember_tensor *w, const ember_attrs *at, bool want_gx, ember_tensor **out)
{
    static const ember_attrs per_channel = {{0, (1u << 0) | (1u << 2) | (1u << 3), 0}, {0}};   /* sum over N, H, W */
    ember_attrs aw = *at, ad = *at;
    EMBER_TRY(ember__nn_set_shape(&aw, name, w->shape));
    EMBER_TRY(ember__nn_set_shape(&ad, name, x->shape));
    EMBER_TRY(ember__run_nograd(EMBER_OP_SUM, 1, &gb_of, &per_channel, &out[2]));
    ember_tensor *xg[2] = {x, gz}, *gw[2] = {gz, w};
    EMBER_TRY(ember__run_nograd(EMBER_OP_CONV2D_BACKWARD_WEIGHT, 2, xg, &aw, &out[1]));
    return want_gx ? ember__run_nograd(EMBER_OP_CONV2D_BACKWARD_INPUT, 2, gw, &ad, &out[0]) : EMBER_OK;
}

static int conv_relu_backward_composed(ember_tensor *const *in, const ember_attrs *at, bool want_gx,
                                       ember_tensor **out)
{
    ember_tensor *gz = NULL;
    int rc = ember__run_nograd(EMBER_OP_RELU_BACKWARD, 2, in, NULL, &gz);
    if (rc >= 0) rc = conv_grads_composed("conv2d_relu_backward", gz, gz, in[2], in[3], at, want_gx, out);
    ember_tensor_release(gz);
    return rc;
}

int fwd_conv2d_relu_backward(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const char *name = ember__ops[op].name;
    ember_tensor *gy = in[0], *y = in[1], *x = in[2], *w = in[3];
    const bool want_gx = at->i[12] != 0;
    char sg[200], sy[200];
    static const char *const names[4] = {"grad_output", "output", "input", "weight"};
    conv_geom g;
    EMBER_TRY(backward_geom(name, 4, in, names, at, &g));
    const int64_t ys[4] = {g.N, g.O, g.Ho, g.Wo};
    if (memcmp(gy->shape, ys, sizeof ys) != 0 || memcmp(y->shape, ys, sizeof ys) != 0)
        return ember__fail(EMBER_ERR_SHAPE, "%s: grad_output %s and output %s must both be the convolution's "
                           "{%lld, %lld, %lld, %lld}", name, ember__tshape(sg, gy), ember__tshape(sy, y),
                           (long long)ys[0], (long long)ys[1], (long long)ys[2], (long long)ys[3]);
    bool fast = true;
    /* channels_last operands: the composed ops, which read and write that layout (nhwc.c) */
    for (int i = 0; i < 4; i++)
        fast = fast && in[i]->storage->device == EMBER_CPU && in[i]->dtype == EMBER_FLOAT32 && !ember__is_nhwc(in[i]);
    if (!fast || g.N == 0 || g.K == 0 || g.Og == 0 || g.Ho == 0 || g.Wo == 0)
        return conv_relu_backward_composed(in, at, want_gx, out);
    dnnl_grads d;
    int rc = dnnl_grads_begin(&d, 4, in, -1, x, w, g.O, want_gx);
    const bool ran = rc == EMBER_OK &&
        ember__dnnl_conv_relu_backward(&g, CF(d.c[0]), CF(d.c[1]), CF(d.c[2]), CF(d.c[3]),
                                       d.gx ? FP(d.gx) : NULL, FP(d.gw), FP(d.gb));
    dnnl_grads_end(&d, ran, out);
    return rc != EMBER_OK || ran ? rc : conv_relu_backward_composed(in, at, want_gx, out);
}

/* ------------------------------------------------------------------ conv2d_relu_max_pool2d */
/* the pool's window from attrs i[12..15] (kernel, stride), checked against
   the convolution's output: max_pool2d's own checks, named for op */
static int pool_window(const char *name, const ember_attrs *at, const conv_geom *g, int64_t *Hp, int64_t *Wp)
{
    const int64_t *k = &at->i[12], *st = &at->i[14];
    if (k[0] < 1 || k[1] < 1 || st[0] < 1 || st[1] < 1 || k[0] > INT32_MAX || k[1] > INT32_MAX ||
        st[0] > INT32_MAX || st[1] > INT32_MAX)
        return ember__fail(EMBER_ERR_ARG, "%s: pool kernel {%lld, %lld} and stride {%lld, %lld} must be positive "
                           "and below 2^31", name, (long long)k[0], (long long)k[1], (long long)st[0],
                           (long long)st[1]);
    if (g->Ho < k[0] || g->Wo < k[1])
        return ember__fail(EMBER_ERR_SHAPE, "%s: the convolution's output {%lld, %lld, %lld, %lld} is smaller than "
                           "the pool kernel {%lld, %lld}", name, (long long)g->N, (long long)g->O, (long long)g->Ho,
                           (long long)g->Wo, (long long)k[0], (long long)k[1]);
    *Hp = (g->Ho - k[0]) / st[0] + 1;
    *Wp = (g->Wo - k[1]) / st[1] + 1;
    return EMBER_OK;
}

/* max_pool2d's attrs from the fused op's */
static ember_attrs pool_attrs(const ember_attrs *at)
{
    ember_attrs pa;
    memset(&pa, 0, sizeof pa);
    pa.i[0] = at->i[12], pa.i[1] = at->i[13], pa.i[2] = at->i[14], pa.i[3] = at->i[15];
    return pa;
}

/* the fused path's conditions: float32 on the CPU, windows that tile, nothing channels_last (the
   composed ops read and write that layout as it is) */
static bool pool_fusable(int n, ember_tensor *const *t, const ember_attrs *at)
{
    for (int i = 0; i < n; i++)
        if (t[i]->storage->device != EMBER_CPU || t[i]->dtype != EMBER_FLOAT32 || ember__is_nhwc(t[i])) return false;
    return at->i[12] == at->i[14] && at->i[13] == at->i[15];
}

int fwd_conv2d_relu_pool(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const char *name = ember__ops[op].name;
    conv_geom g;
    int64_t rs[4], Hp, Wp;
    EMBER_TRY(ember__conv_plan_make(op, in, at, &g, rs));
    EMBER_TRY(ember__conv_bias_check(name, in[2], in[0], g.O));
    EMBER_TRY(pool_window(name, at, &g, &Hp, &Wp));
    if (g.Ho * g.Wo > INT32_MAX)
        return ember__fail(EMBER_ERR_SHAPE, "%s: the convolution's output planes of %lld x %lld hold more than 2^31 "
                           "positions (its positions are int32)", name, (long long)g.Ho, (long long)g.Wo);
    const ember_attrs pa = pool_attrs(at);
    ember_tensor *c[3] = {NULL, NULL, NULL}, *p = NULL, *ix = NULL, *y = NULL, *pi[2] = {NULL, NULL};
    int rc = EMBER_OK;
    if (pool_fusable(3, in, at) && g.N > 0 && g.K > 0 && g.Og > 0) {
        const int64_t ps[4] = {g.N, g.O, Hp, Wp};
        for (int i = 0; i < 3; i++) EMBER_CHECK(ember__contiguous_as(in[i], EMBER_FLOAT32, &c[i]));
        EMBER_CHECK(ember__new(4, ps, EMBER_FLOAT32, EMBER_CPU, &p));
        EMBER_CHECK(ember__new(4, ps, EMBER_INT32, EMBER_CPU, &ix));
        if (ember__dnnl_conv_relu_pool(&g, (const float *)ember__ptr(c[0]), (const float *)ember__ptr(c[1]),
                                       (const float *)ember__ptr(c[2]), at->i[12], at->i[13],
                                       (float *)ember__ptr(p), (int32_t *)ember__ptr(ix))) {
            out[0] = p, out[1] = ix;
            p = ix = NULL;
            goto done;
        }
    }
    /* conv2d_relu, then max_pool2d over its output, its positions as int32 */
    EMBER_CHECK(ember__run_nograd(EMBER_OP_CONV2D_RELU, 3, in, at, &y));
    EMBER_CHECK(ember__run_nograd(EMBER_OP_MAX_POOL2D, 1, &y, &pa, pi));
    EMBER_CHECK(ember__as_dtype(pi[1], EMBER_INT32, &out[1]));
    out[0] = pi[0], pi[0] = NULL;
done:
    ember_tensor_release(pi[0]);
    ember_tensor_release(pi[1]);
    for (int i = 0; i < 3; i++) ember_tensor_release(c[i]);
    ember_tensor_release(p);
    ember_tensor_release(ix);
    ember_tensor_release(y);
    return rc;
}

/* the backward as ops: gp masked by p > 0, put back at the positions, its
   sums per channel, and the two adjoints */
static int conv_relu_pool_backward_composed(ember_tensor *const *in, const ember_attrs *at, const conv_geom *g,
                                            bool want_gx, ember_tensor **out)
{
    const char *name = "conv2d_relu_max_pool2d_backward";
    ember_tensor *gq = NULL, *gz = NULL, *ix = NULL, *two[2];
    ember_attrs ap;
    const int64_t ys[4] = {g->N, g->O, g->Ho, g->Wo};
    int rc = EMBER_OK;
    memset(&ap, 0, sizeof ap);
    EMBER_CHECK(ember__nn_set_shape(&ap, name, ys));
    EMBER_CHECK(ember__run_nograd(EMBER_OP_RELU_BACKWARD, 2, in, NULL, &gq));
    EMBER_CHECK(ember__as_dtype(in[2], EMBER_INT64, &ix));
    two[0] = gq, two[1] = ix;
    EMBER_CHECK(ember__run_nograd(EMBER_OP_MAX_POOL2D_BACKWARD, 2, two, &ap, &gz));
    /* b's gradient from the pooled values: the same numbers as from gz */
    rc = conv_grads_composed(name, gq, gz, in[3], in[4], at, want_gx, out);
done:
    ember_tensor_release(gq);
    ember_tensor_release(gz);
    ember_tensor_release(ix);
    return rc;
}

/* CONV2D_RELU_POOL_BACKWARD (gp, p, idx, x, w) -> (gx, gw, gb) */
int fwd_conv2d_relu_pool_backward(int op, int nin, ember_tensor *const *in, const ember_attrs *at,
                                  ember_tensor **out)
{
    EMBER_UNUSED(nin);
    const char *name = ember__ops[op].name;
    ember_tensor *gp = in[0], *p = in[1], *idx = in[2], *x = in[3], *w = in[4];
    const bool want_gx = at->i[16] != 0;
    char s1[200], s2[200], s3[200];
    static const char *const names[5] = {"grad_output", "output", "indices", "input", "weight"};
    conv_geom g;
    int64_t Hp, Wp;
    EMBER_TRY(backward_geom(name, 5, in, names, at, &g));
    EMBER_TRY(pool_window(name, at, &g, &Hp, &Wp));
    const int64_t ps[4] = {g.N, g.O, Hp, Wp};
    if (memcmp(gp->shape, ps, sizeof ps) != 0 || memcmp(p->shape, ps, sizeof ps) != 0 ||
        memcmp(idx->shape, ps, sizeof ps) != 0 || idx->dtype != EMBER_INT32)
        return ember__fail(EMBER_ERR_SHAPE, "%s: grad_output %s, output %s and int32 indices %s %s must all be the "
                           "pooled {%lld, %lld, %lld, %lld}", name, ember__tshape(s1, gp), ember__tshape(s2, p),
                           ember_dtype_name(idx->dtype), ember__tshape(s3, idx), (long long)ps[0],
                           (long long)ps[1], (long long)ps[2], (long long)ps[3]);
    ember_tensor *f[4] = {gp, p, x, w};
    if (!pool_fusable(4, f, at) || idx->storage->device != EMBER_CPU || g.N == 0 || g.K == 0 || g.Og == 0)
        return conv_relu_pool_backward_composed(in, at, &g, want_gx, out);
    dnnl_grads d;
    int rc = dnnl_grads_begin(&d, 5, in, 2, x, w, g.O, want_gx);
    const bool ran = rc == EMBER_OK &&
        ember__dnnl_conv_relu_pool_backward(&g, at->i[12], at->i[13], CF(d.c[0]), CF(d.c[1]),
                                            (const int32_t *)ember__ptr(d.c[2]), CF(d.c[3]), CF(d.c[4]),
                                            d.gx ? FP(d.gx) : NULL, FP(d.gw), FP(d.gb));
    dnnl_grads_end(&d, ran, out);
    return rc != EMBER_OK || ran ? rc : conv_relu_pool_backward_composed(in, at, &g, want_gx, out);
}

/* grad_rules_nn.c: the grad rules of the network ops: linear and matmul,
   convolutions, pooling, the recurrent cells and batch norm (see grad_rules.c). */
#include "grad_rules_impl.h"

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

static void conv2d_adjoints(rule_ctx *r, ember_tensor *gy)
{
    RULE_LOCALS;
    const int64_t *st = &at->i[0], *pd = &at->i[2], *dl = &at->i[4];
    int64_t ws[EMBER_MAX_DIMS];
    ember__node_in_shape(n, 1, ws);
    ember_tensor *o = NULL, *o2 = NULL;
    if (!have(s, gy, gy)) return;
    if (NEED(0)) give(s, &gi[0], keep(s, ember_conv2d_backward_input(gy, IN(1), in, st, pd, dl, at->i[6], &o), &o));
    if (!OK(s) || !NEED(1)) return;
    ember_tensor *gw = keep(s, ember_conv2d_backward_weight(IN(0), gy, ws, st, pd, dl, at->i[6], &o2), &o2);
    /* the gradient laid out as the weight, which the fused optimizer steps
       want: a channels_last weight's where x and gy leave the layout open
       (1x1 planes are both layouts), a contiguous one's where they are
       channels_last. By ops, as recorded. */
    if (gw && IN(1)->is_contiguous && !gw->is_contiguous) {
        ember_tensor *c = NULL;
        gw = keep(s, ember_contiguous(gw, &c), &c);
    } else if (gw && ember__is_nhwc(IN(1)) && !ember__nhwc_dense(gw)) {
        static const int to_nhwc[4] = {0, 2, 3, 1}, to_nchw[4] = {0, 3, 1, 2};
        ember_tensor *p = NULL, *c = NULL, *v = NULL;
        p = keep(s, ember_permute(gw, 4, to_nhwc, &p), &p);
        if (p) c = keep(s, ember_contiguous(p, &c), &c);
        if (c) gw = keep(s, ember_permute(c, 4, to_nchw, &v), &v);
    }
    give(s, &gi[1], gw);
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
    /* the int32 positions, read as they are on the host */
    ember_tensor *ix = !OK(s) ? NULL
                       : ember_tensor_device(OUT(1)) == EMBER_CPU ? OUT(1)
                                                                  : keep(s, ember_to_dtype(OUT(1), EMBER_INT64, &o2), &o2);
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

/* y = (x - mean) invstd w + b with stats = (mean, var) an output too. Where
   no recording sees this backward and stats got no gradient, the fused
   adjoint batch_norm_backward; else its formulas as recorded ops, plus what
   the stats' gradient adds: gmean / M + gvar 2 (x - mean) / M.
   batch_norm_act's y is act(that): its fused adjoint batch_norm_act_backward
   takes y too; the recorded form passes g through the activation's mask
   first (relu_backward, or hardtanh's where). */
/* g through the activation's mask of its output y (attrs as norm_act.h's),
   recorded: relu_backward, or hardtanh's two where()s */
static ember_tensor *act_grad(arena *s, const ember_attrs *at, ember_tensor *g, ember_tensor *y)
{
    double lo, hi;
    memcpy(&lo, &at->i[1], sizeof lo);
    memcpy(&hi, &at->i[2], sizeof hi);
    if (at->i[0] == 0) return g;
    if (at->i[0] == 1) return relu_bwd(s, g, y);
    ember_tensor *zero = num(s, 0);
    return where3(s, t_le(s, y, num(s, lo)), zero, where3(s, t_ge(s, y, num(s, hi)), zero, g));
}

static void batch_norm_grads(rule_ctx *r, bool act)
{
    RULE_LOCALS;
    ember_tensor *x = IN(0), *w = IN(1), *st = OUT(1), *gst = r->go[1], *y = act ? OUT(0) : NULL;
    if (!have(s, x, w) || !have(s, st, g) || (act && !have(s, y, y))) return;
    double eps = at->f[0];
    ember_tensor *gx = NULL, *gwb = NULL;
    ember_tensor *seen[6] = {g, x, w, st, gst, y};
    bool stats_quiet = all_zero(gst), fused = !ember__ag_would_record(act ? 6 : 5, seen) && stats_quiet;
    double lo, hi;
    memcpy(&lo, &at->i[1], sizeof lo);
    memcpy(&hi, &at->i[2], sizeof hi);
    int rc;
    if (fused && act) {
        rc = ember_batch_norm_act_backward(g, x, w, st, y, eps, (int)at->i[0], lo, hi, &gx, &gwb);
    } else if (fused) {
        rc = ember_batch_norm_backward(g, x, w, st, eps, &gx, &gwb);
    } else {
        ember_tensor *gz = act ? act_grad(s, at, g, y) : g;
        if (!OK(s)) return;
        rc = ember__batch_norm_backward_composed(gz, x, w, st, eps, &gx, &gwb);
    }
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


/* y = (x - mean) rstd w + b over the last k dims, stats = (mean, rstd) an
   output too. Where no recording sees this backward and stats got no
   gradient, the fused adjoint layer_norm_backward; else its formulas as
   recorded ops, gx = rstd (g w - mean(g w) - xhat mean(g w xhat)) (RMS norm:
   no mean(g w)), plus what the stats' gradient adds: (gmean - grstd rstd^2
   xhat) / D (RMS norm: no gmean, its mean is the constant 0). */
RULE(layer_norm)
{
    RULE_LOCALS;
    ember_tensor *x = IN(0), *w = IN(1), *st = OUT(1), *gst = r->go[1];
    if (!have(s, x, w) || !have(s, st, g)) return;
    int k = (int)at->i[0], rms = (int)at->i[1], lead = nd - k;
    int64_t ws[EMBER_MAX_DIMS];
    int nw = ember__node_in_shape(n, 1, ws);
    ember_tensor *seen[5] = {g, x, w, st, gst};
    bool stats_quiet = all_zero(gst);
    if (!ember__ag_would_record(5, seen) && stats_quiet) {
        ember_tensor *gx = NULL, *gwb = NULL;
        int rc = ember_layer_norm_backward(g, x, w, st, k, rms, at->f[0], &gx, NEED(1) || NEED(2) ? &gwb : NULL);
        ember_tensor *dx = keep(s, rc, &gx), *dwb = rc < 0 || !gwb ? NULL : keep(s, rc, &gwb);
        if (NEED(0)) give(s, &gi[0], dx);
        if (NEED(1)) give(s, &gi[1], reshape(s, slice(s, dwb, 0, 0, 1), nw, ws));
        if (NEED(2)) give(s, &gi[2], reshape(s, slice(s, dwb, 0, 1, 1), nw, ws));
        return;
    }
    int64_t kd[EMBER_MAX_DIMS];
    int dims[EMBER_MAX_DIMS];
    double D = 1;
    for (int d = 0; d < nd; d++) kd[d] = d < lead ? in[d] : 1;
    for (int d = lead; d < nd; d++) dims[d - lead] = d, D *= (double)in[d];
    ember_tensor *mean = reshape(s, slice(s, st, 0, 0, 1), nd, kd), *rstd = reshape(s, slice(s, st, 0, 1, 1), nd, kd);
    ember_tensor *xhat = t_mul(s, t_sub(s, x, mean), rstd), *inv_d = num(s, 1 / D);
    if (NEED(0)) {
        ember_tensor *gw = t_mul(s, g, w);
        ember_tensor *inner = t_sub(s, gw, t_mul(s, xhat, t_mul(s, sum_dims(s, t_mul(s, gw, xhat), k, dims, 1), inv_d)));
        if (!rms) inner = t_sub(s, inner, t_mul(s, sum_dims(s, gw, k, dims, 1), inv_d));
        ember_tensor *gx = t_mul(s, rstd, inner);
        if (!stats_quiet) {
            ember_tensor *gmean = reshape(s, slice(s, gst, 0, 0, 1), nd, kd);
            ember_tensor *grstd = reshape(s, slice(s, gst, 0, 1, 1), nd, kd);
            ember_tensor *extra = t_neg(s, t_mul(s, grstd, t_mul(s, t_mul(s, rstd, rstd), xhat)));
            if (!rms) extra = t_add(s, extra, gmean);
            gx = t_add(s, gx, t_mul(s, extra, inv_d));
        }
        give(s, &gi[0], gx);
    }
    if (NEED(1)) give(s, &gi[1], t_mul(s, g, xhat));   /* the engine sums both over the leading dims */
    if (NEED(2)) give(s, &gi[2], g);
}

/* rows = cross_entropy(x, labels, w), stats = (lse, row weights). Where no
   recording sees this backward and stats got no gradient, the fused adjoint;
   else g (a p - b) with p = softmax(x) recorded and a, b constants, plus
   lse's gradient times p (the row weights are constants). w gets none. */
RULE(cross_entropy)
{
    RULE_LOCALS;
    ember_tensor *x = IN(0), *lab = IN(1), *w = IN(2), *st = OUT(1), *gst = r->go[1];
    if (!have(s, x, lab) || !have(s, w, st)) return;
    if (NEED(2)) {
        s->rc = ember__fail(EMBER_ERR_UNSUPPORTED, "cross_entropy: the class weights get no gradient "
                            "(F.cross_entropy composes ops for weights that need one)");
        return;
    }
    if (!NEED(0)) return;
    ember_tensor *seen[5] = {g, x, w, st, gst}, *o = NULL;
    if (!ember__ag_would_record(5, seen) && all_zero(gst)) {
        give(s, &gi[0], keep(s, ember_cross_entropy_backward(g, x, lab, w, st, at->i[0], at->i[1], at->f[0], &o), &o));
        return;
    }
    int64_t m1[2] = {in[0], 1};
    ember_tensor *ca = NULL, *cb = NULL, *p = NULL;
    int rc = ember__cross_entropy_coefs(x, lab, w, at, &ca, &cb);
    ember_tensor *a = keep(s, rc, &ca), *b = rc < 0 ? NULL : keep(s, rc, &cb);
    ember_tensor *pr = OK(s) ? keep(s, ember_softmax(x, 1, &p), &p) : NULL;
    ember_tensor *gx = t_mul(s, reshape(s, g, 2, m1), t_sub(s, t_mul(s, a, pr), b));
    if (!all_zero(gst)) gx = t_add(s, gx, t_mul(s, reshape(s, slice(s, gst, 0, 0, 1), 2, m1), pr));
    give(s, &gi[0], gx);
}
RULE(batch_norm) { batch_norm_grads(r, false); }
RULE(batch_norm_act) { batch_norm_grads(r, true); }

/* y = act(x scale + shift), scale and shift one per channel (dim 1) */
RULE(channel_affine)
{
    RULE_LOCALS;
    ember_tensor *x = IN(0), *sc = IN(1), *y = OUT(0);
    if (!have(s, x, sc) || !have(s, y, g)) return;
    ember_tensor *gz = act_grad(s, at, g, y);
    int64_t cs[EMBER_MAX_DIMS], C = ember_tensor_shape(x)[1];
    int dims[EMBER_MAX_DIMS], k = 0;
    for (int d = 0; d < nd; d++) {
        cs[d] = d == 1 ? C : 1;
        if (d != 1) dims[k++] = d;
    }
    if (NEED(0)) give(s, &gi[0], t_mul(s, gz, reshape(s, sc, nd, cs)));
    if (NEED(1)) give(s, &gi[1], reshape(s, sum_dims(s, t_mul(s, gz, x), k, dims, 0), 1, &C));
    if (NEED(2)) give(s, &gi[2], reshape(s, sum_dims(s, gz, k, dims, 0), 1, &C));
}


/* shape.c: views (reshape, view, transpose, permute, squeeze, unsqueeze,
   expand, narrow, select) and cat / stack. Views share storage with their
   base (and so its version counter). The indexing ops are in index.c. */
#include "ops.h"
#include "../backend.h"

#include <stdint.h>
#include <string.h>


/* A differentiable view of a: it holds a's root (see ember_tensor.base). */
int ember__view_of(ember_tensor *a, int nd, const int64_t *shape, const int64_t *strides, int64_t offset,
                   ember_tensor **out)
{
    EMBER_TRY(ember__make_view(a, nd, shape, strides, offset, out));
    ember_tensor *root = a->base ? a->base : a;
    ember_tensor_retain(root);
    (*out)->base = root;
    (*out)->ag_epoch = root->ag_epoch;
    return EMBER_OK;
}

/* PyTorch's computeStride: the strides that view `a` with `shape`, if any. */
static bool view_strides(const ember_tensor *a, int nd, const int64_t *shape, int64_t *strides)
{
    if (a->numel == 0 || a->ndim == 0) {
        ember__contiguous_strides(nd, shape, strides);
        return true;
    }
    int view_d = nd - 1;
    int64_t chunk_base = a->strides[a->ndim - 1], tensor_numel = 1, view_numel = 1;
    for (int d = a->ndim - 1; d >= 0; d--) {
        tensor_numel *= a->shape[d];
        if (d == 0 || (a->shape[d - 1] != 1 && a->strides[d - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
                strides[view_d] = view_numel * chunk_base;
                view_numel *= shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (d > 0) {
                chunk_base = a->strides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

/* resolves one -1 entry and checks the element count */
static int infer_shape(const char *op, const ember_tensor *a, int nd, const int64_t *in, int64_t *shape)
{
    char buf[200];
    int infer = -1;
    int64_t known = 1;
    for (int d = 0; d < nd; d++) {
        if (in[d] == -1) {
            if (infer >= 0) return ember__fail(EMBER_ERR_SHAPE, "%s: only one dim can be -1", op);
            infer = d;
        } else if (in[d] < 0) {
            return ember__fail(EMBER_ERR_SHAPE, "%s: invalid shape %s", op, ember__shape_str(buf, nd, in));
        } else {
            if (in[d] > 0 && known > INT64_MAX / in[d])
                return ember__fail(EMBER_ERR_SHAPE, "%s: shape %s is invalid for a tensor of %lld elements", op,
                                   ember__shape_str(buf, nd, in), (long long)a->numel);
            known *= in[d];
        }
        shape[d] = in[d];
    }
    if (infer >= 0) {
        if (known == 0 || a->numel % known != 0)
            return ember__fail(EMBER_ERR_SHAPE, "%s: shape %s is invalid for a tensor of %lld elements", op,
                               ember__shape_str(buf, nd, in), (long long)a->numel);
        shape[infer] = a->numel / known;
        known *= shape[infer];
    }
    if (known != a->numel)
        return ember__fail(EMBER_ERR_SHAPE, "%s: shape %s is invalid for a tensor of %lld elements", op,
                           ember__shape_str(buf, nd, in), (long long)a->numel);
    return EMBER_OK;
}

/* RESHAPE, VIEW: i[0] ndim, i[1..] the resolved shape */
int fwd_reshape(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    ember_tensor *a = in[0];
    int nd = (int)at->i[0];
    int64_t strides[EMBER_MAX_DIMS];
    if (view_strides(a, nd, &at->i[1], strides)) return ember__view_of(a, nd, &at->i[1], strides, a->offset, out);
    ember_tensor *c;
    EMBER_TRY(ember__contiguous_as(a, a->dtype, &c));
    ember__contiguous_strides(nd, &at->i[1], strides);
    int rc = ember__make_view(c, nd, &at->i[1], strides, c->offset, out);
    ember_tensor_release(c);
    return rc;
}

int fwd_view(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    char sa[200], ss[200], st[200];
    ember_tensor *a = in[0];
    int nd = (int)at->i[0];
    int64_t strides[EMBER_MAX_DIMS];
    if (!view_strides(a, nd, &at->i[1], strides))
        return ember__fail(EMBER_ERR_SHAPE,
                           "view: shape %s is not compatible with the strides %s of a %s tensor; use reshape",
                           ember__shape_str(ss, nd, &at->i[1]), ember__shape_str(st, a->ndim, a->strides),
                           ember__tshape(sa, a));
    return ember__view_of(a, nd, &at->i[1], strides, a->offset, out);
}

/* a's dims in the order perm gives */
static int view_permuted(ember_tensor *a, const int *perm, ember_tensor **out)
{
    int64_t shape[EMBER_MAX_DIMS], strides[EMBER_MAX_DIMS];
    for (int d = 0; d < a->ndim; d++) {
        shape[d] = a->shape[perm[d]];
        strides[d] = a->strides[perm[d]];
    }
    return ember__view_of(a, a->ndim, shape, strides, a->offset, out);
}

/* a without the dims whose bits are set in drop, from element offset */
static int view_dropping(ember_tensor *a, unsigned drop, int64_t offset, ember_tensor **out)
{
    int64_t shape[EMBER_MAX_DIMS], strides[EMBER_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (drop >> d & 1) continue;
        shape[k] = a->shape[d];
        strides[k++] = a->strides[d];
    }
    return ember__view_of(a, k, shape, strides, offset, out);
}

/* TRANSPOSE: i[0], i[1] */
int fwd_transpose(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    int perm[EMBER_MAX_DIMS];
    for (int d = 0; d < in[0]->ndim; d++) perm[d] = d;
    perm[at->i[0]] = (int)at->i[1];
    perm[at->i[1]] = (int)at->i[0];
    return view_permuted(in[0], perm, out);
}

/* PERMUTE: i[0] ndim, i[1..] perm */
int fwd_permute(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    int perm[EMBER_MAX_DIMS];
    for (int d = 0; d < in[0]->ndim; d++) perm[d] = (int)at->i[1 + d];
    return view_permuted(in[0], perm, out);
}

/* SQUEEZE: i[0] dim (-1: every size-1 dim) */
int fwd_squeeze(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    ember_tensor *a = in[0];
    unsigned drop = 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] == 1 && (at->i[0] < 0 || d == at->i[0])) drop |= 1u << d;
    return view_dropping(a, drop, a->offset, out);
}

/* UNSQUEEZE: i[0] dim in 0..ndim */
int fwd_unsqueeze(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    ember_tensor *a = in[0];
    int dim = (int)at->i[0];
    int64_t shape[EMBER_MAX_DIMS], strides[EMBER_MAX_DIMS];
    for (int d = 0, k = 0; d <= a->ndim; d++) {
        if (d == dim) {
            shape[d] = 1;
            strides[d] = dim < a->ndim ? a->strides[dim] * a->shape[dim] : 1;
            continue;
        }
        shape[d] = a->shape[k];
        strides[d] = a->strides[k++];
    }
    return ember__view_of(a, a->ndim + 1, shape, strides, a->offset, out);
}

/* EXPAND: i[0] ndim, i[1..] shape (resolved) */
int fwd_expand(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    ember_tensor *a = in[0];
    int nd = (int)at->i[0];
    int64_t strides[EMBER_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        int ad = d - (nd - a->ndim);
        strides[d] = ad >= 0 && a->shape[ad] == at->i[1 + d] ? a->strides[ad] : 0;
    }
    return ember__view_of(a, nd, &at->i[1], strides, a->offset, out);
}

/* NARROW: i[0] dim, i[1] start, i[2] length */
int fwd_narrow(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    ember_tensor *a = in[0];
    int64_t shape[EMBER_MAX_DIMS];
    memcpy(shape, a->shape, sizeof shape);
    int dim = (int)at->i[0];
    shape[dim] = at->i[2];
    return ember__view_of(a, a->ndim, shape, a->strides, a->offset + at->i[1] * a->strides[dim], out);
}

/* SELECT: i[0] dim, i[1] index */
int fwd_select(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    ember_tensor *a = in[0];
    int dim = (int)at->i[0];
    return view_dropping(a, 1u << dim, a->offset + at->i[1] * a->strides[dim], out);
}

/* ------------------------------------------------------------------ cat, stack */
static int cat_impl(const char *op, int n, ember_tensor *const *ts, int dim, bool stack, ember_tensor **out)
{
    char sa[200], sb[200];
    const ember_tensor *first = ts[0];
    int nd = first->ndim + (stack ? 1 : 0);
    int64_t shape[EMBER_MAX_DIMS];
    int dt = ember__result_type(n, ts);
    for (int i = 1; i < n; i++) {
        bool ok = ts[i]->ndim == first->ndim;
        for (int d = 0; ok && d < first->ndim; d++)
            if (ts[i]->shape[d] != first->shape[d] && (stack || d != dim)) ok = false;
        if (!ok)
            return ember__fail(EMBER_ERR_SHAPE, "%s: tensor %d has shape %s, which does not match tensor 1 of shape %s%s",
                               op, i + 1, ember__tshape(sb, ts[i]), ember__tshape(sa, first),
                               stack ? "" : " outside the cat dim");
    }
    if (stack) {
        for (int d = 0, k = 0; d < nd; d++) shape[d] = d == dim ? n : first->shape[k++];
    } else {
        memcpy(shape, first->shape, sizeof shape);
        shape[dim] = 0;
        for (int i = 0; i < n; i++) shape[dim] += ts[i]->shape[dim];
    }
    EMBER_TRY(ember__new(nd, shape, dt, first->storage->device, out));
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        int64_t len = stack ? 1 : ts[i]->shape[dim];
        int64_t vshape[EMBER_MAX_DIMS];
        memcpy(vshape, (*out)->shape, sizeof vshape);
        vshape[dim] = len;
        ember_tensor *part, *srcv = ts[i];
        int rc = ember__make_view(*out, nd, vshape, (*out)->strides, off * (*out)->strides[dim], &part);
        if (rc == EMBER_OK && stack) {
            /* view the input with the new dim so shapes line up */
            int64_t ish[EMBER_MAX_DIMS], ist[EMBER_MAX_DIMS];
            for (int d = 0, k = 0; d < nd; d++) {
                if (d == dim) {
                    ish[d] = 1;
                    ist[d] = 0;
                } else {
                    ish[d] = ts[i]->shape[k];
                    ist[d] = ts[i]->strides[k++];
                }
            }
            rc = ember__make_view(ts[i], nd, ish, ist, ts[i]->offset, &srcv);
        }
        if (rc == EMBER_OK) rc = ember__copy_into(part, srcv);
        if (stack && srcv != ts[i]) ember_tensor_release(srcv);
        ember_tensor_release(part);
        if (rc < 0) {
            ember_tensor_release(*out);
            *out = NULL;
            return rc;
        }
        off += len;
    }
    return EMBER_OK;
}

/* CAT, STACK: i[0] dim; inputs are the list */
int fwd_cat(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    return cat_impl("cat", nin, in, (int)at->i[0], false, out);
}

int fwd_stack(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    return cat_impl("stack", nin, in, (int)at->i[0], true, out);
}

/* ------------------------------------------------------------------ public entry points */
static int dim_ok(const char *op, const ember_tensor *a, int dim, int extra)
{
    char sa[200];
    if (!a) return ember__fail(EMBER_ERR_ARG, "%s: argument is NULL", op);
    if (dim < 0 || dim >= a->ndim + extra)
        return ember__fail(EMBER_ERR_ARG, "%s: dim %d out of range for shape %s", op, dim + 1, ember__tshape(sa, a));
    return EMBER_OK;
}

int ember__check_dim(const char *op, const ember_tensor *a, int dim, int extra)
{
    return dim_ok(op, a, dim, extra);
}

static int shape_op(int op, ember_tensor *a, int nd, const int64_t *shape, ember_tensor **out)
{
    const char *name = ember__ops[op].name;
    if (!a || !out || (nd > 0 && !shape)) return ember__fail(EMBER_ERR_ARG, "%s: NULL argument", name);
    if (nd < 0 || nd > EMBER_MAX_DIMS)
        return ember__fail(EMBER_ERR_SHAPE, "%s: %d dims requested, at most %d", name, nd, EMBER_MAX_DIMS);
    ember_attrs at = {{nd}, {0}};
    if (op == EMBER_OP_EXPAND) {
        char sa[200], sb[200];
        if (nd < a->ndim) goto bad_expand;
        for (int d = 0; d < nd; d++) {
            int ad = d - (nd - a->ndim);
            int64_t want = shape[d];
            if (want == -1) {
                if (ad < 0) goto bad_expand;
                want = a->shape[ad];
            }
            if (want < 0 || (ad >= 0 && a->shape[ad] != 1 && a->shape[ad] != want)) goto bad_expand;
            at.i[1 + d] = want;
        }
        EMBER_TRY(ember__check_shape("expand", nd, &at.i[1], NULL));
        return ember__dispatch(op, 1, &a, &at, out);
    bad_expand:
        return ember__fail(EMBER_ERR_SHAPE, "expand: shape %s cannot be expanded to %s", ember__tshape(sa, a),
                           ember__shape_str(sb, nd, shape));
    }
    EMBER_TRY(infer_shape(name, a, nd, shape, &at.i[1]));
    return ember__dispatch(op, 1, &a, &at, out);
}

int ember_reshape(ember_tensor *a, int ndim, const int64_t *shape, ember_tensor **out)
{
    return shape_op(EMBER_OP_RESHAPE, a, ndim, shape, out);
}

int ember_view(ember_tensor *a, int ndim, const int64_t *shape, ember_tensor **out)
{
    return shape_op(EMBER_OP_VIEW, a, ndim, shape, out);
}

int ember_expand(ember_tensor *a, int ndim, const int64_t *shape, ember_tensor **out)
{
    return shape_op(EMBER_OP_EXPAND, a, ndim, shape, out);
}

int ember_transpose(ember_tensor *a, int d0, int d1, ember_tensor **out)
{
    EMBER_TRY(dim_ok("transpose", a, d0, 0));
    EMBER_TRY(dim_ok("transpose", a, d1, 0));
    ember_attrs at = {{d0, d1}, {0}};
    return ember__dispatch(EMBER_OP_TRANSPOSE, 1, &a, &at, out);
}

int ember_permute(ember_tensor *a, int ndim, const int *perm, ember_tensor **out)
{
    char sa[200];
    if (!a || !perm) return ember__fail(EMBER_ERR_ARG, "permute: NULL argument");
    if (ndim != a->ndim)
        return ember__fail(EMBER_ERR_ARG, "permute: %d dims given for shape %s", ndim, ember__tshape(sa, a));
    ember_attrs at = {{ndim}, {0}};
    unsigned seen = 0;
    for (int d = 0; d < ndim; d++) {
        if (perm[d] < 0 || perm[d] >= ndim || (seen & (1u << perm[d])))
            return ember__fail(EMBER_ERR_ARG, "permute: invalid permutation for shape %s (dim %d)",
                               ember__tshape(sa, a), perm[d]);
        seen |= 1u << perm[d];
        at.i[1 + d] = perm[d];
    }
    return ember__dispatch(EMBER_OP_PERMUTE, 1, &a, &at, out);
}

int ember_squeeze(ember_tensor *a, int dim, ember_tensor **out)
{
    if (dim != -1) EMBER_TRY(dim_ok("squeeze", a, dim, 0));
    if (!a) return ember__fail(EMBER_ERR_ARG, "squeeze: argument is NULL");
    ember_attrs at = {{dim}, {0}};
    return ember__dispatch(EMBER_OP_SQUEEZE, 1, &a, &at, out);
}

int ember_unsqueeze(ember_tensor *a, int dim, ember_tensor **out)
{
    EMBER_TRY(dim_ok("unsqueeze", a, dim, 1));
    if (a->ndim >= EMBER_MAX_DIMS) return ember__fail(EMBER_ERR_SHAPE, "unsqueeze: at most %d dims", EMBER_MAX_DIMS);
    ember_attrs at = {{dim}, {0}};
    return ember__dispatch(EMBER_OP_UNSQUEEZE, 1, &a, &at, out);
}

int ember_narrow(ember_tensor *a, int dim, int64_t start, int64_t length, ember_tensor **out)
{
    EMBER_TRY(dim_ok("narrow", a, dim, 0));
    if (start < 0 || length < 0 || start > a->shape[dim] || length > a->shape[dim] - start)   /* no overflow */
        return ember__fail(EMBER_ERR_ARG, "narrow: start %lld and length %lld out of range for dim %d of size %lld",
                           (long long)start + (start < INT64_MAX), (long long)length, dim + 1,
                           (long long)a->shape[dim]);
    ember_attrs at = {{dim, start, length}, {0}};
    return ember__dispatch(EMBER_OP_NARROW, 1, &a, &at, out);
}

int ember_select(ember_tensor *a, int dim, int64_t index, ember_tensor **out)
{
    EMBER_TRY(dim_ok("select", a, dim, 0));
    if (index < 0 || index >= a->shape[dim])
        return ember__fail(EMBER_ERR_ARG, "select: index %lld out of range for dim %d of size %lld",
                           (long long)index + (index < INT64_MAX), dim + 1, (long long)a->shape[dim]);
    ember_attrs at = {{dim, index}, {0}};
    return ember__dispatch(EMBER_OP_SELECT, 1, &a, &at, out);
}

static int list_api(int op, int n, ember_tensor *const *ts, int dim, ember_tensor **out)
{
    const char *name = ember__ops[op].name;
    if (n <= 0 || !ts) return ember__fail(EMBER_ERR_ARG, "%s: expected a non-empty list of tensors", name);
    for (int i = 0; i < n; i++)
        if (!ts[i]) return ember__fail(EMBER_ERR_ARG, "%s: tensor %d is NULL", name, i + 1);
    int extra = op == EMBER_OP_STACK ? 1 : 0;
    EMBER_TRY(dim_ok(name, ts[0], dim, extra));
    if (op == EMBER_OP_STACK && ts[0]->ndim >= EMBER_MAX_DIMS)
        return ember__fail(EMBER_ERR_SHAPE, "stack: at most %d dims", EMBER_MAX_DIMS);
    ember_attrs at = {{dim}, {0}};
    return ember__dispatch(op, n, ts, &at, out);
}

int ember_cat(int n, ember_tensor *const *ts, int dim, ember_tensor **out)
{
    return list_api(EMBER_OP_CAT, n, ts, dim, out);
}

int ember_stack(int n, ember_tensor *const *ts, int dim, ember_tensor **out)
{
    return list_api(EMBER_OP_STACK, n, ts, dim, out);
}

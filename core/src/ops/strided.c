/* strided.c: regions of a tensor given by a geometry over its row-major
   (contiguous) layout: the ops AS_STRIDED and AS_STRIDED_SCATTER, and the
   public ember_as_strided built on the first (ember.as_strided, diagonal). */
#include "ops.h"
#include "../autograd.h"
#include "../backend.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* AS_STRIDED, AS_STRIDED_SCATTER: a region of a tensor given by a geometry
   over its contiguous layout (ember__geometry_of). They are what autograd
   records for writes through views: the root's new value is
   as_strided_scatter(root, value) and the view's is as_strided(root).
   Attrs: i[0] ndim, i[1] offset, i[2..] sizes, i[2 + EMBER_MAX_DIMS..]
   strides; f[0] != 0 (set by ember_as_strided only) asks for a view of a
   non-contiguous input too, where the region is a strided pattern of its
   memory (compose), instead of a region of its contiguous copy. */
static int region_of(ember_tensor *t, const ember_attrs *at, ember_tensor **out)
{
    int nd = (int)at->i[0];
    return ember__make_view(t, nd, &at->i[2], &at->i[2 + EMBER_MAX_DIMS], t->offset + at->i[1], out);
}

/* The region `at` of x's row-major layout as strides and an offset of x's
   memory: the layout offset and each stride, written as indices of x (mixed
   radix over x's shape), must add up without a carry from one dim of x into
   the next anywhere in the region (checked at its far corner, every digit
   being >= 0); then moving along the region moves by whole indices of x. */
static bool compose(const ember_tensor *x, const ember_attrs *at, int64_t *strides, int64_t *offset)
{
    int nd = (int)at->i[0];
    const int64_t *size = &at->i[2], *step = &at->i[2 + EMBER_MAX_DIMS];
    int64_t cs[EMBER_MAX_DIMS], reach[EMBER_MAX_DIMS], numel = 1;
    for (int d = 0; d < nd; d++) numel *= size[d];
    *offset = x->offset;
    memcpy(strides, step, (size_t)nd * sizeof *strides);
    if (numel == 0) return true;   /* reaches nothing */
    ember__contiguous_strides(x->ndim, x->shape, cs);
    int64_t rem = at->i[1];
    for (int k = 0; k < x->ndim; k++) {
        reach[k] = rem / cs[k];
        rem -= reach[k] * cs[k];
        *offset += reach[k] * x->strides[k];
    }
    for (int d = 0; d < nd; d++) {
        strides[d] = 0;
        int64_t left = size[d] > 1 ? step[d] : 0;
        for (int k = 0; k < x->ndim; k++) {
            int64_t digit = left / cs[k];
            left -= digit * cs[k];
            reach[k] += digit * (size[d] - 1);
            strides[d] += digit * x->strides[k];
        }
    }
    for (int k = 0; k < x->ndim; k++)
        if (reach[k] >= x->shape[k]) return false;
    return true;
}

int fwd_as_strided(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    ember_tensor *x = in[0], *c;
    if (x->is_contiguous)   /* a view of the input itself */
        return ember__view_of(x, (int)at->i[0], &at->i[2], &at->i[2 + EMBER_MAX_DIMS], x->offset + at->i[1], out);
    if (at->f[0] != 0) {
        int64_t strides[EMBER_MAX_DIMS], offset;
        char sx[200], sk[200], ss[200], st[200];
        if (compose(x, at, strides, &offset)) return ember__view_of(x, (int)at->i[0], &at->i[2], strides, offset, out);
        return ember__fail(EMBER_ERR_UNSUPPORTED,
                           "as_strided: the view (size %s, stride %s, offset %lld) of the non-contiguous tensor "
                           "of shape %s (strides %s) is not a strided pattern of its memory: call contiguous() first",
                           ember__shape_str(ss, (int)at->i[0], &at->i[2]),
                           ember__shape_str(st, (int)at->i[0], &at->i[2 + EMBER_MAX_DIMS]), (long long)at->i[1],
                           ember__tshape(sx, x), ember__shape_str(sk, x->ndim, x->strides));
    }
    EMBER_TRY(ember__contiguous_as(x, x->dtype, &c));
    int rc = region_of(c, at, out);
    ember_tensor_release(c);
    return rc;
}

int fwd_as_strided_scatter(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    ember_tensor *x = in[0], *region = NULL;
    EMBER_TRY(ember__new(x->ndim, x->shape, x->dtype, x->storage->device, out));
    int rc = ember__copy_into(*out, x);
    if (rc == EMBER_OK) rc = region_of(*out, at, &region);
    if (rc == EMBER_OK) rc = ember__copy_into(region, in[1]);
    ember_tensor_release(region);
    return rc;
}

/* For a dense root in another order than row-major (a transposed or
   permuted result, as elementwise ops give for such inputs): a step of
   `mem` elements in its memory as a step over its row-major layout. The
   step is written in the root's memory strides (largest first) as whole
   indices of its dims; reach[] adds them up, times n, to check the far
   corner stays inside (no carry from one dim into the next). */
static bool logical_step(const ember_tensor *root, const int *order, int n_order, const int64_t *cs, int64_t mem,
                         int64_t times, int64_t *reach, int64_t *logical)
{
    *logical = 0;
    if (mem < 0) return false;
    for (int j = 0; j < n_order; j++) {
        int k = order[j];
        int64_t digit = mem / root->strides[k];
        mem -= digit * root->strides[k];
        reach[k] += digit * times;
        *logical += digit * cs[k];
    }
    return mem == 0;
}

static bool dense_geometry(const ember_tensor *view, const ember_tensor *root, ember_attrs *at)
{
    int order[EMBER_MAX_DIMS], n = 0;
    int64_t cs[EMBER_MAX_DIMS], reach[EMBER_MAX_DIMS] = {0}, v;
    for (int k = 0; k < root->ndim; k++) {   /* dims of size > 1, largest memory stride first */
        if (root->shape[k] < 2) continue;
        int j = n++;
        for (; j > 0 && root->strides[order[j - 1]] < root->strides[k]; j--) order[j] = order[j - 1];
        order[j] = k;
    }
    ember__contiguous_strides(root->ndim, root->shape, cs);
    if (!logical_step(root, order, n, cs, view->offset - root->offset, 1, reach, &v)) return false;
    at->i[1] = v;
    for (int d = 0; d < view->ndim; d++) {
        if (view->shape[d] < 2) continue;   /* a single index: its stride is never used */
        if (!logical_step(root, order, n, cs, view->strides[d], view->shape[d] - 1, reach, &v)) return false;
        at->i[2 + EMBER_MAX_DIMS + d] = v;
    }
    for (int k = 0; k < root->ndim; k++)
        if (reach[k] >= (root->shape[k] > 0 ? root->shape[k] : 1)) return false;
    return true;
}

int ember__geometry_of(const ember_tensor *view, const ember_tensor *root, ember_attrs *at)
{
    char sv[200], sr[200];
    memset(at, 0, sizeof *at);
    at->i[0] = view->ndim;
    at->i[1] = view->offset - root->offset;
    for (int d = 0; d < view->ndim; d++) {
        at->i[2 + d] = view->shape[d];
        at->i[2 + EMBER_MAX_DIMS + d] = view->strides[d];
    }
    if (root->is_contiguous || (view->numel > 0 && ember__dense(root) && dense_geometry(view, root, at)))
        return EMBER_OK;
    return ember__fail(EMBER_ERR_UNSUPPORTED,
                       "in-place write into a view of a non-contiguous tensor of shape %s under recording "
                       "(the view %s): write into a contiguous() copy", ember__tshape(sr, root),
                       ember__tshape(sv, view));
}

/* the internal region (gradients: a region of a gradient, which may be a
   copy) */
int ember__as_strided(ember_tensor *x, const ember_attrs *geometry, ember_tensor **out)
{
    ember_attrs at = *geometry;
    at.f[0] = 0;
    return ember__dispatch(EMBER_OP_AS_STRIDED, 1, &x, &at, out);
}

int ember__as_strided_scatter(ember_tensor *x, ember_tensor *src, const ember_attrs *geometry, ember_tensor **out)
{
    ember_tensor *in[2] = {x, src};
    return ember__dispatch(EMBER_OP_AS_STRIDED_SCATTER, 2, in, geometry, out);
}

/* Whether two elements of the geometry may be one (dims of one element and
   of stride 0 aside, which the gradient adds up): in increasing stride, each
   must step past everything the smaller ones reach. */
static bool may_overlap(int nd, const int64_t *size, const int64_t *stride)
{
    int order[EMBER_MAX_DIMS], k = 0;
    for (int d = 0; d < nd; d++) {
        if (size[d] <= 1 || stride[d] == 0) continue;
        int j = k++;
        for (; j > 0 && stride[order[j - 1]] > stride[d]; j--) order[j] = order[j - 1];
        order[j] = d;
    }
    int64_t reach = 0;   /* bounded: the caller checked the geometry lies inside a tensor */
    for (int j = 0; j < k; j++) {
        if (stride[order[j]] <= reach) return true;
        reach += (size[order[j]] - 1) * stride[order[j]];
    }
    return false;
}

int ember_as_strided(ember_tensor *a, int ndim, const int64_t *size, const int64_t *stride, int64_t offset,
                     ember_tensor **out)
{
    char ss[200], st[200], sa[200];
    int64_t numel;
    if (!a || !out) return ember__fail(EMBER_ERR_ARG, "as_strided: NULL argument");
    EMBER_TRY(ember__check_shape("as_strided", ndim, size, &numel));
    if (ndim > 0 && !stride) return ember__fail(EMBER_ERR_ARG, "as_strided: stride is NULL");
    if (offset < 0) return ember__fail(EMBER_ERR_ARG, "as_strided: offset %lld is negative", (long long)offset);
    ember_attrs at;
    memset(&at, 0, sizeof at);
    at.i[0] = ndim;
    at.i[1] = offset;
    at.f[0] = 1;
    int64_t last = offset;
    bool over = false;
    for (int d = 0; d < ndim; d++) {
        if (stride[d] < 0)
            return ember__fail(EMBER_ERR_ARG, "as_strided: stride %s has a negative entry (dim %d)",
                               ember__shape_str(st, ndim, stride), d + 1);
        int64_t span;
        if (size[d] > 0) over |= __builtin_mul_overflow(size[d] - 1, stride[d], &span) ||
                                 __builtin_add_overflow(last, span, &last);
        at.i[2 + d] = size[d];
        at.i[2 + EMBER_MAX_DIMS + d] = stride[d];
    }
    if (numel > 0 && (over || last >= a->numel))
        return ember__fail(EMBER_ERR_ARG,
                           "as_strided: the view (size %s, stride %s, offset %lld) reaches past the last of the "
                           "%lld elements of a tensor of shape %s", ember__shape_str(ss, ndim, size),
                           ember__shape_str(st, ndim, stride), (long long)offset, (long long)a->numel,
                           ember__tshape(sa, a));
    if (numel > 0 && ember__ag_active && ember__ag_involved(a) && may_overlap(ndim, size, stride))
        return ember__fail(EMBER_ERR_UNSUPPORTED,
                           "as_strided: under recording, a view whose elements may overlap (size %s, stride %s) "
                           "is not differentiable: only dims of stride 0 may repeat elements",
                           ember__shape_str(ss, ndim, size), ember__shape_str(st, ndim, stride));
    return ember__dispatch(EMBER_OP_AS_STRIDED, 1, &a, &at, out);
}

/* index_api.c: the public entry points of the indexing ops (index.c has
   their kernels): gather, index_select, scatter_add and index_add, with the
   checks of shapes, dims and devices every device shares. */
#include "ops.h"

#include <stdint.h>
#include <string.h>

#define BASE_ATTR EMBER_INDEX_BASE_ATTR

/* ------------------------------------------------------------------ public entry points */
/* The index as the op's device takes it: the CPU kernels read it as it
   is, with base in the attributes; the device kernels count from 0, so
   there it is shifted first (*shifted holds it, released by the caller). */
static int device_index(const ember_tensor *data, ember_tensor *idx, int64_t *base, ember_tensor **shifted)
{
    *shifted = NULL;
    if (*base == 0 || (idx->storage->device == EMBER_CPU && data->storage->device == EMBER_CPU)) return EMBER_OK;
    ember_tensor *b = NULL;
    EMBER_TRY(ember_scalar((double)*base, idx->dtype, 1, &b));
    int rc = ember_sub(idx, b, shifted);
    ember_tensor_release(b);
    *base = 0;
    return rc;
}

/* gather and index_select, their shapes checked, through the dispatch */
static int by_index(int op, ember_tensor *a, int dim, ember_tensor *idx, int64_t base, ember_tensor **out)
{
    ember_tensor *sh = NULL;
    EMBER_TRY(device_index(a, idx, &base, &sh));
    ember_tensor *in[2] = {a, sh ? sh : idx};
    ember_attrs at = {{dim}, {0}};
    at.i[BASE_ATTR] = base;
    int rc = ember__dispatch(op, 2, in, &at, out);
    ember_tensor_release(sh);
    return rc;
}

int ember_index_select_base(ember_tensor *a, int dim, ember_tensor *idx, int64_t base, ember_tensor **out)
{
    char sb[200];
    EMBER_TRY(ember__check_dim("index_select", a, dim, 0));
    if (!idx) return ember__fail(EMBER_ERR_ARG, "index_select: index is NULL");
    EMBER_TRY(ember__check_index("index_select", idx));
    if (idx->ndim > 1)
        return ember__fail(EMBER_ERR_SHAPE, "index_select: index must be 1-D, got shape %s", ember__tshape(sb, idx));
    return by_index(EMBER_OP_INDEX_SELECT, a, dim, idx, base, out);
}

int ember_index_select(ember_tensor *a, int dim, ember_tensor *idx, ember_tensor **out)
{
    return ember_index_select_base(a, dim, idx, 0, out);
}

int ember_gather_base(ember_tensor *a, int dim, ember_tensor *idx, int64_t base, ember_tensor **out)
{
    EMBER_TRY(ember__check_dim("gather", a, dim, 0));
    if (!idx) return ember__fail(EMBER_ERR_ARG, "gather: index is NULL");
    EMBER_TRY(ember__check_index("gather", idx));
    char sa[200], sb[200];
    if (idx->ndim != a->ndim)
        return ember__fail(EMBER_ERR_SHAPE, "gather: index of shape %s must have the %d dims of the input %s",
                           ember__tshape(sb, idx), a->ndim, ember__tshape(sa, a));
    for (int d = 0; d < a->ndim; d++)
        if (d != dim && idx->shape[d] > a->shape[d])
            return ember__fail(EMBER_ERR_SHAPE, "gather: index of shape %s does not fit the input %s",
                               ember__tshape(sb, idx), ember__tshape(sa, a));
    return by_index(EMBER_OP_GATHER, a, dim, idx, base, out);
}

int ember_gather(ember_tensor *a, int dim, ember_tensor *idx, ember_tensor **out)
{
    return ember_gather_base(a, dim, idx, 0, out);
}

/* What scatter_impl walks must lie inside the result: index_add's source
   matches the result's shape except along dim (its index is 1-D, one entry
   per source row); scatter_add's index has the source's shape, which fits in
   the result except along dim. */
static int scatter_fits(const char *name, bool per_element, const int64_t *shape, int dim,
                        const ember_tensor *idx, const ember_tensor *src)
{
    char sr[200], ss[200], si[200];
    int nd = src->ndim;
    bool ok = per_element ? idx->ndim == nd : idx->ndim == 1 && idx->numel == src->shape[dim];
    for (int d = 0; ok && d < nd; d++) {
        if (per_element && idx->shape[d] != src->shape[d]) ok = false;
        if (d != dim && (per_element ? src->shape[d] > shape[d] : src->shape[d] != shape[d])) ok = false;
    }
    if (ok) return EMBER_OK;
    ember__shape_str(sr, nd, shape);
    return ember__fail(EMBER_ERR_SHAPE, "%s: index %s and source %s do not fit a result of shape %s along dim %d",
                       name, ember__tshape(si, idx), ember__tshape(ss, src), sr, dim + 1);
}

static int scatter_api(int op, int ndim, const int64_t *shape, int dim, ember_tensor *idx, int64_t base,
                       ember_tensor *src, ember_tensor **out)
{
    const char *name = ember__ops[op].name;
    if (!idx || !src || (ndim > 0 && !shape)) return ember__fail(EMBER_ERR_ARG, "%s: NULL argument", name);
    EMBER_TRY(ember__check_shape(name, ndim, shape, NULL));
    if (ndim != src->ndim || dim < 0 || dim >= ndim)
        return ember__fail(EMBER_ERR_ARG, "%s: dim %d of a %d-dim result does not fit a source of %d dims", name,
                           dim + 1, ndim, src->ndim);
    EMBER_TRY(ember__check_index(name, idx));
    EMBER_TRY(scatter_fits(name, op == EMBER_OP_SCATTER_ADD, shape, dim, idx, src));
    if (ndim > BASE_ATTR - 2) return ember__fail(EMBER_ERR_SHAPE, "%s: too many dims", name);
    ember_tensor *sh = NULL;
    EMBER_TRY(device_index(src, idx, &base, &sh));
    ember_tensor *in[2] = {sh ? sh : idx, src};
    ember_attrs at = {{dim, ndim}, {0}};
    for (int d = 0; d < ndim; d++) at.i[2 + d] = shape[d];
    at.i[BASE_ATTR] = base;
    int rc = ember__dispatch(op, 2, in, &at, out);
    ember_tensor_release(sh);
    return rc;
}

int ember_scatter_add_base(int ndim, const int64_t *shape, int dim, ember_tensor *idx, int64_t base,
                           ember_tensor *src, ember_tensor **out)
{
    return scatter_api(EMBER_OP_SCATTER_ADD, ndim, shape, dim, idx, base, src, out);
}

int ember_scatter_add(int ndim, const int64_t *shape, int dim, ember_tensor *idx, ember_tensor *src,
                      ember_tensor **out)
{
    return scatter_api(EMBER_OP_SCATTER_ADD, ndim, shape, dim, idx, 0, src, out);
}

int ember_index_add_base(int ndim, const int64_t *shape, int dim, ember_tensor *idx, int64_t base,
                         ember_tensor *src, ember_tensor **out)
{
    return scatter_api(EMBER_OP_INDEX_ADD, ndim, shape, dim, idx, base, src, out);
}

int ember_index_add(int ndim, const int64_t *shape, int dim, ember_tensor *idx, ember_tensor *src,
                    ember_tensor **out)
{
    return scatter_api(EMBER_OP_INDEX_ADD, ndim, shape, dim, idx, 0, src, out);
}

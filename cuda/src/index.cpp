/* index.cpp: index_select, gather, scatter_add and index_add on the device.
   The core's entry points check the shapes for every device (shape.c); here
   the index's values are checked on the device before the walk, and an index
   out of range fails with the CPU's message, naming the first one. Each op is
   one walk of kernels/index.h over the result's, the index's or the source's
   shape. */
#include "cuda_backend.h"
#include "kernels/elementwise.h"
#include "kernels/index.h"

#include <string.h>

using ember_cuda::is_float_dtype;

/* element pos of t (a one-operand iterator), read back */
static int read_element(const char *name, const ecu_iter &t, int64_t pos, int64_t *out)
{
    int64_t off[1];
    ember_cuda::iter_offsets(t, pos, off);
    char buf[8];
    size_t esize = (size_t)ecu_core->dtype_size(t.dtype[0]);
    EMBER_TRY(ecu_check(cudaMemcpy(buf, t.data[0] + off[0], esize, cudaMemcpyDeviceToHost), name));
    *out = ember_cuda::load<int64_t>(buf, t.dtype[0]);
    return EMBER_OK;
}

int ecu_find_outside(const char *name, ember_tensor *t, int64_t max, int64_t *pos, int64_t *value)
{
    *pos = -1;
    if (t->numel == 0) return EMBER_OK;
    ecu_iter it;
    ecu_iter_init(&it, 1, &t);
    auto *first = (unsigned long long *)ecu_alloc(sizeof(unsigned long long));
    if (!first) return ecu_core->fail(EMBER_ERR_OOM, "%s: out of device memory for a range check", name);
    unsigned long long found = ~0ull;   /* none: all bits set, as the memset leaves it */
    int rc = ecu_check(cudaMemsetAsync(first, 0xff, sizeof found), name);
    if (rc == EMBER_OK) rc = ecu_check(ecu_launch_find_outside(&it, max, first), name);
    if (rc == EMBER_OK) rc = ecu_check(cudaMemcpy(&found, first, sizeof found, cudaMemcpyDeviceToHost), name);
    ecu_free(first, sizeof(unsigned long long));
    if (rc != EMBER_OK || found == ~0ull) return rc;
    *pos = (int64_t)found;
    return read_element(name, it, *pos, value);
}

/* every value of idx in [0, size), or the CPU's error naming the first that is not */
static int check_index(int op, ember_tensor *idx, int dim, int64_t size)
{
    const char *name = ecu_core->op_names[op];
    int64_t pos, bad;
    EMBER_TRY(ecu_find_outside(name, idx, size - 1, &pos, &bad));
    if (pos < 0) return EMBER_OK;
    return ecu_core->fail(EMBER_ERR_ARG, "%s: index %lld out of range for dim %d of size %lld", name,
                          (long long)bad + 1, dim + 1, (long long)size);
}

/* INDEX_SELECT, GATHER: i[0] dim; inputs (a, idx) */
int ecu_fwd_gather(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    ember_tensor *a = in[0], *idx = in[1];
    int dim = (int)at->i[0];
    bool gather_like = op == EMBER_OP_GATHER;
    EMBER_TRY(check_index(op, idx, dim, a->shape[dim]));
    int64_t shape[EMBER_MAX_DIMS];
    memcpy(shape, gather_like ? idx->shape : a->shape, sizeof shape);
    if (!gather_like) shape[dim] = idx->numel;
    EMBER_TRY(ecu_core->new_tensor(a->ndim, shape, a->dtype, a->storage->device, out));
    ecu_index x;
    ecu_index_init(&x, shape, *out, a, idx, dim, gather_like, false);
    return ecu_check(ecu_launch_gather(&x), ecu_core->op_names[op]);
}

/* SCATTER_ADD, INDEX_ADD: i[0] dim, i[1] ndim, i[2..] the result's shape;
   inputs (idx, src). Float adds are atomic in no fixed order, so under
   ember.set_deterministic(true) they refuse. */
int ecu_fwd_scatter_add(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    ember_tensor *idx = in[0], *src = in[1];
    const char *name = ecu_core->op_names[op];
    int dim = (int)at->i[0], nd = (int)at->i[1];
    if (is_float_dtype(src->dtype) && ecu_core->deterministic())
        return ecu_core->fail(EMBER_ERR_UNSUPPORTED, "%s: the %s adds on cuda are atomic, in no fixed order, "
                              "so not deterministic: call ember.set_deterministic(false) or run it on the cpu",
                              name, ecu_core->dtype_name(src->dtype));
    EMBER_TRY(check_index(op, idx, dim, at->i[2 + dim]));
    EMBER_TRY(ecu_core->new_tensor(nd, &at->i[2], src->dtype, src->storage->device, out));
    EMBER_TRY(ecu_fill(*out, 0));
    ecu_index x;
    ecu_index_init(&x, src->shape, *out, src, idx, dim, op == EMBER_OP_SCATTER_ADD, true);
    return ecu_check(ecu_launch_scatter_add(&x), name);
}

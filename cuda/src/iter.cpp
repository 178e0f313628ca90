/* iter.cpp: the host half of the device iterator (kernels/iter.h): operands
   aligned to the output's shape from the right, broadcast dims given stride
   0, size-1 dims dropped and neighbouring dims merged where every operand
   steps through them as one, so a contiguous op is a single flat dim; and the
   pair of iterators of a reduction or a row-wise op (kernels/reduce.h), and
   the walk of an index op (kernels/index.h). */
#include "cuda_backend.h"
#include "kernels/index.h"
#include "kernels/reduce.h"

#include <stdlib.h>

static_assert((int)ECU_MAX_DIMS == (int)EMBER_MAX_DIMS, "the iterator holds every dim a tensor can have");

static void merge_dims(ecu_iter *it)
{
    int nd = 0;
    for (int d = 0; d < it->ndim; d++) {
        if (it->shape[d] == 1) continue;
        bool merge = nd > 0;
        for (int k = 0; k < it->noperands && merge; k++)
            merge = it->strides[k][nd - 1] == it->shape[d] * it->strides[k][d];
        if (merge) {
            it->shape[nd - 1] *= it->shape[d];
            for (int k = 0; k < it->noperands; k++) it->strides[k][nd - 1] = it->strides[k][d];
            continue;
        }
        it->shape[nd] = it->shape[d];
        for (int k = 0; k < it->noperands; k++) it->strides[k][nd] = it->strides[k][d];
        nd++;
    }
    it->ndim = nd;
}

/* whether every byte offset and the linear index fit in int32, the index
   with room for a loop's stride past the end */
static bool fits_32_bits(const ecu_iter *it)
{
    if (it->numel > INT32_MAX - (1 << 24)) return false;
    for (int k = 0; k < it->noperands; k++) {
        int64_t span = 0;
        for (int d = 0; d < it->ndim; d++) span += (it->shape[d] - 1) * llabs(it->strides[k][d]);
        if (span > INT32_MAX) return false;
    }
    return true;
}

void ecu_iter_init(ecu_iter *it, int n, ember_tensor *const *ts)
{
    const ember_tensor *o = ts[0];
    *it = ecu_iter{};
    it->ndim = o->ndim;
    it->noperands = n;
    it->numel = o->numel;
    for (int d = 0; d < o->ndim; d++) it->shape[d] = o->shape[d];
    for (int k = 0; k < n; k++) {
        const ember_tensor *t = ts[k];
        int64_t esize = ecu_core->dtype_size(t->dtype), lead = o->ndim - t->ndim;
        for (int d = 0; d < t->ndim; d++)
            it->strides[k][lead + d] = t->shape[d] == 1 ? 0 : t->strides[d] * esize;
        it->dtype[k] = t->dtype;
        it->data[k] = (char *)t->storage->data + t->offset * esize;
    }
    ecu_iter_finish(it);
}

void ecu_iter_finish(ecu_iter *it)
{
    merge_dims(it);
    it->index32 = fits_32_bits(it);
}

void ecu_reduce_init(ecu_reduce *r, const ember_tensor *a, unsigned mask, ember_tensor *o, bool rowwise)
{
    int64_t es = ecu_core->dtype_size(a->dtype), os = ecu_core->dtype_size(o->dtype);
    int64_t ostrides[EMBER_MAX_DIMS], step = os;   /* o's byte strides along a's dims */
    for (int d = a->ndim - 1; d >= 0; d--) {
        bool reduced = (mask >> d) & 1;
        ostrides[d] = rowwise ? o->strides[d] * os : reduced ? 0 : step;
        if (!rowwise && !reduced) step *= a->shape[d];
    }
    *r = ecu_reduce{};
    ecu_iter *outer = &r->outer, *inner = &r->inner;
    outer->noperands = 2;
    inner->noperands = rowwise ? 2 : 1;
    outer->numel = inner->numel = 1;
    for (int d = 0; d < a->ndim; d++) {
        bool reduced = (mask >> d) & 1;
        ecu_iter *it = reduced ? inner : outer;
        int k = it->ndim++;
        it->shape[k] = a->shape[d];
        it->numel *= a->shape[d];
        it->strides[reduced ? 0 : 1][k] = a->strides[d] * es;
        it->strides[reduced ? 1 : 0][k] = ostrides[d];
    }
    ecu_iter_finish(outer);
    ecu_iter_finish(inner);
    outer->data[0] = inner->data[1] = (char *)o->storage->data + o->offset * os;
    outer->data[1] = inner->data[0] = (char *)a->storage->data + a->offset * es;
    outer->dtype[0] = inner->dtype[1] = o->dtype;
    outer->dtype[1] = inner->dtype[0] = a->dtype;
    r->len = inner->numel;
}

/* How an operand steps over the walk's dims: as its own strides, with 0
   along the indexed dim (the operand the index picks rows of), or only along
   it (a 1-D or 0-d index of index_select and index_add) */
enum step_kind { ALL_DIMS, BUT_DIM, ONLY_DIM };

static void put_operand(ecu_iter *it, int k, const ember_tensor *t, int dim, step_kind kind)
{
    int64_t es = ecu_core->dtype_size(t->dtype);
    for (int d = 0; d < it->ndim; d++) {
        int64_t s = kind == ONLY_DIM ? (d == dim && t->ndim ? t->strides[0] : 0) : t->strides[d];
        it->strides[k][d] = kind == BUT_DIM && d == dim ? 0 : s * es;
    }
    it->dtype[k] = t->dtype;
    it->data[k] = (char *)t->storage->data + t->offset * es;
}

void ecu_index_init(ecu_index *x, const int64_t *shape, ember_tensor *res, ember_tensor *src,
                    ember_tensor *idx, int dim, bool gather_like, bool scatter)
{
    *x = ecu_index{};
    ecu_iter *it = &x->it;
    it->ndim = res->ndim;
    it->noperands = 3;
    it->numel = 1;
    for (int d = 0; d < res->ndim; d++) it->numel *= it->shape[d] = shape[d];
    put_operand(it, 0, res, dim, scatter ? BUT_DIM : ALL_DIMS);
    put_operand(it, 1, src, dim, scatter ? ALL_DIMS : BUT_DIM);
    put_operand(it, 2, idx, dim, gather_like ? ALL_DIMS : ONLY_DIM);
    ecu_iter_finish(it);
    x->esize = ecu_core->dtype_size(res->dtype);
    x->step = (scatter ? res : src)->strides[dim] * x->esize;
}

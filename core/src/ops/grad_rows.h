/* grad_rows.h: an incoming gradient's rows read in place by the row
   kernels' adjoints (layer_norm.c, softmax.c), where copying it out first
   would write and read a tensor of the input's size: a sum's gradient is
   one value expanded to that size (all strides 0). */
#ifndef EMBER_OPS_GRAD_ROWS_H
#define EMBER_OPS_GRAD_ROWS_H

#include "ops.h"

#include <string.h>

/* the longest rows a broadcast gradient is read in place for: a kernel
   writes the row's one value out to a buffer of this many on its stack */
#define GRAD_ROWS_BCAST_MAX 4096

/* Row r of g (R rows of D values over its last k dims) starts at the sum over
   the leading dims of index times str; each row is D contiguous values, or
   (bcast) one value. */
typedef struct {
    int lead, bcast;
    int64_t shape[EMBER_MAX_DIMS], str[EMBER_MAX_DIMS];
} grad_rows;

/* whether g's rows over its last k dims (D values) can be read in place:
   contiguous, or one value each (all strides 0, D at most
   GRAD_ROWS_BCAST_MAX); the leading dims any strides */
static inline bool grad_rows_of(const ember_tensor *g, int k, int64_t D, grad_rows *gr)
{
    int lead = g->ndim - k;
    bool packed = true, bcast = D <= GRAD_ROWS_BCAST_MAX;
    int64_t want = 1;
    for (int d = g->ndim - 1; d >= lead; d--) {
        if (g->shape[d] == 1) continue;
        packed = packed && g->strides[d] == want;
        bcast = bcast && g->strides[d] == 0;
        want *= g->shape[d];
    }
    if (!packed && !bcast) return false;
    gr->lead = lead;
    gr->bcast = !packed;
    memcpy(gr->shape, g->shape, (size_t)lead * sizeof *g->shape);
    memcpy(gr->str, g->strides, (size_t)lead * sizeof *g->strides);
    return true;
}

/* the rows of a contiguous copy: R rows D apart */
static inline void grad_rows_dense(int64_t R, int64_t D, grad_rows *gr)
{
    gr->lead = 1, gr->bcast = 0, gr->shape[0] = R, gr->str[0] = D;
}

/* where row r starts, in elements */
static inline int64_t grad_row(const grad_rows *gr, int64_t r)
{
    int64_t off = 0;
    for (int d = gr->lead - 1; d >= 0; d--) {
        off += r % gr->shape[d] * gr->str[d];
        r /= gr->shape[d];
    }
    return off;
}

#endif

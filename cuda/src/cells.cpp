/* cells.cpp: lstm_cell and gru_cell on the device. ember_lstm_cell and
   ember_gru_cell check the shapes and dtypes for every device (rnn.c);
   strided operands are copied contiguous first, as the CPU does, and one
   kernel writes the new state. Their gradients are composed of public ops
   on a device (grad_rules.c). */
#include "cuda_backend.h"
#include "kernels/cells.h"

/* t, or a contiguous copy of it in *copy (released by the caller) */
static int contiguous(ember_tensor *t, ember_tensor **copy, const ember_tensor **out)
{
    *out = t;
    if (t->is_contiguous) return EMBER_OK;
    EMBER_TRY(ecu_core->new_tensor(t->ndim, t->shape, t->dtype, t->storage->device, copy));
    *out = *copy;
    return ecu_copy(*copy, t);
}

static const char *data(const ember_tensor *t)
{
    return (const char *)t->storage->data + t->offset * ecu_core->dtype_size(t->dtype);
}

/* LSTM_CELL (outputs h', c'), GRU_CELL (h'): inputs (gi, gh, state) */
int ecu_fwd_cell(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    bool lstm = op == EMBER_OP_LSTM_CELL;
    const ember_tensor *c[3];
    ember_tensor *copies[3] = {NULL, NULL, NULL};
    int rc = EMBER_OK;
    for (int i = 0; i < 3 && rc == EMBER_OK; i++) rc = contiguous(in[i], &copies[i], &c[i]);
    const ember_tensor *st = in[2];
    for (int o = 0; o < (lstm ? 2 : 1) && rc == EMBER_OK; o++)
        rc = ecu_core->new_tensor(2, st->shape, st->dtype, st->storage->device, &out[o]);
    if (rc == EMBER_OK) {
        ecu_cell cell = {data(c[0]), data(c[1]), data(c[2]), (char *)out[0]->storage->data,
                         lstm ? (char *)out[1]->storage->data : NULL, st->numel, st->shape[1]};
        rc = ecu_check(ecu_launch_cell(&cell, lstm, st->dtype == EMBER_FLOAT64), ecu_core->op_names[op]);
    }
    for (ember_tensor *t : copies)
        if (t) ecu_core->release(t);
    return rc;
}

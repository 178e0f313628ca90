/* autograd.c: the tape, nodes and the backward engine. (Being written: for now
   nothing records.) */
#include "autograd.h"

int ember__ag_active;

void ember__ag_forget(ember_tensor *t) { t->ag = NULL; }

int ember__ag_record(int op, int nin, ember_tensor *const *in, const ember_attrs *at, int nout,
                     ember_tensor *const *out)
{
    EMBER_UNUSED(op); EMBER_UNUSED(nin); EMBER_UNUSED(in); EMBER_UNUSED(at); EMBER_UNUSED(nout);
    EMBER_UNUSED(out);
    return EMBER_OK;
}

int ember__ag_rebase(ember_tensor *self, ember_tensor *result)
{
    EMBER_UNUSED(self); EMBER_UNUSED(result);
    return EMBER_OK;
}

/* autograd.h: what the op layer and tensors need from the autograd engine. */
#ifndef EMBER_AUTOGRAD_H
#define EMBER_AUTOGRAD_H

#include "ops/ops.h"

/* Nonzero while any recording is active and grad mode is on: the whole cost
   of autograd on an untracked op is this test plus a scan of the inputs' ag. */
extern int ember__ag_active;

/* A tensor is being freed: drop its tracking entries. */
void ember__ag_forget(ember_tensor *t);
/* Records op on every active key that tracks an input and may see it. */
int ember__ag_record(int op, int nin, ember_tensor *const *in, const ember_attrs *at, int nout,
                     ember_tensor *const *out);
/* self was overwritten in place by the value `result` computed out of place:
   self's history continues at result's node. */
int ember__ag_rebase(ember_tensor *self, ember_tensor *result);
/* Before self is overwritten by the recorded value `result` (name_: the
   in-place op, for the message): fails when the rebase would give a wrong
   gradient, since a view's history moves and its base's does not. That is
   when self's history is a view op (narrow, select, transpose, ...), or when
   self is a view no recording tracks and result is recorded. */
int ember__ag_check_inplace(const char *name, const ember_tensor *self, const ember_tensor *result);

#endif

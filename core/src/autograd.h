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
/* Before an in-place write under recording: fails when self's history is a
   view op (narrow, select, transpose, ...), since the rebase would move the
   view's history and not its base's, and the base's gradient would be wrong.
   `name` is the in-place op, for the message. */
int ember__ag_check_inplace(const char *name, const ember_tensor *self);
/* The same before the copy of a recorded `result` into self: fails when self
   is a view no recording tracks, since its base would not gain the history. */
int ember__ag_check_rebase(const char *name, const ember_tensor *self, const ember_tensor *result);

#endif

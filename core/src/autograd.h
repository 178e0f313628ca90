/* autograd.h: what the op layer and tensors need from the autograd engine. */
#ifndef EMBER_AUTOGRAD_H
#define EMBER_AUTOGRAD_H

#include "ops/ops.h"

/* Nonzero while any recording is active and grad mode is on: the whole cost
   of autograd on an untracked op is this test plus a scan of the inputs' ag. */
extern _Thread_local int ember__ag_active;

/* Whether an op reading these tensors now would be recorded: some key that
   tracks one of them records and may see the op (an outer manager
   differentiating a backward, say). NULLs are skipped. */
bool ember__ag_would_record(int n, ember_tensor *const *ts);
/* A tensor is being freed: drop its tracking entries. */
void ember__ag_forget(ember_tensor *t);
/* Records op on every active key that tracks an input and may see it. */
int ember__ag_record(int op, int nin, ember_tensor *const *in, const ember_attrs *at, int nout,
                     ember_tensor *const *out);
/* A tensor autograd must look at when an op reads it: tracked, or a view whose
   root's history moved since the view's own was made (it is re-derived). */
static inline bool ember__ag_involved(const ember_tensor *t)
{
    return t->ag || (t->base && t->ag_epoch != t->base->ag_epoch);
}

/* In-place writes under recording (elementwise.c, random.c). A write into
   self of a value computed out of place from self and `other`:
     rc = ember__ag_write_recorded(name, self, other);   1: record it, 0: no
     mark = ember__ag_mark();                             before computing
     ... the value r, recorded as an ordinary op ...
     ember__ag_protect(self, mark);    nodes made since mark keep self's old value
     ... copy r into self, bump the version ...
     ember__ag_commit(self, r);        r's history becomes self's
   A write that does not depend on the old value (fill_, copy_, random fills)
   passes the new value's tensor, or NULL when it has no history at all. When
   self is a view, the root's history becomes as_strided_scatter(root, r) and
   the view's as_strided(root): PyTorch's CopySlices. */
int ember__ag_write_recorded(const char *name, const ember_tensor *self, const ember_tensor *other);
uint64_t ember__ag_mark(void);
int ember__ag_protect(const ember_tensor *self, uint64_t mark);
int ember__ag_commit(ember_tensor *self, ember_tensor *value);

#endif

/* autograd_ops.h: what an op's kernel may ask of autograd, and nothing else.
   The funnel (ops/dispatch.c) is what records ops (a kernel that runs an
   op recorded goes through it, ember__dispatch); beyond that a kernel may
   only (1) write in place under recording (inplace.c, random.c), and (2) run
   other ops as an op's implementation without recording them (norm.c's
   composed batch norm): the funnel records the op itself. */
#ifndef EMBER_AUTOGRAD_OPS_H
#define EMBER_AUTOGRAD_OPS_H

#include "internal.h"

/* (1) In-place writes under recording (inplace.c, random.c). A write into
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


/* (2) Ops run by an op's forward as its implementation stay off the tape:
     int paused = ember__ag_pause();
     ... ember's ops ...
     ember__ag_resume(paused); */
int ember__ag_pause(void);
void ember__ag_resume(int paused);

#endif

/* autograd.h: what the dispatch funnel (ops/dispatch.c) and the engine's
   own files need from the autograd engine. Kernels ask it only what
   autograd_ops.h lists; tensors tell it of releases through ember__on_release. */
#ifndef EMBER_AUTOGRAD_H
#define EMBER_AUTOGRAD_H

#include "autograd_ops.h"
#include "ops/ops.h"

/* Nonzero while any recording is active and grad mode is on: the whole cost
   of autograd on an untracked op is this test plus a scan of the inputs' ag. */
extern _Thread_local int ember__ag_active;

/* Whether an op reading these tensors now would be recorded: some key that
   tracks one of them records and may see the op (an outer manager
   differentiating a backward, say). NULLs are skipped. */
bool ember__ag_would_record(int n, ember_tensor *const *ts);
/* Some recording is open on this thread (whether grad mode is on or not). */
int ember__ag_recording_open(void);
/* Records op on every active key that tracks an input and may see it. */
int ember__ag_record(int op, int nin, ember_tensor *const *in, const ember_attrs *at, int nout,
                     ember_tensor *const *out);
/* A tensor autograd must look at when an op reads it: tracked, or a view whose
   root's history moved since the view's own was made (it is re-derived). */
static inline bool ember__ag_involved(const ember_tensor *t)
{
    return t->ag || (t->base && t->ag_epoch != t->base->ag_epoch);
}

#endif

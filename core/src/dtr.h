/* dtr.h: dynamic tensor rematerialization (dtr.c; Kirisame et al., ICLR 2021,
   as MegEngine runs it). While it is on and a recording is open, the storage
   an op makes remembers how to be remade (the op, its attrs, its inputs held
   through private aliases, the seconds it took); a random fill remembers its
   place in the Philox stream. When an allocation would take the bytes in use
   past the budget, storages are evicted (their data freed) by the heuristic
   cost / (size x staleness), and an evicted storage is remade from its
   parents, recursively, when an op, a grad rule or an accessor reads it.

   The rest of the core calls in only through the hooks below, each behind
   the one test `ember__dtr_on`. */
#ifndef EMBER_DTR_H
#define EMBER_DTR_H

#include "internal.h"
#include "ops/ops.h"

struct ember__draw;
struct ember_node;

/* ember_dtr_enable is in force on this thread (DTR is the training thread's:
   other threads' allocations and ops pass it by) */
extern EMBER_TLS int ember__dtr_on;

/* ops/dispatch.c: ember__dispatch when DTR is on: the inputs made resident
   and kept so while `plain` runs the op; a new output storage gets a recipe. */
typedef int (*ember__dispatch_fn)(int op, int nin, ember_tensor *const *in, const ember_attrs *at,
                                  ember_tensor **out);
int ember__dtr_dispatch(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out,
                        ember__dispatch_fn plain);
/* alloc.c, before the memory limit's test: evicts until nbytes more fit the
   budget (and the limit, when one is set); fails naming the budget when
   nothing more can be evicted and the budget is the lower ceiling. */
int ember__dtr_make_room(size_t nbytes, int64_t limit);
/* tensor.c: s is freed (its recipe goes), or only recipes hold it now (its
   data is dropped; it is remade if a recipe needs it). */
void ember__dtr_storage_freed(ember_storage *s);
void ember__dtr_orphaned(ember_storage *s);
/* Before self is written in place (other is read): both resident, self's
   recipe and the recipes that read self's old value are cut, anything held
   outside DTR that would need the old value remade first. */
int ember__dtr_write(ember_tensor *self, const ember_tensor *other);
/* t's data resident (remade if evicted), for readers outside the funnel. */
int ember__dtr_ready(const ember_tensor *t);
/* random.c: t (a whole fresh storage) was filled by draw d. */
void ember__dtr_note_draw(ember_tensor *t, const struct ember__draw *d);
/* grad_rules.c: what a node's rule reads, its saved tensors (at most 5) and
   its output gradients (ops.def's ops make at most 3), resident and kept
   (held, retained) while the rule runs, then let go. */
#define EMBER__DTR_SAVED 5
#define EMBER__DTR_HELD (EMBER__DTR_SAVED + 3)
int ember__dtr_hold_node(const struct ember_node *n, ember_tensor *const *grad_out,
                         ember_tensor *held[EMBER__DTR_HELD]);
void ember__dtr_let_go(ember_tensor *held[EMBER__DTR_HELD]);
/* node.c: n, a node of an open backward run, has run: what it saved that no
   node still to run saved too is evicted first from now (see pick). */
void ember__dtr_node_ran(const struct ember_node *n);

#endif

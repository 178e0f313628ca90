/* dtr_impl.h: what dtr.c and dtr_debug.c share: a recipe (see dtr.c) and the
   diagnostics EMBER_DTR_DEBUG turns on (dtr_debug.c). */
#ifndef EMBER_DTR_IMPL_H
#define EMBER_DTR_IMPL_H

#include "dtr.h"
#include "philox.h"

typedef struct ember__dtr_entry {
    ember_storage *s;                       /* what it remakes (the entry dies with it) */
    struct ember__dtr_entry *prev, *next;   /* in order of making */
    int op;                                 /* EMBER_OP_*, or -1: a random draw */
    int nin, out_k, has_attrs;
    int evicted, mark;
    int late;                               /* made by a grad rule: evicted last (see pick) */
    int keeps;                              /* late and much larger than its inputs: they are kept (see keep) */
    int keepers;                            /* recipes keeping this storage from being dropped */
    int done;                               /* every node of the open backward that saved it has run */
    int in_bwd;                             /* made while a backward ran (a rule, checkpoint's forward) */
    ember_attrs at;
    ember_tensor **in;                      /* [nin] private aliases of the inputs */
    ember__draw draw;                       /* op -1: the draw, into a tensor of this geometry */
    int ndim, dtype, device;
    int64_t shape[EMBER_MAX_DIMS];
    double cost;                            /* CPU seconds the op took (op_s) */
    struct ember__dtr_entry *uf, *seen_by;  /* pick(): its class (union-find), the last one it was added to */
    double class_cost, nbr;                 /* pick(): its class's cost (at the root), its neighbourhood's */
    uint64_t last_use;
} dtr_entry;

/* EMBER_DTR_DEBUG set (read at enable): dtr.c counts evictions and
   recomputations by op, and describes on stderr what holds the bytes in use
   when nothing is left to evict; disable prints the counts. */
extern int ember__dtr_debug;
void ember__dtr_debug_reset(void);
void ember__dtr_debug_count(const dtr_entry *e, int recompute);
/* head: the list's sentinel; min_size, budget as enable set them */
/* in_rule: grad rules running; depth: ops and recomputations nested */
void ember__dtr_debug_oom(const dtr_entry *head, size_t nbytes, int64_t budget, int64_t min_size, int in_rule,
                          int depth);
void ember__dtr_debug_print_counts(void);

#endif

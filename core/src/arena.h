/* arena.h: an arena that owns the results of a chain of ember's ops, for
   code that composes them (the grad rules of grad_rules_impl.h, batch_norm's
   composed forms in ops/norm.c). keep(s, rc, &o) takes an op's status and
   result: after the first failure nothing more is kept and s->rc holds its
   status, so a chain is written as nested calls and checked once at its
   end; arena_end releases every result. `who` names the caller in the one
   failure the arena makes itself. */
#ifndef EMBER_ARENA_H
#define EMBER_ARENA_H

#include "internal.h"

typedef struct {
    const char *who;
    ember_tensor *t[48];
    int n;
    int rc;
} arena;

#define OK(s) ((s)->rc >= 0)

/* Takes the address of the result: argument evaluation order is unspecified,
   so the result is read only once the op has run. */
static inline ember_tensor *keep(arena *s, int rc, ember_tensor **out)
{
    ember_tensor *t = *out;
    if (rc < 0) {
        s->rc = rc;
        return NULL;
    }
    if (s->n == (int)(sizeof s->t / sizeof s->t[0])) {
        ember_tensor_release(t);
        s->rc = ember__fail(EMBER_ERR_STATE, "%s: too many temporaries (more than %d)", s->who,
                            (int)(sizeof s->t / sizeof s->t[0]));
        return NULL;
    }
    s->t[s->n++] = t;
    return t;
}

static inline void arena_end(arena *s)
{
    for (int i = 0; i < s->n; i++) ember_tensor_release(s->t[i]);
}

#endif

/* updates.c: an optimizer's SGD updates that follow one another in a plan
   run as one job on the thread pool (plan.h). Eagerly each update is a job
   of its own, and the updates of a small model's parameters are each too
   small for the pool's grain: the MLP recipe's six run one after another on
   one thread, 20 us of them the first layer's 200704 weights, while the
   other core waits. Together they are one job over all their elements
   (235146), cut into pieces the team shares. Each element gets optim.c's
   step (ember__sgd_range), so the bits are eager's whatever the cut.

   A group is marked at build (consecutive PE_SGD entries, up to
   GROUP_MAX); a whole run (not a budgeted step: it may overrun by one op,
   not by a group) runs it as one job when every update passes sgd_step_'s
   checks, is on the CPU and no update writes memory another reads. Else
   the entries run one by one, as exec runs them, and fail as they do. */
#include "plan.h"

#include "../backend.h"

#include <stdlib.h>

enum { GROUP_MAX = 64 };
#define UPDATE_GRAIN 32768   /* elements a piece, at least */

int ember__plan_group_updates(ember_plan *p)
{
    free(p->group);
    p->group = NULL;
    if (getenv("EMBER_PLAN_NO_GROUP")) return EMBER_OK;
    p->group = calloc((size_t)p->nentries + 1, sizeof *p->group);
    if (!p->group) return ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
    for (int e = 0; e < p->nentries;) {
        int n = 0;
        while (e + n < p->nentries && n < GROUP_MAX && p->entries[e + n].kind == PE_SGD) n++;
        if (n >= 2) p->group[e] = n;
        e += n > 0 ? n : 1;
    }
    return EMBER_OK;
}

typedef struct {
    ember_tensor *p, *g, *buf;
    ember__sgd_args a;
    int64_t off;   /* the update's first element in the job */
} update;

typedef struct {
    int n;
    update u[GROUP_MAX];
} update_job;

/* elements [b, e) of the job: the parts of the updates they cover */
static void run_range(void *vctx, int64_t b, int64_t e)
{
    const update_job *j = vctx;
    for (int k = 0; k < j->n; k++) {
        const update *u = &j->u[k];
        int64_t lo = b > u->off ? b : u->off, hi = u->off + u->p->numel;
        if (e < hi) hi = e;
        if (lo < hi) ember__sgd_range(u->p, u->g, u->buf, &u->a, lo - u->off, hi - u->off);
    }
}

static const ember_storage *st(const ember_tensor *t) { return t ? t->storage : NULL; }

/* whether update w writes memory that update r reads or writes */
static bool clash(const update *w, const update *r)
{
    const ember_storage *ws[2] = {st(w->p), st(w->buf)}, *rs[3] = {st(r->p), st(r->g), st(r->buf)};
    for (int i = 0; i < 2; i++)
        for (int k = 0; k < 3; k++)
            if (ws[i] && ws[i] == rs[k]) return true;
    return false;
}

int ember__plan_updates_run(ember_plan *p, int e0, ember_tensor *const *vals)
{
    int n = p->group ? p->group[e0] : 0;
    if (n < 2) return 0;
    update_job j;
    j.n = n;
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        const plan_entry *en = &p->entries[e0 + k];
        ember_tensor *t[3];
        for (int i = 0; i < 3; i++) t[i] = en->slots[i] >= 0 ? vals[en->slots[i]] : NULL;
        if (p->checked && ember__plan_check_entry(en, t) < 0) return 0;
        if (!t[0] || !t[1] || t[0]->storage->device != EMBER_CPU || ember__sgd_check(t[0], t[1], t[2]) < 0) return 0;
        const double *f = en->args.f;
        update u = {t[0], t[1], t[2], {f[0], f[1], f[2], f[3], (int)en->args.i[0], (int)en->args.i[1], 0}, total};
        j.u[k] = u;
        total += t[0]->numel;
    }
    for (int k = 0; k < n; k++)
        for (int l = 0; l < n; l++)
            if (k != l && clash(&j.u[k], &j.u[l])) return 0;
    ember__parallel_for_kind(total, UPDATE_GRAIN, run_range, &j, ((uint64_t)total * 0x9E3779B97F4A7C15ULL) ^ 0x5D7);
    for (int k = 0; k < n; k++) {
        j.u[k].p->storage->version++;
        if (j.u[k].buf) j.u[k].buf->storage->version++;
    }
    return n;
}

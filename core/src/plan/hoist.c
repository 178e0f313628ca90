/* hoist.c: the entries of a forward's plan that read only weights (live
   tensors the plan never writes), constants and each other's results, such
   as eval-mode batch norm's scale = w / sqrt(var + eps) and shift = b -
   mean scale, run at the first run and their results kept; later runs take
   the kept results, until a weight they read has been written in place
   since (its storage's version: an optimizer step, load_state_dict's
   copy_), when the first run after recomputes them (docs/plans.md,
   "Passes"). The kept tensors are those the entries made, so a run gives the
   bits it gave before. Plans with in-place writes, optimizer updates or
   random draws (a training step) keep nothing. */
#include "plan.h"

#include <stdlib.h>
#include <string.h>

void ember__plan_hoist_free(ember_plan *p)
{
    if (p->kept)
        for (int s = 0; s < p->nslots; s++) ember_tensor_release(p->kept[s]);
    free(p->kept);
    free(p->hoisted);
    free(p->hoist_live);
    free(p->hoist_version);
    p->kept = NULL;
    p->hoisted = NULL;
    p->hoist_live = NULL;
    p->hoist_version = NULL;
    p->nhoisted = p->nhoist_live = p->kept_ok = 0;
}

int ember__plan_hoist(ember_plan *p)
{
    int ns = p->nslots, n = p->nentries;
    for (int e = 0; e < n; e++) {
        int k = p->entries[e].kind;
        if (k != PE_OP && k != PE_VIEW && k != PE_FUSED) return EMBER_OK;   /* a step with effects: nothing kept */
    }
    uint8_t *fixed = calloc((size_t)ns + 1, 1), *reads = calloc((size_t)ns + 1, 1);
    p->hoisted = calloc((size_t)n + 1, 1);
    p->kept = calloc((size_t)ns + 1, sizeof *p->kept);
    if (!fixed || !reads || !p->hoisted || !p->kept) {
        free(fixed);
        free(reads);
        ember__plan_hoist_free(p);
        return ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
    }
    for (int s = 0; s < ns; s++) fixed[s] = p->slots[s].kind == SLOT_LIVE || p->slots[s].kind == SLOT_CONST;
    for (int e = 0; e < n; e++) {
        const plan_entry *en = &p->entries[e];
        int ok = en->nin > 0;
        for (int i = 0; i < en->nin && ok; i++) ok = en->slots[i] < 0 || fixed[en->slots[i]];
        for (int k = 0; k < en->nout && ok; k++) {
            int s = en->slots[en->nin + k];
            ok = s >= 0 && p->slots[s].kind == SLOT_TEMP && !p->slots[s].is_output;
        }
        if (!ok) continue;
        p->hoisted[e] = 1;
        p->nhoisted++;
        for (int i = 0; i < en->nin; i++)
            if (en->slots[i] >= 0 && p->slots[en->slots[i]].kind == SLOT_LIVE) reads[en->slots[i]] = 1;
        for (int k = 0; k < en->nout; k++) fixed[en->slots[en->nin + k]] = 1;
    }
    for (int s = 0; s < ns; s++) p->nhoist_live += reads[s];
    p->hoist_live = malloc(((size_t)p->nhoist_live + 1) * sizeof *p->hoist_live);
    p->hoist_version = calloc((size_t)p->nhoist_live + 1, sizeof *p->hoist_version);
    if (!p->hoist_live || !p->hoist_version) {
        free(fixed);
        free(reads);
        ember__plan_hoist_free(p);
        return ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
    }
    for (int s = 0, k = 0; s < ns; s++)
        if (reads[s]) p->hoist_live[k++] = s;
    free(fixed);
    free(reads);
    if (!p->nhoisted) ember__plan_hoist_free(p);
    return EMBER_OK;
}

void ember__plan_hoist_begin(ember_plan *p)
{
    if (!p->nhoisted) return;
    int ok = p->kept_ok;
    for (int k = 0; k < p->nhoist_live && ok; k++)
        ok = p->slots[p->hoist_live[k]].tensor->storage->version == p->hoist_version[k];
    if (ok) return;
    p->kept_ok = 0;   /* kept again by this run's entries, valid once it completes */
    for (int s = 0; s < p->nslots; s++) {
        ember_tensor_release(p->kept[s]);
        p->kept[s] = NULL;
    }
    for (int k = 0; k < p->nhoist_live; k++) p->hoist_version[k] = p->slots[p->hoist_live[k]].tensor->storage->version;
}

int ember__plan_hoist_take(ember_plan *p, int e)
{
    if (!p->nhoisted || !p->hoisted[e] || !p->kept_ok) return 0;
    const plan_entry *en = &p->entries[e];
    for (int k = 0; k < en->nout; k++) {
        int s = en->slots[en->nin + k];
        ember_tensor_release(p->vals[s]);
        p->vals[s] = p->kept[s];
        ember_tensor_retain(p->vals[s]);
    }
    return 1;
}

void ember__plan_hoist_keep(ember_plan *p, int e)
{
    if (!p->nhoisted || !p->hoisted[e] || p->kept_ok) return;
    const plan_entry *en = &p->entries[e];
    for (int k = 0; k < en->nout; k++) {
        int s = en->slots[en->nin + k];
        ember_tensor_release(p->kept[s]);
        p->kept[s] = p->vals[s];
        ember_tensor_retain(p->kept[s]);
    }
}

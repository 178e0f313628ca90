/* replay.c: a traced plan built (dead entries removed, the temporaries'
   lifetimes worked out) and replayed in C, whole or a budget at a time
   (plan.h, docs/plans.md). */
#include "plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether an entry does something besides making its outputs: in-place
   writes, optimizer updates, random draws (which advance the generator). */
static int has_effect(const plan_entry *e) { return e->kind != PE_OP && e->kind != PE_VIEW; }

static void plan_free_parts(ember_plan *p)
{
    for (int e = 0; e < p->nentries; e++) {
        free(p->entries[e].slots);
        free(p->entries[e].release);
        for (int k = 0; k < p->entries[e].nsub; k++) free(p->entries[e].sub[k].slots);
        free(p->entries[e].sub);
    }
    for (int s = 0; s < p->nslots; s++) {
        ember_tensor_release(p->slots[s].tensor);
        if (p->names) free(p->names[s]);
    }
    free(p->names);
    free(p->entries);
    free(p->slots);
    free(p->owned);
    free(p->outputs);
    free(p->inputs_dtype);
    free(p->inputs_ndim);
    free(p->inputs_shape);
    free(p->inputs_device);
    free(p->inputs_strides);
    free(p->inputs_offset);
    free(p->inputs_viewed);
    free(p->counters);
    free(p->vals);
    free(p->first_held);
    free(p->group);
    ember__plan_hoist_free(p);
    ember__plan_arena_free(p);
    free(p);
}

/* The most bytes of temporaries alive at once along the schedule (held:
   the slots' tensors of a run; born: scratch of nslots). */
static int64_t peak_of(const ember_plan *p, ember_tensor *const *held, int64_t *born)
{
    int64_t live = 0, peak = 0;
    memset(born, 0, (size_t)p->nslots * sizeof *born);
    for (int e = 0; e < p->nentries; e++) {
        const plan_entry *en = &p->entries[e];
        for (int k = 0; k < en->nout; k++) {
            int s = en->slots[en->nin + k];
            if (s < 0) continue;
            if (held[s] && !held[s]->is_view) born[s] = (int64_t)held[s]->storage->nbytes;
            live += born[s];
        }
        if (live > peak) peak = live;
        for (const int32_t *r = en->release; *r >= 0; r++) live -= born[*r];
    }
    return peak;
}

/* A loaded plan's first complete run is over (first_held: each slot's
   tensor in it): its peak bytes and the arena's layout worked out as a
   traced plan's are, over them; the tensors released. A layout that cannot
   be made (out of memory) leaves the plan without an arena. */
static void plan_after_first_run(ember_plan *p)
{
    ember_tensor **held = p->first_held;
    p->first_held = NULL;
    p->arena_pending = 0;
    int64_t *born = calloc((size_t)p->nslots + 1, sizeof *born);
    if (born) p->peak_bytes = peak_of(p, held, born);
    if (!born || ember__plan_arena_layout(p, held) < 0) p->nregions = 0;   /* the run itself succeeded */
    free(born);
    for (int s = 0; s < p->nslots; s++) ember_tensor_release(held[s]);
    free(held);
}

/* Drops the entries nothing reads (dead code), then works out each slot's
   last reader, what each entry releases, and the temporaries' peak bytes. */
static int lifetimes(ember_plan *p, ember_tensor *const *held)
{
    int ns = p->nslots;
    uint8_t *used = calloc((size_t)ns + 1, 1);
    int64_t *born_bytes = calloc((size_t)ns + 1, sizeof *born_bytes);
    if (!used || !born_bytes) {
        free(used);
        free(born_bytes);
        return ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
    }
    for (int k = 0; k < p->noutputs; k++) used[p->outputs[k]] = 1;
    int kept = 0;
    for (int e = p->nentries - 1; e >= 0; e--) {
        plan_entry *en = &p->entries[e];
        int keep = has_effect(en);
        for (int k = 0; k < en->nout && !keep; k++) keep = en->slots[en->nin + k] >= 0 && used[en->slots[en->nin + k]];
        if (!keep) {
            free(en->slots);
            en->slots = NULL;
            en->release = NULL;
            continue;
        }
        kept++;
        for (int i = 0; i < en->nin; i++)
            if (en->slots[i] >= 0) used[en->slots[i]] = 1;
    }
    int n = 0;
    for (int e = 0; e < p->nentries; e++)
        if (p->entries[e].slots) p->entries[n++] = p->entries[e];
    p->removed = p->nentries - n;
    p->nentries = n;
    (void)kept;
    if (held && !getenv("EMBER_PLAN_NO_FUSE")) {   /* a traced plan: its slots' dtypes and shapes are known */
        int rc = ember__plan_patterns(p, held);
        if (rc >= 0) rc = ember__plan_fuse(p, held);
        if (rc < 0) {
            free(used);
            free(born_bytes);
            return rc;
        }
        n = p->nentries;
    }
    for (int s = 0; s < ns; s++) p->slots[s].last_use = -1;
    for (int e = 0; e < n; e++) {
        plan_entry *en = &p->entries[e];
        for (int i = 0; i < en->nin; i++)
            if (en->slots[i] >= 0) p->slots[en->slots[i]].last_use = e;
    }
    int rc = EMBER_OK;
    for (int e = 0; e < n && rc >= 0; e++) {
        plan_entry *en = &p->entries[e];
        int cnt = 0;
        en->release = malloc((size_t)(en->nin + en->nout + 1) * sizeof *en->release);
        if (!en->release) {
            rc = ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
            break;
        }
        for (int j = 0; j < en->nin + en->nout; j++) {
            int s = en->slots[j];
            if (s < 0 || !p->owned[s] || p->slots[s].is_output) continue;
            int last = p->slots[s].last_use;
            if (j < en->nin ? last != e : last >= 0) continue;
            int dup = 0;
            for (int q = 0; q < cnt; q++) dup |= en->release[q] == s;
            if (dup) continue;
            en->release[cnt++] = s;
        }
        en->release[cnt] = -1;
    }
    if (rc >= 0 && held) p->peak_bytes = peak_of(p, held, born_bytes);
    if (rc >= 0 && !getenv("EMBER_PLAN_NO_HOIST")) rc = ember__plan_hoist(p);
    if (rc >= 0 && !getenv("EMBER_PLAN_NO_ARENA")) {
        if (held) rc = ember__plan_arena_layout(p, held);
        else p->arena_pending = 1;   /* a loaded plan: laid out after its first run */
    }
    if (rc >= 0) rc = ember__plan_group_updates(p);
    free(used);
    free(born_bytes);
    return rc;
}

/* lifetimes, after a traced forward's convolutions read their weights'
   live taps from hoisted entries (taps.c; held grows by their slots) */
static int plan_lifetimes(ember_plan *p, ember_tensor *const *held)
{
    int ns0 = p->nslots, rc = EMBER_OK;
    ember_tensor **held2 = NULL;
    if (held && !getenv("EMBER_PLAN_NO_HOIST")) rc = ember__plan_crop_taps(p, held, &held2);
    if (rc >= 0) rc = lifetimes(p, held2 ? held2 : held);
    if (held2)
        for (int s = ns0; s < p->nslots; s++) ember_tensor_release(held2[s]);
    free(held2);
    return rc;
}

ember_plan *ember__plan_alloc(int nslots, int nentries, int ninputs, int noutputs, int ncounters)
{
    ember_plan *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->slots = calloc((size_t)nslots + 1, sizeof *p->slots);
    p->entries = calloc((size_t)nentries + 1, sizeof *p->entries);
    p->outputs = calloc((size_t)noutputs + 1, sizeof *p->outputs);
    p->inputs_dtype = calloc((size_t)ninputs + 1, sizeof *p->inputs_dtype);
    p->inputs_ndim = calloc((size_t)ninputs + 1, sizeof *p->inputs_ndim);
    p->inputs_device = calloc((size_t)ninputs + 1, sizeof *p->inputs_device);
    p->inputs_shape = calloc((size_t)ninputs + 1, sizeof *p->inputs_shape);
    p->inputs_strides = calloc((size_t)ninputs + 1, sizeof *p->inputs_strides);
    p->inputs_offset = calloc((size_t)ninputs + 1, sizeof *p->inputs_offset);
    p->inputs_viewed = calloc((size_t)ninputs + 1, 1);
    p->counters = calloc((size_t)ncounters + 1, sizeof *p->counters);
    p->vals = calloc((size_t)nslots + 1, sizeof *p->vals);
    p->owned = calloc((size_t)nslots + 1, 1);
    p->names = calloc((size_t)nslots + 1, sizeof *p->names);
    if (!p->slots || !p->entries || !p->outputs || !p->inputs_dtype || !p->inputs_ndim || !p->inputs_device ||
        !p->inputs_shape || !p->counters || !p->vals || !p->owned || !p->inputs_strides || !p->inputs_offset ||
        !p->inputs_viewed || !p->names) {
        plan_free_parts(p);
        return NULL;
    }
    p->ninputs = ninputs;
    p->noutputs = noutputs;
    p->ncounters = ncounters;
    return p;
}

void ember__plan_free_parts(ember_plan *p) { plan_free_parts(p); }

/* What a plan's slots, outputs and counters give: who owns what, and the
   lifetimes (held: the slots' tensors in the trace, for the peak bytes; NULL
   for a loaded plan). Frees p on failure. */
int ember__plan_finish(ember_plan *p, ember_tensor *const *held)
{
    for (int k = 0; k < p->noutputs; k++) {
        plan_slot *sl = &p->slots[p->outputs[k]];
        sl->is_output = 1;
        if (sl->kind == SLOT_CONST) sl->written = 1;   /* the caller gets a copy it may write */
    }
    for (int s = 0; s < p->nslots; s++)
        p->owned[s] = p->slots[s].kind == SLOT_TEMP || (p->slots[s].kind == SLOT_CONST && p->slots[s].written);
    for (int e = 0; e < p->nentries; e++) {
        const plan_entry *en = &p->entries[e];
        if (en->kind == PE_ADAM) p->counters[en->args.i[2]] = en->args.i[3] + 1;
        /* a live tensor the plan writes (a parameter, a momentum buffer): so marked in a saved file */
        unsigned w = ember__plan_written(en->kind);
        for (int i = 0; i < en->nin; i++)
            if ((w >> i & 1) && en->slots[i] >= 0 && p->slots[en->slots[i]].kind == SLOT_LIVE)
                p->slots[en->slots[i]].written = 1;
        /* a view of an input's memory is made at the offsets the example had */
        if (en->kind == PE_VIEW && p->slots[en->slots[0]].kind == SLOT_INPUT)
            p->inputs_viewed[p->slots[en->slots[0]].index] = 1;
    }
    int rc = plan_lifetimes(p, held);
    if (rc < 0) plan_free_parts(p);
    return rc;
}

int ember__plan_build(const tracer_view *v, ember_plan **out)
{
    ember_plan *p = ember__plan_alloc(v->nslots, v->nentries, v->ninputs, v->noutputs, v->nadam);
    if (!p) {
        for (int e = 0; e < v->nentries; e++) free(v->entries[e].slots);
        for (int s = 0; s < v->nslots; s++) ember_tensor_release(v->slots[s].tensor);
        return ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
    }
    p->nslots = v->nslots;
    p->nentries = v->nentries;
    memcpy(p->slots, v->slots, (size_t)v->nslots * sizeof *p->slots);
    memcpy(p->entries, v->entries, (size_t)v->nentries * sizeof *p->entries);
    memcpy(p->outputs, v->outputs, (size_t)v->noutputs * sizeof *p->outputs);
    for (int s = 0; s < v->nslots; s++) {
        const plan_slot *sl = &v->slots[s];
        if (sl->kind != SLOT_INPUT) continue;
        const ember_tensor *t = v->held[s];
        p->inputs_dtype[sl->index] = t->dtype;
        p->inputs_ndim[sl->index] = t->ndim;
        p->inputs_device[sl->index] = t->storage->device;
        memcpy(p->inputs_shape[sl->index], t->shape, sizeof t->shape);
        memcpy(p->inputs_strides[sl->index], t->strides, sizeof t->strides);
        p->inputs_offset[sl->index] = t->offset;
    }
    EMBER_TRY(ember__plan_finish(p, v->held));
    *out = p;
    return EMBER_OK;
}

/* ------------------------------------------------------------------ running */
/* A slot's last reader has run: its tensor released (kept to the run's end
   by a run that lays out a loaded plan's arena). */
static void drop(ember_plan *p, int s)
{
    if (p->first_held) {
        ember_tensor_release(p->first_held[s]);
        p->first_held[s] = p->vals[s];
    } else {
        ember_tensor_release(p->vals[s]);
    }
    p->vals[s] = NULL;
}

static int exec(ember_plan *p, const plan_entry *e)
{
    ember_tensor **vals = p->vals;
    if (ember__plan_hoist_take(p, (int)(e - p->entries))) {   /* its results kept from an earlier run */
        for (const int32_t *r = e->release; *r >= 0; r++) drop(p, *r);
        return EMBER_OK;
    }
    ember_tensor *small[16], **in = small, *res[8] = {NULL};
    if (e->nin > 16) {
        in = malloc((size_t)e->nin * sizeof *in);
        if (!in) return ember__fail(EMBER_ERR_OOM, "plan: out of memory");
    }
    for (int i = 0; i < e->nin; i++) in[i] = e->slots[i] >= 0 ? vals[e->slots[i]] : NULL;
    const double *f = e->args.f;
    const int64_t *a = e->args.i;
    int rc = p->checked ? ember__plan_check_entry(e, in) : EMBER_OK;
    if (rc < 0) {
        if (in != small) free(in);
        return rc;
    }
    ember__arena_offer offer = {0};
    if (p->arena && ember__plan_arena_offer(p, e, &offer)) ember__plan_offer = &offer;
    switch (e->kind) {
    case PE_OP: rc = ember__run_nograd(e->op, e->nin, in, &e->at, res); break;
    case PE_BINARY_: rc = ember__binary_inplace(e->op, in[0], in[1]); break;
    case PE_UNARY_: rc = ember__unary_inplace(e->op, in[0], &e->at); break;
    case PE_COPY_: rc = ember_copy_(in[0], in[1]); break;
    case PE_FILL_: rc = ember_fill_(in[0], f[0]); break;
    case PE_SGD: rc = ember_sgd_step_(in[0], in[1], in[2], f[0], f[1], f[2], f[3], (int)a[0], (int)a[1], 0); break;
    case PE_ADAM:
        rc = ember_adam_step_(in[0], in[1], in[2], in[3], in[4], f[0], f[1], f[2], f[3], f[4], (int)a[0], (int)a[1],
                              p->counters[a[2]]);
        break;
    case PE_RANDOM: rc = ember__random_new((int)a[0], f[0], f[1], (int)a[3], &a[4], (int)a[1], (int)a[2], res); break;
    case PE_RANDOM_: rc = ember__random_fill((int)a[0], f[0], f[1], in[0]); break;
    case PE_VIEW: rc = ember__make_view(in[0], (int)a[0], &a[2], &a[2 + EMBER_MAX_DIMS], a[1], res); break;
    case PE_FUSED: rc = ember__fused_run(e, in, res); break;
    default: rc = ember__fail(EMBER_ERR_STATE, "plan: unknown entry kind %d", e->kind);
    }
    ember__plan_offer = NULL;
    if (in != small) free(in);
    if (rc < 0) return rc;
    for (int k = 0; k < e->nout; k++) {
        int s = e->slots[e->nin + k];
        if (s >= 0) {
            ember_tensor_release(vals[s]);
            vals[s] = res[k];
        } else {
            ember_tensor_release(res[k]);
        }
    }
    if (p->arena && offer.n) ember__plan_arena_check(p, &offer, vals);
    ember__plan_hoist_keep(p, (int)(e - p->entries));
    for (const int32_t *r = e->release; *r >= 0; r++) drop(p, *r);
    return EMBER_OK;
}

/* Releases what an open run holds. */
static void end_run(ember_plan *p)
{
    if (p->first_held) {   /* a run that failed or was cancelled lays nothing out */
        for (int s = 0; s < p->nslots; s++) ember_tensor_release(p->first_held[s]);
        free(p->first_held);
        p->first_held = NULL;
    }
    for (int s = 0; s < p->nslots; s++) {
        if (p->owned[s]) ember_tensor_release(p->vals[s]);
        p->vals[s] = NULL;
    }
    p->running = 0;
    p->next = 0;
}

static int check_inputs(const ember_plan *p, ember_tensor *const *in, int nin)
{
    char got[200], want[200];
    if (nin != p->ninputs)
        return ember__fail(EMBER_ERR_ARG, "plan: expected %d input%s, got %d", p->ninputs, p->ninputs == 1 ? "" : "s",
                           nin);
    for (int i = 0; i < nin; i++) {
        const ember_tensor *t = in ? in[i] : NULL;
        if (!t || t->refcount <= 0) return ember__fail(EMBER_ERR_ARG, "plan: input %d is NULL or released", i + 1);
        int nd = p->inputs_ndim[i];
        if (t->dtype != p->inputs_dtype[i] || t->ndim != nd ||
            memcmp(t->shape, p->inputs_shape[i], (size_t)nd * sizeof *t->shape) != 0 ||
            t->storage->device != p->inputs_device[i]) {
            char dg[32], dw[32];
            return ember__fail(EMBER_ERR_SHAPE,
                               "plan: input %d is %s %s on %s, but the plan was traced with %s %s on %s "
                               "(a plan replays one shape and dtype: trace another for this one)",
                               i + 1, ember_dtype_name(t->dtype), ember__tshape(got, t),
                               ember__device_name(dg, t->storage->device), ember_dtype_name(p->inputs_dtype[i]),
                               ember__shape_str(want, nd, p->inputs_shape[i]),
                               ember__device_name(dw, p->inputs_device[i]));
        }
        if (p->inputs_viewed[i] && (t->offset != p->inputs_offset[i] ||
                                    memcmp(t->strides, p->inputs_strides[i], (size_t)nd * sizeof *t->strides) != 0))
            return ember__fail(EMBER_ERR_SHAPE,
                               "plan: input %d is laid out in memory (strides %s, offset %lld) unlike the example "
                               "(strides %s, offset %lld), whose memory the plan views; pass a contiguous copy",
                               i + 1, ember__shape_str(got, nd, t->strides), (long long)t->offset,
                               ember__shape_str(want, nd, p->inputs_strides[i]), (long long)p->inputs_offset[i]);
    }
    return EMBER_OK;
}

int ember_plan_start(ember_plan *p, ember_tensor *const *in, int nin)
{
    if (!p) return ember__fail(EMBER_ERR_ARG, "plan: NULL plan");
    if (p->running) return ember__fail(EMBER_ERR_STATE, "plan: a run of this plan is still open (finish or cancel it)");
    if (ember__trace_on)
        return ember__fail(EMBER_ERR_STATE, "plan: a plan cannot run inside ember.jit.trace (trace the function it "
                                            "was traced from instead)");
    EMBER_TRY(check_inputs(p, in, nin));
    EMBER_TRY(ember__plan_arena_begin(p));
    if (p->arena_pending) p->first_held = calloc((size_t)p->nslots + 1, sizeof *p->first_held);   /* NULL: later */
    ember__plan_hoist_begin(p);
    for (int s = 0; s < p->nslots; s++) {
        const plan_slot *sl = &p->slots[s];
        switch (sl->kind) {
        case SLOT_INPUT: p->vals[s] = in[sl->index]; break;
        case SLOT_LIVE: p->vals[s] = sl->tensor; break;
        case SLOT_CONST:
            if (!sl->written) {
                p->vals[s] = sl->tensor;
                break;
            }
            {
                ember_tensor *c = sl->tensor;
                int rc = ember__run_nograd(EMBER_OP_CLONE, 1, &c, NULL, &p->vals[s]);
                if (rc < 0) {
                    end_run(p);
                    return rc;
                }
            }
            break;
        default: p->vals[s] = NULL;
        }
    }
    p->running = 1;
    p->next = 0;
    return EMBER_OK;
}

int ember_plan_step(ember_plan *p, double seconds, int *done)
{
    if (!p) return ember__fail(EMBER_ERR_ARG, "plan: NULL plan");
    if (done) *done = 0;
    if (!p->running) return ember__fail(EMBER_ERR_STATE, "plan: no run is open (start one first)");
    double deadline = seconds >= 0 ? ember_clock() + seconds : -1;
    while (p->next < p->nentries) {
        int rc = seconds < 0 ? ember__plan_updates_run(p, p->next, p->vals) : 0;
        if (rc > 0) {   /* a group of updates ran as one job (updates.c) */
            for (int k = 0; k < rc; k++)
                for (const int32_t *r = p->entries[p->next + k].release; *r >= 0; r++) drop(p, *r);
            p->next += rc;
            continue;
        }
        rc = exec(p, &p->entries[p->next]);
        if (rc < 0) {   /* "plan: entry 3 of 7: linear_relu: ..." */
            char where[64];
            snprintf(where, sizeof where, "plan: entry %d of %d", p->next + 1, p->nentries);
            if (strncmp(ember_last_error(), "plan:", 5) != 0) ember__fail_prefix(rc, where);
            end_run(p);
            return rc;
        }
        p->next++;
        if (deadline >= 0 && p->next < p->nentries && ember_clock() >= deadline) return EMBER_OK;
    }
    if (done) *done = 1;
    return EMBER_OK;
}

int ember_plan_result(ember_plan *p, ember_tensor **out, int nout)
{
    if (!p) return ember__fail(EMBER_ERR_ARG, "plan: NULL plan");
    if (!p->running || p->next < p->nentries)
        return ember__fail(EMBER_ERR_STATE, "plan: the run is not complete (step it until it is done)");
    if (nout != p->noutputs || (nout > 0 && !out))
        return ember__fail(EMBER_ERR_ARG, "plan: the plan has %d outputs, %d asked for", p->noutputs, nout);
    for (int k = 0; k < nout; k++) {
        out[k] = p->vals[p->outputs[k]];
        ember_tensor_retain(out[k]);
    }
    for (int k = 0; k < p->ncounters; k++) p->counters[k]++;
    p->kept_ok = p->nhoisted > 0;   /* every hoisted entry ran or was taken */
    if (p->first_held) {   /* the slots still held, then the layout over all */
        for (int s = 0; s < p->nslots; s++)
            if (!p->first_held[s] && p->vals[s]) {
                p->first_held[s] = p->vals[s];
                ember_tensor_retain(p->vals[s]);
            }
        plan_after_first_run(p);
    }
    end_run(p);
    return EMBER_OK;
}

void ember_plan_cancel(ember_plan *p)
{
    if (p && p->running) end_run(p);
}

int ember_plan_run(ember_plan *p, ember_tensor *const *in, int nin, ember_tensor **out, int nout)
{
    if (p && (nout != p->noutputs || (nout > 0 && !out)))   /* before anything is written */
        return ember__fail(EMBER_ERR_ARG, "plan: the plan has %d outputs, %d asked for", p->noutputs, nout);
    EMBER_TRY(ember_plan_start(p, in, nin));
    EMBER_TRY(ember_plan_step(p, -1, NULL));
    return ember_plan_result(p, out, nout);
}

void ember_plan_free(ember_plan *p)
{
    if (!p) return;
    ember_plan_cancel(p);
    plan_free_parts(p);
}

void ember_plan_stats(const ember_plan *p, ember_plan_stats_t *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!p) return;
    out->ops = p->nentries;
    for (int e = 0; e < p->nentries; e++) out->fused += p->entries[e].kind == PE_FUSED;
    out->fused += p->patterns;
    out->patterns = p->patterns;
    out->hoisted = p->nhoisted;
    out->removed = p->removed;
    out->arena_bytes = p->arena_bytes;
    out->peak_bytes = p->peak_bytes;
    out->inputs = p->ninputs;
    out->outputs = p->noutputs;
}

int64_t *ember_plan_counters(ember_plan *p, int *n)
{
    if (n) *n = p ? p->ncounters : 0;
    return p ? p->counters : NULL;
}

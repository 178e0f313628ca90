/* trace.c: recording a plan (plan.h, docs/plans.md). One trace at a time, on
   the thread that began it. Every tensor the trace sees is held until the
   trace ends, so an address names one tensor throughout. */
#include "plan.h"
#include "../autograd.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

EMBER_TLS int ember__trace_on;
static EMBER_TLS int trace_depth;
static int allow_reads;   /* > 0: inside a library check whose reads do not change the graph */

enum { MAP_EMPTY = -1, MAP_BORN = -2, MAP_INNER = -3 };

/* address -> value, open addressing */
typedef struct addr_map {
    const void **keys;
    int32_t *vals;
    size_t cap, used;
} addr_map;

typedef struct tracer {
    /* tensor -> slot, or MAP_BORN (made by a factory during the trace) or
       MAP_INNER (made inside an op during the trace) */
    addr_map tensors;
    addr_map storages;   /* storage -> the slot of a tensor that owns it, or MAP_BORN (made during the trace) */
    plan_slot *slots;
    ember_tensor **held;   /* per slot: the tensor it had in the trace (one reference) */
    int nslots, slot_cap;
    plan_entry *entries;
    int nentries, entry_cap;
    int ninputs, nadam;
    ember_tensor **inputs;
    const void **written;   /* storages written in place by an entry */
    int nwritten, written_cap;
    int failed;
} tracer;

/* the open trace: one in the process, of the thread that has ember__trace_on set */
static _Atomic(tracer *) g_trace;

/* ------------------------------------------------------------------ address map */
static size_t hash_ptr(const void *p, size_t cap) { return ((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull & (cap - 1); }

static int map_find(const addr_map *tr, const void *p)
{
    if (!tr->cap) return MAP_EMPTY;
    for (size_t h = hash_ptr(p, tr->cap);; h = (h + 1) & (tr->cap - 1)) {
        if (tr->keys[h] == p) return tr->vals[h];
        if (!tr->keys[h]) return MAP_EMPTY;
    }
}

static int map_put(addr_map *tr, const void *p, int32_t v)
{
    if ((tr->used + 1) * 2 > tr->cap) {
        size_t ncap = tr->cap ? tr->cap * 2 : 1024;
        const void **nk = calloc(ncap, sizeof *nk);
        int32_t *nv = malloc(ncap * sizeof *nv);
        if (!nk || !nv) {
            free(nk);
            free(nv);
            return ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
        }
        for (size_t i = 0; i < tr->cap; i++) {
            if (!tr->keys[i]) continue;
            size_t h = hash_ptr(tr->keys[i], ncap);
            while (nk[h]) h = (h + 1) & (ncap - 1);
            nk[h] = tr->keys[i];
            nv[h] = tr->vals[i];
        }
        free(tr->keys);
        free(tr->vals);
        tr->keys = nk;
        tr->vals = nv;
        tr->cap = ncap;
    }
    size_t h = hash_ptr(p, tr->cap);
    while (tr->keys[h] && tr->keys[h] != p) h = (h + 1) & (tr->cap - 1);
    if (!tr->keys[h]) tr->used++;
    tr->keys[h] = p;
    tr->vals[h] = v;
    return EMBER_OK;
}

static int grow(void **p, int *cap, int need, size_t size)
{
    if (need <= *cap) return EMBER_OK;
    int ncap = *cap ? *cap * 2 : 64;
    while (ncap < need) ncap *= 2;
    void *np = realloc(*p, (size_t)ncap * size);
    if (!np) return ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
    *p = np;
    *cap = ncap;
    return EMBER_OK;
}

/* ------------------------------------------------------------------ slots */
static int new_slot(tracer *tr, int kind, ember_tensor *t, ember_tensor *value)
{
    int cap = tr->slot_cap;
    EMBER_TRY(grow((void **)&tr->slots, &cap, tr->nslots + 1, sizeof *tr->slots));
    EMBER_TRY(grow((void **)&tr->held, &tr->slot_cap, tr->nslots + 1, sizeof *tr->held));
    int s = tr->nslots;
    EMBER_TRY(map_put(&tr->tensors, t, s));
    /* the memory's owner: a tensor that is not a view, else the first slot seen on it (a view's offsets
       are the memory's, so any tensor on it can make the views of it) */
    if (!t->is_view || kind == SLOT_INPUT || kind == SLOT_LIVE || map_find(&tr->storages, t->storage) < 0)
        EMBER_TRY(map_put(&tr->storages, t->storage, s));
    tr->nslots++;
    tr->slots[s] = (plan_slot){kind, 0, value, 0, -1, 0};
    ember_tensor_retain(t);
    tr->held[s] = t;
    return s;
}

static int record(tracer *tr, int kind, int op, int nin, ember_tensor *const *in, int nout, ember_tensor *const *out,
                  const ember_attrs *at, const ember__call_args *args);

/* The slot t is read from: a slot it has; else a constant (a factory's
   tensor made during the trace: its value now); else, for a tensor sharing
   the memory of a slot's tensor (a view an op's recording made: what a grad
   rule saved), a view entry of that slot, or the tensor itself when that
   slot is live; else, for memory that existed before the trace, a live
   tensor (read and written in place on replay). */
static int slot_of(tracer *tr, ember_tensor *t)
{
    int m = map_find(&tr->tensors, t);
    if (m >= 0) return m;
    if (m == MAP_BORN) {
        ember_tensor *snap = NULL;
        EMBER_TRY(ember__run_nograd(EMBER_OP_CLONE, 1, &t, NULL, &snap));
        int s = new_slot(tr, SLOT_CONST, t, snap);
        if (s < 0) ember_tensor_release(snap);
        return s;
    }
    int owner = map_find(&tr->storages, t->storage);
    if (owner >= 0 && tr->slots[owner].kind != SLOT_LIVE) {
        ember__call_args args = {{t->ndim, t->offset}, {0}};   /* the dims past ndim 0 (a saved plan writes them) */
        memcpy(&args.i[2], t->shape, (size_t)t->ndim * sizeof *t->shape);
        memcpy(&args.i[2 + EMBER_MAX_DIMS], t->strides, (size_t)t->ndim * sizeof *t->strides);
        ember_tensor *src = tr->held[owner];
        EMBER_TRY(record(tr, PE_VIEW, 0, 1, &src, 1, &t, NULL, &args));
        return map_find(&tr->tensors, t);
    }
    if (owner == MAP_BORN)   /* memory made during the trace that no slot holds */
        return ember__fail(EMBER_ERR_UNSUPPORTED,
                           "jit.trace: an op reads a tensor made inside another op's recording that the trace "
                           "cannot place (a saved copy under allow_mutation_on_saved_tensors?)");
    ember_tensor_retain(t);
    int s = new_slot(tr, SLOT_LIVE, t, t);
    if (s < 0) ember_tensor_release(t);
    return s;
}

static int note_written(tracer *tr, const ember_tensor *t)
{
    EMBER_TRY(grow((void **)&tr->written, &tr->written_cap, tr->nwritten + 1, sizeof *tr->written));
    tr->written[tr->nwritten++] = t->storage;
    return EMBER_OK;
}

unsigned ember__plan_written(int kind)
{
    switch (kind) {
    case PE_BINARY_: case PE_UNARY_: case PE_COPY_: case PE_FILL_: case PE_RANDOM_: return 1u;
    case PE_SGD: return 1u | 4u;
    case PE_ADAM: return 1u | 4u | 8u | 16u;
    default: return 0;
    }
}

static int record(tracer *tr, int kind, int op, int nin, ember_tensor *const *in, int nout, ember_tensor *const *out,
                  const ember_attrs *at, const ember__call_args *args)
{
    plan_entry e;
    memset(&e, 0, sizeof e);
    e.kind = (int16_t)kind;
    e.op = (int16_t)op;
    e.nin = nin;
    e.nout = nout;
    if (at) e.at = *at;
    if (args) e.args = *args;
    e.slots = malloc((size_t)(nin + nout + 1) * sizeof *e.slots);
    if (!e.slots) return ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
    unsigned w = ember__plan_written(kind);
    int rc = EMBER_OK;
    for (int i = 0; i < nin && rc >= 0; i++) {
        if (!in[i]) {
            e.slots[i] = -1;
            continue;
        }
        rc = slot_of(tr, in[i]);
        e.slots[i] = rc;
        if (rc >= 0 && (w >> i & 1)) rc = note_written(tr, in[i]);
    }
    for (int k = 0; k < nout && rc >= 0; k++) {
        /* an op may hand back one of its inputs (contiguous, to_device): the slot is new all the same */
        if (map_find(&tr->tensors, out[k]) >= 0) EMBER_TRY(map_put(&tr->tensors, out[k], MAP_EMPTY));
        rc = out[k] ? new_slot(tr, SLOT_TEMP, out[k], NULL) : -1;
        e.slots[nin + k] = rc;
    }
    if (kind == PE_ADAM) e.args.i[2] = tr->nadam++;
    /* grown only now: finding an operand's slot may record entries of its own (a view) */
    if (rc >= 0) rc = grow((void **)&tr->entries, &tr->entry_cap, tr->nentries + 1, sizeof *tr->entries);
    if (rc < 0) {
        free(e.slots);
        return rc;
    }
    tr->entries[tr->nentries++] = e;
    return EMBER_OK;
}

/* ------------------------------------------------------------------ hooks */
int ember__trace_enter(void) { return trace_depth++; }

int ember__trace_leave(int depth, int rc, int kind, int op, int nin, ember_tensor *const *in, int nout,
                       ember_tensor *const *out, const ember_attrs *at, const ember__call_args *args)
{
    trace_depth = depth;
    tracer *tr = atomic_load_explicit(&g_trace, memory_order_relaxed);
    if (depth != 0 || rc < 0 || !tr || !ember__trace_on) return rc;
    trace_depth = 1;   /* the recording's own ops (snapshots) are not recorded */
    int r = tr->failed ? tr->failed : record(tr, kind, op, nin, in, nout, out, at, args);
    trace_depth = 0;
    if (r < 0) {
        if (!tr->failed) tr->failed = r;
        for (int k = 0; k < nout; k++) {
            ember_tensor_release(out[k]);
            ((ember_tensor **)out)[k] = NULL;
        }
        return r;
    }
    return rc;
}

void ember__trace_header(const ember_tensor *t)
{
    tracer *tr = atomic_load_explicit(&g_trace, memory_order_relaxed);
    if (!tr || tr->failed) return;
    /* a header made inside an op is that op's (a view its recording saved);
       outside one, a tensor the trace has not seen (from_blob's: live) */
    int r = map_put(&tr->tensors, t, trace_depth == 0 ? MAP_EMPTY : MAP_INNER);
    if (r < 0) tr->failed = r;
}

void ember__trace_born(const ember_tensor *t)
{
    tracer *tr = atomic_load_explicit(&g_trace, memory_order_relaxed);
    if (!tr || tr->failed) return;
    int r = map_put(&tr->storages, t->storage, MAP_BORN);   /* memory made during the trace */
    if (r >= 0) r = map_put(&tr->tensors, t, trace_depth == 0 ? MAP_BORN : MAP_INNER);
    if (r < 0) tr->failed = r;
}

void ember__trace_view(const ember_tensor *a, ember_tensor *view)
{
    tracer *tr = atomic_load_explicit(&g_trace, memory_order_relaxed);
    if (trace_depth != 0 || !tr || tr->failed) return;
    ember__call_args args = {{view->ndim, view->offset}, {0}};
    memcpy(&args.i[2], view->shape, (size_t)view->ndim * sizeof *view->shape);
    memcpy(&args.i[2 + EMBER_MAX_DIMS], view->strides, (size_t)view->ndim * sizeof *view->strides);
    ember_tensor *in = (ember_tensor *)a;
    trace_depth = 1;
    int r = record(tr, PE_VIEW, 0, 1, &in, 1, &view, NULL, &args);
    trace_depth = 0;
    if (r < 0) tr->failed = r;
}

void ember_trace_allow_reads(int delta)
{
    allow_reads += delta;
    if (allow_reads < 0) allow_reads = 0;
}

int ember__trace_read(const char *what)
{
    if (trace_depth != 0 || allow_reads > 0) return EMBER_OK;
    return ember__fail(EMBER_ERR_STATE,
                       "%s: reads a tensor's value inside ember.jit.trace: a plan cannot replay a value the "
                       "traced function acts on in Lua (compute it with tensor ops, or read it outside the "
                       "traced function)", what);
}

/* ------------------------------------------------------------------ begin, end */
static void tracer_free(tracer *tr)
{
    if (!tr) return;
    for (int s = 0; s < tr->nslots; s++) {
        ember_tensor_release(tr->held[s]);
        if (tr->slots[s].kind != SLOT_TEMP) ember_tensor_release(tr->slots[s].tensor);
    }
    for (int e = 0; e < tr->nentries; e++) free(tr->entries[e].slots);
    free(tr->tensors.keys);
    free(tr->tensors.vals);
    free(tr->storages.keys);
    free(tr->storages.vals);
    free(tr->slots);
    free(tr->held);
    free(tr->entries);
    free(tr->written);
    free(tr->inputs);
    free(tr);
}

int ember_trace_begin(int n, ember_tensor *const *inputs)
{
    if (atomic_load(&g_trace))
        return ember__fail(EMBER_ERR_STATE, "jit.trace: a trace is already open (traces do not nest; one at a time)");
    if (n < 0 || (n > 0 && !inputs)) return ember__fail(EMBER_ERR_ARG, "jit.trace: %d inputs given as NULL", n);
    tracer *tr = calloc(1, sizeof *tr);
    if (!tr) return ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
    int rc = EMBER_OK;
    for (int i = 0; i < n && rc >= 0; i++) {
        if (!inputs[i] || inputs[i]->refcount <= 0) {
            rc = ember__fail(EMBER_ERR_ARG, "jit.trace: input %d is NULL or released", i + 1);
            break;
        }
        if (map_find(&tr->tensors, inputs[i]) >= 0) {
            rc = ember__fail(EMBER_ERR_ARG, "jit.trace: input %d is input %d again; give distinct tensors", i + 1,
                             map_find(&tr->tensors, inputs[i]) + 1);
            break;
        }
        rc = new_slot(tr, SLOT_INPUT, inputs[i], NULL);
        if (rc >= 0) tr->slots[rc].index = i;
    }
    if (rc < 0) {
        tracer_free(tr);
        return rc;
    }
    tr->ninputs = n;
    tracer *none = NULL;
    if (!atomic_compare_exchange_strong(&g_trace, &none, tr)) {   /* another thread's, opened meanwhile */
        tracer_free(tr);
        return ember__fail(EMBER_ERR_STATE, "jit.trace: a trace is already open (one at a time)");
    }
    ember__trace_on = 1;
    trace_depth = 0;
    allow_reads = 0;
    return EMBER_OK;
}

void ember_trace_abort(void)
{
    if (!ember__trace_on) return;   /* none open on this thread */
    tracer *tr = atomic_exchange(&g_trace, NULL);
    ember__trace_on = 0;
    trace_depth = 0;
    tracer_free(tr);
}

int ember_trace_end(int nout, ember_tensor *const *outputs, ember_plan **out)
{
    tracer *tr = atomic_load_explicit(&g_trace, memory_order_relaxed);
    if (!out) return ember__fail(EMBER_ERR_ARG, "jit.trace: out is NULL");
    *out = NULL;
    if (!tr || !ember__trace_on) return ember__fail(EMBER_ERR_STATE, "jit.trace: no trace is open on this thread");
    ember__trace_on = 0;
    atomic_store(&g_trace, NULL);
    int rc = tr->failed;
    if (rc < 0) {
        tracer_free(tr);
        return ember__fail(rc, "jit.trace: the trace failed earlier");
    }
    int32_t *outs = malloc((size_t)(nout + 1) * sizeof *outs);
    if (!outs) rc = ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
    trace_depth = 1;
    for (int k = 0; k < nout && rc >= 0; k++) {
        if (!outputs[k]) rc = ember__fail(EMBER_ERR_ARG, "jit.trace: output %d is NULL", k + 1);
        else rc = outs[k] = slot_of(tr, outputs[k]);
    }
    trace_depth = 0;
    /* a constant the plan writes gets a fresh copy of its snapshot per run */
    for (int s = 0; s < tr->nslots && rc >= 0; s++) {
        if (tr->slots[s].kind != SLOT_CONST) continue;
        for (int w = 0; w < tr->nwritten; w++)
            if (tr->written[w] == tr->held[s]->storage) tr->slots[s].written = 1;
    }
    if (rc >= 0) {
        tracer_view v = {tr->slots, tr->held, tr->nslots, tr->entries, tr->nentries, tr->ninputs, tr->nadam, outs, nout};
        rc = ember__plan_build(&v, out);
        /* the builder took the entries and the slots' tensors, also when it failed */
        tr->nentries = 0;
        for (int s = 0; s < tr->nslots; s++) tr->slots[s].tensor = NULL;
    }
    free(outs);
    tracer_free(tr);
    return rc;
}

int ember_is_tracing(void) { return ember__trace_on; }

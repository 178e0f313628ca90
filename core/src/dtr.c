/* dtr.c: dynamic tensor rematerialization (see dtr.h and docs/dtr.md).

   A recipe (dtr_entry) hangs off the storage it remakes (storage->dtr) and
   lives as long as that storage does. It holds its inputs through private
   alias headers; storage->dtr_holds counts the aliases on a storage, so a
   storage whose only holders are recipes (refcount == dtr_holds) can be read
   by nobody but a recomputation: its data is dropped at once (MegEngine's
   "drop"), as freeing it would have been without DTR. Recipes are kept in a
   list in the order they were made, which is a topological order: a
   recipe's inputs were all made before it.

   DTR is the training thread's: the flag is per thread, so other threads'
   allocations and ops pass it by; the recipes (not locked) must be released
   on that thread too (docs/dtr.md). */
#include "dtr.h"
#include "dtr_impl.h"
#include "autograd.h"
#include "backend.h"
#include "node.h"
#include "philox.h"
#include "tape.h"

#include <stdlib.h>
#include <time.h>

EMBER_TLS int ember__dtr_on;
int ember__draw_fill(ember_tensor *t, const ember__draw *d);   /* random.c */


static struct {
    int64_t budget, min_size;
    dtr_entry head;                         /* sentinel of the list */
    int depth;                              /* inside an op or a recomputation: make no recipes */
    int in_rule;                            /* inside a built-in grad rule: its results are late */
    int settling;                           /* disable(): no eviction */
    dtr_entry *doomed;                      /* cut(): recipes whose aliases are still to release */
    int cutting;
    uint64_t clock;
    int64_t evictions, recomputes, drops, peak, entries;
    int64_t pinned_base;                    /* note_pinned(): in use but not evictable, at the last hint */
    int64_t next_check;                     /* note_pinned(): the bytes in use at which to measure again */
    int64_t making;                         /* bytes the op or recomputation running has allocated */
    int gc_wanted;
    double recompute_s;
    double draw_s_per_byte;                 /* a random draw's cost, as the last one remade took */
} D = {.draw_s_per_byte = 1e-8, .head = {.prev = &D.head, .next = &D.head}};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* An op's cost for the heuristic: the CPU seconds of the calling thread
   (its share of a parallel op), which a busy machine's preemption does not
   inflate as it does wall time (a relu timed 1000x its usual under load);
   recompute_s in the stats stays wall time. */
static double op_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void touch(dtr_entry *e)
{
    e->last_use = ++D.clock;
    e->done = 0;   /* read again after backward let it go: someone still uses it */
}

/* ------------------------------------------------------------------ data in and out */
static void free_data(ember_storage *s)
{
    ember__stats_bytes(-(int64_t)s->nbytes);
    if (s->device == EMBER_CPU) ember__free(s->data, s->nbytes);
    else ember__backend(s->device)->free(s->data, s->nbytes);
    s->data = NULL;
}

static void evict(dtr_entry *e)
{
    free_data(e->s);
    e->evicted = 1;
}

/* ------------------------------------------------------------------ recipes */
static void unlink_entry(dtr_entry *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    e->s->dtr = NULL;
    D.entries--;
}

/* A grad rule's result much larger than its inputs together (a parameter's
   gradient from conv2d_backward_weight: 590 KB from two 64 KB tensors) keeps
   them from being dropped while the result is held outside DTR: evicting
   the result then costs one op to remake it, where remaking inputs that
   were dropped as backward went on would remake the backward that led to
   them and the forward under that. More than twice: the stem's 2 MiB
   max_pool2d_backward from 1 MiB (gradient, int32 positions) kept those at
   the ResNet's tightest point (P/2: 95-100 recomputes a step against 44). */
static void drop(dtr_entry *e);

static void unkeep(dtr_entry *e)
{
    if (!e->keeps) return;
    e->keeps = 0;
    for (int i = 0; i < e->nin; i++) {
        ember_storage *in = e->in[i]->storage;
        dtr_entry *p = in->dtr;
        if (!p || p->keepers <= 0 || --p->keepers > 0) continue;
        if (in->refcount == in->dtr_holds && !p->evicted && in->dtr_locks == 0 && ember__dtr_on) drop(p);
    }
}

static void keep(dtr_entry *e)
{
    size_t inputs = 0;
    for (int i = 0; i < e->nin; i++) {
        const ember_storage *in = e->in[i]->storage;
        bool seen = false;
        for (int j = 0; j < i; j++) seen |= e->in[j]->storage == in;
        if (!seen) inputs += in->nbytes;
    }
    if ((int64_t)e->s->nbytes < D.min_size || inputs * 2 >= e->s->nbytes) return;
    e->keeps = 1;
    for (int i = 0; i < e->nin; i++)
        if (e->in[i]->storage->dtr) e->in[i]->storage->dtr->keepers++;
}

/* Forgets e: its storage keeps its data (or none, if it was evicted: then
   only other recipes, about to be cut too, may hold it). Releasing the
   aliases may free or drop the inputs' storages in turn. */
static void cut(dtr_entry *e)
{
    /* Releasing an alias may free a storage whose own recipe is cut in turn:
       a chain as long as the graph (150,000 ops deep in autograd_spec). The
       recipes to cut wait on a list that the outermost cut empties, so the
       C stack stays flat. */
    unkeep(e);
    unlink_entry(e);
    e->next = D.doomed;
    D.doomed = e;
    if (D.cutting) return;
    D.cutting = 1;
    while ((e = D.doomed) != NULL) {
        D.doomed = e->next;
        for (int i = 0; i < e->nin; i++) {
            e->in[i]->storage->dtr_holds--;
            ember_tensor_release(e->in[i]);
        }
        free(e->in);
        free(e);
    }
    D.cutting = 0;
}

static dtr_entry *new_entry(ember_storage *s, int op, double cost)
{
    dtr_entry *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->s = s;
    e->op = op;
    e->cost = cost;
    e->prev = D.head.prev;
    e->next = &D.head;
    D.head.prev->next = e;
    D.head.prev = e;
    s->dtr = e;
    e->in_bwd = ag_state()->run_depth > 0;
    D.entries++;
    touch(e);
    return e;
}

/* A storage a recipe may stand for: ours, with no recipe yet. An op's
   output storage is new or an input's (the tape's alias of a saved output
   may hold it already); a draw's must be held by the one tensor drawn into. */
static bool fresh(const ember_storage *s)
{
    return !s->dtr && !s->release && s->data && s->nbytes > 0;
}

static void note_op(ember_tensor *o, int op, int nin, ember_tensor *const *in, const ember_attrs *at, int k,
                    double cost)
{
    ember_storage *s = o->storage;
    if (!fresh(s)) return;
    for (int i = 0; i < nin; i++)
        if (in[i]->storage == s) return;
    if (nin < 0 || nin > 4096) return;
    ember_tensor **al = nin > 0 ? calloc((size_t)nin, sizeof *al) : NULL;
    if (nin > 0 && !al) return;   /* no recipe: the storage stays resident */
    for (int i = 0; i < nin; i++) {
        const ember_tensor *t = in[i];
        if (ember__make_view(t, t->ndim, t->shape, t->strides, t->offset, &al[i]) < 0) {
            for (int j = 0; j < i; j++) ember_tensor_release(al[j]);
            free(al);
            return;
        }
        al[i]->wrapped_number = t->wrapped_number;   /* it promotes as the input did */
        al[i]->is_view = t->is_view;
    }
    dtr_entry *e = new_entry(s, op, cost);
    if (!e) {
        for (int j = 0; j < nin; j++) ember_tensor_release(al[j]);
        free(al);
        return;
    }
    for (int i = 0; i < nin; i++) in[i]->storage->dtr_holds++;
    e->nin = nin;
    e->in = al;
    e->out_k = k;
    e->late = D.in_rule > 0;
    e->has_attrs = at != NULL;
    if (at) e->at = *at;
    if (e->late) keep(e);
}

void ember__dtr_note_draw(ember_tensor *t, const ember__draw *d)
{
    if (D.depth || !ember__ag_recording_open() || !fresh(t->storage) || t->storage->refcount != 1 || !t->is_contiguous || t->offset != 0 ||
        (size_t)t->numel * (size_t)ember_dtype_size(t->dtype) != t->storage->nbytes)
        return;
    /* its cost: the seconds per byte the last draw remade took (ember__dtr_note_draw
       comes after the fill, which it does not time) */
    dtr_entry *e = new_entry(t->storage, -1, D.draw_s_per_byte * (double)t->storage->nbytes);
    if (!e) return;
    e->draw = *d;
    e->ndim = t->ndim;
    e->dtype = t->dtype;
    e->device = t->storage->device;
    memcpy(e->shape, t->shape, sizeof e->shape);
}

/* ------------------------------------------------------------------ remaking */
static int remat(dtr_entry *e);

static int ready_storage(ember_storage *s)
{
    dtr_entry *e = s->dtr;
    if (!e) return EMBER_OK;
    if (e->evicted) return remat(e);
    touch(e);
    return EMBER_OK;
}

static void unlock_inputs(dtr_entry *e, int n)
{
    for (int i = 0; i < n; i++) e->in[i]->storage->dtr_locks--;
}

/* Puts the data of `made`'s storage into e's (same size, same device). */
static int adopt(dtr_entry *e, ember_tensor *made)
{
    ember_storage *from = made->storage, *s = e->s;
    if (from->nbytes != s->nbytes || from->device != s->device || !from->data)
        return ember__fail(EMBER_ERR_STATE, "dtr: recomputing %s made %zu bytes where %zu were evicted",
                           e->op >= 0 ? ember__ops[e->op].name : "a random draw", from->nbytes, s->nbytes);
    if (from->refcount == 1 && !from->release) {   /* only `made` holds it, ours: its memory moves to s */
        s->data = from->data;
        from->data = NULL;   /* its bytes now count for s */
    } else {   /* shared (an op returning a tensor it keeps): a copy */
        EMBER_TRY(ember__reserve(s->nbytes));
        void *p = s->device == EMBER_CPU ? ember__alloc(s->nbytes) : ember__backend(s->device)->alloc(s->nbytes);
        if (!p) return ember__fail(EMBER_ERR_OOM, "out of memory: %zu bytes remaking an evicted tensor", s->nbytes);
        int rc = EMBER_OK;
        if (s->device == EMBER_CPU) memcpy(p, from->data, s->nbytes);
        else rc = ember__backend(s->device)->memcpy(p, from->data, s->nbytes, 2);
        if (rc < 0) {
            if (s->device == EMBER_CPU) ember__free(p, s->nbytes);
            else ember__backend(s->device)->free(p, s->nbytes);
            return rc;
        }
        ember__stats_bytes((int64_t)s->nbytes);
        s->data = p;
    }
    e->evicted = 0;
    return EMBER_OK;
}

static int remat(dtr_entry *e)
{
    int rc = EMBER_OK, locked = 0;
    double t0 = D.depth ? 0 : now_s();
    ember_tensor *outs[8] = {NULL}, *made = NULL;
    e->s->dtr_locks++;
    if (D.depth++ == 0) D.making = 0;
    if (e->op < 0) {
        double t1 = op_s();
        rc = ember__new(e->ndim, e->shape, e->dtype, e->device, &made);
        if (rc == EMBER_OK) rc = ember__draw_fill(made, &e->draw);
        if (rc == EMBER_OK) e->cost = op_s() - t1;
        if (rc == EMBER_OK) D.draw_s_per_byte = e->cost / (double)e->s->nbytes;
    } else {
        for (; locked < e->nin && rc == EMBER_OK; locked++) {
            rc = ready_storage(e->in[locked]->storage);
            e->in[locked]->storage->dtr_locks++;
        }
        int nout = ember__ops[e->op].nout;
        if (rc == EMBER_OK && nout > 8) rc = ember__fail(EMBER_ERR_STATE, "dtr: an op of %d outputs", nout);
        if (rc == EMBER_OK) rc = ember__run_nograd(e->op, e->nin, e->in, e->has_attrs ? &e->at : NULL, outs);
        if (rc == EMBER_OK) made = outs[e->out_k];
        if (rc == EMBER_OK) ember_tensor_retain(made);
        for (int k = 0; rc == EMBER_OK && k < nout; k++) ember_tensor_release(outs[k]);
        unlock_inputs(e, locked);
    }
    if (rc == EMBER_OK) rc = adopt(e, made);
    ember_tensor_release(made);
    if (--D.depth == 0) D.making = 0;
    e->s->dtr_locks--;
    if (rc < 0) return rc;
    D.recomputes++;
    if (ember__dtr_debug) ember__dtr_debug_count(e, 1);
    if (!D.depth) D.recompute_s += now_s() - t0;
    touch(e);
    return EMBER_OK;
}

int ember__dtr_ready(const ember_tensor *t)
{
    return t && t->refcount > 0 && t->storage ? ready_storage(t->storage) : EMBER_OK;
}

/* ------------------------------------------------------------------ the funnel */
int ember__dtr_dispatch(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out,
                        ember__dispatch_fn plain)
{
    int rc = EMBER_OK, locked = 0;
    D.clock++;
    if (in)
        for (; locked < nin && rc == EMBER_OK; locked++) {
            if (!in[locked] || in[locked]->refcount <= 0) break;   /* the funnel names it */
            rc = ready_storage(in[locked]->storage);
            in[locked]->storage->dtr_locks++;
        }
    bool note = D.depth == 0 && ember__ag_recording_open();
    double t0 = note ? op_s() : 0;
    if (D.depth++ == 0) D.making = 0;
    if (rc == EMBER_OK) rc = plain(op, nin, in, at, out);
    if (--D.depth == 0) D.making = 0;
    double cost = note ? op_s() - t0 : 0;
    for (int i = 0; i < locked; i++) in[i]->storage->dtr_locks--;
    if (rc == EMBER_OK && note)
        for (int k = 0; k < ember__ops[op].nout; k++)
            if (out[k]) note_op(out[k], op, nin, in, at, k, cost);
    return rc;
}

/* what node n keeps for its rule (NULL where nothing) */
static void saved_of(const ember_node *n, ember_tensor *saved[EMBER__DTR_SAVED])
{
    ember_tensor *const sv[EMBER__DTR_SAVED] = {n->sv_in[0], n->sv_in[1], n->sv_in[2], n->sv_out[0], n->sv_out[1]};
    memcpy(saved, sv, sizeof sv);
}

/* What the rule reads (saved tensors, output gradients) is locked in two
   passes: what is resident first, then what is evicted is remade beside
   it. Remaking first could evict a resident one to be remade in turn: the
   transformer block's gelu rule remade x, evicting its gradient g, then g
   (three 2 MiB tensors) beside x, where x remade beside g fits (docs/dtr.md). */
int ember__dtr_hold_node(const ember_node *n, ember_tensor *const *grad_out, ember_tensor *held[EMBER__DTR_HELD])
{
    ember_tensor *reads[EMBER__DTR_HELD] = {NULL};
    saved_of(n, reads);
    for (int k = 0; k < n->nout && k < EMBER__DTR_HELD - EMBER__DTR_SAVED; k++)
        reads[EMBER__DTR_SAVED + k] = grad_out ? grad_out[k] : NULL;
    int rc = EMBER_OK;
    D.in_rule++;   /* until let go */
    for (int i = 0; i < EMBER__DTR_HELD; i++) held[i] = NULL;
    for (int pass = 0; pass < 2; pass++)   /* the resident ones, then the evicted ones */
        for (int i = 0; i < EMBER__DTR_HELD && rc == EMBER_OK; i++) {
            const dtr_entry *e = reads[i] ? reads[i]->storage->dtr : NULL;
            if (!reads[i] || held[i] || (pass == 0 && e && e->evicted)) continue;
            rc = ready_storage(reads[i]->storage);
            held[i] = reads[i];   /* kept (and resident) until let go, whatever the rule does to the node */
            ember_tensor_retain(held[i]);
            held[i]->storage->dtr_locks++;
        }
    if (rc < 0) ember__dtr_let_go(held);
    return rc;
}

void ember__dtr_node_ran(const ember_node *n)
{
    ember_tensor *saved[EMBER__DTR_SAVED];
    saved_of(n, saved);
    for (int i = 0; i < EMBER__DTR_SAVED; i++) {
        dtr_entry *e = saved[i] ? saved[i]->storage->dtr : NULL;
        if (e && !e->evicted && saved[i]->storage->pins == 0) e->done = 1;
    }
}

void ember__dtr_let_go(ember_tensor *held[EMBER__DTR_HELD])
{
    if (!ember__dtr_on) return;   /* (grad_rules.c calls it whether DTR is on or not) */
    D.in_rule--;
    for (int i = 0; i < EMBER__DTR_HELD; i++) {
        if (!held[i]) continue;
        held[i]->storage->dtr_locks--;
        ember_tensor_release(held[i]);
        held[i] = NULL;
    }
}

/* ------------------------------------------------------------------ eviction */
/* The heuristic, DTR's h_DTR with its equivalence classes (e*): evicting
   e costs its own op's time plus that of the evicted neighbourhood it
   joins: the classes of evicted storages (connected through recipes)
   beside it, above (what its recomputation would remake first, MegEngine's
   estimate) and below (evicted results whose recomputation would then
   remake it too), each class counted once; over its size times its
   staleness (ops since it was last read); the smallest goes first. A pick
   builds the classes (union-find) in one walk over the recipes and scores
   in two more, however long the evicted runs are. */
/* A grad rule's result (a gradient on its way, a parameter's gradient
   waiting to be accumulated) is evicted only when nothing else is left:
   remaking it remakes the backward that led to it, and the forward under
   that, since their own results were dropped as they went. */
#define LATE_FACTOR 1e6
/* One whose inputs are kept (see keep) is remade by its one op, and goes
   somewhat after what the forward made: the optimizer's step reads it right
   after backward. (At 1e4, when remaking it there made the GC hint ask for
   a full collection, the ResNet's stem was remade 3 times at the end of
   backward instead; at 10 its P/2 remakes about 46 a step against 53, at
   1 the transformer block's P remakes 9 against 3.) */
#define KEPT_LATE_FACTOR 10
/* What the forward made that the open backward does not need (no node still
   to run saved it: `done`, its nodes ran; or, while a backward runs, none
   pins it) goes first: what still holds it is, in a training step, a
   wrapper the host's GC has not collected yet, which nothing reads again
   (a residual sum, a batch norm's output that only the next op read); a
   holder that does read it has it remade (and it is no longer `done`).
   Evicting it is what freeing it at once would have been without the GC's
   delay. */
#define UNNEEDED_FACTOR 1e-6

static bool unneeded(const dtr_entry *e, bool bwd)
{
    return !e->late && !e->in_bwd && e->keepers == 0 && (e->done || (bwd && e->s->pins == 0));
}

static dtr_entry *input_entry(const dtr_entry *e, int i) { return e->in[i]->storage->dtr; }

/* remaking e is its own op alone */
static bool inputs_resident(const dtr_entry *e)
{
    for (int i = 0; i < e->nin; i++)
        if (e->in[i]->storage->dtr && e->in[i]->storage->dtr->evicted) return false;
    return true;
}

static dtr_entry *class_of(dtr_entry *e)
{
    while (e->uf != e) {
        e->uf = e->uf->uf;   /* path halving */
        e = e->uf;
    }
    return e;
}

/* adds the cost of the class of evicted q to the neighbourhood of t, once */
static void neighbour(dtr_entry *t, dtr_entry *q)
{
    dtr_entry *r = class_of(q);
    if (r->seen_by == t) return;
    r->seen_by = t;
    t->nbr += r->class_cost;
}

/* *tracked gets the bytes of the resident recipes of min_size or more
   (evictable, or locked now): with the bytes in use, what eviction cannot
   free, garbage the host's GC has not collected yet among it */
static dtr_entry *pick(int64_t *tracked)
{
    for (dtr_entry *e = D.head.next; e != &D.head; e = e->next) {
        e->uf = e;
        e->seen_by = NULL;
        e->nbr = 0;
        if (!e->evicted) continue;
        e->class_cost = e->cost;
        for (int i = 0; i < e->nin; i++) {
            dtr_entry *p = input_entry(e, i);
            if (!p || !p->evicted) continue;
            dtr_entry *a = class_of(e), *b = class_of(p);
            if (a == b) continue;
            b->uf = a;
            a->class_cost += b->class_cost;
        }
    }
    for (dtr_entry *e = D.head.next; e != &D.head; e = e->next) {
        for (int i = 0; i < e->nin; i++) {
            dtr_entry *p = input_entry(e, i);
            if (!p || p->evicted == e->evicted) continue;
            if (e->evicted) neighbour(p, e);   /* below resident p */
            else neighbour(e, p);              /* above resident e */
        }
    }
    dtr_entry *best = NULL;
    double best_score = 0;
    bool bwd = ag_state()->run_depth > 0;
    *tracked = 0;
    for (dtr_entry *e = D.head.next; e != &D.head; e = e->next) {
        if (e->evicted || (int64_t)e->s->nbytes < D.min_size) continue;
        *tracked += (int64_t)e->s->nbytes;
        if (e->s->dtr_locks > 0) continue;
        double stale = (double)(D.clock - e->last_use + 1);
        double sc = (e->cost + e->nbr + 1e-9) / ((double)e->s->nbytes * stale);
        if (unneeded(e, bwd)) sc *= UNNEEDED_FACTOR;
        else if ((e->late && !(e->keeps && inputs_resident(e))) || e->keepers > 0) sc *= LATE_FACTOR;
        else if (e->late) sc *= KEPT_LATE_FACTOR;
        if (!best || sc < best_score) {
            best = e;
            best_score = sc;
        }
    }
    return best;
}

/* The bytes eviction could never free (no recipe, or under min_size) grew
   by an eighth of the room the budget leaves above them (the budget less
   the lowest such bytes seen since the last hint): the binding is asked to
   run its GC, which may free the tensors dead wrappers still hold. An
   eighth of the room, not of the budget: a process that already holds most
   of its budget (a large model, or what earlier work left live) has little
   room, and would fill it before an eighth of the whole budget had grown.
   Collecting only then, not every so many bytes, keeps the GC off the step
   while eviction can make room. Until the bytes in use could have grown
   that much, the walk that measures it is skipped (next_check). */
static void note_pinned(int64_t tracked)
{
    /* what the op (or recomputation) running has allocated so far will
       have a recipe (its outputs, what is remade), be freed with it (its
       scratch) or be counted once it returns: no garbage */
    int64_t in_use = ember_bytes_in_use(), pinned = in_use - tracked - D.making;
    if (pinned < D.pinned_base && D.making == 0) D.pinned_base = pinned;
    int64_t room = D.budget - D.pinned_base, step = room > 0 ? room / 8 : 0;
    if (pinned - D.pinned_base > step) {
        D.gc_wanted = 1;
        D.pinned_base = pinned;
    }
    D.next_check = in_use + step - (pinned - D.pinned_base);
}

/* The error when nothing is left to evict, with what holds the bytes in use:
   the inputs of the op running now and the tensors the running grad rule
   reads (locked), and what DTR may never evict (parameters, gradients
   accumulated, optimizer state, the batch, tensors under min_size) */
static int out_of_budget(size_t nbytes)
{
    int64_t in_use = ember_bytes_in_use(), locked = 0;
    for (const dtr_entry *e = D.head.next; e != &D.head; e = e->next)
        if (!e->evicted && e->s->dtr_locks > 0) locked += (int64_t)e->s->nbytes;
    return ember__fail(EMBER_ERR_OOM,
                       "out of memory: %zu bytes would pass the DTR budget of %lld bytes (%lld in use, nothing left "
                       "to evict: %lld read by the ops running, %lld with no recipe or under min_size)",
                       nbytes, (long long)D.budget, (long long)in_use, (long long)locked, (long long)(in_use - locked));
}

int ember__dtr_make_room(size_t nbytes, int64_t limit)
{
    if (D.settling) return EMBER_OK;
    int64_t cap = D.budget;
    bool by_limit = limit > 0 && limit < cap;
    if (by_limit) cap = limit;
    if (nbytes > (size_t)INT64_MAX / 2) nbytes = (size_t)INT64_MAX / 2;
    int64_t need = (int64_t)nbytes, tracked = 0;
    bool picked = false;
    while (ember_bytes_in_use() + need > cap) {
        dtr_entry *v = pick(&tracked);
        picked = true;
        if (!v) {
            D.gc_wanted = 1;
            if (by_limit) return EMBER_OK;   /* the limit's own error follows */
            if (ember__dtr_debug) ember__dtr_debug_oom(&D.head, nbytes, D.budget, D.min_size, D.in_rule, D.depth);
            return out_of_budget(nbytes);
        }
        evict(v);
        tracked -= (int64_t)v->s->nbytes;
        D.evictions++;
        if (ember__dtr_debug) ember__dtr_debug_count(v, 0);
    }
    /* also when no eviction was needed, so tensors without a recipe (made
       outside a recording) that dead wrappers hold are collected before
       they fill the budget */
    if (!picked && ember_bytes_in_use() + need > D.next_check) {
        pick(&tracked);
        picked = true;
    }
    if (picked) note_pinned(tracked);
    if (D.depth > 0) D.making += need;
    int64_t after = ember_bytes_in_use() + need;
    if (after > D.peak) D.peak = after;
    return EMBER_OK;
}

int ember_dtr_gc_wanted(void)
{
    int w = D.gc_wanted;
    D.gc_wanted = 0;
    if (w) {   /* a collection follows: the next allocation measures afresh what it left */
        D.pinned_base = INT64_MAX / 4;
        D.next_check = 0;
    }
    return w;
}

/* ------------------------------------------------------------------ lifetime */
void ember__dtr_storage_freed(ember_storage *s)
{
    if (s->dtr) cut(s->dtr);
}

static void drop(dtr_entry *e)
{
    free_data(e->s);
    e->evicted = 1;
    D.drops++;
    unkeep(e);   /* nobody needs it remade cheaply now */
}

void ember__dtr_orphaned(ember_storage *s)
{
    dtr_entry *e = s->dtr;
    if (!e || e->evicted || s->dtr_locks > 0 || e->keepers > 0 || !ember__dtr_on) return;
    drop(e);
}

/* Marks the recipes that read s, directly or through other recipes; returns
   whether one of them is evicted while something outside DTR holds it. */
static bool mark_readers(const ember_storage *s)
{
    bool needed = false;
    for (dtr_entry *e = D.head.next; e != &D.head; e = e->next) {
        e->mark = 0;
        for (int i = 0; i < e->nin && !e->mark; i++) {
            const ember_storage *in = e->in[i]->storage;
            e->mark = in == s || (in->dtr && in->dtr->mark);
        }
        needed |= e->mark && e->evicted && e->s->refcount > e->s->dtr_holds;
    }
    return needed;
}

/* The recipes reading host storage s move to a copy of its bytes, so they
   still remake what they made; false (nothing changed) if the copy cannot
   be made. */
static bool keep_old_value(ember_storage *s)
{
    int64_t n = (int64_t)s->nbytes;
    ember_tensor *copy = NULL;
    if (s->device != EMBER_CPU) return false;
    s->dtr_locks++;
    int rc = ember__new(1, &n, EMBER_UINT8, EMBER_CPU, &copy);
    s->dtr_locks--;
    if (rc < 0) return false;
    memcpy(copy->storage->data, s->data, s->nbytes);
    for (dtr_entry *e = D.head.next; e != &D.head; e = e->next)
        for (int i = 0; i < e->nin; i++) {
            ember_tensor *old = e->in[i], *a = NULL;
            if (old->storage != s) continue;
            if (ember__make_view(copy, old->ndim, old->shape, old->strides, old->offset, &a) < 0) continue;
            a->dtype = old->dtype;   /* the same bytes read as before */
            a->wrapped_number = old->wrapped_number;
            a->is_view = old->is_view;
            copy->storage->dtr_holds++;
            e->in[i] = a;
            s->dtr_holds--;
            ember_tensor_release(old);
        }
    bool moved = s->dtr_holds == 0;
    ember_tensor_release(copy);   /* the aliases hold its storage */
    return moved;
}

/* The recipes marked are cut, after each evicted one that something outside
   DTR holds is remade (while s still has its old value). */
static int settle_readers(void)
{
    /* mark 2: kept resident (locked) while the others are remade */
    int rc = EMBER_OK;
    for (dtr_entry *e = D.head.next; e != &D.head; e = e->next)
        if (e->mark && !e->evicted) {
            e->s->dtr_locks++;
            e->mark = 2;
        }
    for (dtr_entry *e = D.head.next; e != &D.head && rc == EMBER_OK; e = e->next)
        if (e->mark == 1) {
            if (e->evicted && e->s->refcount > e->s->dtr_holds) rc = remat(e);
            if (!e->evicted) {   /* remade now, or as another's input */
                e->s->dtr_locks++;
                e->mark = 2;
            }
        }
    for (dtr_entry *e = D.head.next; e != &D.head; e = e->next)
        if (e->mark == 2) e->s->dtr_locks--;
    if (rc < 0) return rc;
    /* a cut may cut others (their storages freed with it): the walk starts
       again after each */
    for (dtr_entry *e = D.head.next; e != &D.head;) {
        if (!e->mark) {
            e = e->next;
            continue;
        }
        cut(e);
        e = D.head.next;
    }
    return EMBER_OK;
}

int ember__dtr_write(ember_tensor *self, const ember_tensor *other)
{
    if (other) EMBER_TRY(ember__dtr_ready(other));
    EMBER_TRY(ember__dtr_ready(self));
    ember_storage *s = self->storage;
    /* readers whose results someone still holds evicted keep the old value
       (a copy); otherwise they are cut, their results kept as they are */
    if (s->dtr_holds && !(mark_readers(s) && keep_old_value(s))) EMBER_TRY(settle_readers());
    if (s->dtr) cut(s->dtr);
    return EMBER_OK;
}

/* ------------------------------------------------------------------ the C API */
#define DEFAULT_MIN_SIZE ((int64_t)1 << 20)   /* MegEngine's evictee_minimum_size (budget / 1024 when smaller) */

int ember_dtr_enable(int64_t budget, int64_t min_size)
{
    if (budget <= 0)
        return ember__fail(EMBER_ERR_ARG, "dtr.enable: budget must be a number of bytes > 0, got %lld",
                           (long long)budget);
    D.budget = budget;
    D.min_size = min_size >= 0 ? min_size : budget / 1024 < DEFAULT_MIN_SIZE ? budget / 1024 : DEFAULT_MIN_SIZE;
    D.evictions = D.recomputes = D.drops = 0;
    D.recompute_s = 0;
    D.peak = ember_bytes_in_use();
    D.pinned_base = D.peak;
    D.gc_wanted = 0;
    D.next_check = D.peak + (budget > D.peak ? (budget - D.peak) / 8 : 0);   /* note_pinned()'s step */
    ember__dtr_debug_reset();
    ember__dtr_on = 1;
    return EMBER_OK;
}

int ember_dtr_disable(void)
{
    if (!ember__dtr_on) return EMBER_OK;
    /* what something outside DTR still holds is remade, in the order it was
       made (its inputs first); then every recipe goes */
    D.settling = 1;
    int rc = EMBER_OK;
    for (dtr_entry *e = D.head.next; e != &D.head && rc == EMBER_OK; e = e->next)
        if (e->evicted && e->s->refcount > e->s->dtr_holds) rc = remat(e);
    D.settling = 0;
    if (rc < 0) return ember__fail_prefix(rc, "dtr.disable");
    if (ember__dtr_debug) ember__dtr_debug_print_counts();
    while (D.head.next != &D.head) cut(D.head.prev);
    ember__dtr_on = 0;
    return EMBER_OK;
}

int ember_dtr_stats(ember_dtr_stats_t *out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "dtr.stats: out is NULL");
    out->enabled = ember__dtr_on;
    out->budget = ember__dtr_on ? D.budget : 0;
    out->min_size = D.min_size;
    out->evictions = D.evictions;
    out->drops = D.drops;
    out->recomputes = D.recomputes;
    out->recompute_s = D.recompute_s;
    out->peak_bytes = D.peak;
    out->tracked = D.entries;
    out->evicted = 0;
    for (const dtr_entry *e = D.head.next; e != &D.head; e = e->next) out->evicted += e->evicted;
    return EMBER_OK;
}

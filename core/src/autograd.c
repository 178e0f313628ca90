/* autograd.c: keys, tapes, nodes and the backward engine.

   A key is one recording (MegEngine's GradKey). A tensor a key tracks carries
   an entry (key, generation, node, output_nr) in its ag meta; entries of keys
   that stopped recording are recognised by their generation and dropped
   lazily. Nodes live on their key's tape in creation order, which is already
   a topological order, so backward is a single reverse sweep: no recursion
   anywhere, for building, running or freeing (150,000-deep chains are fine).

   Visibility: while key K runs backward, an op is recorded only by active keys
   that started before K and are not in K's group. Grad rules are written with
   public ops, so an outer key records an inner key's backward: that is how
   nested managers give higher-order gradients.

   What is not done here: calling Lua. Nodes with a Lua rule (custom Functions,
   replaced rules) or intercepted for hooks, and attached tensors whose
   gradient is complete, are handed to the caller as requests of a pull loop. */
#include "autograd.h"
#include "grad_rules.h"
#include "node.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Autograd state is per thread: each thread records, and runs backward on,
   its own tensors (ember.h, "Threads"). */
EMBER_TLS int ember__ag_active;
static EMBER_TLS int intercept_all;
static EMBER_TLS int save_copies;

static EMBER_TLS int grad_enabled = 1;
static EMBER_TLS int64_t stat_live_nodes, stat_saved, stat_hits, stat_misses;
static EMBER_TLS uint64_t next_node_id = 1;

/* ------------------------------------------------------------------ keys */
#define MAX_KEYS 1024

typedef struct ag_key {
    int in_use;
    int recording;
    uint32_t gen;          /* bumped at each record() and release(): stale entries die */
    uint64_t stamp;        /* when recording started */
    int group;
    int running;           /* inside its own backward */
    uint64_t bwd_stamp;    /* when its running backward started */
    ember_node **tape;
    int64_t tape_len, tape_cap;
} ag_key;

/* The backward-graph cache: what a node of this op must keep, by input dtypes,
   devices and the requires-grad mask. */
#define CACHE_SIZE 1024
typedef struct {
    uint64_t sig;
    unsigned save;
    int used;
} cache_slot;

#define MAX_RUN_DEPTH 64

/* The larger per-thread state, on the heap behind one pointer (EMBER_TLS). */
typedef struct ag_thread {
    ag_key key_table[MAX_KEYS];
    int recording[MAX_KEYS];          /* ids of the keys recording now, n_recording of them */
    struct ag_key *runs[MAX_RUN_DEPTH];   /* backward runs in progress, innermost last */
    cache_slot cache[CACHE_SIZE];
    int overrides[EMBER_OP_COUNT];
} ag_thread;

static EMBER_TLS ag_thread *agt;
static ag_thread ag_fallback;   /* used only if the calloc below fails (then shared, as before threads) */

static ag_thread *ag_state(void)
{
    if (EMBER_LIKELY(agt != NULL)) return agt;
    agt = calloc(1, sizeof *agt);
    if (!agt) agt = &ag_fallback;
    else ember__thread_uses_state();
    return agt;
}
#define keys (ag_state()->key_table)
#define recording_keys (ag_state()->recording)
#define run_stack (ag_state()->runs)
#define bwd_cache (ag_state()->cache)
#define override_rule (ag_state()->overrides)


static EMBER_TLS uint64_t stamp_counter;
static EMBER_TLS int n_recording;

static void set_recording(int key, int on)
{
    if (on) {
        recording_keys[n_recording++] = key;
    } else {
        for (int i = 0; i < n_recording; i++)
            if (recording_keys[i] == key) {
                recording_keys[i] = recording_keys[--n_recording];
                break;
            }
    }
}

/* the backward runs in progress (run_stack, innermost last) limit visibility */
static EMBER_TLS int run_depth;

static void update_active(void) { ember__ag_active = grad_enabled && n_recording > 0; }

void ember_set_grad_enabled(int enabled)
{
    grad_enabled = enabled != 0;
    update_active();
}

int ember_is_grad_enabled(void) { return grad_enabled; }

static ag_key *key_at(int key)
{
    return key > 0 && key < MAX_KEYS && keys[key].in_use ? &keys[key] : NULL;
}

int ember_key_new(int group, int *key)
{
    if (!key) return ember__fail(EMBER_ERR_ARG, "key_new: key is NULL");
    for (int k = 1; k < MAX_KEYS; k++) {
        if (!keys[k].in_use) {
            uint32_t gen = keys[k].gen;
            memset(&keys[k], 0, sizeof keys[k]);
            keys[k].in_use = 1;
            keys[k].gen = gen + 1;
            keys[k].group = group > 0 ? group : -k;   /* a group of its own */
            *key = k;
            return EMBER_OK;
        }
    }
    return ember__fail(EMBER_ERR_OOM, "GradManager: too many live managers (%d)", MAX_KEYS - 1);
}

/* ------------------------------------------------------------------ nodes */
static void meta_of(ag_meta_io *m, const ember_tensor *t)
{
    m->ndim = t->ndim;
    m->dtype = t->dtype;
    m->device = t->storage->device;
    memcpy(m->shape, t->shape, sizeof m->shape);
}

/* Nodes of up to 3 inputs and 2 outputs (nearly all) come from a free list. */
#define SMALL_NIN 3
#define SMALL_NOUT 2
static size_t node_size(int nin, int nout)
{
    return sizeof(ember_node) + (size_t)nin * (sizeof(ag_edge) + sizeof(ag_meta_io) + 1) +
           (size_t)nout * (sizeof(ag_meta_io) + sizeof(ember_tensor *)) + 16;
}
static EMBER_TLS void *node_pool;
static EMBER_TLS int node_pool_size;

static ember_node *node_new(int op, int key, int nin, int nout)
{
    bool small = nin <= SMALL_NIN && nout <= SMALL_NOUT;
    size_t sz = small ? node_size(SMALL_NIN, SMALL_NOUT) : node_size(nin, nout);
    ember_node *n;
    if (small && node_pool) {
        n = node_pool;
        node_pool = *(void **)node_pool;
        node_pool_size--;
        memset(n, 0, sz);
    } else if (!(n = calloc(1, sz))) {
        return NULL;
    }
    char *p = (char *)(n + 1);
    n->in_meta = (ag_meta_io *)p;
    p += (size_t)nin * sizeof(ag_meta_io);
    n->out_meta = (ag_meta_io *)p;
    p += (size_t)nout * sizeof(ag_meta_io);
    n->next = (ag_edge *)p;
    p += (size_t)nin * sizeof(ag_edge);
    n->grads = (ember_tensor **)p;
    p += (size_t)nout * sizeof(ember_tensor *);
    n->needs = (uint8_t *)p;
    n->op = op;
    n->key = key;
    n->nin = nin;
    n->nout = nout;
    n->id = next_node_id++;
    stat_live_nodes++;
    return n;
}

/* freed ctx ids waiting for the caller to drop its state */
static EMBER_TLS int *freed_ctx;
static EMBER_TLS int n_freed_ctx, cap_freed_ctx;

/* A node an open run still has to execute pins the storage of what it saved:
   writes into it fail until the node has run (ember__check_writable). */
static void pin_saved(ember_node *n, int delta)
{
    for (int i = 0; i < MAX_SAVED_IN; i++)
        if (n->sv_in[i]) n->sv_in[i]->storage->pins += delta;
    for (int k = 0; k < MAX_SAVED_OUT; k++)
        if (n->sv_out[k]) n->sv_out[k]->storage->pins += delta;
}

static void release_saved(ember_node *n)
{
    if (n->pinned) {
        pin_saved(n, -1);
        n->pinned = 0;
    }
    for (int i = 0; i < MAX_SAVED_IN; i++)
        if (n->sv_in[i]) {
            ember_tensor_release(n->sv_in[i]);
            n->sv_in[i] = NULL;
            stat_saved--;
        }
    for (int k = 0; k < MAX_SAVED_OUT; k++)
        if (n->sv_out[k]) {
            ember_tensor_release(n->sv_out[k]);
            n->sv_out[k] = NULL;
            stat_saved--;
        }
}

static void release_grads(ember_node *n)
{
    for (int k = 0; k < n->nout; k++) {
        ember_tensor_release(n->grads[k]);
        n->grads[k] = NULL;
    }
}

static void push_freed_ctx(int ctx_id)
{
    if (n_freed_ctx == cap_freed_ctx) {
        int cap = cap_freed_ctx ? cap_freed_ctx * 2 : 64;
        int *p = realloc(freed_ctx, (size_t)cap * sizeof *p);
        if (p) {
            freed_ctx = p;
            cap_freed_ctx = cap;
        }
    }
    if (n_freed_ctx < cap_freed_ctx) freed_ctx[n_freed_ctx++] = ctx_id;
}

static void node_free(ember_node *n)
{
    release_saved(n);
    release_grads(n);
    if (n->ctx_id > 0) push_freed_ctx(n->ctx_id);
    stat_live_nodes--;
#ifndef EMBER_NO_CACHE
    if (n->nin <= SMALL_NIN && n->nout <= SMALL_NOUT && node_pool_size < 65536) {
        *(void **)n = node_pool;
        node_pool = n;
        node_pool_size++;
        return;
    }
#endif
    free(n);
}

/* ------------------------------------------------------------------ node lifetime
   A node lives on its key's tape until the recording ends, but what it keeps
   is freed as soon as no tensor's entry and no other node's edge refers to it:
   a branch computed and dropped during the forward pass gives its memory back
   at once. Deaths cascade through an explicit stack (a dropped chain can be
   150,000 nodes deep), and wait while the node's key runs backward. */
static EMBER_TLS ember_node **kill_stack;
static EMBER_TLS int64_t n_kill, cap_kill;
static EMBER_TLS int killing;

static void push_freed_ctx(int ctx_id);

static void node_kill(ember_node *n)
{
    n->dead = 1;
    release_saved(n);
    release_grads(n);
    if (n->ctx_id > 0) {
        push_freed_ctx(n->ctx_id);
        n->ctx_id = 0;
    }
}

static void node_ref(ember_node *n)
{
    if (n) n->refs++;
}

static void node_unref(ember_node *n)
{
    if (!n || --n->refs > 0 || n->dead || keys[n->key].running || n->op == NODE_ACCUMULATE) return;
    if (n_kill == cap_kill) {
        int64_t cap = cap_kill ? cap_kill * 2 : 256;
        ember_node **p = realloc(kill_stack, (size_t)cap * sizeof *p);
        if (!p) return;   /* it lives until the recording ends, as before */
        kill_stack = p;
        cap_kill = cap;
    }
    kill_stack[n_kill++] = n;
    if (killing) return;
    killing = 1;
    while (n_kill > 0) {
        ember_node *d = kill_stack[--n_kill];
        if (d->dead) continue;
        for (int i = 0; i < d->nin; i++)
            if (d->next[i].node) node_unref(d->next[i].node);   /* pushes, does not recurse */
        node_kill(d);   /* its saved tensors may die and push more */
    }
    killing = 0;
}

int ember_drain_freed_ctx(int *ids, int cap)
{
    int n = n_freed_ctx < cap ? n_freed_ctx : cap;
    if (n <= 0) return 0;
    memcpy(ids, freed_ctx + (n_freed_ctx - n), (size_t)n * sizeof *ids);
    n_freed_ctx -= n;
    return n;
}

static int tape_push(ag_key *k, ember_node *n)
{
    if (k->tape_len == k->tape_cap) {
        int64_t cap = k->tape_cap ? k->tape_cap * 2 : 64;
        ember_node **p = realloc(k->tape, (size_t)cap * sizeof *p);
        if (!p) return ember__fail(EMBER_ERR_OOM, "out of memory growing the autograd tape");
        k->tape = p;
        k->tape_cap = cap;
    }
    k->tape[k->tape_len++] = n;
    return EMBER_OK;
}

/* ------------------------------------------------------------------ tracking entries */
typedef struct ag_entry {
    int key;
    uint32_t gen;
    ember_node *node;
    int output_nr;
} ag_entry;

struct ember_autograd_meta {
    int n, cap;
    ag_entry e[];
};

static EMBER_TLS void *meta_pool;
static EMBER_TLS int meta_pool_size;

static bool entry_live(const ag_entry *e)
{
    const ag_key *k = &keys[e->key];
    return k->in_use && k->recording && k->gen == e->gen;
}

static ag_entry *find_entry(const ember_tensor *t, int key)
{
    struct ember_autograd_meta *m = t->ag;
    if (!m) return NULL;
    for (int i = 0; i < m->n; i++)
        if (m->e[i].key == key && entry_live(&m->e[i])) return &m->e[i];
    return NULL;
}

/* Sets t's entry for key (replacing its live one, else a stale one). */
static int set_entry(ember_tensor *t, int key, ember_node *node, int output_nr)
{
    struct ember_autograd_meta *m = t->ag;
    ag_entry *slot = NULL;
    for (int i = 0; m && i < m->n; i++) {
        ag_entry *e = &m->e[i];
        if (!entry_live(e)) {
            if (!slot) slot = e;
        } else if (e->key == key) {
            ember_node *old = e->node;
            node_ref(node);
            e->node = node;
            e->output_nr = output_nr;
            node_unref(old);
            return EMBER_OK;
        }
    }
    if (slot) {   /* a stale entry's node may be gone: it is not unreferenced */
        node_ref(node);
        *slot = (ag_entry){key, keys[key].gen, node, output_nr};
        return EMBER_OK;
    }
    if (!m && meta_pool) {   /* most tensors are tracked by one key: a pooled 2-entry meta */
        m = meta_pool;
        meta_pool = *(void **)meta_pool;
        meta_pool_size--;
        m->n = 0;
        m->cap = 2;
        t->ag = m;
    }
    if (!m || m->n == m->cap) {
        int cap = m ? m->cap * 2 : 2;
        struct ember_autograd_meta *p = realloc(m, sizeof *m + (size_t)cap * sizeof(ag_entry));
        if (!p) return ember__fail(EMBER_ERR_OOM, "out of memory tracking a tensor");
        if (!m) p->n = 0;
        p->cap = cap;
        t->ag = m = p;
    }
    node_ref(node);
    m->e[m->n++] = (ag_entry){key, keys[key].gen, node, output_nr};
    return EMBER_OK;
}

void ember__ag_forget(ember_tensor *t)
{
    struct ember_autograd_meta *m = t->ag;
    ember_node *drop[8];
    int n_drop = 0;
    for (int i = 0; i < m->n; i++) {
        ag_entry *e = &m->e[i];
        if (!entry_live(e) || !e->node) continue;
        if (e->node->op < 0 && e->node->leaf == t) e->node->leaf = NULL;
        if (n_drop < 8) drop[n_drop++] = e->node;   /* past 8 keys a node waits for its recording's end */
    }
    t->ag = NULL;
    for (int i = 0; i < n_drop; i++) node_unref(drop[i]);
#ifndef EMBER_NO_CACHE
    if (m->cap == 2 && meta_pool_size < 65536) {
        *(void **)m = meta_pool;
        meta_pool = m;
        meta_pool_size++;
        return;
    }
#endif
    free(m);
}

/* ------------------------------------------------------------------ key lifecycle */
static void tape_free(ag_key *k)
{
    for (int64_t i = 0; i < k->tape_len; i++) node_free(k->tape[i]);
    free(k->tape);
    k->tape = NULL;
    k->tape_len = k->tape_cap = 0;
}

void ember_key_release(int key)
{
    ag_key *k = key_at(key);
    if (!k || k->running) return;   /* its backward owns the tape until ember_backward_end */
    if (k->recording) {
        k->recording = 0;
        set_recording(key, 0);
        update_active();
    }
    k->gen++;
    tape_free(k);
}

void ember_key_set_group(int key, int group)
{
    ag_key *k = key_at(key);
    if (k) k->group = group > 0 ? group : -key;
}

void ember_key_free(int key)
{
    ag_key *k = key_at(key);
    if (!k || k->running) return;
    ember_key_release(key);
    k->in_use = 0;
}

int ember_key_record(int key)
{
    ag_key *k = key_at(key);
    if (!k) return ember__fail(EMBER_ERR_ARG, "GradManager.record: unknown key %d", key);
    if (k->recording) return ember__fail(EMBER_ERR_STATE, "GradManager.record: already recording");
    tape_free(k);
    k->gen++;
    k->recording = 1;
    k->stamp = ++stamp_counter;
    set_recording(key, 1);
    update_active();
    return EMBER_OK;
}

int ember_key_is_recording(int key)
{
    ag_key *k = key_at(key);
    return k && k->recording;
}

int ember_key_track(int key, ember_tensor *t)
{
    ag_key *k = key_at(key);
    if (!k || !t) return ember__fail(EMBER_ERR_ARG, "GradManager.attach: bad key or tensor");
    if (!ember__is_float(t->dtype))
        return ember__fail(EMBER_ERR_DTYPE,
                           "GradManager.attach: only floating point tensors can require gradients, got %s",
                           ember_dtype_name(t->dtype));
    if (!k->recording) return EMBER_OK;   /* tracked when record() starts */
    ag_entry *e = find_entry(t, key);
    if (e && e->node && (e->node->op == NODE_ACCUMULATE || e->node->op == NODE_RETAIN) && e->node->leaf == t)
        return EMBER_OK;
    /* an intermediate keeps its history: a RETAIN node in front of its producer */
    bool retain = e && e->node;
    ember_node *n = node_new(retain ? NODE_RETAIN : NODE_ACCUMULATE, key, 1, 1);
    if (!n) return ember__fail(EMBER_ERR_OOM, "out of memory attaching a tensor");
    n->leaf = t;
    if (retain) {
        n->next[0] = (ag_edge){e->node, e->output_nr};
        node_ref(e->node);
        n->needs[0] = 1;
    }
    meta_of(&n->in_meta[0], t);
    meta_of(&n->out_meta[0], t);
    int rc = tape_push(k, n);
    if (rc < 0) {
        node_free(n);
        return rc;
    }
    return set_entry(t, key, n, 0);
}

int ember_key_tracks(int key, const ember_tensor *t) { return t && find_entry(t, key) != NULL; }

int ember_is_tracked(const ember_tensor *t)
{
    if (!t || !t->ag) return 0;
    for (int i = 0; i < t->ag->n; i++)
        if (entry_live(&t->ag->e[i])) return 1;
    return 0;
}

ember_node *ember_grad_fn_key(int key, const ember_tensor *t, int *output_nr)
{
    ag_entry *e = t ? find_entry(t, key) : NULL;
    if (!e || !e->node || e->node->op == NODE_ACCUMULATE) return NULL;
    if (e->node->op == NODE_RETAIN) {   /* the producer is the grad_fn */
        if (output_nr) *output_nr = e->node->next[0].output_nr;
        return e->node->next[0].node;
    }
    if (output_nr) *output_nr = e->output_nr;
    return e->node;
}

ember_node *ember_gradient_edge(const ember_tensor *t, int *output_nr)
{
    if (!t || !t->ag) return NULL;
    const ag_entry *best = NULL;
    for (int i = 0; i < t->ag->n; i++) {
        const ag_entry *e = &t->ag->e[i];
        if (entry_live(e) && (!best || keys[e->key].stamp > keys[best->key].stamp)) best = e;
    }
    if (!best) return NULL;
    if (output_nr) *output_nr = best->output_nr;
    return best->node;
}

int ember_node_key(const ember_node *n) { return n ? n->key : 0; }
uint32_t ember_key_generation(int key)
{
    ag_key *k = key_at(key);
    return k && k->recording ? k->gen : 0;
}

static EMBER_TLS int journal_on;
static EMBER_TLS ember_node **journal;
static EMBER_TLS int n_journal, cap_journal;

void ember_set_node_journal(int on)
{
    journal_on = on != 0;
    if (!journal_on) n_journal = 0;
}

int ember_drain_node_journal(ember_node **nodes, int cap)
{
    int n = n_journal < cap ? n_journal : cap;
    if (n <= 0) return 0;
    memcpy(nodes, journal, (size_t)n * sizeof *nodes);
    memmove(journal, journal + n, (size_t)(n_journal - n) * sizeof *journal);
    n_journal -= n;
    return n;
}

static void journal_add(ember_node *n)
{
    if (n_journal == cap_journal) {
        int cap = cap_journal ? cap_journal * 2 : 64;
        ember_node **p = realloc(journal, (size_t)cap * sizeof *p);
        if (!p) return;
        journal = p;
        cap_journal = cap;
    }
    journal[n_journal++] = n;
}

ember_node *ember_grad_fn(const ember_tensor *t, int *output_nr)
{
    if (!t || !t->ag) return NULL;
    const ag_entry *best = NULL;
    for (int i = 0; i < t->ag->n; i++) {
        const ag_entry *e = &t->ag->e[i];
        if (entry_live(e) && (!best || keys[e->key].stamp > keys[best->key].stamp)) best = e;
    }
    if (!best || !best->node || best->node->op == NODE_ACCUMULATE) return NULL;
    if (best->node->op == NODE_RETAIN) {
        if (output_nr) *output_nr = best->node->next[0].output_nr;
        return best->node->next[0].node;
    }
    if (output_nr) *output_nr = best->output_nr;
    return best->node;
}

/* ------------------------------------------------------------------ recording */
/* While key R runs backward, key K records R's ops when K started before R
   (an outer manager: higher-order gradients) and is not in R's group, or when
   K started during R's backward (a recording inside a rule, as checkpoint
   does); a key started between the two sees nothing of R's backward. */
static bool visible(const ag_key *k)
{
    for (int i = 0; i < run_depth; i++) {
        const ag_key *r = run_stack[i];
        if (k->stamp > r->bwd_stamp) continue;
        if (k->stamp >= r->stamp || k->group == r->group) return false;
    }
    return true;
}


static unsigned save_mask(int op, int nin, ember_tensor *const *in, const uint8_t *needs)
{
    uint64_t sig = (uint64_t)op * 0x9E3779B97F4A7C15ULL;
    for (int i = 0; i < nin && i < 4; i++)
        sig = (sig ^ (uint64_t)(in[i]->dtype | (in[i]->storage->device << 4) | (needs[i] << 12)))
              * 0x100000001B3ULL;
    sig ^= (uint64_t)(override_rule[op] > 0) << 63;
    cache_slot *s = &bwd_cache[sig % CACHE_SIZE];
    if (s->used && s->sig == sig) {
        stat_hits++;
        return s->save;
    }
    stat_misses++;
    unsigned m = override_rule[op] > 0 ? (SAVE_IN0 | SAVE_IN1 | SAVE_IN2 | SAVE_OUT0 | SAVE_OUT1)
                                       : ember__op_save(op, needs);
    s->sig = sig;
    s->save = m;
    s->used = 1;
    return m;
}

/* The tensor a node keeps: t itself, or a detached copy in save_copies mode. */
static ember_tensor *to_save(ember_tensor *t)
{
    if (save_copies) {
        ember_tensor *c = NULL;
        int prev = ember__ag_active;
        ember__ag_active = 0;   /* the copy is not an op of the graph */
        int rc = ember_clone(t, &c);
        ember__ag_active = prev;
        if (rc == EMBER_OK) return c;
    }
    ember_tensor_retain(t);
    return t;
}

/* An output the node keeps is held through an alias with no history: holding
   the output itself would keep its tracking entry, and so the node, alive. */
static ember_tensor *to_save_output(ember_tensor *t)
{
    ember_tensor *a = NULL;
    if (!save_copies && ember__make_view(t, t->ndim, t->shape, t->strides, t->offset, &a) == EMBER_OK) return a;
    return to_save(t);
}

static void save_tensors(ember_node *n, unsigned mask, int nin, ember_tensor *const *in, int nout,
                         ember_tensor *const *out)
{
    n->copied = save_copies;
    for (int i = 0; i < nin && i < MAX_SAVED_IN; i++) {
        if (!(mask & (SAVE_IN0 << i))) continue;
        n->sv_in[i] = to_save(in[i]);
        n->sv_in_version[i] = n->sv_in[i]->storage->version;
        stat_saved++;
    }
    for (int k = 0; k < nout && k < MAX_SAVED_OUT; k++) {
        if (!(mask & (SAVE_OUT0 << k))) continue;
        n->sv_out[k] = to_save_output(out[k]);
        n->sv_out_version[k] = n->sv_out[k]->storage->version;
        stat_saved++;
    }
}

void ember_set_save_copies(int on) { save_copies = on != 0; }
int ember_get_save_copies(void) { return save_copies; }
void ember_set_intercept_all(int on) { intercept_all = on != 0; }

static int set_saved(const ember_node *n, ember_tensor **slot, int64_t *version, ember_tensor *t)
{
    if (*slot && !t) stat_saved--;
    if (!*slot && t) stat_saved++;
    if (n->pinned) {
        if (*slot) (*slot)->storage->pins--;
        if (t) t->storage->pins++;
    }
    if (t) ember_tensor_retain(t);
    ember_tensor_release(*slot);
    *slot = t;
    *version = t ? t->storage->version : 0;
    return EMBER_OK;
}

int ember_node_set_saved_input(ember_node *n, int i, ember_tensor *t)
{
    if (!n || i < 0 || i >= MAX_SAVED_IN || i >= n->nin)
        return ember__fail(EMBER_ERR_ARG, "set_saved_input: bad node or index %d", i);
    return set_saved(n, &n->sv_in[i], &n->sv_in_version[i], t);
}

int ember_node_set_saved_output(ember_node *n, int k, ember_tensor *t)
{
    if (!n || k < 0 || k >= MAX_SAVED_OUT || k >= n->nout)
        return ember__fail(EMBER_ERR_ARG, "set_saved_output: bad node or index %d", k);
    return set_saved(n, &n->sv_out[k], &n->sv_out_version[k], t);
}

static int record_on(ag_key *k, int key, int op, int rule_id, int ctx_id, const char *custom_name,
                     int nin, ember_tensor *const *in, const ember_attrs *at, int nout,
                     ember_tensor *const *out)
{
    ember_node *n = NULL;
    for (int i = 0; i < nin; i++) {
        ag_entry *e = ember__is_float(in[i]->dtype) ? find_entry(in[i], key) : NULL;
        if (!e) continue;
        if (!n) {
            n = node_new(op, key, nin, nout);
            if (!n) return ember__fail(EMBER_ERR_OOM, "out of memory recording %s", custom_name);
        }
        n->next[i] = (ag_edge){e->node, e->output_nr};
        node_ref(e->node);
        n->needs[i] = 1;
    }
    if (!n) return EMBER_OK;
    n->rule_id = rule_id > 0 ? rule_id : (op >= 0 ? override_rule[op] : 0);
    n->ctx_id = ctx_id;
    n->custom_name = custom_name;
    if (at) n->attrs = *at;
    for (int i = 0; i < nin; i++) meta_of(&n->in_meta[i], in[i]);
    for (int j = 0; j < nout; j++) meta_of(&n->out_meta[j], out[j]);
    if (op >= 0) save_tensors(n, save_mask(op, nin, in, n->needs), nin, in, nout, out);
    int rc = tape_push(k, n);
    if (rc < 0) {
        n->ctx_id = 0;
        node_free(n);
        return rc;
    }
    for (int j = 0; j < nout; j++)
        if (ember__is_float(out[j]->dtype)) EMBER_TRY(set_entry(out[j], key, n, j));
    if (journal_on) journal_add(n);
    return EMBER_OK;
}

static int refresh_view(ember_tensor *v);

static int record(int op, int rule_id, int ctx_id, const char *name, int nin,
                  ember_tensor *const *in, const ember_attrs *at, int nout, ember_tensor *const *out)
{
    for (int i = 0; i < nin; i++)
        if (in[i]->base && in[i]->ag_epoch != in[i]->base->ag_epoch) EMBER_TRY(refresh_view(in[i]));
    uint64_t mark = next_node_id;
    for (int i = 0; i < n_recording; i++) {
        int key = recording_keys[i];
        ag_key *k = &keys[key];
        if (!visible(k)) continue;
        EMBER_TRY(record_on(k, key, op, rule_id, ctx_id, name, nin, in, at, nout, out));
    }
    if (next_node_id == mark || save_copies || (op >= 0 && !ember__op_may_save_output(op)))
        return EMBER_OK;   /* no node made, or none keeps an output */
    /* A kept output is an alias (to_save_output); it carries the output's
       history in the keys that started earlier, which differentiate this
       node's backward (higher order). Later keys never do, and leaving them
       out keeps references pointing from inner to outer keys: no cycles. */
    for (int i = 0; i < n_recording; i++) {
        ag_key *k = &keys[recording_keys[i]];
        if (k->tape_len == 0 || k->tape[k->tape_len - 1]->id < mark) continue;
        ember_node *n = k->tape[k->tape_len - 1];
        for (int j = 0; j < nout && j < MAX_SAVED_OUT; j++) {
            const struct ember_autograd_meta *m = out[j]->ag;
            for (int e = 0; n->sv_out[j] && m && e < m->n; e++) {
                const ag_entry *en = &m->e[e];
                if (entry_live(en) && keys[en->key].stamp < k->stamp)
                    EMBER_TRY(set_entry(n->sv_out[j], en->key, en->node, en->output_nr));
            }
        }
    }
    return EMBER_OK;
}

int ember__ag_record(int op, int nin, ember_tensor *const *in, const ember_attrs *at, int nout,
                     ember_tensor *const *out)
{
    /* integer results (comparisons, argmax, indices) carry no gradient */
    bool any_float = false;
    for (int j = 0; j < nout; j++) any_float |= ember__is_float(out[j]->dtype);
    if (!any_float) return EMBER_OK;
    return record(op, 0, 0, ember__ops[op].name, nin, in, at, nout, out);
}

int ember_record_custom(const char *name, int rule_id, int ctx_id, int nin, ember_tensor *const *in,
                        int nout, ember_tensor *const *out)
{
    if (!name) return ember__fail(EMBER_ERR_ARG, "Function: the name is NULL");
    if (nin < 0 || nout < 1 || (nin && !in) || !out)
        return ember__fail(EMBER_ERR_ARG, "Function %s: bad inputs or outputs", name);
    if (!ember__ag_active) return EMBER_OK;
    for (int i = 0; i < nin; i++)
        if (!in[i]) return ember__fail(EMBER_ERR_ARG, "Function %s: input %d is NULL", name, i + 1);
    for (int j = 0; j < nout; j++)
        if (!out[j]) return ember__fail(EMBER_ERR_ARG, "Function %s: output %d is NULL", name, j + 1);
    return record(NODE_CUSTOM, rule_id, ctx_id, name, nin, in, NULL, nout, out);
}

/* ------------------------------------------------------------------ in-place writes */
/* Drops t's entries for the keys that see the op being recorded now. */
static void drop_visible(ember_tensor *t)
{
    struct ember_autograd_meta *m = t->ag;
    for (int i = 0; m && i < m->n;) {
        ag_entry *e = &m->e[i];
        if (!entry_live(e)) {
            m->e[i] = m->e[--m->n];
        } else if (visible(&keys[e->key])) {
            ember_node *old = e->node;
            m->e[i] = m->e[--m->n];
            node_unref(old);
        } else {
            i++;
        }
    }
}

/* A view whose root's history moved gets a history of its own again: the
   region of its root, as_strided(root), expanded where it repeats elements. */
static int refresh_view(ember_tensor *v)
{
    ember_tensor *root = v->base, *dense = NULL;
    v->ag_epoch = root->ag_epoch;
    drop_visible(v);
    if (!root->ag) return EMBER_OK;
    int64_t shape[EMBER_MAX_DIMS];
    bool repeats = false;
    for (int d = 0; d < v->ndim; d++) {
        repeats |= v->strides[d] == 0 && v->shape[d] > 1;
        shape[d] = v->strides[d] == 0 ? 1 : v->shape[d];
    }
    int rc = ember__make_view(v, v->ndim, shape, v->strides, v->offset, &dense);
    ember_attrs geo;
    if (rc == EMBER_OK) rc = ember__geometry_of(repeats ? dense : v, root, &geo);
    if (rc == EMBER_OK)
        rc = record(EMBER_OP_AS_STRIDED, 0, 0, ember__ops[EMBER_OP_AS_STRIDED].name, 1, &root, &geo, 1,
                    repeats ? &dense : &v);
    if (rc == EMBER_OK && repeats) {
        ember_attrs at = {{v->ndim}, {0}};
        for (int d = 0; d < v->ndim; d++) at.i[1 + d] = v->shape[d];
        rc = record(EMBER_OP_EXPAND, 0, 0, ember__ops[EMBER_OP_EXPAND].name, 1, &dense, &at, 1, &v);
    }
    ember_tensor_release(dense);
    return rc;
}

int ember__ag_write_recorded(const char *name, const ember_tensor *self, const ember_tensor *other)
{
    if (!ember__ag_active) return 0;
    bool rec = ember__ag_involved(self) || (other && ember__ag_involved(other)) || (self->base && self->base->ag);
    if (!rec) return 0;
    if (self->base && !self->base->is_contiguous) {
        char sv[200], sr[200];
        return ember__fail(EMBER_ERR_UNSUPPORTED,
                           "%s_: in-place write under recording into a view (shape %s) of a non-contiguous "
                           "tensor of shape %s: write into a contiguous() copy of it instead",
                           name, ember__tshape(sv, self), ember__tshape(sr, self->base));
    }
    return 1;
}

uint64_t ember__ag_mark(void) { return next_node_id; }

/* a copy of t that no recording sees */
static int untracked_clone(ember_tensor *t, ember_tensor **out)
{
    int prev = ember__ag_active;
    ember__ag_active = 0;
    int rc = ember_clone(t, out);
    ember__ag_active = prev;
    return rc;
}

/* The copy stands for the old value in every recording that tracks it, so an
   outer manager still differentiates the rule that reads it. */
static int protect_slot(ember_tensor **slot, int64_t *version, const ember_tensor *self)
{
    ember_tensor *t = *slot, *c;
    if (!t || t->storage != self->storage) return EMBER_OK;
    EMBER_TRY(untracked_clone(t, &c));
    for (int i = 0; t->ag && i < t->ag->n; i++) {
        const ag_entry *e = &t->ag->e[i];
        int rc = entry_live(e) ? set_entry(c, e->key, e->node, e->output_nr) : EMBER_OK;
        if (rc < 0) {
            ember_tensor_release(c);
            return rc;
        }
    }
    ember_tensor_release(t);
    *slot = c;
    *version = c->storage->version;
    return EMBER_OK;
}

int ember__ag_protect(const ember_tensor *self, uint64_t mark)
{
    for (int r = 0; r < n_recording; r++) {
        ag_key *k = &keys[recording_keys[r]];
        for (int64_t i = k->tape_len - 1; i >= 0 && k->tape[i]->id >= mark; i--) {
            ember_node *n = k->tape[i];
            for (int j = 0; j < MAX_SAVED_IN; j++) EMBER_TRY(protect_slot(&n->sv_in[j], &n->sv_in_version[j], self));
            for (int j = 0; j < MAX_SAVED_OUT; j++)
                EMBER_TRY(protect_slot(&n->sv_out[j], &n->sv_out_version[j], self));
        }
    }
    return EMBER_OK;
}

int ember__ag_commit(ember_tensor *self, ember_tensor *value)
{
    ember_tensor *root = self->base;
    if (!root) {   /* self's history is value's */
        drop_visible(self);
        self->ag_epoch++;
        struct ember_autograd_meta *m = value ? value->ag : NULL;
        for (int i = 0; m && i < m->n; i++) {
            const ag_entry *e = &m->e[i];
            if (entry_live(e) && visible(&keys[e->key])) EMBER_TRY(set_entry(self, e->key, e->node, e->output_nr));
        }
        return EMBER_OK;
    }
    /* a view: the root becomes as_strided_scatter(root, value), self its region */
    ember_attrs geo;
    ember_tensor *alias = NULL;
    EMBER_TRY(ember__geometry_of(self, root, &geo));
    if (!value) {   /* a value with no history: an untracked alias of self stands for it */
        EMBER_TRY(ember__make_view(self, self->ndim, self->shape, self->strides, self->offset, &alias));
        value = alias;
    }
    ember_tensor *in[2] = {root, value};
    int rc = record(EMBER_OP_AS_STRIDED_SCATTER, 0, 0, ember__ops[EMBER_OP_AS_STRIDED_SCATTER].name, 2, in, &geo,
                    1, &root);
    ember_tensor_release(alias);
    EMBER_TRY(rc);
    root->ag_epoch++;
    return refresh_view(self);
}

int ember_set_rule_override(const char *op, int rule_id)
{
    if (!op) return ember__fail(EMBER_ERR_ARG, "register_grad_rule: op name is NULL");
    for (int k = 0; k < EMBER_OP_COUNT; k++) {
        if (strcmp(ember__ops[k].name, op) == 0) {
            override_rule[k] = rule_id > 0 ? rule_id : 0;
            memset(bwd_cache, 0, sizeof bwd_cache);
            return EMBER_OK;
        }
    }
    return ember__fail(EMBER_ERR_ARG, "register_grad_rule: unknown op '%s'", op);
}

/* ------------------------------------------------------------------ node inspection */
static _Thread_local char name_buf[128];

const char *ember_node_name(const ember_node *n)
{
    if (!n) return "";
    if (n->op == NODE_ACCUMULATE || n->op == NODE_RETAIN) return "AccumulateGrad";
    const char *base = n->op == NODE_CUSTOM ? n->custom_name : ember__ops[n->op].name;
    /* "log_softmax" -> "LogSoftmaxBackward" */
    char *p = name_buf;
    bool up = true;
    for (const char *s = base; *s && p < name_buf + sizeof name_buf - 10; s++) {
        if (*s == '_') {
            up = true;
            continue;
        }
        *p++ = up && *s >= 'a' && *s <= 'z' ? (char)(*s - 'a' + 'A') : *s;
        up = false;
    }
    strcpy(p, "Backward");
    return name_buf;
}

uint64_t ember_node_id(const ember_node *n) { return n ? n->id : 0; }
int ember_node_num_inputs(const ember_node *n) { return n ? n->nin : 0; }
int ember_node_num_outputs(const ember_node *n) { return n ? n->nout : 0; }
ember_node *ember_node_next(const ember_node *n, int i, int *output_nr)
{
    if (!n || i < 0 || i >= n->nin || n->op == NODE_ACCUMULATE) return NULL;
    if (output_nr) *output_nr = n->next[i].output_nr;
    return n->next[i].node;
}
int ember_node_needs_input_grad(const ember_node *n, int i)
{
    return n && i >= 0 && i < n->nin && n->op != NODE_ACCUMULATE && n->needs[i];
}
ember_tensor *ember_node_leaf(const ember_node *n)
{
    return n && (n->op == NODE_ACCUMULATE || n->op == NODE_RETAIN) ? n->leaf : NULL;
}
ember_tensor *ember_node_saved_input(const ember_node *n, int i)
{
    return n && i >= 0 && i < MAX_SAVED_IN ? n->sv_in[i] : NULL;
}
ember_tensor *ember_node_saved_output(const ember_node *n, int k)
{
    return n && k >= 0 && k < MAX_SAVED_OUT ? n->sv_out[k] : NULL;
}
int ember_node_input_shape(const ember_node *n, int i, int64_t *shape)
{
    if (!n || i < 0 || i >= n->nin || !shape) return -1;
    memcpy(shape, n->in_meta[i].shape, sizeof n->in_meta[i].shape);
    return n->in_meta[i].ndim;
}
int ember_node_lua_ctx(const ember_node *n) { return n ? n->ctx_id : 0; }
void ember_node_set_intercept(ember_node *n, int on)
{
    if (n) n->intercept = on != 0;
}

/* ------------------------------------------------------------------ backward */
struct ember_backward_run {
    int key;
    ag_key *k;
    int64_t pos;              /* next tape index to consider, going down */
    ember_node *waiting;      /* the node whose request is out */
    ember_node **ready;       /* AccumulateGrad nodes whose gradient is complete */
    int64_t n_ready, cap_ready;
    ember_tensor *req_grads[64];
    ember_tensor **req_grads_big;
    int failed;
};

static int push_ready(ember_backward_run *r, ember_node *a)
{
    if (r->n_ready == r->cap_ready) {
        int64_t cap = r->cap_ready ? r->cap_ready * 2 : 16;
        ember_node **p = realloc(r->ready, (size_t)cap * sizeof *p);
        if (!p) return ember__fail(EMBER_ERR_OOM, "out of memory in backward");
        r->ready = p;
        r->cap_ready = cap;
    }
    r->ready[r->n_ready++] = a;
    return EMBER_OK;
}

/* Adds g into a node's output slot (a recorded op, so outer keys see it). */
static int accumulate(ember_node *n, int slot, ember_tensor *g)
{
    if (!n->grads[slot]) {
        ember_tensor_retain(g);
        n->grads[slot] = g;
        return EMBER_OK;
    }
    ember_tensor *sum;
    EMBER_TRY(ember_add(n->grads[slot], g, &sum));
    ember_tensor_release(n->grads[slot]);
    n->grads[slot] = sum;
    return EMBER_OK;
}

static bool same_shape(int nd, const int64_t *a, const ember_tensor *t)
{
    return nd == t->ndim && memcmp(a, t->shape, (size_t)nd * sizeof *a) == 0;
}

/* A rule's gradient for input i brought to the input's shape (a gradient of
   the broadcast shape is summed back) and dtype: a new reference in *out. */
static int conform(const ember_node *n, int i, ember_tensor *g, ember_tensor **out)
{
    char sg[200], si[200];
    const ag_meta_io *m = &n->in_meta[i];
    ember_tensor *cur = g, *tmp = NULL;
    ember_tensor_retain(cur);
    *out = NULL;
    if (!same_shape(m->ndim, m->shape, cur)) {
        if (ember_sum_to(cur, m->ndim, m->shape, &tmp) < 0) {
            ember_tensor_release(cur);
            return ember__fail(EMBER_ERR_SHAPE, "backward: %s returned a gradient of shape %s for input %d of shape %s",
                               ember_node_name(n), ember__tshape(sg, g), i + 1,
                               ember__shape_str(si, m->ndim, m->shape));
        }
        ember_tensor_release(cur);
        cur = tmp;
    }
    if (cur->dtype != m->dtype) {
        int rc = ember_to_dtype(cur, m->dtype, &tmp);
        ember_tensor_release(cur);
        if (rc < 0) return rc;
        cur = tmp;
    }
    *out = cur;
    return EMBER_OK;
}

/* Sends a rule's gradient for input i along the input's edge. */
static int route_one(ember_backward_run *r, ember_node *n, int i, ember_tensor *g)
{
    ember_tensor *cur;
    EMBER_TRY(conform(n, i, g, &cur));
    ember_node *dst = n->next[i].node;
    int rc = accumulate(dst, n->next[i].output_nr, cur);
    if (rc == EMBER_OK && dst->op == NODE_ACCUMULATE && --dst->pending == 0) rc = push_ready(r, dst);
    ember_tensor_release(cur);
    return rc;
}

static int route(ember_backward_run *r, ember_node *n, int count, ember_tensor *const *grads)
{
    for (int i = 0; i < n->nin && i < count; i++) {
        if (!n->needs[i] || !grads[i]) continue;
        EMBER_TRY(route_one(r, n, i, grads[i]));
    }
    /* producers that sent nothing still count as run */
    for (int i = 0; i < n->nin; i++) {
        if (!n->needs[i] || (i < count && grads[i])) continue;
        ember_node *dst = n->next[i].node;
        if (dst->op == NODE_ACCUMULATE && --dst->pending == 0 && dst->grads[0])
            EMBER_TRY(push_ready(r, dst));
    }
    return EMBER_OK;
}

static int check_versions(const ember_node *n)
{
    for (int i = 0; i < MAX_SAVED_IN; i++) {
        const ember_tensor *t = n->sv_in[i];
        if (t && t->storage->version != n->sv_in_version[i])
            return ember__fail(EMBER_ERR_VERSION,
                               "backward: one of the tensors needed by %s (input %d) was modified in place: "
                               "it is at version %lld, but backward needs version %lld",
                               ember_node_name(n), i + 1, (long long)t->storage->version,
                               (long long)n->sv_in_version[i]);
    }
    for (int k = 0; k < MAX_SAVED_OUT; k++) {
        const ember_tensor *t = n->sv_out[k];
        if (t && t->storage->version != n->sv_out_version[k])
            return ember__fail(EMBER_ERR_VERSION,
                               "backward: one of the tensors needed by %s (output %d) was modified in place: "
                               "it is at version %lld, but backward needs version %lld",
                               ember_node_name(n), k + 1, (long long)t->storage->version,
                               (long long)n->sv_out_version[k]);
    }
    return EMBER_OK;
}

/* Output grads for a built-in rule: zeros where an output got none. */
static int fill_missing_grads(ember_node *n)
{
    for (int k = 0; k < n->nout; k++) {
        if (n->grads[k]) continue;
        const ag_meta_io *m = &n->out_meta[k];
        if (!ember__is_float(m->dtype)) continue;
        EMBER_TRY(ember_full(m->ndim, m->shape, 0, m->dtype, m->device, &n->grads[k]));
    }
    return EMBER_OK;
}

static int run_builtin(ember_backward_run *r, ember_node *n)
{
    if (n->op == NODE_CUSTOM)
        return ember__fail(EMBER_ERR_UNSUPPORTED, "backward: no grad rule for %s", n->custom_name);
    EMBER_TRY(fill_missing_grads(n));
    int nin = n->nin;
    ember_tensor *small[8] = {0}, **gin = small;
    if (nin > 8 && !(gin = calloc((size_t)nin, sizeof *gin)))
        return ember__fail(EMBER_ERR_OOM, "out of memory in backward");
    int rc = ember__grad_rule(n, n->grads, gin);
    if (rc >= 0) rc = route(r, n, nin, gin);
    for (int i = 0; i < nin; i++) ember_tensor_release(gin[i]);
    if (gin != small) free(gin);
    return rc;
}

static void finish_node(ember_node *n)
{
    n->done = 1;
    release_saved(n);
    release_grads(n);
}

/* Marks which nodes backward must run: reachable from the roots and on a
   path to an attached tensor of this key. */
static void plan(ember_backward_run *r)
{
    ag_key *k = r->k;
    /* forward sweep (edges point back): does a node lead to an attached tensor? */
    for (int64_t i = 0; i < k->tape_len; i++) {
        ember_node *n = k->tape[i];
        if (n->op == NODE_ACCUMULATE) {
            n->needed = n->leaf != NULL;
            continue;
        }
        int leads = 0;
        for (int j = 0; j < n->nin; j++) {
            ember_node *d = n->next[j].node;
            if (n->needs[j] && d && d->needed) leads = 1;
            else n->needs[j] = 0;
        }
        n->needed = leads || (n->op == NODE_RETAIN && n->leaf);
    }
    /* backward sweep: keep what the roots reach; count each leaf's producers */
    for (int64_t i = k->tape_len - 1; i >= 0; i--) {
        ember_node *n = k->tape[i];
        if (n->op == NODE_ACCUMULATE) continue;
        if (!n->reached || !n->needed) {
            n->needed = 0;
            continue;
        }
        for (int j = 0; j < n->nin; j++) {
            ember_node *d = n->next[j].node;
            if (!n->needs[j]) continue;
            d->reached = 1;
            if (d->op == NODE_ACCUMULATE) d->pending++;
        }
    }
    for (int64_t i = 0; i < k->tape_len; i++) {
        ember_node *n = k->tape[i];
        if (n->op == NODE_ACCUMULATE) n->needed = n->needed && n->reached;
    }
}

int ember_backward_begin(int key, int n, ember_tensor *const *ys, ember_tensor *const *dys,
                         ember_backward_run **out)
{
    char sy[200], sd[200];
    if (!out) return ember__fail(EMBER_ERR_ARG, "GradManager.backward: the run pointer is NULL");
    *out = NULL;
    if (n < 0 || (n > 0 && !ys))
        return ember__fail(EMBER_ERR_ARG, "GradManager.backward: %d roots given%s", n, n > 0 ? " but the list is NULL" : "");
    ag_key *k = key_at(key);
    if (!k || !k->recording)
        return ember__fail(EMBER_ERR_STATE,
                           "GradManager.backward: no computation history (did you call gm:record()?)");
    if (k->running) return ember__fail(EMBER_ERR_STATE, "GradManager.backward: already running backward");
    if (run_depth >= MAX_RUN_DEPTH) return ember__fail(EMBER_ERR_STATE, "backward: nested too deeply");
    for (int i = 0; i < n; i++) {
        if (!ys[i]) return ember__fail(EMBER_ERR_ARG, "GradManager.backward: y %d is NULL", i + 1);
        if (!dys || !dys[i]) {
            if (ys[i]->numel != 1)
                return ember__fail(EMBER_ERR_SHAPE,
                                   "GradManager.backward: grad can be implicitly created only for scalar "
                                   "outputs, got y of shape %s", ember__tshape(sy, ys[i]));
        } else if (!same_shape(ys[i]->ndim, ys[i]->shape, dys[i])) {
            return ember__fail(EMBER_ERR_SHAPE,
                               "GradManager.backward: dy of shape %s does not match y of shape %s",
                               ember__tshape(sd, dys[i]), ember__tshape(sy, ys[i]));
        }
    }
    if (!save_copies) {
        for (int64_t i = 0; i < k->tape_len; i++) {
            if (k->tape[i]->copied)
                return ember__fail(EMBER_ERR_STATE,
                                   "allow_mutation_on_saved_tensors: backward must run inside the "
                                   "context that recorded the graph");
        }
    }
    ember_backward_run *r = calloc(1, sizeof *r);
    if (!r) return ember__fail(EMBER_ERR_OOM, "out of memory starting backward");
    r->key = key;
    r->k = k;
    r->pos = k->tape_len - 1;
    k->running = 1;
    k->bwd_stamp = ++stamp_counter;
    run_stack[run_depth++] = k;
    *out = r;
    /* seed the roots */
    int rc = EMBER_OK;
    for (int i = 0; i < n; i++) {
        ag_entry *e = find_entry(ys[i], key);
        if (!e) continue;
        e->node->reached = 1;
    }
    plan(r);
    for (int64_t i = 0; i < k->tape_len; i++) {
        ember_node *m = k->tape[i];
        if (m->needed && !m->done && m->op != NODE_ACCUMULATE && !m->pinned) {
            pin_saved(m, 1);
            m->pinned = 1;
        }
    }
    for (int i = 0; i < n && rc >= 0; i++) {
        ag_entry *e = find_entry(ys[i], key);
        if (!e || !e->node->needed) continue;
        ember_tensor *dy = dys ? dys[i] : NULL, *own = NULL;
        if (!dy) {
            rc = ember_full(ys[i]->ndim, ys[i]->shape, 1, ys[i]->dtype, ys[i]->storage->device, &own);
            dy = own;
        } else if (dy->dtype != ys[i]->dtype) {
            rc = ember_to_dtype(dy, ys[i]->dtype, &own);
            dy = own;
        }
        if (rc >= 0) rc = accumulate(e->node, e->output_nr, dy);
        ember_tensor_release(own);
    }
    /* a root that is itself an attached tensor is complete unless a node feeds it */
    for (int64_t i = 0; i < k->tape_len && rc >= 0; i++) {
        ember_node *a = k->tape[i];
        if (a->op == NODE_ACCUMULATE && a->needed && a->pending == 0 && a->grads[0]) rc = push_ready(r, a);
    }
    if (rc < 0) r->failed = 1;
    return rc;
}

static int leaf_request(ember_backward_run *r, ember_backward_req *req)
{
    while (r->n_ready > 0) {
        ember_node *a = r->ready[--r->n_ready];
        if (!a->leaf || !a->grads[0]) continue;
        req->kind = EMBER_REQ_LEAF;
        req->rule_id = a->intercept || intercept_all;
        req->ctx_id = 0;
        req->node = a;
        req->num_grads = 1;
        r->req_grads[0] = a->grads[0];
        req->grads = r->req_grads;
        req->tensor = a->leaf;
        return EMBER_NEED_LUA;
    }
    return EMBER_OK;
}

#include <time.h>

double ember_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int step(ember_backward_run *r, ember_backward_req *req, double deadline);

int ember_backward_step(ember_backward_run *r, ember_backward_req *req) { return step(r, req, 0); }

int ember_backward_step_until(ember_backward_run *r, ember_backward_req *req, double deadline)
{
    if (!(deadline > 0)) deadline = 1e-300;   /* one node, then pause */
    return step(r, req, deadline);
}

/* deadline 0: none */
static int step(ember_backward_run *r, ember_backward_req *req, double deadline)
{
    if (!r || !req) return ember__fail(EMBER_ERR_ARG, "backward_step: NULL argument");
    if (r->failed) return ember__fail(EMBER_ERR_STATE, "backward: the run already failed");
    if (r->waiting) return ember__fail(EMBER_ERR_STATE, "backward: a request is waiting for its answer");
    int rc = leaf_request(r, req);
    if (rc != EMBER_OK) return rc;
    ag_key *k = r->k;
    while (r->pos >= 0) {
        ember_node *n = k->tape[r->pos];
        if (n->op == NODE_ACCUMULATE || !n->needed || n->done) {
            r->pos--;
            continue;
        }
        bool any = false;
        for (int j = 0; j < n->nout; j++) any |= n->grads[j] != NULL;
        if (!any) {   /* nothing flowed here: its inputs get nothing either */
            rc = route(r, n, 0, NULL);
            finish_node(n);
            r->pos--;
            if (rc < 0) goto fail;
            rc = leaf_request(r, req);
            if (rc != EMBER_OK) return rc;
            continue;
        }
        if (n->op == NODE_RETAIN) {   /* pass the gradient on, then hand it to the caller */
            rc = route(r, n, 1, n->grads);
            n->done = 1;              /* grads stay: the leaf request reads them */
            r->pos--;
            if (rc >= 0 && n->leaf) rc = push_ready(r, n);
            if (rc < 0) goto fail;
            rc = leaf_request(r, req);
            if (rc != EMBER_OK) return rc;
            continue;
        }
        rc = check_versions(n);
        if (rc < 0) goto fail;
        if (n->rule_id > 0 || n->intercept || intercept_all || n->op == NODE_CUSTOM) {
            ember_tensor **g = n->nout <= 64 ? r->req_grads : NULL;
            if (!g) {
                free(r->req_grads_big);
                r->req_grads_big = malloc((size_t)n->nout * sizeof *g);
                if (!r->req_grads_big) {
                    rc = ember__fail(EMBER_ERR_OOM, "out of memory in backward");
                    goto fail;
                }
                g = r->req_grads_big;
            }
            for (int j = 0; j < n->nout; j++) g[j] = n->grads[j];
            req->kind = EMBER_REQ_NODE;
            req->rule_id = n->rule_id;
            req->ctx_id = n->ctx_id;
            req->node = n;
            req->num_grads = n->nout;
            req->grads = g;
            req->tensor = NULL;
            r->waiting = n;
            return EMBER_NEED_LUA;
        }
        rc = run_builtin(r, n);
        finish_node(n);
        r->pos--;
        if (rc < 0) goto fail;
        rc = leaf_request(r, req);
        if (rc != EMBER_OK) return rc;
        if (deadline > 0 && ember_clock() >= deadline) return EMBER_PAUSED;
    }
    return EMBER_DONE;
fail:
    r->failed = 1;
    return rc;
}

static int answer(ember_backward_run *r, int n, ember_tensor *const *grads, bool builtin)
{
    ember_node *node = r ? r->waiting : NULL;
    if (!node) return ember__fail(EMBER_ERR_STATE, "backward: no request is waiting for an answer");
    int rc;
    if (builtin) {
        /* the caller's (possibly hooked) output grads replace the slots */
        for (int j = 0; j < node->nout && j < n; j++) {
            if (grads && grads[j] != node->grads[j]) {
                ember_tensor_retain(grads[j]);
                ember_tensor_release(node->grads[j]);
                node->grads[j] = grads[j];
            }
        }
        rc = run_builtin(r, node);
    } else {
        if (n > node->nin)
            rc = ember__fail(EMBER_ERR_ARG, "backward: %s: wrong number of grads: %d for %d inputs",
                             ember_node_name(node), n, node->nin);
        else
            rc = route(r, node, n, grads);
    }
    finish_node(node);
    r->waiting = NULL;
    r->pos--;
    if (rc < 0) r->failed = 1;
    return rc;
}

int ember_backward_builtin_grads(ember_backward_run *r, int n, ember_tensor *const *grads,
                                 ember_tensor **grad_in)
{
    ember_node *node = r ? r->waiting : NULL;
    if (!node) return ember__fail(EMBER_ERR_STATE, "backward: no request is waiting for an answer");
    if (node->op < 0) return ember__fail(EMBER_ERR_UNSUPPORTED, "backward: no grad rule for %s", ember_node_name(node));
    for (int i = 0; i < node->nin; i++) grad_in[i] = NULL;
    for (int j = 0; j < node->nout && j < n; j++) {
        if (grads && grads[j] != node->grads[j]) {
            if (grads[j]) ember_tensor_retain(grads[j]);
            ember_tensor_release(node->grads[j]);
            node->grads[j] = grads[j];
        }
    }
    EMBER_TRY(check_versions(node));
    EMBER_TRY(fill_missing_grads(node));
    EMBER_TRY(ember__grad_rule(node, node->grads, grad_in));
    /* hooks see each gradient in its input's shape and dtype */
    int rc = EMBER_OK;
    for (int i = 0; i < node->nin; i++) {
        ember_tensor *c = NULL;
        if (!grad_in[i] || rc < 0) continue;
        rc = conform(node, i, grad_in[i], &c);
        ember_tensor_release(grad_in[i]);
        grad_in[i] = c;
    }
    if (rc < 0)
        for (int i = 0; i < node->nin; i++) {
            ember_tensor_release(grad_in[i]);
            grad_in[i] = NULL;
        }
    return rc;
}

int ember_backward_supply(ember_backward_run *r, int n, ember_tensor *const *grads)
{
    return answer(r, n, grads, false);
}

int ember_backward_builtin(ember_backward_run *r, int n, ember_tensor *const *grads)
{
    return answer(r, n, grads, true);
}

void ember_backward_end(ember_backward_run *r)
{
    if (!r) return;
    ag_key *k = r->k;
    k->running = 0;
    for (int i = run_depth - 1; i >= 0; i--) {
        if (run_stack[i] == k) {
            memmove(&run_stack[i], &run_stack[i + 1], (size_t)(run_depth - i - 1) * sizeof *run_stack);
            run_depth--;
            break;
        }
    }
    ember_key_release(r->key);
    free(r->ready);
    free(r->req_grads_big);
    free(r);
}

void ember_autograd_stats(ember_autograd_stats_t *out)
{
    if (!out) return;
    out->live_nodes = stat_live_nodes;
    out->saved_tensors = stat_saved;
    out->bwd_cache_hits = stat_hits;
    out->bwd_cache_misses = stat_misses;
}

/* Thread exit (threads.c): the thread's recordings and pools go. */
void ember__free_thread_autograd(void)
{
    if (agt && agt != &ag_fallback) {
        for (int k = 1; k < MAX_KEYS; k++)
            if (agt->key_table[k].in_use) free(agt->key_table[k].tape);   /* nodes of live recordings are dropped */
        free(agt);
    }
    agt = NULL;
    while (node_pool) {
        void *next = *(void **)node_pool;
        free(node_pool);
        node_pool = next;
    }
    node_pool_size = 0;
    while (meta_pool) {
        void *next = *(void **)meta_pool;
        free(meta_pool);
        meta_pool = next;
    }
    meta_pool_size = 0;
    free(freed_ctx);
    free(kill_stack);
    free(journal);
    freed_ctx = NULL;
    kill_stack = NULL;
    journal = NULL;
    n_freed_ctx = cap_freed_ctx = 0;
    n_kill = cap_kill = 0;
    n_journal = cap_journal = 0;
}

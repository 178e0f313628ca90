/* autograd.c: keys, tapes, tracking entries, recording and in-place writes
   (nodes: node.c; the backward engine: backward.c).

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
#include "tape.h"
#include "dtr.h"

#include <stdio.h>
#include <string.h>

/* Autograd state is per thread: each thread records, and runs backward on,
   its own tensors (ember.h, "Threads"). */
EMBER_TLS int ember__ag_active;
EMBER_TLS int ember__ag_intercept_all;
EMBER_TLS int ember__ag_save_copies;
EMBER_TLS uint64_t ember__ag_next_node_id = 1;
static EMBER_TLS int grad_enabled = 1;

EMBER_TLS ag_thread *ember__agt;
static ag_thread ag_fallback;   /* used only if the calloc below fails (then shared, as before threads) */

ag_thread *ember__ag_state_new(void)
{
    ember__agt = calloc(1, sizeof *ember__agt);
    if (!ember__agt) ember__agt = &ag_fallback;
    else ember__thread_uses_state();
    return ember__agt;
}

/* ------------------------------------------------------------------ keys */
static EMBER_TLS int n_recording;
static void ag_forget(ember_tensor *t);

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

static EMBER_TLS uint64_t ag_serial;

void ember__ag_changed(void) { ag_serial++; }
uint64_t ember_autograd_serial(void) { return ag_serial; }

static void update_active(void)
{
    ember__ag_active = grad_enabled && n_recording > 0;
    ember__ag_changed();
}

void ember_set_grad_enabled(int enabled)
{
    grad_enabled = enabled != 0;
    update_active();
}

int ember_is_grad_enabled(void) { return grad_enabled; }

int ember__ag_pause(void)
{
    int was = grad_enabled;
    ember_set_grad_enabled(0);
    return was;
}

void ember__ag_resume(int paused) { ember_set_grad_enabled(paused); }

int ember_num_recording(void) { return ember__ag_active ? n_recording : 0; }
int ember__ag_recording_open(void) { return n_recording > 0; }   /* in grad mode or not (dtr.c) */

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
            ember__on_release(ag_forget);   /* before the key tracks any tensor */
            *key = k;
            return EMBER_OK;
        }
    }
    return ember__fail(EMBER_ERR_OOM, "GradManager: too many live managers (%d)", MAX_KEYS - 1);
}

static int tape_push(ag_key *k, ember_node *n)
{
    if (node_list_push(&k->tape, &k->tape_len, &k->tape_cap, n)) return EMBER_OK;
    return ember__fail(EMBER_ERR_OOM, "out of memory growing the autograd tape");
}

/* ------------------------------------------------------------------ tracking entries */
static EMBER_TLS void *meta_pool;   /* of metas with 2 entries */
static EMBER_TLS int meta_pool_len;

static bool entry_live(const ag_entry *e)
{
    const ag_key *k = &keys[e->key];
    return k->in_use && k->recording && k->gen == e->gen;
}

ag_entry *ember__ag_find_entry(const ember_tensor *t, int key)
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
            ember__node_ref(node);
            e->node = node;
            e->output_nr = output_nr;
            ember__node_unref(old);
            return EMBER_OK;
        }
    }
    if (slot) {   /* a stale entry's node may be gone: it is not unreferenced */
        ember__node_ref(node);
        *slot = (ag_entry){key, keys[key].gen, node, output_nr};
        return EMBER_OK;
    }
    /* most tensors are tracked by one key: a pooled 2-entry meta */
    if (!m && (m = ember__freelist_get(&meta_pool, &meta_pool_len, 0))) {
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
    ember__node_ref(node);
    m->e[m->n++] = (ag_entry){key, keys[key].gen, node, output_nr};
    return EMBER_OK;
}

/* the release hook (ember__on_release): a tensor is being freed, drop its tracking entries */
static void ag_forget(ember_tensor *t)
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
    for (int i = 0; i < n_drop; i++) ember__node_unref(drop[i]);
    if (m->cap != 2 || !ember__freelist_put(&meta_pool, &meta_pool_len, 0, m, 65536)) free(m);
}

/* ------------------------------------------------------------------ key lifecycle */
/* Frees the tape's nodes; a short tape's array stays for the next recording
   (a training loop's next step) but in sanitizer builds, a long one goes. */
static void tape_free(ag_key *k)
{
    for (int64_t i = 0; i < k->tape_len; i++) ember__node_free(k->tape[i]);
    k->tape_len = 0;
#ifndef EMBER_NO_CACHE
    if (k->tape_cap <= 4096) return;
#endif
    free(k->tape);
    k->tape = NULL;
    k->tape_cap = 0;
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
    free(k->tape);   /* the array tape_free keeps; ember_key_new clears the rest */
    k->tape = NULL;
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
    k->stamp = ++ag_state()->stamp_counter;
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
    ember__ag_changed();
    ag_entry *e = ember__ag_find_entry(t, key);
    if (e && e->node && (e->node->op == NODE_ACCUMULATE || e->node->op == NODE_RETAIN) && e->node->leaf == t)
        return EMBER_OK;
    /* an intermediate keeps its history: a RETAIN node in front of its producer */
    bool retain = e && e->node;
    ember_node *n = ember__node_new(retain ? NODE_RETAIN : NODE_ACCUMULATE, key, 1, 1);
    if (!n) return ember__fail(EMBER_ERR_OOM, "out of memory attaching a tensor");
    n->leaf = t;
    if (retain) {
        n->next[0] = (ag_edge){e->node, e->output_nr};
        ember__node_ref(e->node);
        n->needs[0] = 1;
    }
    ember__node_meta_of(&n->in_meta[0], t);
    ember__node_meta_of(&n->out_meta[0], t);
    int rc = tape_push(k, n);
    if (rc < 0) {
        ember__node_free(n);
        return rc;
    }
    return set_entry(t, key, n, 0);
}

int ember_key_tracks(int key, const ember_tensor *t) { return t && ember__ag_find_entry(t, key) != NULL; }

int ember_is_tracked(const ember_tensor *t)
{
    if (!t || !t->ag) return 0;
    for (int i = 0; i < t->ag->n; i++)
        if (entry_live(&t->ag->e[i])) return 1;
    return 0;
}

/* The node that produced the tensor of entry e (a RETAIN node stands in
   front of its producer), or NULL for a leaf. */
static ember_node *producer(const ag_entry *e, int *output_nr)
{
    if (!e || !e->node || e->node->op == NODE_ACCUMULATE) return NULL;
    if (e->node->op == NODE_RETAIN) {
        if (output_nr) *output_nr = e->node->next[0].output_nr;
        return e->node->next[0].node;
    }
    if (output_nr) *output_nr = e->output_nr;
    return e->node;
}

/* t's live entry of the key that started recording last */
static const ag_entry *latest_entry(const ember_tensor *t)
{
    if (!t || !t->ag) return NULL;
    const ag_entry *best = NULL;
    for (int i = 0; i < t->ag->n; i++) {
        const ag_entry *e = &t->ag->e[i];
        if (entry_live(e) && (!best || keys[e->key].stamp > keys[best->key].stamp)) best = e;
    }
    return best;
}

ember_node *ember_grad_fn_key(int key, const ember_tensor *t, int *output_nr)
{
    return producer(t ? ember__ag_find_entry(t, key) : NULL, output_nr);
}

ember_node *ember_grad_fn(const ember_tensor *t, int *output_nr) { return producer(latest_entry(t), output_nr); }

ember_node *ember_gradient_edge(const ember_tensor *t, int *output_nr)
{
    const ag_entry *e = latest_entry(t);
    if (!e) return NULL;
    if (output_nr) *output_nr = e->output_nr;
    return e->node;
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

/* ------------------------------------------------------------------ recording */
/* While key R runs backward, key K records R's ops when K started before R
   (an outer manager: higher-order gradients) and is not in R's group, or when
   K started during R's backward (a recording inside a rule, as checkpoint
   does); a key started between the two sees nothing of R's backward. */
static bool visible(const ag_key *k)
{
    const ag_thread *st = ag_state();
    for (int i = 0; i < st->run_depth; i++) {
        const ag_key *r = st->runs[i];
        if (k->stamp > r->bwd_stamp) continue;
        if (k->stamp >= r->stamp || k->group == r->group) return false;
    }
    return true;
}


bool ember__ag_would_record(int n, ember_tensor *const *ts)
{
    if (!ember__ag_active) return false;
    for (int i = 0; i < n_recording; i++) {
        int key = recording_keys[i];
        if (!visible(&keys[key])) continue;
        for (int j = 0; j < n; j++)
            if (ts[j] && ember__ag_involved(ts[j]) && ember__ag_find_entry(ts[j], key)) return true;
    }
    return false;
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
        ag_state()->cache_hits++;
        return s->save;
    }
    ag_state()->cache_misses++;
    unsigned m = override_rule[op] > 0 ? (SAVE_IN0 | SAVE_IN1 | SAVE_IN2 | SAVE_OUT0 | SAVE_OUT1)
                                       : ember__op_save(op, needs);
    s->sig = sig;
    s->save = m;
    s->used = 1;
    return m;
}

/* The tensor a node keeps: t itself, or a detached copy in ember__ag_save_copies mode. */
static ember_tensor *to_save(ember_tensor *t)
{
    if (ember__ag_save_copies) {
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
    if (!ember__ag_save_copies && ember__make_view(t, t->ndim, t->shape, t->strides, t->offset, &a) == EMBER_OK) return a;
    return to_save(t);
}

static void save_tensors(ember_node *n, unsigned mask, int nin, ember_tensor *const *in, int nout,
                         ember_tensor *const *out)
{
    n->copied = ember__ag_save_copies;
    for (int i = 0; i < nin && i < MAX_SAVED_IN; i++) {
        if (!(mask & (SAVE_IN0 << i))) continue;
        n->sv_in[i] = to_save(in[i]);
        n->sv_in_version[i] = n->sv_in[i]->storage->version;
        ag_state()->saved++;
    }
    for (int k = 0; k < nout && k < MAX_SAVED_OUT; k++) {
        if (!(mask & (SAVE_OUT0 << k))) continue;
        n->sv_out[k] = to_save_output(out[k]);
        n->sv_out_version[k] = n->sv_out[k]->storage->version;
        ag_state()->saved++;
    }
}

void ember_set_save_copies(int on) { ember__ag_save_copies = on != 0; }
int ember_get_save_copies(void) { return ember__ag_save_copies; }
void ember_set_intercept_all(int on) { ember__ag_intercept_all = on != 0; }

static int set_saved(const ember_node *n, ember_tensor **slot, int64_t *version, ember_tensor *t)
{
    if (*slot && !t) ag_state()->saved--;
    if (!*slot && t) ag_state()->saved++;
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
        ag_entry *e = ember__is_float(in[i]->dtype) ? ember__ag_find_entry(in[i], key) : NULL;
        if (!e) continue;
        if (!n) {
            n = ember__node_new(op, key, nin, nout);
            if (!n) return ember__fail(EMBER_ERR_OOM, "out of memory recording %s", custom_name);
        }
        n->next[i] = (ag_edge){e->node, e->output_nr};
        ember__node_ref(e->node);
        n->needs[i] = 1;
    }
    if (!n) return EMBER_OK;
    n->rule_id = rule_id > 0 ? rule_id : (op >= 0 ? override_rule[op] : 0);
    n->ctx_id = ctx_id;
    if (op == NODE_CUSTOM && custom_name) {   /* a built-in op's name is its table's (ember_node_name) */
        size_t len = strnlen(custom_name, sizeof n->custom_name - 1);
        memcpy(n->custom_name, custom_name, len);
        n->custom_name[len] = '\0';
    }
    if (at) n->attrs = *at;
    for (int i = 0; i < nin; i++) ember__node_meta_of(&n->in_meta[i], in[i]);
    for (int j = 0; j < nout; j++) ember__node_meta_of(&n->out_meta[j], out[j]);
    if (op >= 0) save_tensors(n, save_mask(op, nin, in, n->needs), nin, in, nout, out);
    int rc = tape_push(k, n);
    if (rc < 0) {
        n->ctx_id = 0;
        ember__node_free(n);
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
    uint64_t mark = ember__ag_next_node_id;
    for (int i = 0; i < n_recording; i++) {
        int key = recording_keys[i];
        ag_key *k = &keys[key];
        if (!visible(k)) continue;
        EMBER_TRY(record_on(k, key, op, rule_id, ctx_id, name, nin, in, at, nout, out));
    }
    if (ember__ag_next_node_id == mark || ember__ag_save_copies || (op >= 0 && !ember__op_may_save_output(op)))
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
    if (strlen(name) > EMBER_NODE_NAME_MAX)
        return ember__fail(EMBER_ERR_ARG, "Function %.32s...: the name is %zu bytes, longer than %d", name,
                           strlen(name), EMBER_NODE_NAME_MAX);
    if (nin < 0 || nout < 1 || (nin && !in) || !out)
        return ember__fail(EMBER_ERR_ARG, "Function %s: bad inputs or outputs", name);
    if (!ember__ag_active) return EMBER_OK;
    for (int i = 0; i < nin; i++)
        if (!in[i]) return ember__fail(EMBER_ERR_ARG, "Function %s: input %d is NULL", name, i + 1);
    for (int j = 0; j < nout; j++)
        if (!out[j]) return ember__fail(EMBER_ERR_ARG, "Function %s: output %d is NULL", name, j + 1);
    uint64_t mark = ember__ag_next_node_id;
    EMBER_TRY(record(NODE_CUSTOM, rule_id, ctx_id, name, nin, in, NULL, nout, out));
    return (int)(ember__ag_next_node_id - mark);   /* one node per key, each holding ctx_id */
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
            ember__node_unref(old);
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
    if (EMBER_UNLIKELY(ember__dtr_on)) EMBER_TRY(ember__dtr_write((ember_tensor *)self, other));
    if (!ember__ag_active) return 0;
    bool rec = ember__ag_involved(self) || (other && ember__ag_involved(other)) || (self->base && self->base->ag);
    if (!rec) return 0;
    ember_attrs geo;   /* a dense root in another order (a transposed result) maps too */
    if (self->base && !self->base->is_contiguous && ember__geometry_of(self, self->base, &geo) < 0) {
        char sv[200], sr[200];
        return ember__fail(EMBER_ERR_UNSUPPORTED,
                           "%s_: in-place write under recording into a view (shape %s) of a non-contiguous "
                           "tensor of shape %s: write into a contiguous() copy of it instead",
                           name, ember__tshape(sv, self), ember__tshape(sr, self->base));
    }
    return 1;
}

uint64_t ember__ag_mark(void) { return ember__ag_next_node_id; }

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

void ember_autograd_stats(ember_autograd_stats_t *out)
{
    if (!out) return;
    const ag_thread *st = ag_state();
    out->live_nodes = st->live_nodes;
    out->saved_tensors = st->saved;
    out->bwd_cache_hits = st->cache_hits;
    out->bwd_cache_misses = st->cache_misses;
}

/* Thread exit (threads.c): the thread's recordings and pools go. */
void ember__free_thread_autograd(void)
{
    if (ember__agt && ember__agt != &ag_fallback) {
        for (int k = 1; k < MAX_KEYS; k++)
            if (ember__agt->key_table[k].in_use) free(ember__agt->key_table[k].tape);   /* nodes of live recordings are dropped */
        free(ember__agt);
    }
    ember__agt = NULL;
    ember__free_thread_nodes();
    ember__free_thread_backward();
    ember__freelist_drain(&meta_pool, &meta_pool_len, 0);
    free(journal);
    journal = NULL;
    n_journal = cap_journal = 0;
}

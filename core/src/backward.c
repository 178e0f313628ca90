/* backward.c: the backward engine. One reverse sweep of the key's tape,
   after a forward sweep that marks the nodes leading to attached tensors and
   a backward sweep that marks what the roots reach (plan); built-in rules run
   here (grad_rules.c), Lua rules, hooks and completed gradients go to the
   caller as requests of a pull loop (ember_backward_step). */
#include "grad_rules.h"
#include "platform.h"
#include "tape.h"

#include <string.h>

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

/* a finished run's struct, reused by the thread's next backward */
static EMBER_TLS ember_backward_run *spare_run;

static int push_ready(ember_backward_run *r, ember_node *a)
{
    if (node_list_push(&r->ready, &r->n_ready, &r->cap_ready, a)) return EMBER_OK;
    return ember__fail(EMBER_ERR_OOM, "out of memory in backward");
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
        int rc = ember_sum_to(cur, m->ndim, m->shape, &tmp);
        if (rc < 0) {
            ember_tensor_release(cur);
            if (rc == EMBER_ERR_OOM) return rc;   /* out of memory (a limit, a DTR budget) says so itself */
            return ember__fail(EMBER_ERR_SHAPE, "backward: %s returned a gradient of shape %s for input %d of shape %s",
                               ember_node_label(n), ember__tshape(sg, g), i + 1,
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

/* A saved tensor written in place since the node saved it fails the node. */
static int check_version(const ember_node *n, const ember_tensor *t, int64_t saved, const char *what, int k)
{
    if (!t || t->storage->version == saved) return EMBER_OK;
    return ember__fail(EMBER_ERR_VERSION,
                       "backward: one of the tensors needed by %s (%s %d) was modified in place: "
                       "it is at version %lld, but backward needs version %lld",
                       ember_node_label(n), what, k + 1, (long long)t->storage->version, (long long)saved);
}

static int check_versions(const ember_node *n)
{
    for (int i = 0; i < MAX_SAVED_IN; i++) EMBER_TRY(check_version(n, n->sv_in[i], n->sv_in_version[i], "input", i));
    for (int k = 0; k < MAX_SAVED_OUT; k++)
        EMBER_TRY(check_version(n, n->sv_out[k], n->sv_out_version[k], "output", k));
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
        return ember__fail(EMBER_ERR_UNSUPPORTED, "backward: no grad rule for %s", ember_node_label(n));
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
    ember__node_release_saved(n);
    ember__node_release_grads(n);
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
    if (ag_state()->run_depth >= MAX_RUN_DEPTH) return ember__fail(EMBER_ERR_STATE, "backward: nested too deeply");
    for (int i = 0; i < n; i++) {
        if (!ys[i]) return ember__fail(EMBER_ERR_ARG, "GradManager.backward: y %d is NULL", i + 1);
        if (!dys || !dys[i]) {
            if (ys[i]->numel != 1)
                return ember__fail(EMBER_ERR_SHAPE,
                                   "GradManager.backward: dy can be omitted only for scalar "
                                   "outputs, got y of shape %s", ember__tshape(sy, ys[i]));
        } else if (!same_shape(ys[i]->ndim, ys[i]->shape, dys[i])) {
            return ember__fail(EMBER_ERR_SHAPE,
                               "GradManager.backward: dy of shape %s does not match y of shape %s",
                               ember__tshape(sd, dys[i]), ember__tshape(sy, ys[i]));
        }
    }
    if (!ember__ag_save_copies) {
        for (int64_t i = 0; i < k->tape_len; i++) {
            if (k->tape[i]->copied)
                return ember__fail(EMBER_ERR_STATE,
                                   "allow_mutation_on_saved_tensors: backward must run inside the "
                                   "context that recorded the graph");
        }
    }
    ember_backward_run *r = spare_run;
    if (r) {   /* the last run's struct and its ready list, as new */
        spare_run = NULL;
        ember_node **ready = r->ready;
        int64_t cap = r->cap_ready;
        memset(r, 0, sizeof *r);
        r->ready = ready;
        r->cap_ready = cap;
    } else if (!(r = calloc(1, sizeof *r))) {
        return ember__fail(EMBER_ERR_OOM, "out of memory starting backward");
    }
    r->key = key;
    r->k = k;
    r->pos = k->tape_len - 1;
    k->running = 1;
    ember__ag_changed();
    k->bwd_stamp = ++ag_state()->stamp_counter;
    run_stack[ag_state()->run_depth++] = k;
    *out = r;
    /* seed the roots */
    int rc = EMBER_OK;
    for (int i = 0; i < n; i++) {
        ag_entry *e = ember__ag_find_entry(ys[i], key);
        if (!e) continue;
        e->node->reached = 1;
    }
    plan(r);
    for (int64_t i = 0; i < k->tape_len; i++) {
        ember_node *m = k->tape[i];
        if (m->needed && !m->done && m->op != NODE_ACCUMULATE && !m->pinned) {
            ember__node_pin_saved(m, 1);
            m->pinned = 1;
        }
    }
    for (int i = 0; i < n && rc >= 0; i++) {
        ag_entry *e = ember__ag_find_entry(ys[i], key);
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
        req->rule_id = a->intercept || ember__ag_intercept_all;
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

double ember_clock(void)
{
    int64_t ns = ember__now_ns();
    return (double)(ns / 1000000000) + (double)(ns % 1000000000) * 1e-9;
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
        if (n->rule_id > 0 || n->intercept || ember__ag_intercept_all || n->op == NODE_CUSTOM) {
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
                             ember_node_label(node), n, node->nin);
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
    if (node->op < 0) return ember__fail(EMBER_ERR_UNSUPPORTED, "backward: no grad rule for %s", ember_node_label(node));
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
    ember__ag_changed();
    ag_thread *st = ag_state();
    for (int i = st->run_depth - 1; i >= 0; i--) {
        if (st->runs[i] == k) {
            memmove(&st->runs[i], &st->runs[i + 1], (size_t)(st->run_depth - i - 1) * sizeof *st->runs);
            st->run_depth--;
            break;
        }
    }
    ember_key_release(r->key);
    free(r->req_grads_big);
    r->req_grads_big = NULL;
#ifndef EMBER_NO_CACHE   /* sanitizer builds free it, so ASan sees every use */
    if (!spare_run && r->cap_ready <= 4096) {   /* kept for the next backward (a training loop's) */
        spare_run = r;
        return;
    }
#endif
    free(r->ready);
    free(r);
}

/* Thread exit (ember__free_thread_autograd): the kept run goes. */
void ember__free_thread_backward(void)
{
    if (!spare_run) return;
    free(spare_run->ready);
    free(spare_run);
    spare_run = NULL;
}

/* node.c: autograd nodes: making them (small ones from a per-thread free
   list), their lifetime (a node's saved tensors go with its last reference)
   and the C API that inspects them (ember_node_*). What a node holds: node.h. */
#include "dtr.h"
#include "tape.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

void ember__node_meta_of(ag_meta_io *m, const ember_tensor *t)
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
static EMBER_TLS void *node_pool;   /* of nodes of the small size */
static EMBER_TLS int node_pool_len;

ember_node *ember__node_new(int op, int key, int nin, int nout)
{
    bool small = nin <= SMALL_NIN && nout <= SMALL_NOUT;
    size_t sz = small ? node_size(SMALL_NIN, SMALL_NOUT) : node_size(nin, nout);
    ember_node *n;
    bool pooled = small && (n = ember__freelist_get(&node_pool, &node_pool_len, 0)) != NULL;
    if (pooled) {
        /* zeroed as calloc would, except what the recording writes whole
           before anything reads it: the Function name past its first byte
           and the input and output metas (ember__node_meta_of) */
        memset(n, 0, offsetof(ember_node, custom_name));
        n->custom_name[0] = '\0';
        memset(&n->attrs, 0, sizeof *n - offsetof(ember_node, attrs));
    } else if (!(n = calloc(1, sz))) {
        return NULL;
    }
    char *p = (char *)(n + 1);
    n->in_meta = (ag_meta_io *)p;
    p += (size_t)nin * sizeof(ag_meta_io);
    n->out_meta = (ag_meta_io *)p;
    p += (size_t)nout * sizeof(ag_meta_io);
    if (pooled) memset(p, 0, (size_t)nin * (sizeof(ag_edge) + 1) + (size_t)nout * sizeof(ember_tensor *));
    n->next = (ag_edge *)p;
    p += (size_t)nin * sizeof(ag_edge);
    n->grads = (ember_tensor **)p;
    p += (size_t)nout * sizeof(ember_tensor *);
    n->needs = (uint8_t *)p;
    n->op = op;
    n->key = key;
    n->nin = nin;
    n->nout = nout;
    n->id = ember__ag_next_node_id++;
    ag_state()->live_nodes++;
    return n;
}

/* freed ctx ids waiting for the caller to drop its state */
static EMBER_TLS int *freed_ctx;
static EMBER_TLS int n_freed_ctx, cap_freed_ctx;

/* A node an open run still has to execute pins the storage of what it saved:
   writes into it fail until the node has run (ember__check_writable). */
void ember__node_pin_saved(ember_node *n, int delta)
{
    for (int i = 0; i < MAX_SAVED_IN; i++)
        if (n->sv_in[i]) n->sv_in[i]->storage->pins += delta;
    for (int k = 0; k < MAX_SAVED_OUT; k++)
        if (n->sv_out[k]) n->sv_out[k]->storage->pins += delta;
}

void ember__node_release_saved(ember_node *n)
{
    if (n->pinned) {
        ember__node_pin_saved(n, -1);
        n->pinned = 0;
        if (ember__dtr_on) ember__dtr_node_ran(n);
    }
    for (int i = 0; i < MAX_SAVED_IN; i++)
        if (n->sv_in[i]) {
            ember_tensor_release(n->sv_in[i]);
            n->sv_in[i] = NULL;
            ag_state()->saved--;
        }
    for (int k = 0; k < MAX_SAVED_OUT; k++)
        if (n->sv_out[k]) {
            ember_tensor_release(n->sv_out[k]);
            n->sv_out[k] = NULL;
            ag_state()->saved--;
        }
}

void ember__node_release_grads(ember_node *n)
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

void ember__node_free(ember_node *n)
{
    ember__node_release_saved(n);
    ember__node_release_grads(n);
    if (n->ctx_id > 0) push_freed_ctx(n->ctx_id);
    ag_state()->live_nodes--;
    bool small = n->nin <= SMALL_NIN && n->nout <= SMALL_NOUT;
    if (!small || !ember__freelist_put(&node_pool, &node_pool_len, 0, n, 65536)) free(n);
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

static void node_kill(ember_node *n)
{
    n->dead = 1;
    ember__node_release_saved(n);
    ember__node_release_grads(n);
    if (n->ctx_id > 0) {
        push_freed_ctx(n->ctx_id);
        n->ctx_id = 0;
    }
}

void ember__node_ref(ember_node *n)
{
    if (n) n->refs++;
}

void ember__node_unref(ember_node *n)
{
    if (!n || --n->refs > 0 || n->dead || keys[n->key].running || n->op == NODE_ACCUMULATE) return;
    if (!node_list_push(&kill_stack, &n_kill, &cap_kill, n)) return;   /* it lives until the recording ends */
    if (killing) return;
    killing = 1;
    while (n_kill > 0) {
        ember_node *d = kill_stack[--n_kill];
        if (d->dead) continue;
        for (int i = 0; i < d->nin; i++)
            if (d->next[i].node) ember__node_unref(d->next[i].node);   /* pushes, does not recurse */
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

/* ------------------------------------------------------------------ node inspection */
/* ember_node_name's and ember_node_label's answer (one buffer: static TLS is
   scarce when the library is loaded with dlopen) */
static _Thread_local char name_buf[128];
_Static_assert(2 * EMBER_NODE_NAME_MAX + sizeof " (Backward)" <= sizeof name_buf, "name_buf holds a label");

/* the op's or Function's own name, as written */
static const char *base_name(const ember_node *n)
{
    return n->op == NODE_CUSTOM ? n->custom_name : ember__ops[n->op].name;
}

/* "log_softmax" -> "LogSoftmaxBackward", written at p */
static void camel_name(const char *base, char *p)
{
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
}

const char *ember_node_name(const ember_node *n)
{
    if (!n) return "";
    if (n->op == NODE_ACCUMULATE || n->op == NODE_RETAIN) return "AccumulateGrad";
    camel_name(base_name(n), name_buf);
    return name_buf;
}

/* "log_softmax (LogSoftmaxBackward)": errors name a node by it */
const char *ember_node_label(const ember_node *n)
{
    if (!n) return "";
    if (n->op == NODE_ACCUMULATE || n->op == NODE_RETAIN) return "AccumulateGrad";
    const char *base = base_name(n);
    int k = snprintf(name_buf, sizeof name_buf, "%s (", base);
    camel_name(base, name_buf + k);
    strcat(name_buf, ")");
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
void ember_node_set_intercept(ember_node *n, int on)
{
    if (n) n->intercept = on != 0;
}

/* Thread exit: the node pools and stacks go (ember__free_thread_autograd). */
void ember__free_thread_nodes(void)
{
    ember__freelist_drain(&node_pool, &node_pool_len, 0);
    free(freed_ctx);
    free(kill_stack);
    freed_ctx = NULL;
    kill_stack = NULL;
    n_freed_ctx = cap_freed_ctx = 0;
    n_kill = cap_kill = 0;
}

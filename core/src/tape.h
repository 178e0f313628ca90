/* tape.h: the autograd engine's own state, shared by its three files:
   autograd.c (keys, tracking entries, recording, in-place writes), node.c
   (nodes: making, lifetime, inspection) and backward.c (the engine). All of
   it is per thread (ember.h, "Threads"). Nothing outside those files includes
   this; the op layer sees autograd through autograd.h, grad rules read nodes
   through node.h. */
#ifndef EMBER_TAPE_H
#define EMBER_TAPE_H

#include "autograd.h"
#include "node.h"

#include <stdlib.h>

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
    int run_depth;                    /* backward runs in progress (runs) */
    uint64_t stamp_counter;           /* orders record() and backward starts */
    int64_t live_nodes, saved, cache_hits, cache_misses;   /* ember_autograd_stats */
} ag_thread;

extern EMBER_TLS ag_thread *ember__agt;
ag_thread *ember__ag_state_new(void);
static inline ag_thread *ag_state(void)
{
    return EMBER_LIKELY(ember__agt != NULL) ? ember__agt : ember__ag_state_new();
}
#define keys (ag_state()->key_table)
#define recording_keys (ag_state()->recording)
#define run_stack (ag_state()->runs)
#define bwd_cache (ag_state()->cache)
#define override_rule (ag_state()->overrides)

static inline ag_key *key_at(int key)
{
    return key > 0 && key < MAX_KEYS && keys[key].in_use ? &keys[key] : NULL;
}

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

/* Appends n to a growable array of node pointers; false when out of memory. */
static inline bool node_list_push(ember_node ***list, int64_t *len, int64_t *cap, ember_node *n)
{
    if (*len == *cap) {
        int64_t c = *cap ? *cap * 2 : 64;
        ember_node **p = realloc(*list, (size_t)c * sizeof *p);
        if (!p) return false;
        *list = p;
        *cap = c;
    }
    (*list)[(*len)++] = n;
    return true;
}

/* per-thread settings and counters */
extern EMBER_TLS int ember__ag_intercept_all;   /* hooks: every node asks the caller */
extern EMBER_TLS int ember__ag_save_copies;     /* nodes keep copies (allow_mutation_on_saved_tensors) */
extern EMBER_TLS uint64_t ember__ag_next_node_id;
void ember__ag_changed(void);   /* moves ember_autograd_serial on */

/* autograd.c */
ag_entry *ember__ag_find_entry(const ember_tensor *t, int key);

/* node.c */
ember_node *ember__node_new(int op, int key, int nin, int nout);
void ember__node_free(ember_node *n);
void ember__node_ref(ember_node *n);
void ember__node_unref(ember_node *n);
void ember__node_meta_of(ag_meta_io *m, const ember_tensor *t);
void ember__node_pin_saved(ember_node *n, int delta);
void ember__node_release_saved(ember_node *n);
void ember__node_release_grads(ember_node *n);
void ember__free_thread_nodes(void);
/* backward.c */
void ember__free_thread_backward(void);

#endif

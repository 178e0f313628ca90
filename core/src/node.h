/* node.h: an autograd node as the engine builds it (autograd.c, node.c,
   backward.c) and the built-in rules (grad_rules.c) read it. Nodes are
   created, linked and freed only by the engine; everyone else reads them
   through the inline helpers at the end. */
#ifndef EMBER_NODE_H
#define EMBER_NODE_H

#include "ops/ops.h"

#include <string.h>

/* AccumulateGrad nodes end the graph at an attached tensor; a RETAIN node
   stands between an attached intermediate and its producer: it hands the
   tensor's gradient to the caller and passes it on unchanged. */
enum { NODE_ACCUMULATE = -1, NODE_CUSTOM = -2, NODE_RETAIN = -3 };

typedef struct ag_edge {
    ember_node *node;
    int output_nr;
} ag_edge;

typedef struct ag_meta_io {   /* what backward needs to know of an input or output */
    int8_t ndim, dtype;
    int device;
    int64_t shape[EMBER_MAX_DIMS];
} ag_meta_io;

#define MAX_SAVED_IN 3
#define MAX_SAVED_OUT 2

struct ember_node {
    int op;                  /* EMBER_OP_*, NODE_ACCUMULATE or NODE_CUSTOM */
    int key;
    int nin, nout;
    int rule_id;             /* > 0: a Lua rule */
    int ctx_id;
    int intercept;           /* hooks: ask the caller even for a built-in rule */
    int needed;              /* backward: on a path from a root to an attached tensor */
    int reached;
    int pending;             /* AccumulateGrad: producers still to run */
    int done;
    int copied;              /* saved copies (allow_mutation_on_saved_tensors) */
    int dead;                /* nothing refers to it any more: its saved tensors are gone */
    int pinned;              /* an open backward run still needs what it saved */
    int64_t refs;            /* live tracking entries and edges of other nodes that point here */
    uint64_t id;
    char custom_name[EMBER_NODE_NAME_MAX + 1];   /* a Function's name, copied */
    ember_attrs attrs;
    ag_edge *next;           /* [nin] */
    uint8_t *needs;          /* [nin] */
    ag_meta_io *in_meta;     /* [nin] */
    ag_meta_io *out_meta;    /* [nout] */
    ember_tensor **grads;    /* [nout] accumulated output grads */
    ember_tensor *sv_in[MAX_SAVED_IN];
    int64_t sv_in_version[MAX_SAVED_IN];
    ember_tensor *sv_out[MAX_SAVED_OUT];
    int64_t sv_out_version[MAX_SAVED_OUT];
    ember_tensor *leaf;      /* AccumulateGrad: the attached tensor (weak) */
};

/* ---- reading a node (what a grad rule needs) */
static inline const ember_attrs *ember__node_attrs(const ember_node *n) { return &n->attrs; }
static inline int ember__node_op(const ember_node *n) { return n->op; }
static inline int ember__node_needs(const ember_node *n, int i) { return n->needs[i]; }
static inline int ember__node_num_inputs(const ember_node *n) { return n->nin; }
static inline ember_tensor *ember__node_saved_in(const ember_node *n, int i) { return n->sv_in[i]; }
static inline ember_tensor *ember__node_saved_out(const ember_node *n, int k) { return n->sv_out[k]; }
static inline int ember__node_in_device(const ember_node *n, int i) { return n->in_meta[i].device; }
/* output k's shape into shape[]; returns its ndim */
static inline int ember__node_out_shape(const ember_node *n, int k, int64_t *shape)
{
    memcpy(shape, n->out_meta[k].shape, sizeof n->out_meta[k].shape);
    return n->out_meta[k].ndim;
}
/* input i's shape into shape[]; returns its ndim */
static inline int ember__node_in_shape(const ember_node *n, int i, int64_t *shape)
{
    memcpy(shape, n->in_meta[i].shape, sizeof n->in_meta[i].shape);
    return n->in_meta[i].ndim;
}

#endif

/* grad_rules.h: the built-in grad rules (grad_rules.c) and the node accessors
   they read (autograd.c). */
#ifndef EMBER_GRAD_RULES_H
#define EMBER_GRAD_RULES_H

#include "ops/ops.h"

/* What a node of `op` must keep, given which inputs need a gradient. */
unsigned ember__grad_save_mask(int op, const uint8_t *needs);
/* Runs the built-in rule: grad_in[i] gets a new reference for each input that
   needs a gradient (the engine sums it to the input's shape and dtype). */
int ember__grad_rule(const ember_node *n, ember_tensor *const *grad_out, ember_tensor **grad_in);

const ember_attrs *ember__node_attrs(const ember_node *n);
int ember__node_op(const ember_node *n);
int ember__node_needs(const ember_node *n, int i);
int ember__node_in_shape(const ember_node *n, int i, int64_t *shape);   /* returns ndim */
int ember__node_in_dtype(const ember_node *n, int i);
int ember__node_in_device(const ember_node *n, int i);
int ember__node_num_inputs(const ember_node *n);
int ember__node_out_shape(const ember_node *n, int k, int64_t *shape);
ember_tensor *ember__node_saved_in(const ember_node *n, int i);
ember_tensor *ember__node_saved_out(const ember_node *n, int k);

#endif

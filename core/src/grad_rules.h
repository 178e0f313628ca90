/* grad_rules.h: the built-in grad rules (grad_rules.c), which read nodes through node.h. */
#ifndef EMBER_GRAD_RULES_H
#define EMBER_GRAD_RULES_H

#include "ops/ops.h"

/* What a node of `op` must keep, given which inputs need a gradient. */
unsigned ember__grad_save_mask(int op, const uint8_t *needs);
/* Runs the built-in rule: grad_in[i] gets a new reference for each input that
   needs a gradient (the engine sums it to the input's shape and dtype). */
int ember__grad_rule(const ember_node *n, ember_tensor *const *grad_out, ember_tensor **grad_in);

#endif

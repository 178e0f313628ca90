/* grad_rules.h: the built-in grad rules (grad_rules.c), which read nodes through node.h. */
#ifndef EMBER_GRAD_RULES_H
#define EMBER_GRAD_RULES_H

#include "ops/ops.h"

/* Runs the built-in rule: grad_in[i] gets a new reference for each input that
   needs a gradient (the engine sums it to the input's shape and dtype). */
int ember__grad_rule(const ember_node *n, ember_tensor *const *grad_out, ember_tensor **grad_in);

#endif

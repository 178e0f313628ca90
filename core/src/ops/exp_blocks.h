/* exp_blocks.h: the float32 loops of exp, sigmoid and silu over blocks whose
   exp arguments all lie in (-87, 88) (exp_blocks.c), with ember__expf's bits.
   Loops of the iterator (ember__loop_fn): p[0] the output, p[1] the input. */
#ifndef EMBER_OPS_EXP_BLOCKS_H
#define EMBER_OPS_EXP_BLOCKS_H

#include "ops.h"

void ember__exp_blocks_f32(char **p, const int64_t *s, int64_t n, const void *ctx);
void ember__sigmoid_blocks_f32(char **p, const int64_t *s, int64_t n, const void *ctx);
void ember__silu_blocks_f32(char **p, const int64_t *s, int64_t n, const void *ctx);

#endif

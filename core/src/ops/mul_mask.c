/* mul_mask.c: a float tensor times a bool mask without the float copy of the
   mask (see ember__mul_by_mask). */
#include "ops.h"

/* x * mask, a float32 or float64 x and a bool mask (dropout's product and its
   gradient g * mask): the mask read as 0 or 1 in place, without the float
   copy of it that the promotion makes (2 MiB beside the product for the
   transformer block's 512K-element dropouts: what stopped its DTR budget of
   P/3, docs/dtr.md). x * 1 and x * 0 in the operands' order, as the copy
   gave them: the same bits, NaN and signed zeros included. ctx: whether
   the mask is the first operand. */
#define MASK_LOOP(NAME, T)                                                                 \
    EMBER_SIMD static void NAME(char **p, const int64_t *s, int64_t n, const void *ctx)    \
    {                                                                                      \
        const int first = *(const int *)ctx;                                               \
        const char *px = p[first ? 2 : 1], *pm = p[first ? 1 : 2];                         \
        const int64_t sx = s[first ? 2 : 1], sm = s[first ? 1 : 2];                        \
        if (s[0] == (int64_t)sizeof(T) && sx == (int64_t)sizeof(T) && sm == 1) {           \
            T *restrict o = (T *)p[0];                                                     \
            const T *restrict x = (const T *)px;                                           \
            const uint8_t *restrict m = (const uint8_t *)pm;                               \
            if (first)                                                                     \
                for (int64_t i = 0; i < n; i++) o[i] = (T)(m[i] != 0) * x[i];              \
            else                                                                           \
                for (int64_t i = 0; i < n; i++) o[i] = x[i] * (T)(m[i] != 0);              \
            return;                                                                        \
        }                                                                                  \
        for (int64_t i = 0; i < n; i++) {                                                  \
            T x = *(const T *)(px + i * sx), w = (T)(*(const uint8_t *)(pm + i * sm) != 0); \
            *(T *)(p[0] + i * s[0]) = first ? w * x : x * w;                               \
        }                                                                                  \
    }
MASK_LOOP(mul_mask_f32, float)
MASK_LOOP(mul_mask_f64, double)

/* mul of a float operand (of the compute dtype ct) by a bool one: true and
   *out set when it ran here */
bool ember__mul_by_mask(int op, int ct, ember_tensor *a, ember_tensor *b, int nd, const int64_t *shape, int *rc,
                        ember_tensor **out)
{
    if (op != EMBER_OP_MUL || (ct != EMBER_FLOAT32 && ct != EMBER_FLOAT64)) return false;
    int first = a->dtype == EMBER_BOOL;
    ember_tensor *x = first ? b : a, *m = first ? a : b;
    if (m->dtype != EMBER_BOOL || x->dtype != ct) return false;
    ember_tensor *ins[2] = {a, b}, *o = NULL;
    *rc = ember__new_result(nd, shape, ct, 2, ins, &o);
    if (*rc < 0) return true;
    ember_iter it;
    ember_tensor *ts[3] = {o, a, b};
    ember__iter_init(&it, 3, ts);
    ember__iter_run(&it, ct == EMBER_FLOAT32 ? mul_mask_f32 : mul_mask_f64, &first);
    *out = o;
    return true;
}

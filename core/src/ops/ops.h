/* ops.h: the op layer inside core: the op enum and info table built from
   ops.def, op attributes, the dispatch funnel every public op goes through,
   and the elementwise iterator the CPU kernels share. */
#ifndef EMBER_OPS_H
#define EMBER_OPS_H

#include "../internal.h"

#include <math.h>

enum ember_op {
#define OP(E, ...) EMBER_OP_##E,
#include "ops.def"
    EMBER_OP_COUNT
};

/* What backward keeps (ops.def's last column): the low byte always, the
   second byte when input 0 needs a gradient, the third when input 1 does. */
enum {
    SAVE_NONE = 0,
    SAVE_IN0 = 1 << 0,
    SAVE_IN1 = 1 << 1,
    SAVE_IN2 = 1 << 2,
    SAVE_OUT0 = 1 << 4,
    SAVE_OUT1 = 1 << 5
};
#define IF_GRAD0(m) ((m) << 8)
#define IF_GRAD1(m) ((m) << 16)

/* ops.def's flags */
enum {
    OPF_INPLACE = 1 << 0,     /* has an in-place form <name>_ */
    OPF_KEEPS_INT = 1 << 1,   /* unary: integer inputs keep their dtype */
    OPF_BOOL_OUT = 1 << 2,    /* the result is bool */
    OPF_LUA = 1 << 3          /* a generated Lua wrapper (BINARY and UNARY lines) */
};

/* Op attributes, stored by value in autograd nodes. The layout per op is
   written beside each forward. */
#define EMBER_MAX_ATTRS 18
typedef struct ember_attrs {
    int64_t i[EMBER_MAX_ATTRS];
    double f[2];
} ember_attrs;

typedef int (*ember__fwd_fn)(int op, int nin, ember_tensor *const *in, const ember_attrs *at,
                             ember_tensor **out);

typedef struct ember__op_info {
    const char *name;
    int nin;      /* -1: a list */
    int nout;
    unsigned flags;
    unsigned save;   /* SAVE_* with IF_GRAD0/IF_GRAD1 parts */
    ember__fwd_fn fwd;
} ember__op_info;

extern const ember__op_info ember__ops[EMBER_OP_COUNT];

/* What a node of `op` keeps, given which of its inputs need a gradient. */
static inline unsigned ember__op_save(int op, const uint8_t *needs)
{
    unsigned s = ember__ops[op].save;
    return (s & 0xff) | (needs[0] ? (s >> 8) & 0xff : 0) | ((s >> 16) && needs[1] ? s >> 16 : 0);
}
/* Whether a node of `op` may keep one of its outputs. */
static inline bool ember__op_may_save_output(int op)
{
    unsigned s = ember__ops[op].save;
    return ((s | s >> 8 | s >> 16) & (SAVE_OUT0 | SAVE_OUT1)) != 0;
}

/* Runs op `op` on the inputs (checked for NULL and for one shared device),
   then records it for autograd when an input is tracked. out[] gets nout new
   references, or NULLs on failure. */
int ember__dispatch(int op, int nin, ember_tensor *const *in, const ember_attrs *at,
                    ember_tensor **out);
/* Same for ops that need no recording (comparisons and other non-differentiable
   results are still dispatched normally; this is for internal helpers). */
int ember__run_nograd(int op, int nin, ember_tensor *const *in, const ember_attrs *at,
                      ember_tensor **out);

/* forwards, by family */
#define OP(E, n, ni, no, fwd, ...) \
    int fwd(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);
#include "ops.def"

/* ------------------------------------------------------------------ regions (shape.c)
   A view's geometry over its root's contiguous layout (attrs: i[0] ndim, i[1]
   offset, i[2..] shape, i[2 + EMBER_MAX_DIMS..] strides); fails for a root
   that is not contiguous. */
int ember__geometry_of(const ember_tensor *view, const ember_tensor *root, ember_attrs *at);
int ember__as_strided(ember_tensor *x, const ember_attrs *geometry, ember_tensor **out);
int ember__as_strided_scatter(ember_tensor *x, ember_tensor *src, const ember_attrs *geometry, ember_tensor **out);

/* ------------------------------------------------------------------ elementwise.c
   what its in-place forms (inplace.c) share with it */
/* The dtype a binary op computes in (*compute), and the dtype of its result. */
int ember__binary_types(int op, ember_tensor *a, ember_tensor *b, int *compute);
/* Fails for a negative exponent of an integer pow, as PyTorch does. */
int ember__no_negative_exponent(const ember_tensor *e);
/* Runs a binary op's kernel into o (the broadcast shape); a and b have dtype dt. */
void ember__run_binary(int op, int dt, ember_tensor *o, ember_tensor *a, ember_tensor *b);
/* Runs a unary op's kernel from a into o (same shape). */
void ember__run_unary(int op, const ember_attrs *at, ember_tensor *o, ember_tensor *a);

/* ------------------------------------------------------------------ recurrent cells (rnn.c)
   The cells' first-order backward as kernels, not ops, for their rules when
   no recording would see the rules' ops (so they need not be
   differentiable). lstm: in = (g_h, g_c, gi, gh, c, c'), the gradients of h
   and c' and what the node keeps -> out = (da (N, 4H), the gradient of gi and
   of gh; dc (N, H)). gru: in = (g, gi, gh, h) -> out = (dgi, dgh (N, 3H),
   dh (N, H)). */
int ember__lstm_cell_backward(ember_tensor *const *in, ember_tensor **out);
int ember__gru_cell_backward(ember_tensor *const *in, ember_tensor **out);

/* ------------------------------------------------------------------ broadcasting */
int ember__broadcast_shape(const char *op, int n, ember_tensor *const *ts, int *ndim,
                           int64_t *shape);

/* ------------------------------------------------------------------ the CPU iterator
   Walks up to 4 operands (out first) of one broadcast shape, with byte strides
   (0 on broadcast dims). Dims are coalesced so contiguous data is one flat loop;
   the innermost loop is handed to a kernel. */
#define ITER_MAX 4
typedef struct ember_iter {
    int ndim;
    int ntensors;
    int64_t numel;
    int64_t shape[EMBER_MAX_DIMS];
    int64_t strides[ITER_MAX][EMBER_MAX_DIMS];   /* bytes; [t][d], innermost d = ndim - 1 */
    char *ptr[ITER_MAX];
} ember_iter;

/* kernel over n elements: ptrs[k] advance by strides[k] bytes */
typedef void (*ember__loop_fn)(char **ptrs, const int64_t *strides, int64_t n, const void *ctx);

/* out must already have the broadcast shape; inputs broadcast to it. */
void ember__iter_init(ember_iter *it, int n, ember_tensor *const *ts);
/* Runs the loop over the whole iteration space, in parallel when large. */
void ember__iter_run(ember_iter *it, ember__loop_fn fn, const void *ctx);
/* Strided copy with dtype conversion: dst and src of one shape (src may broadcast). */
int ember__copy_kernel(ember_tensor *dst, const ember_tensor *src);
/* Input `t` converted to dtype (a new reference; t itself when it already has it). */
int ember__as_dtype(ember_tensor *t, int dtype, ember_tensor **out);
/* A contiguous CPU copy of t in dtype, made inside a forward (not an op of its
   own): a new reference, t itself when it already is one. */
int ember__contiguous_as(ember_tensor *t, int dtype, ember_tensor **out);
/* Normalises a dims list into a bitmask; fails on out-of-range or repeated dims. */
int ember__dims_mask(const char *op, const ember_tensor *t, int ndims, const int *dims,
                     unsigned *mask);

/* the logistic function for kernels (sigmoid, silu, the recurrent cells) */
static inline float sigmoidf_(float x) { return 1.0f / (1.0f + ember__expf(-x)); }
static inline double sigmoid_(double x) { return 1.0 / (1.0 + exp(-x)); }

#endif /* EMBER_OPS_H */

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
    OPF_KEEPS_INT = 1 << 1,   /* integer inputs keep their dtype (BINARY and COMPARE lines, some UNARY ones) */
    OPF_BOOL_OUT = 1 << 2,    /* the result is bool */
    OPF_LUA = 1 << 3,         /* a generated Lua wrapper (BINARY and UNARY lines) */
    OPF_ANY_DEVICE = 1 << 4   /* the forward makes views, runs other ops or copies: any device runs it */
};

/* Op attributes, stored by value in autograd nodes. The layout per op is
   written beside each forward. */
#define EMBER_MAX_ATTRS 18
/* gather, index_select, scatter_add and index_add: the base their indices
   count from (0, or 1 for Lua's) */
#define EMBER_INDEX_BASE_ATTR (EMBER_MAX_ATTRS - 1)
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

/* Runs op on the host for inputs on a device: copies them to the CPU, runs
   the op's CPU forward there (not recorded) and copies its nout results
   back (scan_sort.c). */
int ember__on_host(int op, int nin, ember_tensor *const *in, const ember_attrs *at, int nout, ember_tensor **out);
/* The result of a CPU kernel that computes in dtype cdt (prod.c): *out of
   dtype rdt and *work to write, *out itself (one more reference) when the
   dtypes agree, else a new tensor of cdt. ember__kernel_result_end copies
   work into *out (when rc >= 0), releases work and `in` (the kernel's
   input copy, may be NULL), and *out on failure; it returns rc. */
int ember__kernel_result(int nd, const int64_t *shape, int rdt, int cdt, ember_tensor **out, ember_tensor **work);
int ember__kernel_result_end(int rc, ember_tensor *work, ember_tensor *in, ember_tensor **out);

/* forwards, by family */
#define OP(E, n, ni, no, fwd, ...) \
    int fwd(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out);
#include "ops.def"

/* A differentiable view of a with the given geometry of a's memory: it holds
   a's root (see ember_tensor.base). shape.c */
int ember__view_of(ember_tensor *a, int nd, const int64_t *shape, const int64_t *strides, int64_t offset,
                   ember_tensor **out);

/* ------------------------------------------------------------------ regions (strided.c)
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
/* mul_mask.c: fwd_binary's mul of a float operand (of compute dtype ct) by a
   bool one, the mask read in place; true (and *out, or *rc on failure) when
   it ran, false when this is not that case */
bool ember__mul_by_mask(int op, int ct, ember_tensor *a, ember_tensor *b, int nd, const int64_t *shape, int *rc,
                        ember_tensor **out);
/* clamp's bounds (attrs i[0..1] has_lo/has_hi, f[0..1]) on an integer tensor:
   whole numbers its dtype holds, else a failure naming op, the bound and the
   dtype (the result would silently differ from the bound asked for) */
int ember__clamp_bounds(const char *op, const ember_tensor *a, const ember_attrs *at);
/* Fails for a negative exponent of an integer pow, as PyTorch does. */
int ember__no_negative_exponent(const ember_tensor *e);
/* Runs a binary op's kernel into o (the broadcast shape); a and b have dtype
   dt. Fails for an op or dtype with no kernel. */
int ember__run_binary(int op, int dt, ember_tensor *o, ember_tensor *a, ember_tensor *b);
/* Runs a unary op's kernel from a into o (same shape); fails for an op that
   is not one (a UNARY line, gelu, clamp). */
int ember__run_unary(int op, const ember_attrs *at, ember_tensor *o, ember_tensor *a);

/* ------------------------------------------------------------------ recurrent cells (rnn.c)
   The cells' first-order backward as kernels, not ops, for their rules when
   no recording would see the rules' ops (so they need not be
   differentiable). lstm: in = (g_h, g_c, gi, gh, c, c'), the gradients of h
   and c' and what the node keeps -> out = (da (N, 4H), the gradient of gi and
   of gh; dc (N, H)). gru: in = (g, gi, gh, h) -> out = (dgi, dgh (N, 3H),
   dh (N, H)). */
int ember__lstm_cell_backward(ember_tensor *const *in, ember_tensor **out);
int ember__gru_cell_backward(ember_tensor *const *in, ember_tensor **out);

/* ------------------------------------------------------------------ matmul (matmul.c)
   matmul's operands as batches of matrices, for every device: 1-D operands
   made 2-D views (a row vector in front, a column vector behind), the shapes
   checked, the batch dims broadcast. */
typedef struct ember__matmul_plan {
    ember_tensor *a, *b;   /* (..., M, K) and (..., K, N) views of the inputs: new references */
    int64_t M, N, K;
    int nbatch;            /* the broadcast batch dims */
    int64_t bshape[EMBER_MAX_DIMS];
    int ond;               /* the result's shape: batch dims, then M and N unless from a 1-D operand */
    int64_t oshape[EMBER_MAX_DIMS];
    int dtype;             /* the result's dtype */
} ember__matmul_plan;
/* Fails (holding nothing) on shapes that cannot be multiplied. */
int ember__matmul_plan_make(ember_tensor *const *in, ember__matmul_plan *p);
void ember__matmul_plan_release(ember__matmul_plan *p);

/* ------------------------------------------------------------------ products (gemm.c)
   A 2-D operand as BLAS sees it: base pointer, read transposed or not, leading dim. */
typedef struct ember__mat {
    const char *p;
    bool trans;
    int64_t ld;
} ember__mat;
/* C = op(A) op(B) + beta C, C contiguous (M, N), in float32 or float64: the
   one entry for matmul's and conv2d's products, with the one policy (skinny
   loops, blocks fixed by the shape, oneDNN or OpenBLAS on one thread each)
   gemm.c describes. */
void ember__gemm_run(int dt, int64_t M, int64_t N, int64_t K, const ember__mat *a, const ember__mat *b,
                     double beta, char *c);

/* Whether oneDNN is built in, switched on and faster than OpenBLAS at a
   float32 product of this shape (matmul_dnnl.c). */
bool ember__dnnl_sgemm_wins(int64_t M, int64_t N, int64_t K);
/* C = op(A) op(B) + beta C in float32 through oneDNN on the calling thread
   (row-major, op a transpose where ta / tb); false where oneDNN failed. */
bool ember__dnnl_sgemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc);
/* The same product by gemm_skinny.c's AVX-512 loops at the two skinny
   shape classes they win (x w^T with 10 or fewer columns; g^T x with 12 or
   fewer rows); false, having done nothing, elsewhere. */
bool ember__sgemm_skinny(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                         const float *B, int64_t ldb, float beta, float *C, int64_t ldc);

/* The element offsets of the matrices of batch index idx in a and b, two
   operands of a plan (or copies of them of the same shapes). */
static inline void ember__matmul_offsets(int nbatch, const int64_t *idx, const ember_tensor *a,
                                         const ember_tensor *b, int64_t *aoff, int64_t *boff)
{
    int na = a->ndim - 2, nb = b->ndim - 2;
    *aoff = a->offset;
    *boff = b->offset;
    for (int d = 0; d < nbatch; d++) {
        int da = d - (nbatch - na), db = d - (nbatch - nb);
        if (da >= 0 && a->shape[da] != 1) *aoff += idx[d] * a->strides[da];
        if (db >= 0 && b->shape[db] != 1) *boff += idx[d] * b->strides[db];
    }
}

/* Advances idx, a row-major index over shape (n dims), by one. */
static inline void ember__index_next(int n, const int64_t *shape, int64_t *idx)
{
    for (int d = n - 1; d >= 0; d--) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
    }
}

/* ------------------------------------------------------------------ reductions (reduce.c)
   What SUM, MEAN, VAR, NORM, LOGSUMEXP, AMAX_ALL, AMIN_ALL, MAX_DIM, MIN_DIM,
   ARGMAX and ARGMIN produce from their input and attrs, for every device. */
typedef struct ember__reduce_plan {
    unsigned mask;          /* the reduced dims */
    int keepdim, unbiased;  /* unbiased: VAR's */
    double p;               /* NORM's order */
    int ndim;               /* the result's shape and dtype */
    int64_t shape[EMBER_MAX_DIMS];
    int dtype;
    int64_t len;            /* elements reduced into each result */
    double empty;           /* each result when len is 0 */
} ember__reduce_plan;
/* Fails on a max or min of an empty tensor, and (max_dim, min_dim, argmax,
   argmin, whose plan gives the values' dtype) of an empty dim. */
int ember__reduce_plan_make(int op, const ember_tensor *a, const ember_attrs *at, ember__reduce_plan *p);

/* ------------------------------------------------------------------ conv2d and pooling (conv.c, pool.c)
   The window geometry of a convolution or a pooling op, checked from its
   inputs and attrs, for every device. N batch, C channels, H x W spatial. */
enum { NHWC_ACT = 1, NHWC_WEIGHT = 2 };   /* ember__conv_geom's nhwc bits */
typedef struct ember__conv_geom {
    int64_t N, C, H, W;       /* input */
    int64_t O, kH, kW;        /* weight (O, C / G, kH, kW) */
    int64_t G;                /* groups */
    int64_t sh, sw, ph, pw, dh, dw;
    int64_t Ho, Wo;
    int64_t Cg, Og, K;        /* per group: channels in and out, K = Cg kH kW */
    int64_t nhwc;             /* NHWC_ACT: x, y and their gradients channels_last; NHWC_WEIGHT: the weight
                                 (or its gradient) (O, kH, kW, C/G) */
} ember__conv_geom;
/* conv2d, conv2d_backward_input or conv2d_backward_weight: the geometry and
   the shape of the op's result; fails as the op does on bad operands. */
int ember__conv_plan_make(int op, ember_tensor *const *in, const ember_attrs *at, ember__conv_geom *g,
                          int64_t *rshape);

typedef struct ember__pool_geom {
    int64_t N, C, H, W, kh, kw, sh, sw, ph, pw, Ho, Wo;
} ember__pool_geom;
/* max_pool2d, avg_pool2d or their backward ops: the geometry and the shape of
   the (first) result. max_pool2d_backward's indices name input positions, so
   its plan has no window (kh .. pw are 0). */
int ember__pool_plan_make(int op, ember_tensor *const *in, const ember_attrs *at, ember__pool_geom *p,
                          int64_t *rshape);

/* ------------------------------------------------------------------ broadcasting */
/* batch_norm's and its adjoint's formulas as ember's public ops (ops/norm.c),
   recorded where a recording sees them: the forwards' fallback (with grad
   off) and batch_norm's rule where a higher-order recording is on */
int ember__batch_norm_composed(ember_tensor *x, ember_tensor *w, ember_tensor *b, double eps, ember_tensor **y,
                               ember_tensor **stats);
int ember__batch_norm_backward_composed(ember_tensor *g, ember_tensor *x, ember_tensor *w, ember_tensor *stats,
                                        double eps, ember_tensor **gx, ember_tensor **gwb);
/* cross_entropy's adjoint as g (a p - b) with p = softmax(x) (ops/cross_entropy.c):
   the constant coefficients a (M, 1) and b (M, C), on x's device */
int ember__cross_entropy_coefs(ember_tensor *x, ember_tensor *lab, ember_tensor *w, const ember_attrs *attr,
                               ember_tensor **a, ember_tensor **b);

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
    int out_size;   /* the output's element size in bytes */
    int64_t numel;
    int64_t shape[EMBER_MAX_DIMS];
    int64_t strides[ITER_MAX][EMBER_MAX_DIMS];   /* bytes; [t][d], innermost d = ndim - 1 */
    char *ptr[ITER_MAX];
} ember_iter;

/* kernel over n elements: ptrs[k] advance by strides[k] bytes */
typedef void (*ember__loop_fn)(char **ptrs, const int64_t *strides, int64_t n, const void *ctx);

/* The strides PyTorch's TensorIterator gives a new result of this shape
   computed from inputs ins (n <= ITER_MAX): contiguous when they all are,
   their layout when they share one (channels-last, or dense with equal
   strides), otherwise dense in the order of their strides. */
void ember__result_strides(int nd, const int64_t *shape, int n, ember_tensor *const *ins, int64_t *strides);
/* A new CPU tensor laid out by ember__result_strides. */
int ember__new_result(int nd, const int64_t *shape, int dtype, int n, ember_tensor *const *ins, ember_tensor **out);
/* PyTorch's is_non_overlapping_and_dense. */
bool ember__dense(const ember_tensor *t);
/* sgd_step_'s checks of its operands, and its update of elements [b, e) of
   their memory (optim.c; a plan runs several updates as one job with them,
   plan/updates.c) */
struct ember__sgd_args;
int ember__sgd_check(ember_tensor *p, ember_tensor *g, ember_tensor *buf);
void ember__sgd_range(ember_tensor *p, const ember_tensor *g, ember_tensor *buf, const struct ember__sgd_args *a,
                      int64_t b, int64_t e);
/* PyTorch's is_contiguous(memory_format = channels_last): t is 4-D with the
   strides of a row-major (N, H, W, C), size-1 dims skipped (nhwc.c) */
bool ember__nhwc_dense(const ember_tensor *t);
/* out must already have the broadcast shape; inputs broadcast to it. Dims
   are walked in the order of the operands' strides (the output's first), so
   the innermost loop is unit-stride where an operand allows it. */
void ember__iter_init(ember_iter *it, int n, ember_tensor *const *ts);
/* Runs the loop over the whole iteration space, in parallel when large. */
void ember__iter_run(ember_iter *it, ember__loop_fn fn, const void *ctx);
/* Fails naming op unless idx is an int64 or int32 tensor (index.c). */
int ember__check_index(const char *op, const ember_tensor *idx);
/* Non-temporal stores (iter.c): an op that streams more than the
   last-level cache holds (ember__stream_worth of the bytes it reads and
   writes) gains nothing from leaving its result in the cache, which what it
   reads later evicts, and saves the read of each output line before its
   write. ember__stream_copy copies nb bytes from an L1 buffer to dst, with
   non-temporal stores where dst's 16-byte units allow (x86-64; plain copies
   elsewhere); a task ends its streamed writes with ember__stream_fence. */
bool ember__stream_worth(int64_t bytes);
void ember__stream_copy(char *dst, const char *buf, size_t nb);
void ember__stream_fence(void);
/* Strided copy with dtype conversion: dst and src of one shape (src may broadcast). */
int ember__copy_kernel(ember_tensor *dst, const ember_tensor *src);
/* Input `t` converted to dtype (a new reference; t itself when it already has it). */
int ember__as_dtype(ember_tensor *t, int dtype, ember_tensor **out);
/* A contiguous copy of t in dtype on t's device, made inside a forward (not
   an op of its own): a new reference, t itself when it already is one. */
int ember__contiguous_as(ember_tensor *t, int dtype, ember_tensor **out);
/* Fails naming op unless 0 <= dim < a's ndim + extra (a NULL a fails too). */
int ember__check_dim(const char *op, const ember_tensor *a, int dim, int extra);
/* Normalises a dims list into a bitmask; fails on out-of-range or repeated dims. */
int ember__dims_mask(const char *op, const ember_tensor *t, int ndims, const int *dims,
                     unsigned *mask);

/* the ops of fwd_unary, which both devices' elementwise kernels compute:
   ops.def's UNARY lines, gelu and clamp */
static inline bool ember__is_unary_op(int op)
{
    switch (op) {
#define OP(...)
#define BINARY(...)
#define UNARY(E, ...) case EMBER_OP_##E:
#include "ops.def"
    case EMBER_OP_GELU: case EMBER_OP_CLAMP:
        return true;
    default: return false;
    }
}

/* the logistic function for kernels (sigmoid, silu, the recurrent cells) */
EMBER_INLINE float sigmoidf_(float x) { return 1.0f / (1.0f + ember__expf(-x)); }
EMBER_INLINE double sigmoid_(double x) { return 1.0 / (1.0 + exp(-x)); }

#endif /* EMBER_OPS_H */

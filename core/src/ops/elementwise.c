/* elementwise.c: binary, unary, where, clamp and conversions on the CPU (their
   in-place forms: inplace.c). Typed loops for float32/float64/int32/int64/
   uint8 (with fast paths for contiguous and scalar operands the compiler
   vectorises); float16, bfloat16 and bool go through a generic loop that
   computes in double and rounds once on store. */
#include "ops.h"
#include "../backend.h"
#include "../polygamma.h"
#include "../formulas.h"
#include "exp_blocks.h"

#include <math.h>
#include <string.h>

/* ------------------------------------------------------------------ binary kernels
   Made of ops.def's BINARY, BINARY_FLOAT and COMPARE lines: each line's
   expressions of x and y become its typed loops here and its device kernels
   in cuda/kernels/elementwise.h. EXPR reads x and y of type T (and U, T's
   unsigned twin, for the integer forms). The three branches give the
   vectoriser unit-stride loops for the common layouts. */
/* what every typed loop declares: T, U (T's unsigned twin) and T's size z */
#define LOOP_TYPES(TY, UT)                                                                 \
    typedef TY T;                                                                          \
    typedef UT U __attribute__((unused));                                                  \
    const int64_t z = (int64_t)sizeof(T)

#define BIN_LOOP(NAME, TY, UT, EXPR)                                                       \
    EMBER_SIMD static void NAME(char **p, const int64_t *s, int64_t n, const void *ctx)    \
    {                                                                                      \
        LOOP_TYPES(TY, UT);                                                                \
        EMBER_UNUSED(ctx);                                                                 \
        if (s[0] == z && s[1] == z && s[2] == z) {                                         \
            T *restrict o = (T *)p[0];                                                     \
            const T *restrict a = (const T *)p[1], *restrict b = (const T *)p[2];          \
            for (int64_t i = 0; i < n; i++) {                                              \
                T x = a[i], y = b[i];                                                      \
                o[i] = (EXPR);                                                             \
            }                                                                              \
        } else if (s[0] == z && s[1] == z && s[2] == 0) {                                  \
            T *restrict o = (T *)p[0];                                                     \
            const T *restrict a = (const T *)p[1];                                         \
            const T y = *(const T *)p[2];                                                  \
            for (int64_t i = 0; i < n; i++) {                                              \
                T x = a[i];                                                                \
                o[i] = (EXPR);                                                             \
            }                                                                              \
        } else if (s[0] == z && s[1] == 0 && s[2] == z) {                                  \
            T *restrict o = (T *)p[0];                                                     \
            const T x = *(const T *)p[1];                                                  \
            const T *restrict b = (const T *)p[2];                                         \
            for (int64_t i = 0; i < n; i++) {                                              \
                T y = b[i];                                                                \
                o[i] = (EXPR);                                                             \
            }                                                                              \
        } else {                                                                           \
            for (int64_t i = 0; i < n; i++) {                                              \
                T x = *(const T *)(p[1] + i * s[1]), y = *(const T *)(p[2] + i * s[2]);    \
                *(T *)(p[0] + i * s[0]) = (EXPR);                                          \
            }                                                                              \
        }                                                                                  \
    }

#define CMP_LOOP(NAME, T, EXPR)                                                            \
    EMBER_SIMD static void NAME(char **p, const int64_t *s, int64_t n, const void *ctx)    \
    {                                                                                      \
        EMBER_UNUSED(ctx);                                                                 \
        const int64_t z = (int64_t)sizeof(T);                                              \
        if (s[0] == 1 && s[1] == z && (s[2] == z || s[2] == 0)) {                          \
            uint8_t *restrict o = (uint8_t *)p[0];                                         \
            const T *restrict a = (const T *)p[1];                                         \
            if (s[2] == 0) {                                                               \
                const T y = *(const T *)p[2];                                              \
                for (int64_t i = 0; i < n; i++) {                                          \
                    T x = a[i];                                                            \
                    o[i] = (uint8_t)(EXPR);                                                \
                }                                                                          \
            } else {                                                                       \
                const T *restrict b = (const T *)p[2];                                     \
                for (int64_t i = 0; i < n; i++) {                                          \
                    T x = a[i], y = b[i];                                                  \
                    o[i] = (uint8_t)(EXPR);                                                \
                }                                                                          \
            }                                                                              \
            return;                                                                        \
        }                                                                                  \
        for (int64_t i = 0; i < n; i++) {                                                  \
            T x = *(const T *)(p[1] + i * s[1]), y = *(const T *)(p[2] + i * s[2]);        \
            *(uint8_t *)(p[0] + i * s[0]) = (uint8_t)(EXPR);                               \
        }                                                                                  \
    }

/* float16, bfloat16 (in place: fwd_binary widens them) and bool, through
   double, rounded once on store (bool arithmetic is logical: the store
   makes any nonzero true); ctx is the dtype */
#define GEN_LOOP(NAME, EXPR, OUT_BOOL)                                                     \
    static void NAME(char **p, const int64_t *s, int64_t n, const void *ctx)               \
    {                                                                                      \
        int dt = *(const int *)ctx, odt = (OUT_BOOL) ? EMBER_BOOL : dt;                    \
        for (int64_t i = 0; i < n; i++) {                                                  \
            double x = ember__load(p[1] + i * s[1], dt), y = ember__load(p[2] + i * s[2], dt); \
            ember__store(p[0] + i * s[0], odt, (double)(EXPR));                            \
        }                                                                                  \
    }

#define FLOAT_LOOPS(E, n, flags, F32, F64)                                                 \
    BIN_LOOP(n##_f32, float, float, F32)                                                   \
    BIN_LOOP(n##_f64, double, double, F64)                                                 \
    GEN_LOOP(n##_gen, F64, 0)
#define OP(...)
#define UNARY(...)
#define BINARY(E, n, grad, flags, save, F32, F64, INT)                                     \
    _Static_assert((flags) & OPF_KEEPS_INT, #n ": a BINARY line keeps integers (else BINARY_FLOAT)"); \
    FLOAT_LOOPS(E, n, flags, F32, F64)                                                     \
    BIN_LOOP(n##_i32, int32_t, uint32_t, INT)                                              \
    BIN_LOOP(n##_i64, int64_t, uint64_t, INT)                                              \
    BIN_LOOP(n##_u8, uint8_t, uint8_t, INT)
#define BINARY_FLOAT(E, n, grad, flags, save, F32, F64)                                    \
    _Static_assert(!((flags) & OPF_KEEPS_INT), #n ": a BINARY_FLOAT line has no integer form"); \
    FLOAT_LOOPS(E, n, flags, F32, F64)
#define COMPARE(E, n, EXPR)                                                                \
    CMP_LOOP(n##_f32, float, EXPR)                                                         \
    CMP_LOOP(n##_f64, double, EXPR)                                                        \
    CMP_LOOP(n##_i32, int32_t, EXPR)                                                       \
    CMP_LOOP(n##_i64, int64_t, EXPR)                                                       \
    CMP_LOOP(n##_u8, uint8_t, EXPR)                                                        \
    GEN_LOOP(n##_gen, EXPR, 1)
#include "ops.def"
/* x ^ 2, the common power (squared errors, norms): one multiply, which is what
   pow rounds to as well (ember__powf), instead of a call to pow per element */
BIN_LOOP(square_f32, float, float, ((void)y, x * x))
BIN_LOOP(square_f64, double, double, ((void)y, x * x))

static bool is_cmp(int op) { return ember__ops[op].flags & OPF_BOOL_OUT; }

/* the loop of one line for dtype dt (NULL: none; the integer forms are NULL
   for a BINARY_FLOAT line) */
static ember__loop_fn pick(int dt, ember__loop_fn f32, ember__loop_fn f64, ember__loop_fn i32, ember__loop_fn i64,
                           ember__loop_fn u8, ember__loop_fn gen)
{
    switch (dt) {
    case EMBER_FLOAT32: return f32;
    case EMBER_FLOAT64: return f64;
    case EMBER_INT32: return i32;
    case EMBER_INT64: return i64;
    case EMBER_UINT8: return u8;
    case EMBER_FLOAT16: case EMBER_BFLOAT16: case EMBER_BOOL: return gen;
    default: return NULL;
    }
}

/* the kernel for op on operands of dtype dt, NULL where there is none; b
   (the second operand) picks a faster kernel for some values, as x ^ 2 */
static ember__loop_fn binary_kernel(int op, int dt, const ember_tensor *b)
{
    if (op == EMBER_OP_POW && b->numel == 1 && (dt == EMBER_FLOAT32 || dt == EMBER_FLOAT64) &&
        ember__load(ember__ptr(b), dt) == 2.0)
        return dt == EMBER_FLOAT32 ? square_f32 : square_f64;
    switch (op) {
#define OP(...)
#define UNARY(...)
#define BINARY(E, n, ...) case EMBER_OP_##E: return pick(dt, n##_f32, n##_f64, n##_i32, n##_i64, n##_u8, n##_gen);
#define BINARY_FLOAT(E, n, ...) case EMBER_OP_##E: return pick(dt, n##_f32, n##_f64, NULL, NULL, NULL, n##_gen);
#define COMPARE(E, n, ...) case EMBER_OP_##E: return pick(dt, n##_f32, n##_f64, n##_i32, n##_i64, n##_u8, n##_gen);
#include "ops.def"
    default: return NULL;
    }
}

/* Runs a binary kernel into an output of the broadcast shape; `a` and `b`
   already have dtype dt. Fails for an op or dtype with no kernel (a
   fwd_binary that let one through). */
int ember__run_binary(int op, int dt, ember_tensor *o, ember_tensor *a, ember_tensor *b)
{
    ember__loop_fn fn = binary_kernel(op, dt, b);
    if (!fn)
        return ember__fail(EMBER_ERR_UNSUPPORTED, "%s: no CPU kernel for dtype %s", ember__ops[op].name,
                           ember_dtype_name(dt));
    ember_iter it;
    ember_tensor *ts[3] = {o, a, b};
    ember__iter_init(&it, 3, ts);
    ember__iter_run(&it, fn, &dt);
    return EMBER_OK;
}

/* Small contiguous operands of the output's shape (or a scalar b) skip the
   iterator: this is the path of tiny ops in a training loop. */
static bool run_binary_small(int op, int dt, ember_tensor *o, ember_tensor *a, ember_tensor *b)
{
    int64_t n = o->numel;
    if (n >= EMBER_PARALLEL_GRAIN || !o->is_contiguous || !a->is_contiguous || !b->is_contiguous || a->numel != n ||
        (b->numel != n && b->numel != 1))
        return false;
    ember__loop_fn fn = binary_kernel(op, dt, b);
    if (!fn) return false;
    int64_t es = ember_dtype_size(dt), eo = ember_dtype_size(o->dtype);
    char *p[3] = {ember__ptr(o), ember__ptr(a), ember__ptr(b)};
    int64_t st[3] = {eo, es, b->numel == n ? es : 0};
    fn(p, st, n, &dt);
    return true;
}

/* The dtype a binary op computes in, and the dtype of its result: PyTorch's
   promotion, integers to float32 for a BINARY_FLOAT line (true division),
   bool for a COMPARE line. The CUDA backend borrows this one definition. */
int ember__binary_types(int op, ember_tensor *a, ember_tensor *b, int *compute)
{
    ember_tensor *ts[2] = {a, b};
    int rt = ember__result_type(2, ts);
    if (!(ember__ops[op].flags & OPF_KEEPS_INT) && !ember__is_float(rt)) rt = EMBER_FLOAT32;
    *compute = rt;
    return is_cmp(op) ? EMBER_BOOL : rt;
}

/* PyTorch's rule: an integer to a negative integer power is an error (its
   value is a fraction an integer cannot hold). */
int ember__no_negative_exponent(const ember_tensor *e)
{
    ember_iter it;
    ember_tensor *ts[1] = {(ember_tensor *)e};
    if (e->dtype == EMBER_UINT8 || e->dtype == EMBER_BOOL) return EMBER_OK;
    ember__iter_init(&it, 1, ts);
    int64_t idx[EMBER_MAX_DIMS] = {0};
    for (int64_t k = 0; k < e->numel; k++) {
        const char *p = it.ptr[0];
        for (int d = 0; d < it.ndim; d++) p += idx[d] * it.strides[0][d];
        double v = ember__load(p, e->dtype);
        if (v < 0)
            return ember__fail(EMBER_ERR_ARG, "pow: integers to negative integer powers are not allowed "
                               "(exponent %lld, dtype %s)", (long long)v, ember_dtype_name(e->dtype));
        for (int d = it.ndim - 1; d >= 0; d--) {
            if (++idx[d] < it.shape[d]) break;
            idx[d] = 0;
        }
    }
    return EMBER_OK;
}

/* The most common call of a training loop: two contiguous operands of one
   shape and one dtype with typed loops (neither a wrapped number). The result
   type is that dtype (bool for a comparison) and the result is contiguous, so
   the promotion, the broadcast and the layout rule have nothing to decide:
   this skips them and the operands' retains, and gives the same result.
   false: not this case (or no kernel), for fwd_binary's general path. */
static bool binary_same_layout(int op, ember_tensor *a, ember_tensor *b, int *rc, ember_tensor **out)
{
    int dt = a->dtype, nd = a->ndim;
    if (b->dtype != dt || b->ndim != nd || !a->is_contiguous || !b->is_contiguous || a->wrapped_number ||
        b->wrapped_number || memcmp(a->shape, b->shape, (size_t)nd * sizeof *a->shape) != 0)
        return false;
    bool keeps_int = ember__ops[op].flags & OPF_KEEPS_INT;
    if (!(dt == EMBER_FLOAT32 || dt == EMBER_FLOAT64 ||
          (keeps_int && op != EMBER_OP_POW && (dt == EMBER_INT32 || dt == EMBER_INT64 || dt == EMBER_UINT8))))
        return false;
    ember__loop_fn fn = binary_kernel(op, dt, b);
    if (!fn) return false;
    ember_tensor *o;
    *rc = ember__new(nd, a->shape, is_cmp(op) ? EMBER_BOOL : dt, EMBER_CPU, &o);
    if (*rc < 0) return true;
    int64_t n = o->numel;
    if (n < EMBER_PARALLEL_GRAIN) {
        int64_t es = ember_dtype_size(dt);
        char *p[3] = {ember__ptr(o), ember__ptr(a), ember__ptr(b)};
        int64_t st[3] = {ember_dtype_size(o->dtype), es, es};
        fn(p, st, n, &dt);
    } else {
        *rc = ember__run_binary(op, dt, o, a, b);
        if (*rc < 0) {
            ember_tensor_release(o);
            return true;
        }
    }
    *out = o;
    return true;
}

int fwd_binary(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    const char *name = ember__ops[op].name;
    ember_tensor *a = in[0], *b = in[1], *ca = NULL, *cb = NULL, *o = NULL;
    int nd, ct, rc = EMBER_OK;
    if (binary_same_layout(op, a, b, &rc, out)) return rc;
    int64_t shape[EMBER_MAX_DIMS];
    EMBER_TRY(ember__broadcast_shape(name, 2, in, &nd, shape));
    int odt = ember__binary_types(op, a, b, &ct);
    if (ember__mul_by_mask(op, ct, a, b, nd, shape, &rc, out)) return rc;   /* mul_mask.c */
    /* the 16-bit floats compute in float32 with float32's kernels, a widening
       pass per operand and a rounding pass for the result, instead of a load
       and a store through double per element (8x slower); +, -, *, / and the
       comparisons give the same bits either way */
    if (ct == EMBER_FLOAT16 || ct == EMBER_BFLOAT16) ct = EMBER_FLOAT32;
    EMBER_CHECK(ember__as_dtype(a, ct, &ca));
    EMBER_CHECK(ember__as_dtype(b, ct, &cb));
    if (op == EMBER_OP_POW && ember__is_int(ct)) EMBER_CHECK(ember__no_negative_exponent(cb));
    ember_tensor *ins[2] = {ca, cb};
    EMBER_CHECK(ember__new_result(nd, shape, odt == EMBER_BOOL ? odt : ct, 2, ins, &o));
    if (!run_binary_small(op, ct, o, ca, cb)) EMBER_CHECK(ember__run_binary(op, ct, o, ca, cb));
    if (o->dtype == odt) {
        *out = o;
        o = NULL;
    } else {
        EMBER_CHECK(ember__as_dtype(o, odt, out));
    }
done:
    ember_tensor_release(ca);
    ember_tensor_release(cb);
    ember_tensor_release(o);
    return rc;
}

/* ------------------------------------------------------------------ where */
typedef struct {
    int dt, cdt;
} where_ctx;

/* typed selection for 1-byte conditions (bool, uint8) and 4- or 8-byte values.
   A mask, not a branch: on real data the condition is a coin flip, and a
   branch mispredicted half the time cost 8x a multiply. The contiguous case
   is a loop the compiler vectorises. */
#define WHERE_TYPED(T)                                                                     \
    do {                                                                                   \
        const int64_t z = (int64_t)sizeof(T);                                              \
        if (s[0] == z && s[1] == 1 && s[2] == z && s[3] == z) {                            \
            T *restrict o = (T *)p[0];                                                     \
            const uint8_t *restrict m = (const uint8_t *)p[1];                             \
            const T *restrict a = (const T *)p[2], *restrict b = (const T *)p[3];          \
            for (int64_t i = 0; i < n; i++) {                                              \
                T k = (T)0 - (T)(m[i] != 0);                                               \
                o[i] = (a[i] & k) | (b[i] & ~k);                                           \
            }                                                                              \
        } else if (s[0] == z && s[1] == 1 && s[2] == z && s[3] == 0) { /* where(m, a, 0) */  \
            T *restrict o = (T *)p[0];                                                     \
            const uint8_t *restrict m = (const uint8_t *)p[1];                             \
            const T *restrict a = (const T *)p[2], b = *(const T *)p[3];                   \
            for (int64_t i = 0; i < n; i++) {                                              \
                T k = (T)0 - (T)(m[i] != 0);                                               \
                o[i] = (a[i] & k) | (b & ~k);                                              \
            }                                                                              \
        } else {                                                                           \
            for (int64_t i = 0; i < n; i++) {                                              \
                T k = (T)0 - (T)(p[1][i * s[1]] != 0);                                     \
                T a = *(const T *)(p[2] + i * s[2]), b = *(const T *)(p[3] + i * s[3]);    \
                *(T *)(p[0] + i * s[0]) = (a & k) | (b & ~k);                              \
            }                                                                              \
        }                                                                                  \
    } while (0);

EMBER_SIMD static void where_loop(char **p, const int64_t *s, int64_t n, const void *vctx)
{
    const where_ctx *c = vctx;
    int es = ember_dtype_size(c->dt);
    if (c->cdt == EMBER_BOOL || c->cdt == EMBER_UINT8) {
        if (es == 4) {
            WHERE_TYPED(uint32_t)
            return;
        }
        if (es == 8) {
            WHERE_TYPED(uint64_t)
            return;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        bool cond = ember__load(p[1] + i * s[1], c->cdt) != 0;
        memcpy(p[0] + i * s[0], cond ? p[2] + i * s[2] : p[3] + i * s[3], (size_t)es);
    }
}

/* The shared body of where and relu_backward: the last two of the nin inputs
   are brought to their common dtype, which is written to *dt before fn runs
   (fn's ctx may point at it); a leading input (where's condition) is passed
   as it is; fn runs over (out, inputs) broadcast to one shape. */
static int select_op(const char *name, int nin, ember_tensor *const *in, int *dt, ember__loop_fn fn,
                     const void *ctx, ember_tensor **out)
{
    ember_tensor *ca = NULL, *cb = NULL;
    int nd, rc;
    int64_t shape[EMBER_MAX_DIMS];
    EMBER_TRY(ember__broadcast_shape(name, nin, in, &nd, shape));
    *dt = ember__result_type(2, in + nin - 2);
    EMBER_CHECK(ember__as_dtype(in[nin - 2], *dt, &ca));
    EMBER_CHECK(ember__as_dtype(in[nin - 1], *dt, &cb));
    ember_tensor *ts[4] = {NULL, in[0], ca, cb};
    if (nin == 2) ts[1] = cb, ts[2] = ca;   /* relu_backward: laid out by y, then g, as PyTorch's */
    EMBER_CHECK(ember__new_result(nd, shape, *dt, nin, ts + 1, out));
    if (nin == 2) ts[1] = ca, ts[2] = cb;
    ts[0] = *out;
    ember_iter it;
    ember__iter_init(&it, nin + 1, ts);
    ember__iter_run(&it, fn, ctx);
done:
    ember_tensor_release(ca);
    ember_tensor_release(cb);
    return rc;
}

/* where(cond, a, b) */
int fwd_where(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    where_ctx c = {EMBER_FLOAT32, in[0]->dtype};
    return select_op("where", 3, in, &c.dt, where_loop, &c, out);
}

/* relu_backward(g, y) = y <= 0 ? 0 : g: one pass instead of a mask and a select.
   0 where y <= 0, whatever g is (a NaN gradient included), and g where y is
   NaN (relu passed the NaN on), as PyTorch's threshold_backward.
   BIN_LOOP loads both operands, so this is a vector select, not a branch. */
BIN_LOOP(relu_bwd_f32, float, float, EMBER_RELU_BACKWARD(T, x, y))
BIN_LOOP(relu_bwd_f64, double, double, EMBER_RELU_BACKWARD(T, x, y))

/* other dtypes, through double; ctx is the dtype */
static void relu_bwd_any(char **p, const int64_t *s, int64_t n, const void *ctx)
{
    int dt = *(const int *)ctx;
    for (int64_t i = 0; i < n; i++) {
        double y = ember__load(p[2] + i * s[2], dt);
        ember__store(p[0] + i * s[0], dt, EMBER_RELU_BACKWARD(double, ember__load(p[1] + i * s[1], dt), y));
    }
}

static void relu_bwd_loop(char **p, const int64_t *s, int64_t n, const void *ctx)
{
    int dt = *(const int *)ctx;
    if (dt == EMBER_FLOAT32) relu_bwd_f32(p, s, n, ctx);
    else if (dt == EMBER_FLOAT64) relu_bwd_f64(p, s, n, ctx);
    else relu_bwd_any(p, s, n, ctx);
}

int fwd_relu_backward(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    int dt = EMBER_FLOAT32;
    return select_op("relu_backward", 2, in, &dt, relu_bwd_loop, &dt, out);
}

/* ------------------------------------------------------------------ unary kernels */
#define UN_LOOP(NAME, TY, UT, EXPR)                                                        \
    EMBER_SIMD static void NAME(char **p, const int64_t *s, int64_t n, const void *ctx)    \
    {                                                                                      \
        LOOP_TYPES(TY, UT);                                                                \
        EMBER_UNUSED(ctx);                                                                 \
        if (s[0] == z && s[1] == z) {                                                      \
            T *restrict o = (T *)p[0];                                                     \
            const T *restrict a = (const T *)p[1];                                         \
            for (int64_t i = 0; i < n; i++) {                                              \
                T x = a[i];                                                                \
                o[i] = (EXPR);                                                             \
            }                                                                              \
        } else {                                                                           \
            for (int64_t i = 0; i < n; i++) {                                              \
                T x = *(const T *)(p[1] + i * s[1]);                                       \
                *(T *)(p[0] + i * s[0]) = (EXPR);                                          \
            }                                                                              \
        }                                                                                  \
    }

#define OP(...)
#define BINARY(...)
#define UNARY(E, n, grad, flags, save, F32, F64) \
    UN_LOOP(n##_f32, float, float, F32) UN_LOOP(n##_f64, double, double, F64)
#include "ops.def"
/* formulas.h's integer forms, in int32 and int64 */
#define INT_FORM(E, EXPR) UN_LOOP(int_##E##_i32, int32_t, uint32_t, EXPR) UN_LOOP(int_##E##_i64, int64_t, uint64_t, EXPR)
EMBER_UNARY_INT_FORMS(INT_FORM)
#undef INT_FORM

/* gelu's form (approx: tanh) and clamp's bounds (an absent one infinite) */
typedef struct {
    int op, dtype;
    int approx;
    double lo, hi;
} un_ctx;

/* the generic path: every dtype but float32 and float64, computed in double */
static double unary_double(const un_ctx *c, double x)
{
    switch (c->op) {
#define OP(...)
#define BINARY(...)
#define UNARY(E, n, grad, flags, save, F32, F64) case EMBER_OP_##E: return (F64);
#include "ops.def"
    case EMBER_OP_GELU: return ember__gelu_f64(x, c->approx);
    case EMBER_OP_CLAMP: return ember__clamp_f64(x, c->lo, c->hi);
    default: return NAN;   /* never: ember__run_unary refuses any other op */
    }
}

static void unary_generic(char **p, const int64_t *s, int64_t n, const void *vctx)
{
    const un_ctx *c = vctx;
    for (int64_t i = 0; i < n; i++)
        ember__store(p[0] + i * s[0], c->dtype, unary_double(c, ember__load(p[1] + i * s[1], c->dtype)));
}

/* gelu in float32 (formulas.h's) */
EMBER_SIMD static void gelu_f32(char **p, const int64_t *s, int64_t n, const void *vctx)
{
    const un_ctx *c = vctx;
    if (s[0] == 4 && s[1] == 4) {   /* one loop per form, so each vectorises */
        float *restrict o = (float *)p[0];
        const float *restrict a = (const float *)p[1];
        if (c->approx)
            for (int64_t i = 0; i < n; i++) o[i] = ember__gelu_tanh_f32(a[i]);
        else
            for (int64_t i = 0; i < n; i++) o[i] = ember__gelu_erf_f32(a[i]);
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float x = *(const float *)(p[1] + i * s[1]);
        *(float *)(p[0] + i * s[0]) = ember__gelu_f32(x, c->approx);
    }
}

/* clamp in the tensor's float dtype (formulas.h's), the bounds rounded to it */
#define CLAMP_LOOP(T, SUF)                                                                 \
    EMBER_SIMD static void clamp_##SUF(char **p, const int64_t *s, int64_t n, const void *vctx) \
    {                                                                                      \
        const un_ctx *c = vctx;                                                            \
        const T lo = (T)c->lo, hi = (T)c->hi;                                              \
        const int64_t z = (int64_t)sizeof(T);                                              \
        if (s[0] == z && s[1] == z) {                                                      \
            T *restrict o = (T *)p[0];                                                     \
            const T *restrict a = (const T *)p[1];                                         \
            for (int64_t i = 0; i < n; i++) o[i] = ember__clamp_##SUF(a[i], lo, hi);       \
        } else {                                                                           \
            for (int64_t i = 0; i < n; i++)                                                \
                *(T *)(p[0] + i * s[0]) = ember__clamp_##SUF(*(const T *)(p[1] + i * s[1]), lo, hi); \
        }                                                                                  \
    }
CLAMP_LOOP(float, f32)
CLAMP_LOOP(double, f64)

static ember__loop_fn unary_kernel(int op, int dt)
{
    if (dt == EMBER_FLOAT32 && op == EMBER_OP_GELU) return gelu_f32;
    if (dt == EMBER_FLOAT32 && op == EMBER_OP_EXP) return ember__exp_blocks_f32;   /* exp_blocks.c */
    if (dt == EMBER_FLOAT32 && op == EMBER_OP_SIGMOID) return ember__sigmoid_blocks_f32;
    if (dt == EMBER_FLOAT32 && op == EMBER_OP_SILU) return ember__silu_blocks_f32;
    if (dt == EMBER_FLOAT32 || dt == EMBER_FLOAT64) {
        bool f = dt == EMBER_FLOAT32;
        switch (op) {
#define OP(...)
#define BINARY(...)
#define UNARY(E, n, ...) case EMBER_OP_##E: return f ? n##_f32 : n##_f64;
#include "ops.def"
        case EMBER_OP_CLAMP: return f ? clamp_f32 : clamp_f64;
        default: return NULL;   /* gelu in float64: the generic path */
        }
    }
    if (dt == EMBER_INT32 || dt == EMBER_INT64) {   /* the others through double */
        bool w = dt == EMBER_INT64;
        switch (op) {
#define INT_FORM(E, EXPR) case EMBER_OP_##E: return w ? int_##E##_i64 : int_##E##_i32;
            EMBER_UNARY_INT_FORMS(INT_FORM)
#undef INT_FORM
        default: return NULL;
        }
    }
    return NULL;
}

int ember__unary_dtype(int op, int dt)
{
    if (ember__is_float(dt)) return dt;
    if (ember__ops[op].flags & OPF_KEEPS_INT) return dt == EMBER_BOOL && op != EMBER_OP_CLAMP ? EMBER_INT64 : dt;
    return EMBER_FLOAT32;
}

int ember__run_unary(int op, const ember_attrs *at, ember_tensor *o, ember_tensor *a)
{
    if (!ember__is_unary_op(op))
        return ember__fail(EMBER_ERR_UNSUPPORTED, "%s: not an elementwise op of one operand", ember__ops[op].name);
    un_ctx c = {op, a->dtype, 0, -INFINITY, INFINITY};
    if (op == EMBER_OP_GELU) c.approx = (int)at->i[0];
    if (op == EMBER_OP_CLAMP) {
        if (at->i[0]) c.lo = at->f[0];
        if (at->i[1]) c.hi = at->f[1];
    }
    ember__loop_fn fn = unary_kernel(op, a->dtype);
    ember_iter it;
    ember_tensor *ts[2] = {o, a};
    ember__iter_init(&it, 2, ts);
    ember__iter_run(&it, fn ? fn : unary_generic, &c);
    return EMBER_OK;
}

int fwd_unary(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    ember_tensor *a = NULL;
    int rc;
    int dt = ember__unary_dtype(op, in[0]->dtype);
    EMBER_TRY(ember__as_dtype(in[0], dt, &a));
    EMBER_CHECK(ember__new_result(a->ndim, a->shape, dt, 1, &a, out));
    EMBER_CHECK(ember__run_unary(op, at, *out, a));
done:
    ember_tensor_release(a);
    return rc;
}

/* ------------------------------------------------------------------ conversions */
/* i[0] = dtype */
int fwd_to_dtype(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    int dt = (int)at->i[0];
    if (!ember__valid_dtype(dt)) return ember__fail(EMBER_ERR_DTYPE, "to: unknown dtype %d", dt);
    ember_tensor *a = in[0];
    if (a->storage->device != EMBER_CPU) {
        const ember_backend *be = ember__backend(a->storage->device);
        EMBER_TRY(be->fwd[EMBER_OP_CLONE] ? EMBER_OK : ember__fail(EMBER_ERR_DEVICE, "to: not implemented for this device"));
        EMBER_TRY(ember__new(a->ndim, a->shape, dt, a->storage->device, out));
        return be->copy(*out, a);
    }
    /* PyTorch's preserve_format: a dense tensor's strides kept, others contiguous */
    if (ember__dense(a)) EMBER_TRY(ember__new_result(a->ndim, a->shape, dt, 1, &a, out));
    else EMBER_TRY(ember__new(a->ndim, a->shape, dt, EMBER_CPU, out));
    return ember__copy_kernel(*out, a);
}

/* a contiguous copy (contiguous() is made of it) */
int fwd_clone(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    EMBER_UNUSED(at);
    ember_tensor *a = in[0];
    if (a->storage->device != EMBER_CPU) {
        ember_attrs a2 = {{a->dtype}, {0}};
        return fwd_to_dtype(op, nin, in, &a2, out);
    }
    EMBER_TRY(ember__new(a->ndim, a->shape, a->dtype, EMBER_CPU, out));
    return ember__copy_kernel(*out, a);
}

/* i[0] = device, i[1] = non_blocking: a copy from pinned host memory to a
   device is queued without waiting */
int fwd_to_device(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(op);
    EMBER_UNUSED(nin);
    ember_tensor *a = in[0], *c = NULL;
    int dst = (int)at->i[0], src = a->storage->device, rc;
    if (dst == src) {
        ember_tensor_retain(a);
        *out = a;
        return EMBER_OK;
    }
    const ember_backend *be;
    EMBER_TRY(ember__backend_get(dst == EMBER_CPU ? src : dst, &be));
    EMBER_TRY(ember_contiguous(a, &c));
    EMBER_CHECK(ember__new(a->ndim, a->shape, a->dtype, dst, out));
    size_t nbytes = (size_t)(a->numel * ember_dtype_size(a->dtype));
    bool queued = at->i[1] && c == a && ember_is_pinned(a);
    int kind = src == EMBER_CPU ? (queued ? 3 : 0) : dst == EMBER_CPU ? 1 : 2;
    EMBER_CHECK(be->memcpy(ember__ptr(*out), ember__ptr(c), nbytes, kind));
done:
    ember_tensor_release(c);
    return rc;
}

/* ------------------------------------------------------------------ public entry points */
#define OP(...)
#define BINARY(E, n, ...)                                                                  \
    int ember_##n(ember_tensor *a, ember_tensor *b, ember_tensor **out)                     \
    {                                                                                      \
        ember_tensor *in[2] = {a, b};                                                      \
        return ember__dispatch(EMBER_OP_##E, 2, in, NULL, out);                            \
    }
#define UNARY(E, n, ...)                                                                   \
    int ember_##n(ember_tensor *a, ember_tensor **out)                                     \
    {                                                                                      \
        return ember__dispatch(EMBER_OP_##E, 1, &a, NULL, out);                            \
    }
#include "ops.def"

int ember_where(ember_tensor *cond, ember_tensor *a, ember_tensor *b, ember_tensor **out)
{
    ember_tensor *in[3] = {cond, a, b};
    return ember__dispatch(EMBER_OP_WHERE, 3, in, NULL, out);
}

int ember_relu_backward(ember_tensor *g, ember_tensor *y, ember_tensor **out)
{
    ember_tensor *in[2] = {g, y};
    return ember__dispatch(EMBER_OP_RELU_BACKWARD, 2, in, NULL, out);
}

int ember_clone(ember_tensor *a, ember_tensor **out)
{
    return ember__dispatch(EMBER_OP_CLONE, 1, &a, NULL, out);
}

int ember_gelu(ember_tensor *a, int approximate_tanh, ember_tensor **out)
{
    ember_attrs at = {{approximate_tanh != 0}, {0}};
    return ember__dispatch(EMBER_OP_GELU, 1, &a, &at, out);
}

int ember__clamp_bounds(const char *op, const ember_tensor *a, const ember_attrs *at)
{
    if (!a || a->refcount <= 0 || !ember__is_int(a->dtype)) return EMBER_OK;
    for (int k = 0; k < 2; k++) {
        if (!at->i[k]) continue;
        double v = at->f[k];
        EMBER_TRY(ember__check_value(op, v, a->dtype));
        if (v != floor(v))
            return ember__fail(EMBER_ERR_ARG, "%s: bound %.17g is not a whole number, which a tensor of dtype %s "
                               "cannot hold (PyTorch's clamp gives a float result here: clamp a float copy)", op, v,
                               ember_dtype_name(a->dtype));
    }
    return EMBER_OK;
}

int ember_clamp(ember_tensor *a, int has_lo, double lo, int has_hi, double hi, ember_tensor **out)
{
    ember_attrs at = {{has_lo != 0, has_hi != 0}, {lo, hi}};
    if (out) *out = NULL;
    EMBER_TRY(ember__clamp_bounds("clamp", a, &at));
    return ember__dispatch(EMBER_OP_CLAMP, 1, &a, &at, out);
}

int ember_to_dtype(ember_tensor *a, int dtype, ember_tensor **out)
{
    ember_attrs at = {{dtype}, {0}};
    return ember__dispatch(EMBER_OP_TO_DTYPE, 1, &a, &at, out);
}

int ember_to_device(ember_tensor *a, int device, ember_tensor **out)
{
    ember_attrs at = {{device}, {0}};
    return ember__dispatch(EMBER_OP_TO_DEVICE, 1, &a, &at, out);
}

int ember_to_device_async(ember_tensor *a, int device, ember_tensor **out)
{
    ember_attrs at = {{device, 1}, {0}};
    return ember__dispatch(EMBER_OP_TO_DEVICE, 1, &a, &at, out);
}

int ember_contiguous(ember_tensor *a, ember_tensor **out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "contiguous: the output pointer is NULL");
    if (a && a->refcount > 0 && a->is_contiguous) {
        ember_tensor_retain(a);
        *out = a;
        return EMBER_OK;
    }
    return ember_clone(a, out);
}

int ember_detach(ember_tensor *a, ember_tensor **out)
{
    if (!a || !out) return ember__fail(EMBER_ERR_ARG, "detach: NULL argument");
    if (a->refcount <= 0) return ember__fail(EMBER_ERR_ARG, "detach: the tensor was released");
    return ember__make_view(a, a->ndim, a->shape, a->strides, a->offset, out);
}

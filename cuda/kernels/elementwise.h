/* elementwise.h: the arithmetic of the elementwise and comparison kernels.
   The unary functions come from ops.def's UNARY lines, the expressions the
   CPU kernels are made of; here ember__expf, ember__tanhf and ember__erff are
   the math library's (CUDA's on the device, libm's on the host), so float32
   results agree with the CPU's polynomial forms within a few ulp
   (cuda/tests/test_kernel_math.cpp states the bounds). float16 and bfloat16
   compute in float32, float64 in double, integers in int64_t. */
#ifndef EMBER_CUDA_ELEMENTWISE_H
#define EMBER_CUDA_ELEMENTWISE_H

#include <math.h>

#include "hd.h"
#include "polygamma.h"
#include "dtype.h"
#include "iter.h"
#include "ops/ops.h"

/* The attrs of the unary ops that have them: gelu's form (approx: tanh) and
   clamp's bounds (core/src/ops/ops.def); zero for every other op. */
typedef struct ecu_unary_attrs {
    int32_t approx, has_lo, has_hi;
    double lo, hi;
} ecu_unary_attrs;

namespace ember_cuda {

EMBER_HD float ember__expf(float x) { return expf(x); }
EMBER_HD float ember__tanhf(float x) { return tanhf(x); }
EMBER_HD float ember__erff(float x) { return erff(x); }
EMBER_HD float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }
EMBER_HD double sigmoid_(double x) { return 1.0 / (1.0 + exp(-x)); }

EMBER_HD float unary(int op, float x)
{
    switch (op) {
#define OP(...)
#define BINARY(...)
#define UNARY(E, n, grad, flags, save, F32, F64) case EMBER_OP_##E: return F32;
#include "ops/ops.def"
    default: return x;
    }
}

EMBER_HD double unary(int op, double x)
{
    switch (op) {
#define OP(...)
#define BINARY(...)
#define UNARY(E, n, grad, flags, save, F32, F64) case EMBER_OP_##E: return F64;
#include "ops/ops.def"
    default: return x;
    }
}

/* gelu as the CPU computes it: float32 in float over ember__tanhf/erff,
   every other dtype in double */
EMBER_HD float gelu(float x, bool tanh_form)
{
    const float k = 0.79788456080286535588f, r = 0.70710678118654752440f;   /* sqrt(2/pi), sqrt(1/2) */
    return tanh_form ? 0.5f * x * (1.0f + ember__tanhf(k * (x + 0.044715f * x * x * x)))
                     : 0.5f * x * (1.0f + ember__erff(x * r));
}

EMBER_HD double gelu(double x, bool tanh_form)
{
    const double k = 0.79788456080286535588, r = 0.70710678118654752440;
    return tanh_form ? 0.5 * x * (1 + tanh(k * (x + 0.044715 * x * x * x))) : 0.5 * x * (1 + erf(x * r));
}

/* clamp in T (float for float32, double for every other dtype, as the CPU):
   NaN stays NaN, and lo > hi gives hi */
template <class T> EMBER_HD T clamp_to(T x, const ecu_unary_attrs &a)
{
    T lo = a.has_lo ? (T)a.lo : -(T)INFINITY, hi = a.has_hi ? (T)a.hi : (T)INFINITY;
    T y = x < lo ? lo : x;
    y = y > hi ? hi : y;
    return x != x ? x : y;
}

/* the integer forms of the OPF_KEEPS_INT ops, wrapping as the CPU's do */
EMBER_HD int64_t unary(int op, int64_t x)
{
    switch (op) {
    case EMBER_OP_NEG: return (int64_t)(0u - (uint64_t)x);
    case EMBER_OP_ABS: return x < 0 ? (int64_t)(0u - (uint64_t)x) : x;
    case EMBER_OP_SIGN: return (x > 0) - (x < 0);
    case EMBER_OP_RELU: return x > 0 ? x : 0;
    default: return x;
    }
}

/* x to an integer power y >= 0 (fwd_binary refuses negative ones), wrapping */
EMBER_HD int64_t ipow(int64_t x, int64_t y)
{
    uint64_t r = 1, b = (uint64_t)x;
    while (y > 0) {
        if (y & 1) r *= b;
        b *= b;
        y >>= 1;
    }
    return (int64_t)r;
}

EMBER_HD float power(float x, float y) { return y == 2.0f ? x * x : powf(x, y); }
EMBER_HD double power(double x, double y) { return y == 2.0 ? x * x : pow(x, y); }
EMBER_HD int64_t power(int64_t x, int64_t y) { return ipow(x, y); }

/* maximum and minimum propagate NaN from either side */
template <class T> EMBER_HD bool is_nan(T x) { return x != x; }

template <class T> EMBER_HD T binary(int op, T x, T y)
{
    switch (op) {
    case EMBER_OP_ADD: return x + y;
    case EMBER_OP_SUB: return x - y;
    case EMBER_OP_MUL: return x * y;
    case EMBER_OP_DIV: return x / y;   /* float types only: integer division is true division */
    case EMBER_OP_POW: return power(x, y);
    case EMBER_OP_MAXIMUM: return (is_nan(x) || x > y) ? x : y;
    case EMBER_OP_RELU_BACKWARD: return y <= 0 ? (T)0 : x;   /* x the gradient, y relu's output (NaN passes x) */
    default: return (is_nan(x) || x < y) ? x : y;     /* MINIMUM */
    }
}

/* integer add, sub and mul wrap instead of overflowing */
template <> EMBER_HD int64_t binary<int64_t>(int op, int64_t x, int64_t y)
{
    uint64_t a = (uint64_t)x, b = (uint64_t)y;
    switch (op) {
    case EMBER_OP_ADD: return (int64_t)(a + b);
    case EMBER_OP_SUB: return (int64_t)(a - b);
    case EMBER_OP_MUL: return (int64_t)(a * b);
    case EMBER_OP_POW: return ipow(x, y);
    case EMBER_OP_MAXIMUM: return x > y ? x : y;
    case EMBER_OP_RELU_BACKWARD: return y <= 0 ? 0 : x;
    default: return x < y ? x : y;   /* MINIMUM (DIV never computes in integers) */
    }
}

/* the BINARY lines flagged OPF_BOOL_OUT */
EMBER_HD bool is_comparison(int op)
{
    switch (op) {
#define OP(...)
#define UNARY(...)
#define BINARY(E, n, grad, flags, save) case EMBER_OP_##E: return ((flags) & OPF_BOOL_OUT) != 0;
#include "ops/ops.def"
    default: return false;
    }
}

/* The ops binary() and compare() compute: a BINARY line without its case
   here gets no device kernel (its slot stays NULL), and test_kernel_math
   fails until it has one. */
inline bool has_binary(int op)
{
    switch (op) {
    case EMBER_OP_ADD: case EMBER_OP_SUB: case EMBER_OP_MUL: case EMBER_OP_DIV: case EMBER_OP_POW:
    case EMBER_OP_MAXIMUM: case EMBER_OP_MINIMUM: case EMBER_OP_RELU_BACKWARD:
        return true;
    default: return is_comparison(op);
    }
}

template <class T> EMBER_HD bool compare(int op, T x, T y)
{
    switch (op) {
    case EMBER_OP_EQ: return x == y;
    case EMBER_OP_NE: return x != y;
    case EMBER_OP_LT: return x < y;
    case EMBER_OP_LE: return x <= y;
    case EMBER_OP_GT: return x > y;
    default: return x >= y;   /* GE */
    }
}

/* The compute types the CPU kernels use. Unary: int32 and int64 in their own
   width (as int64), the other integer dtypes through double (uint8 saturates,
   as ember__store does). Binary: integers and bool in int64, wrapping to the
   output's width as the CPU's integer kernels do. */
inline bool is_float_dtype(int dt)
{
    return dt == EMBER_FLOAT32 || dt == EMBER_FLOAT64 || dt == EMBER_FLOAT16 || dt == EMBER_BFLOAT16;
}

inline ecu_compute float_compute(int dt) { return dt == EMBER_FLOAT64 ? ECU_DOUBLE : ECU_FLOAT; }

inline ecu_compute unary_compute(int op, int dt)
{
    if (op == EMBER_OP_CLAMP) return dt == EMBER_FLOAT32 ? ECU_FLOAT : ECU_DOUBLE;
    if (is_float_dtype(dt)) return float_compute(dt);
    return dt == EMBER_INT32 || dt == EMBER_INT64 ? ECU_INT64 : ECU_DOUBLE;
}

/* x through unary op, gelu and clamp with their attrs (in float or double:
   unary_compute never gives them int64) */
template <class T> EMBER_HD T unary_with(int op, const ecu_unary_attrs &a, T x)
{
    switch (op) {
    case EMBER_OP_GELU: return gelu(x, a.approx != 0);
    case EMBER_OP_CLAMP: return clamp_to(x, a);
    default: return unary(op, x);
    }
}
EMBER_HD int64_t unary_with(int op, const ecu_unary_attrs &, int64_t x) { return unary(op, x); }

inline ecu_compute binary_compute(int dt) { return is_float_dtype(dt) ? float_compute(dt) : ECU_INT64; }

/* Element `i` of an elementwise op over `it` (operand 0 the output), computed
   in T: the body of the device kernels and of the host check. */
template <class T, class Index>
EMBER_HD void unary_at(const ecu_iter &it, int op, const ecu_unary_attrs &a, Index i)
{
    Index off[2];
    iter_offsets(it, i, off);
    T x = load<T>(it.data[1] + off[1], it.dtype[1]);
    store<T>(it.data[0] + off[0], it.dtype[0], unary_with(op, a, x));
}

template <class T, class Index>
EMBER_HD void binary_at(const ecu_iter &it, int op, Index i)
{
    Index off[3];
    iter_offsets(it, i, off);
    T x = load<T>(it.data[1] + off[1], it.dtype[1]), y = load<T>(it.data[2] + off[2], it.dtype[2]);
    char *o = it.data[0] + off[0];
    if (is_comparison(op)) *(uint8_t *)o = compare(op, x, y);
    else store<T>(o, it.dtype[0], binary(op, x, y));
}

/* a conversion (copy, to(dtype)): ember__store's rules */
template <class Index>
EMBER_HD void convert_at(const ecu_iter &it, Index i)
{
    Index off[2];
    iter_offsets(it, i, off);
    ember__store(it.data[0] + off[0], it.dtype[0], ember__load(it.data[1] + off[1], it.dtype[1]));
}

/* where(cond, a, b) into an output of a's and b's common dtype: a value
   already of that dtype is copied as it is, any other converted as
   ember__convert does; cond is true where it is not 0 (NaN included) */
EMBER_HD int dtype_bytes(int dt)
{
    return dt == EMBER_FLOAT64 || dt == EMBER_INT64 ? 8 : dt == EMBER_FLOAT32 || dt == EMBER_INT32 ? 4
           : dt == EMBER_UINT8 || dt == EMBER_BOOL ? 1 : 2;
}

template <class Index>
EMBER_HD void where_at(const ecu_iter &it, Index i)
{
    Index off[4];
    iter_offsets(it, i, off);
    int k = ember__load(it.data[1] + off[1], it.dtype[1]) != 0 ? 2 : 3;
    const char *src = it.data[k] + off[k];
    char *dst = it.data[0] + off[0];
    if (it.dtype[k] == it.dtype[0]) memcpy(dst, src, (size_t)dtype_bytes(it.dtype[0]));
    else ember__store(dst, it.dtype[0], ember__load(src, it.dtype[k]));
}

/* a fill: the value stored with ember__store's rules */
template <class Index>
EMBER_HD void fill_at(const ecu_iter &it, double value, Index i)
{
    Index off[1];
    iter_offsets(it, i, off);
    ember__store(it.data[0] + off[0], it.dtype[0], value);
}

}   // namespace ember_cuda

#endif

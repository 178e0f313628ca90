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

/* the core's formulas (ipow, pow, gelu, clamp, relu's adjoint) over the
   ember__tanhf and ember__erff above */
#include "formulas.h"

/* The ops the device kernels compute come from ops.def's lines: the core's
   ember__is_unary_op and has_binary below. The host launches no other (the
   forwards check), so the kernels' switches have no case to fall back on:
   their default is never taken. */
template <class T> EMBER_HD T unary(int op, T x)   /* T float or double; int64_t below */
{
    constexpr bool f32 = sizeof(T) == sizeof(float);
    switch (op) {
#define OP(...)
#define BINARY(...)
#define UNARY(E, n, grad, flags, save, F32, F64) \
    case EMBER_OP_##E: if constexpr (f32) return F32; else return F64;
#include "ops/ops.def"
    default: return NAN;   /* never: ember__is_unary_op */
    }
}

EMBER_HD float gelu(float x, bool tanh_form) { return ember__gelu_f32(x, tanh_form); }
EMBER_HD double gelu(double x, bool tanh_form) { return ember__gelu_f64(x, tanh_form); }

/* clamp in float for float32, in double for every other dtype, as the CPU */
EMBER_HD float clamp_to(float x, const ecu_unary_attrs &a)
{
    return ember__clamp_f32(x, a.has_lo ? (float)a.lo : -INFINITY, a.has_hi ? (float)a.hi : INFINITY);
}

EMBER_HD double clamp_to(double x, const ecu_unary_attrs &a)
{
    return ember__clamp_f64(x, a.has_lo ? a.lo : -INFINITY, a.has_hi ? a.hi : INFINITY);
}

/* formulas.h's integer forms of the unary ops, in int64_t, wrapping to the
   output's width as the CPU's do; the others compute in double
   (unary_compute) */
inline bool has_int_unary(int op)
{
    switch (op) {
#define INT_FORM(E, EXPR) case EMBER_OP_##E:
        EMBER_UNARY_INT_FORMS(INT_FORM)
#undef INT_FORM
        return true;
    default: return false;
    }
}

EMBER_HD int64_t unary(int op, int64_t x)
{
    typedef int64_t T;
    typedef uint64_t U;
    switch (op) {
#define INT_FORM(E, EXPR) case EMBER_OP_##E: return EXPR;
        EMBER_UNARY_INT_FORMS(INT_FORM)
#undef INT_FORM
    default: return 0;   /* never: has_int_unary */
    }
}

/* The binary ops, made of ops.def's expressions: float32's in float,
   float64's in double, the integer forms in int64_t (T; U its unsigned
   twin), whose results wrap to the output's width as the CPU's kernels do.
   A BINARY_FLOAT line has no integer form: integers compute in float32
   (ember__binary_types). relu_backward (x the gradient, y relu's output) is
   formulas.h's. */
template <class T> EMBER_HD T binary(int op, T x, T y)   /* T float or double */
{
    constexpr bool f32 = sizeof(T) == sizeof(float);
    switch (op) {
#define OP(...)
#define UNARY(...)
#define BINARY(E, n, grad, flags, save, F32, F64, INT) \
    case EMBER_OP_##E: if constexpr (f32) return F32; else return F64;
#define BINARY_FLOAT(E, n, grad, flags, save, F32, F64) BINARY(E, n, grad, flags, save, F32, F64, ~)
#define COMPARE(...)
#include "ops/ops.def"
    case EMBER_OP_RELU_BACKWARD: return EMBER_RELU_BACKWARD(T, x, y);
    default: return NAN;   /* never: has_binary */
    }
}

EMBER_HD int64_t binary(int op, int64_t x, int64_t y)
{
    typedef int64_t T;
    typedef uint64_t U;
    switch (op) {
#define OP(...)
#define UNARY(...)
#define BINARY(E, n, grad, flags, save, F32, F64, INT) case EMBER_OP_##E: return INT;
#define BINARY_FLOAT(...)
#define COMPARE(...)
#include "ops/ops.def"
    case EMBER_OP_RELU_BACKWARD: return EMBER_RELU_BACKWARD(T, x, y);
    default: return 0;   /* never: has_binary, and no integer compute for BINARY_FLOAT lines */
    }
}

/* maximum and minimum (and the reductions) propagate NaN from either side */
template <class T> EMBER_HD bool is_nan(T x) { return x != x; }

/* the COMPARE lines */
EMBER_HD bool is_comparison(int op)
{
    switch (op) {
#define OP(...)
#define UNARY(...)
#define BINARY(...)
#define COMPARE(E, ...) case EMBER_OP_##E: return true;
#include "ops/ops.def"
    default: return false;
    }
}

template <class T> EMBER_HD bool compare(int op, T x, T y)
{
    switch (op) {
#define OP(...)
#define UNARY(...)
#define BINARY(...)
#define COMPARE(E, n, EXPR) case EMBER_OP_##E: return EXPR;
#include "ops/ops.def"
    default: return false;   /* never: has_binary */
    }
}

/* every line of ops.def's binary kinds, and relu_backward */
inline bool has_binary(int op)
{
    switch (op) {
#define OP(...)
#define UNARY(...)
#define BINARY(E, ...) case EMBER_OP_##E:
#include "ops/ops.def"
    case EMBER_OP_RELU_BACKWARD:
        return true;
    default: return false;
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
    return (dt == EMBER_INT32 || dt == EMBER_INT64) && has_int_unary(op) ? ECU_INT64 : ECU_DOUBLE;
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
template <class Index>
EMBER_HD void where_at(const ecu_iter &it, Index i)
{
    Index off[4];
    iter_offsets(it, i, off);
    int k = ember__load(it.data[1] + off[1], it.dtype[1]) != 0 ? 2 : 3;
    const char *src = it.data[k] + off[k];
    char *dst = it.data[0] + off[0];
    if (it.dtype[k] == it.dtype[0]) memcpy(dst, src, (size_t)ember__dtype_bytes(it.dtype[0]));
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

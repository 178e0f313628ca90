/* dtype.h: loading and storing every ember dtype in the kernels with the
   CPU's rules, through the core's element.h (ember__load, ember__store):
   float16 and bfloat16 round to nearest even, a float becomes an integer by
   truncation toward zero saturating at the dtype's bounds (NaN gives 0),
   bool is x != 0. Arithmetic
   runs in a compute type: float for float32, float16 and bfloat16, double for
   float64, int64_t for the integer dtypes and bool, whose results wrap as the
   CPU's integer kernels do. */
#ifndef EMBER_CUDA_DTYPE_H
#define EMBER_CUDA_DTYPE_H

#include "hd.h"
#include "ember.h"
#include "element.h"

namespace ember_cuda {

/* The compute types: load<T> reads an element of any dtype as T, store<T>
   writes a T result into an output of dtype dt. */
template <class T> EMBER_HD T load(const char *p, int dt);

template <> EMBER_HD float load<float>(const char *p, int dt)
{
    switch (dt) {
    case EMBER_FLOAT32: return *(const float *)p;
    case EMBER_FLOAT16: return ember__half_to_float(*(const uint16_t *)p);
    case EMBER_BFLOAT16: return ember__bf16_to_float(*(const uint16_t *)p);
    default: return (float)ember__load(p, dt);
    }
}

template <> EMBER_HD double load<double>(const char *p, int dt) { return ember__load(p, dt); }

template <> EMBER_HD int64_t load<int64_t>(const char *p, int dt)
{
    switch (dt) {
    case EMBER_INT32: return *(const int32_t *)p;
    case EMBER_INT64: return *(const int64_t *)p;
    case EMBER_UINT8: return *(const uint8_t *)p;
    case EMBER_BOOL: return *(const uint8_t *)p != 0;
    default: return ember__to_i64(ember__load(p, dt));
    }
}

template <class T> EMBER_HD void store(char *p, int dt, T v);

template <> EMBER_HD void store<float>(char *p, int dt, float v)
{
    switch (dt) {
    case EMBER_FLOAT32: *(float *)p = v; break;
    case EMBER_FLOAT16: *(uint16_t *)p = ember__float_to_half(v); break;
    case EMBER_BFLOAT16: *(uint16_t *)p = ember__float_to_bf16(v); break;
    default: ember__store(p, dt, v); break;
    }
}

template <> EMBER_HD void store<double>(char *p, int dt, double v) { ember__store(p, dt, v); }

/* integer results wrap to the output's width (two's complement), as the
   CPU's int32 and uint8 kernels do; bool is v != 0 */
template <> EMBER_HD void store<int64_t>(char *p, int dt, int64_t v)
{
    switch (dt) {
    case EMBER_INT32: *(int32_t *)p = (int32_t)(uint32_t)(uint64_t)v; break;
    case EMBER_INT64: *(int64_t *)p = v; break;
    case EMBER_UINT8: *(uint8_t *)p = (uint8_t)(uint64_t)v; break;
    case EMBER_BOOL: *(uint8_t *)p = v != 0; break;
    default: ember__store(p, dt, (double)v); break;
    }
}

}   // namespace ember_cuda

#endif

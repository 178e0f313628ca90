/* element.h: one element of any dtype: IEEE half and bfloat16 <-> float
   (rounding to nearest even), an element read as double and a double stored
   with the conversion rules of docs/dtypes.md. One definition for the CPU and
   the CUDA kernels (cuda/kernels/dtype.h, which defines EMBER_HD as host and
   device functions), so both devices convert alike. */
#ifndef EMBER_ELEMENT_H
#define EMBER_ELEMENT_H

#include <stdint.h>
#include <string.h>

#include "ember.h"

#ifndef EMBER_HD
#define EMBER_HD static inline
#endif

/* a float from its IEEE bits and back (memcpy, not a pointer cast: no aliasing) */
EMBER_HD float ember__float_of_bits(uint32_t bits)
{
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

EMBER_HD uint32_t ember__bits_of_float(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    return x;
}

EMBER_HD float ember__half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else {   /* subnormal: renormalise */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            man &= 0x3ff;
            bits = sign | (exp << 23) | (man << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    return ember__float_of_bits(bits);
}

EMBER_HD uint16_t ember__float_to_half(float f)
{
    uint32_t x = ember__bits_of_float(f);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t man = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t sub = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (sub & 1))) sub++;
        return (uint16_t)(sign | sub);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;   /* may carry into exp: correct */
    return (uint16_t)h;
}

EMBER_HD float ember__bf16_to_float(uint16_t h) { return ember__float_of_bits((uint32_t)h << 16); }

EMBER_HD uint16_t ember__float_to_bf16(float f)
{
    uint32_t x = ember__bits_of_float(f);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);   /* quiet NaN */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* the bytes of one element of a valid dtype (ember_dtype_size checks it first) */
EMBER_HD int ember__dtype_bytes(int dtype)
{
    switch (dtype) {
    case EMBER_FLOAT64: case EMBER_INT64: return 8;
    case EMBER_FLOAT32: case EMBER_INT32: return 4;
    case EMBER_FLOAT16: case EMBER_BFLOAT16: return 2;
    default: return 1;   /* uint8, bool */
    }
}

EMBER_HD double ember__load(const void *p, int dtype)
{
    switch (dtype) {
    case EMBER_FLOAT32: return *(const float *)p;
    case EMBER_FLOAT64: return *(const double *)p;
    case EMBER_FLOAT16: return ember__half_to_float(*(const uint16_t *)p);
    case EMBER_BFLOAT16: return ember__bf16_to_float(*(const uint16_t *)p);
    case EMBER_INT32: return *(const int32_t *)p;
    case EMBER_INT64: return (double)*(const int64_t *)p;
    case EMBER_UINT8: return *(const uint8_t *)p;
    default: return *(const uint8_t *)p ? 1.0 : 0.0;
    }
}

/* Float to integer conversion saturates instead of invoking undefined behaviour. */
EMBER_HD int64_t ember__to_i64(double v)
{
    if (v != v) return 0;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)v;
}

/* docs/dtypes.md: a float becomes an integer by truncation toward zero,
   saturating at the dtype's bounds; NaN becomes 0. */
EMBER_HD int64_t ember__clamp_i64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

EMBER_HD void ember__store(void *p, int dtype, double v)
{
    switch (dtype) {
    case EMBER_FLOAT32: *(float *)p = (float)v; break;
    case EMBER_FLOAT64: *(double *)p = v; break;
    case EMBER_FLOAT16: *(uint16_t *)p = ember__float_to_half((float)v); break;
    case EMBER_BFLOAT16: *(uint16_t *)p = ember__float_to_bf16((float)v); break;
    case EMBER_INT32: *(int32_t *)p = (int32_t)ember__clamp_i64(ember__to_i64(v), INT32_MIN, INT32_MAX); break;
    case EMBER_INT64: *(int64_t *)p = ember__to_i64(v); break;
    case EMBER_UINT8: *(uint8_t *)p = (uint8_t)ember__clamp_i64(ember__to_i64(v), 0, 255); break;
    default: *(uint8_t *)p = v != 0; break;
    }
}

#endif

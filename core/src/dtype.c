/* dtype.c: dtype names and sizes, PyTorch's type promotion, half/bfloat16
   conversion and generic element conversion.

   Promotion (documented in docs/dtypes.md): categories bool < integer < float.
   The result's category is the highest among all operands. Within it, the
   dtype comes from the operands of the highest priority that have that
   category: dimensioned tensors first, then 0-d tensors, then wrapped numbers
   (Lua numbers). Wrapped numbers give int64 for integers and the default
   float32 for floats. Among equals: uint8 + int32 -> int32, float16 +
   bfloat16 -> float32, otherwise the wider type. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const char *const DTYPE_NAMES[EMBER_DTYPE_COUNT] = {
    "float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"};
static const int DTYPE_SIZES[EMBER_DTYPE_COUNT] = {4, 8, 2, 2, 4, 8, 1, 1};

bool ember__valid_dtype(int dt) { return dt >= 0 && dt < EMBER_DTYPE_COUNT; }

const char *ember_dtype_name(int dtype)
{
    return ember__valid_dtype(dtype) ? DTYPE_NAMES[dtype] : "?";
}

int ember_dtype_size(int dtype) { return ember__valid_dtype(dtype) ? DTYPE_SIZES[dtype] : 0; }

static int category(int dt) { return dt == EMBER_BOOL ? 0 : ember__is_int(dt) ? 1 : 2; }

/* rank within a category: the wider type wins */
static int rank(int dt)
{
    switch (dt) {
    case EMBER_BOOL: return 0;
    case EMBER_UINT8: return 1;
    case EMBER_INT32: return 2;
    case EMBER_INT64: return 3;
    case EMBER_FLOAT16: return 1;
    case EMBER_BFLOAT16: return 1;
    case EMBER_FLOAT32: return 2;
    default: return 3;   /* float64 */
    }
}

int ember__promote(int a, int b)
{
    if (a == b) return a;
    int ca = category(a), cb = category(b);
    if (ca != cb) return ca > cb ? a : b;
    if ((a == EMBER_FLOAT16 && b == EMBER_BFLOAT16) || (a == EMBER_BFLOAT16 && b == EMBER_FLOAT16))
        return EMBER_FLOAT32;
    return rank(a) >= rank(b) ? a : b;
}

int ember__result_type(int n, ember_tensor *const *ts)
{
    int best_cat = 0;
    for (int i = 0; i < n; i++) {
        int c = category(ts[i]->dtype);
        if (c > best_cat) best_cat = c;
    }
    /* priority 2: dimensioned, 1: 0-d, 0: wrapped number */
    for (int prio = 2; prio >= 0; prio--) {
        int dt = -1;
        for (int i = 0; i < n; i++) {
            const ember_tensor *t = ts[i];
            int p = t->wrapped_number ? 0 : t->ndim == 0 ? 1 : 2;
            if (p != prio || category(t->dtype) != best_cat) continue;
            int d = t->dtype;
            if (prio == 0) d = best_cat == 2 ? EMBER_FLOAT32 : best_cat == 1 ? EMBER_INT64 : EMBER_BOOL;
            dt = dt < 0 ? d : ember__promote(dt, d);
        }
        if (dt >= 0) return dt;
    }
    return EMBER_FLOAT32;
}

/* IEEE half <-> float, round to nearest even. */
float ember__half_to_float(uint16_t h)
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
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ember__float_to_half(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    int32_t exp = (int32_t)((x >> 23) & 0xff) - 127 + 15;
    uint32_t man = x & 0x7fffff;
    if (((x >> 23) & 0xff) == 0xff) return (uint16_t)(sign | 0x7c00 | (man ? 0x200 : 0));
    if (exp >= 31) return (uint16_t)(sign | 0x7c00);
    if (exp <= 0) {
        if (exp < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t half = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (h & 1))) h++;   /* may carry into exp: correct */
    return (uint16_t)h;
}

float ember__bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t ember__float_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000) return (uint16_t)((x >> 16) | 0x40);   /* quiet NaN */
    x += 0x7fff + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

double ember__load(const void *p, int dtype)
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
static int64_t to_i64(double v)
{
    if (v != v) return 0;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    return (int64_t)v;
}

/* docs/dtypes.md: a float becomes an integer by truncation toward zero,
   saturating at the dtype's bounds; NaN becomes 0. */
static int64_t clamp_i64(int64_t v, int64_t lo, int64_t hi) { return v < lo ? lo : v > hi ? hi : v; }

void ember__store(void *p, int dtype, double v)
{
    switch (dtype) {
    case EMBER_FLOAT32: *(float *)p = (float)v; break;
    case EMBER_FLOAT64: *(double *)p = v; break;
    case EMBER_FLOAT16: *(uint16_t *)p = ember__float_to_half((float)v); break;
    case EMBER_BFLOAT16: *(uint16_t *)p = ember__float_to_bf16((float)v); break;
    case EMBER_INT32: *(int32_t *)p = (int32_t)clamp_i64(to_i64(v), INT32_MIN, INT32_MAX); break;
    case EMBER_INT64: *(int64_t *)p = to_i64(v); break;
    case EMBER_UINT8: *(uint8_t *)p = (uint8_t)clamp_i64(to_i64(v), 0, 255); break;
    default: *(uint8_t *)p = v != 0; break;
    }
}

void ember__convert(void *dst, int ddt, int64_t dstride, const void *src, int sdt,
                    int64_t sstride, int64_t n)
{
    int ds = ember_dtype_size(ddt), ss = ember_dtype_size(sdt);
    char *d = dst;
    const char *s = src;
    if (ddt == sdt) {
        if (dstride == 1 && sstride == 1) {
            memcpy(d, s, (size_t)(n * ds));
            return;
        }
        switch (ds) {   /* strided moves by width: a transpose is one of these */
        case 1: for (int64_t i = 0; i < n; i++) ((uint8_t *)d)[i * dstride] = ((const uint8_t *)s)[i * sstride]; return;
        case 2: for (int64_t i = 0; i < n; i++) ((uint16_t *)d)[i * dstride] = ((const uint16_t *)s)[i * sstride]; return;
        case 4: for (int64_t i = 0; i < n; i++) ((uint32_t *)d)[i * dstride] = ((const uint32_t *)s)[i * sstride]; return;
        case 8: for (int64_t i = 0; i < n; i++) ((uint64_t *)d)[i * dstride] = ((const uint64_t *)s)[i * sstride]; return;
        default:
            for (int64_t i = 0; i < n; i++) memcpy(d + i * dstride * ds, s + i * sstride * ss, (size_t)ds);
            return;
        }
    }
    /* masks into floats (the gradient of relu, dropout, comparisons) */
    if ((sdt == EMBER_BOOL || sdt == EMBER_UINT8) && (ddt == EMBER_FLOAT32 || ddt == EMBER_FLOAT64)) {
        const uint8_t *u = (const uint8_t *)s;
        if (ddt == EMBER_FLOAT32)
            for (int64_t i = 0; i < n; i++) ((float *)d)[i * dstride] = (float)u[i * sstride];
        else
            for (int64_t i = 0; i < n; i++) ((double *)d)[i * dstride] = (double)u[i * sstride];
        return;
    }
    if ((sdt == EMBER_INT64 || sdt == EMBER_INT32) && ddt == EMBER_FLOAT32) {
        if (sdt == EMBER_INT64)
            for (int64_t i = 0; i < n; i++) ((float *)d)[i * dstride] = (float)((const int64_t *)s)[i * sstride];
        else
            for (int64_t i = 0; i < n; i++) ((float *)d)[i * dstride] = (float)((const int32_t *)s)[i * sstride];
        return;
    }
    /* int64 <-> int64-like paths keep full precision */
    if (ddt == EMBER_INT64 && (sdt == EMBER_INT32 || sdt == EMBER_UINT8 || sdt == EMBER_BOOL)) {
        for (int64_t i = 0; i < n; i++)
            ((int64_t *)d)[i * dstride] = (int64_t)ember__load(s + i * sstride * ss, sdt);
        return;
    }
    if (sdt == EMBER_INT64 && ember__is_int(ddt)) {
        for (int64_t i = 0; i < n; i++) {
            int64_t v = ((const int64_t *)s)[i * sstride];
            if (ddt == EMBER_INT32) ((int32_t *)d)[i * dstride] = (int32_t)v;
            else ((uint8_t *)d)[i * dstride] = (uint8_t)v;
        }
        return;
    }
    if (ddt == EMBER_FLOAT32 && sdt == EMBER_FLOAT64) {
        for (int64_t i = 0; i < n; i++)
            ((float *)d)[i * dstride] = (float)((const double *)s)[i * sstride];
        return;
    }
    if (ddt == EMBER_FLOAT64 && sdt == EMBER_FLOAT32) {
        for (int64_t i = 0; i < n; i++)
            ((double *)d)[i * dstride] = ((const float *)s)[i * sstride];
        return;
    }
    /* the 16-bit floats and float32: autocast's casts, and the operands and
       results of the kernels that compute the 16-bit floats in float32 */
    if (sdt == EMBER_FLOAT32 && (ddt == EMBER_BFLOAT16 || ddt == EMBER_FLOAT16)) {
        const float *f = (const float *)s;
        uint16_t *h = (uint16_t *)d;
        if (ddt == EMBER_BFLOAT16)
            for (int64_t i = 0; i < n; i++) h[i * dstride] = ember__float_to_bf16(f[i * sstride]);
        else
            for (int64_t i = 0; i < n; i++) h[i * dstride] = ember__float_to_half(f[i * sstride]);
        return;
    }
    if (ddt == EMBER_FLOAT32 && (sdt == EMBER_BFLOAT16 || sdt == EMBER_FLOAT16)) {
        const uint16_t *h = (const uint16_t *)s;
        float *f = (float *)d;
        if (sdt == EMBER_BFLOAT16)
            for (int64_t i = 0; i < n; i++) f[i * dstride] = ember__bf16_to_float(h[i * sstride]);
        else
            for (int64_t i = 0; i < n; i++) f[i * dstride] = ember__half_to_float(h[i * sstride]);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        ember__store(d + i * dstride * ds, ddt, ember__load(s + i * sstride * ss, sdt));
}

int ember__check_value(const char *op, double v, int dtype)
{
    if (!ember__is_int(dtype) || dtype == EMBER_BOOL) return EMBER_OK;
    double lo = dtype == EMBER_UINT8 ? 0 : dtype == EMBER_INT32 ? (double)INT32_MIN : -9.2233720368547758e18;
    double hi = dtype == EMBER_UINT8 ? 255 : dtype == EMBER_INT32 ? (double)INT32_MAX : 9.2233720368547758e18;
    if (!(v >= lo && (dtype == EMBER_INT64 ? v < hi : v <= hi)))
    {
        char num[64];
        if (v != v) snprintf(num, sizeof num, "nan");
        else snprintf(num, sizeof num, "%.17g", v);
        return ember__fail(EMBER_ERR_ARG, "%s: value %s cannot be converted to %s without overflow", op, num,
                           ember_dtype_name(dtype));
    }
    return EMBER_OK;
}

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

bool ember__valid_dtype(int dt) { return dt >= 0 && dt < EMBER_DTYPE_COUNT; }

const char *ember_dtype_name(int dtype)
{
    return ember__valid_dtype(dtype) ? DTYPE_NAMES[dtype] : "?";
}

int ember_dtype_size(int dtype) { return ember__valid_dtype(dtype) ? ember__dtype_bytes(dtype) : 0; }

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

/* ember__convert's typed loops: d[i] = CONV(s[i]) from ST to DT over the strides */
#define CAST_LOOP(DT, ST, CONV)                                                                \
    for (int64_t i = 0; i < n; i++) ((DT *)d)[i * dstride] = CONV(((const ST *)s)[i * sstride])

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
        if (ddt == EMBER_FLOAT32) CAST_LOOP(float, uint8_t, (float));
        else CAST_LOOP(double, uint8_t, (double));
        return;
    }
    if ((sdt == EMBER_INT64 || sdt == EMBER_INT32) && ddt == EMBER_FLOAT32) {
        if (sdt == EMBER_INT64) CAST_LOOP(float, int64_t, (float));
        else CAST_LOOP(float, int32_t, (float));
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
        CAST_LOOP(float, double, (float));
        return;
    }
    if (ddt == EMBER_FLOAT64 && sdt == EMBER_FLOAT32) {
        CAST_LOOP(double, float, (double));
        return;
    }
    /* the 16-bit floats and float32: autocast's casts, and the operands and
       results of the kernels that compute the 16-bit floats in float32 */
    if (sdt == EMBER_FLOAT32 && (ddt == EMBER_BFLOAT16 || ddt == EMBER_FLOAT16)) {
        if (ddt == EMBER_BFLOAT16) CAST_LOOP(uint16_t, float, ember__float_to_bf16);
        else CAST_LOOP(uint16_t, float, ember__float_to_half);
        return;
    }
    if (ddt == EMBER_FLOAT32 && (sdt == EMBER_BFLOAT16 || sdt == EMBER_FLOAT16)) {
        if (sdt == EMBER_BFLOAT16) CAST_LOOP(float, uint16_t, ember__bf16_to_float);
        else CAST_LOOP(float, uint16_t, ember__half_to_float);
        return;
    }
#undef CAST_LOOP
    for (int64_t i = 0; i < n; i++)
        ember__store(d + i * dstride * ds, ddt, ember__load(s + i * sstride * ss, sdt));
}

int ember__check_numbers(const char *op, int n, ember_tensor *const *ts, int dtype)
{
    if (!ember__is_int(dtype)) return EMBER_OK;
    for (int i = 0; i < n; i++)
        if (ts[i] && ember__host_number(ts[i]) && ts[i]->dtype != dtype)
            EMBER_TRY(ember__check_value(op, ember__load(ember__ptr(ts[i]), ts[i]->dtype), dtype));
    return EMBER_OK;
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

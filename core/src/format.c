/* format.c: tostring for tensors, in PyTorch's layout:
     tensor([[1.5000, 2.0000],
             [3.0000, 4.0000]], dtype=float32, shape={2,2})
   Floats share one format per tensor (integral values print as "1.", small or
   huge magnitudes switch to scientific); more than 1000 elements are
   summarised with the first and last 3 entries of each dim. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

typedef struct {
    char *buf;
    int64_t cap, len;
} sbuf;

static void put(sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(sbuf *s, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n >= (int)sizeof tmp) n = (int)sizeof tmp - 1;
    if (s->len + n < s->cap) memcpy(s->buf + s->len, tmp, (size_t)n);
    else if (s->len < s->cap) memcpy(s->buf + s->len, tmp, (size_t)(s->cap - s->len));
    s->len += n;
}

typedef struct {
    const ember_tensor *t;   /* a CPU tensor */
    int kind;                /* 0 int, 1 float integral, 2 float fixed, 3 float sci, 4 bool */
    int width;
    bool summarize;
} fmt_ctx;

static void fmt_value(char *out, size_t n, const fmt_ctx *c, double v)
{
    switch (c->kind) {
    case 0: snprintf(out, n, "%.0f", v); break;
    case 4: snprintf(out, n, "%s", v != 0 ? "true" : "false"); break;
    default:
        if (v != v) snprintf(out, n, "nan");
        else if (isinf(v)) snprintf(out, n, v > 0 ? "inf" : "-inf");
        else if (c->kind == 1) snprintf(out, n, "%.0f.", v);
        else if (c->kind == 2) snprintf(out, n, "%.4f", v);
        else snprintf(out, n, "%.4e", v);
    }
}

static double value_at(const ember_tensor *t, const int64_t *idx)
{
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
    return ember__load(ember__ptr(t) + off * ember_dtype_size(t->dtype), t->dtype);
}

#define EDGE 3

static bool shown(const fmt_ctx *c, int64_t size, int64_t i)
{
    return !c->summarize || size <= 2 * EDGE || i < EDGE || i >= size - EDGE;
}

static void scan(fmt_ctx *c, int d, int64_t *idx, double *maxabs, double *minabs, bool *integral,
                 bool *any)
{
    const ember_tensor *t = c->t;
    if (d == t->ndim) {
        double v = value_at(t, idx);
        if (v != v || isinf(v)) return;
        double a = fabs(v);
        if (a > *maxabs) *maxabs = a;
        if (a != 0 && a < *minabs) *minabs = a;
        if (v != floor(v)) *integral = false;
        *any = true;
        return;
    }
    for (int64_t i = 0; i < t->shape[d]; i++) {
        if (!shown(c, t->shape[d], i)) continue;
        idx[d] = i;
        scan(c, d + 1, idx, maxabs, minabs, integral, any);
    }
}

static void widths(fmt_ctx *c, int d, int64_t *idx)
{
    const ember_tensor *t = c->t;
    if (d == t->ndim) {
        char tmp[64];
        fmt_value(tmp, sizeof tmp, c, value_at(t, idx));
        int w = (int)strlen(tmp);
        if (w > c->width) c->width = w;
        return;
    }
    for (int64_t i = 0; i < t->shape[d]; i++) {
        if (!shown(c, t->shape[d], i)) continue;
        idx[d] = i;
        widths(c, d + 1, idx);
    }
}

static void emit(sbuf *s, const fmt_ctx *c, int d, int64_t *idx, int indent)
{
    const ember_tensor *t = c->t;
    if (d == t->ndim) {
        char tmp[64];
        fmt_value(tmp, sizeof tmp, c, value_at(t, idx));
        put(s, "%*s", c->width, tmp);
        return;
    }
    put(s, "[");
    int64_t n = t->shape[d];
    bool first = true;
    for (int64_t i = 0; i < n; i++) {
        if (!shown(c, n, i)) {
            if (i == EDGE) {
                if (d == t->ndim - 1) put(s, ", ...");
                else put(s, ",\n%*s...", indent + d + 1, "");
            }
            continue;
        }
        if (!first) {
            if (d == t->ndim - 1) put(s, ", ");
            else {
                put(s, ",");
                for (int k = 0; k < t->ndim - d - 1; k++) put(s, "\n");
                put(s, "%*s", indent + d + 1, "");
            }
        }
        first = false;
        idx[d] = i;
        emit(s, c, d + 1, idx, indent);
    }
    put(s, "]");
}

int64_t ember_format(const ember_tensor *t, char *buf, int64_t cap)
{
    sbuf s = {buf, cap > 0 ? cap - 1 : 0, 0};
    char shp[200], dev[32];
    if (!t) {
        put(&s, "tensor(NULL)");
        goto end;
    }
    ember_tensor *cpu = (ember_tensor *)t;
    if (t->storage->device != EMBER_CPU && ember_to_device((ember_tensor *)t, EMBER_CPU, &cpu) < 0) {
        put(&s, "tensor(<unreadable on %s>)", ember__device_name(dev, t->storage->device));
        goto end;
    }
    fmt_ctx c = {cpu, 0, 1, cpu->numel > 1000};
    int64_t idx[EMBER_MAX_DIMS] = {0};
    if (cpu->dtype == EMBER_BOOL) c.kind = 4;
    else if (!ember__is_float(cpu->dtype)) c.kind = 0;
    else {
        double maxabs = 0, minabs = INFINITY;
        bool integral = true, any = false;
        if (cpu->numel) scan(&c, 0, idx, &maxabs, &minabs, &integral, &any);
        if (integral && maxabs < 1e8) c.kind = 1;
        else if (maxabs >= 1e8 || (any && minabs < 1e-4) || maxabs / minabs > 1e6) c.kind = 3;
        else c.kind = 2;
    }
    put(&s, "tensor(");
    if (cpu->numel == 0) {
        put(&s, "[]");
    } else {
        widths(&c, 0, idx);
        emit(&s, &c, 0, idx, 7);
    }
    put(&s, ", dtype=%s, shape=%s", ember_dtype_name(t->dtype), ember__tshape(shp, t));
    if (t->storage->device != EMBER_CPU) put(&s, ", device=%s", ember__device_name(dev, t->storage->device));
    put(&s, ")");
    if (cpu != t) ember_tensor_release(cpu);
end:
    if (cap > 0) buf[s.len < cap ? s.len : cap - 1] = 0;
    return s.len + 1;
}

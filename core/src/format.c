/* format.c: tostring for tensors, laid out as PyTorch 1.13 prints them
   (torch/_tensor_str.py with its default options):
     tensor([[1.5000, 2.0000],
             [3.0000, 4.0000]], dtype=float32, shape={2,2})
   One format per tensor, chosen from its nonzero finite values: integral
   floats print as "1.", a range over 1000x or magnitudes beyond 1e8 (or
   below 1e-4 for non-integral values) switch to scientific; every entry is
   padded to one width. Rows wrap at 80 columns, continuation lines aligned
   under the first entry. More than 1000 elements are summarised with the
   first and last 3 entries of each dim and "...". ember keeps its own
   suffixes (dtype and shape, always), wrapped as PyTorch wraps its own. */
#include "internal.h"
#include "dtr.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define LINEWIDTH 80
#define THRESHOLD 1000
#define EDGE 3
#define PREFIX "tensor("

typedef struct {
    char *buf;
    int64_t cap, len;
    int64_t last_nl;   /* position of the last '\n' written, -1 for none */
} sbuf;

static void put(sbuf *s, const char *fmt, ...) EMBER_PRINTF(2, 3);
static void put(sbuf *s, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if (n >= (int)sizeof tmp) n = (int)sizeof tmp - 1;
    for (int i = 0; i < n; i++)
        if (tmp[i] == '\n') s->last_nl = s->len + i;
    if (s->len + n < s->cap) memcpy(s->buf + s->len, tmp, (size_t)n);
    else if (s->len < s->cap) memcpy(s->buf + s->len, tmp, (size_t)(s->cap - s->len));
    s->len += n;
}

static void put_spaces(sbuf *s, int n) { put(s, "%*s", n, ""); }

typedef struct {
    const ember_tensor *t;   /* a CPU tensor */
    bool floating, int_mode, sci_mode, summarize;
    int width;
} fmt_ctx;

typedef struct {
    bool is_int;   /* exact int64 (integer dtypes), else a double */
    int64_t i;
    double d;
} value;

static value value_at(const ember_tensor *t, const int64_t *idx)
{
    int64_t off = 0;
    for (int d = 0; d < t->ndim; d++) off += idx[d] * t->strides[d];
    const char *p = ember__ptr(t) + off * ember_dtype_size(t->dtype);
    if (t->dtype == EMBER_INT64) return (value){true, *(const int64_t *)p, 0};
    double v = ember__load(p, t->dtype);
    if (ember__is_float(t->dtype)) return (value){false, 0, v};
    return (value){true, (int64_t)v, 0};
}

/* One entry without padding; Python's str.format for the chosen mode
   (NaN prints without a sign, as Python prints it). */
static void fmt_value(char *out, size_t n, const fmt_ctx *c, value v)
{
    if (c->t->dtype == EMBER_BOOL) snprintf(out, n, "%s", v.i ? "true" : "false");
    else if (v.is_int) snprintf(out, n, "%lld", (long long)v.i);
    else if (v.d != v.d) snprintf(out, n, "nan");
    else if (isinf(v.d)) snprintf(out, n, v.d > 0 ? "inf" : "-inf");
    else if (c->sci_mode) snprintf(out, n, "%.4e", v.d);
    else if (c->int_mode) snprintf(out, n, "%.0f.", v.d);
    else snprintf(out, n, "%.4f", v.d);
}

static bool shown(const fmt_ctx *c, int64_t size, int64_t i)
{
    return !c->summarize || size <= 2 * EDGE || i < EDGE || i >= size - EDGE;
}

/* Calls fn on every entry that is printed (all of them, or the edges). */
static void each_shown(fmt_ctx *c, int d, int64_t *idx, void (*fn)(fmt_ctx *, value, void *),
                       void *arg)
{
    const ember_tensor *t = c->t;
    if (d == t->ndim) {
        fn(c, value_at(t, idx), arg);
        return;
    }
    for (int64_t i = 0; i < t->shape[d]; i++) {
        if (!shown(c, t->shape[d], i)) continue;
        idx[d] = i;
        each_shown(c, d + 1, idx, fn, arg);
    }
}

typedef struct {
    double min, max;   /* of |v| over nonzero finite values */
    bool any;
} range;

static bool counts(const fmt_ctx *c, value v)
{
    return !c->floating || (v.d == v.d && !isinf(v.d) && v.d != 0);
}

static void scan_value(fmt_ctx *c, value v, void *arg)
{
    range *r = arg;
    if (!counts(c, v)) return;
    double a = fabs(v.d);
    if (!r->any || a < r->min) r->min = a;
    if (!r->any || a > r->max) r->max = a;
    r->any = true;
    if (v.d != ceil(v.d)) c->int_mode = false;
}

/* The width: every integer entry, or every nonzero finite float (integral
   floats count one more for their '.'). Zeros and non-finite entries may be
   wider than it; they are printed unpadded, as in PyTorch. */
static void widen(fmt_ctx *c, value v, void *arg)
{
    (void)arg;
    if (!counts(c, v)) return;
    char tmp[64];
    fmt_value(tmp, sizeof tmp, c, v);
    int w = (int)strlen(tmp);
    if (w > c->width) c->width = w;
}

static void choose_format(fmt_ctx *c)
{
    int64_t idx[EMBER_MAX_DIMS] = {0};
    if (c->floating) {
        range r = {0, 0, false};
        each_shown(c, 0, idx, scan_value, &r);
        if (!r.any) return;   /* nothing but zeros, NaN and inf: "0.", width 1 */
        c->sci_mode = r.max / r.min > 1000.0 || r.max > 1e8 || (!c->int_mode && r.min < 1e-4);
    }
    each_shown(c, 0, idx, widen, NULL);
}

static void emit_value(sbuf *s, const fmt_ctx *c, const int64_t *idx)
{
    char tmp[64];
    fmt_value(tmp, sizeof tmp, c, value_at(c->t, idx));
    put(s, "%*s", c->width, tmp);
}

/* The last dim: entries joined by ", ", as many per line as fit in
   LINEWIDTH - indent (at width + 2 columns each, " ..." counting as one). */
static void emit_vector(sbuf *s, const fmt_ctx *c, int64_t *idx, int indent)
{
    int d = c->t->ndim - 1;
    int64_t n = c->t->shape[d];
    int per_line = (LINEWIDTH - indent) / (c->width + 2);
    if (per_line < 1) per_line = 1;
    int on_line = 0;
    put(s, "[");
    for (int64_t i = 0; i < n; i++) {
        bool dots = !shown(c, n, i);
        if (dots && i != EDGE) continue;
        if (on_line == per_line) {
            put(s, ",\n");
            put_spaces(s, indent + 1);
            on_line = 0;
        } else if (on_line > 0) {
            put(s, ", ");
        }
        on_line++;
        if (dots) {
            put(s, " ...");
        } else {
            idx[d] = i;
            emit_value(s, c, idx);
        }
    }
    put(s, "]");
}

/* Dim d and those after it; sub-tensors are separated by ",", one blank
   line per dim below the next, and indent + 1 spaces. */
static void emit(sbuf *s, const fmt_ctx *c, int d, int64_t *idx, int indent)
{
    const ember_tensor *t = c->t;
    if (d == t->ndim) {
        emit_value(s, c, idx);
        return;
    }
    if (d == t->ndim - 1) {
        emit_vector(s, c, idx, indent);
        return;
    }
    put(s, "[");
    int64_t n = t->shape[d];
    for (int64_t i = 0; i < n; i++) {
        bool dots = !shown(c, n, i);
        if (dots && i != EDGE) continue;
        if (i > 0) {
            put(s, ",");
            for (int k = 0; k < t->ndim - d - 1; k++) put(s, "\n");
            put_spaces(s, indent + 1);
        }
        if (dots) {
            put(s, "...");
        } else {
            idx[d] = i;
            emit(s, c, d + 1, idx, indent + 1);
        }
    }
    put(s, "]");
}

/* ", suffix" on the same line while it fits (PyTorch's count of the last
   line, quirks included), else ",\n" and the prefix's indent. */
static void suffix(sbuf *s, int64_t *line_len, const char *text)
{
    int64_t n = (int64_t)strlen(text);
    if (*line_len + n + 2 > LINEWIDTH) {
        put(s, ",\n%*s%s", (int)strlen(PREFIX), "", text);
        *line_len = (int64_t)strlen(PREFIX) + n;
    } else {
        put(s, ", %s", text);
        *line_len += n + 2;
    }
}

int64_t ember_format(const ember_tensor *t, char *buf, int64_t cap)
{
    sbuf s = {buf, cap > 0 ? cap - 1 : 0, 0, -1};
    char shp[200], dev[32], text[256];
    if (!t) {
        put(&s, "tensor(NULL)");
        goto end;
    }
    ember_tensor *cpu = (ember_tensor *)t;
    if (ember__dtr_on && ember__dtr_ready(t) < 0) {   /* evicted, and it cannot be remade now */
        put(&s, "tensor(<evicted: %s>)", ember_last_error());
        goto end;
    }
    if (t->storage->device != EMBER_CPU && ember_to_device((ember_tensor *)t, EMBER_CPU, &cpu) < 0) {
        put(&s, "tensor(<unreadable on %s>)", ember__device_name(dev, t->storage->device));
        goto end;
    }
    fmt_ctx c = {cpu, ember__is_float(cpu->dtype), true, false, cpu->numel > THRESHOLD, 1};
    int64_t idx[EMBER_MAX_DIMS] = {0};
    put(&s, PREFIX);
    if (cpu->numel == 0) {
        put(&s, "[]");
    } else {
        choose_format(&c);
        emit(&s, &c, 0, idx, (int)strlen(PREFIX));
    }
    int64_t line_len = s.last_nl < 0 ? s.len + 2 : s.len - s.last_nl + 1;
    snprintf(text, sizeof text, "dtype=%s", ember_dtype_name(t->dtype));
    suffix(&s, &line_len, text);
    snprintf(text, sizeof text, "shape=%s", ember__tshape(shp, t));
    suffix(&s, &line_len, text);
    if (t->storage->device != EMBER_CPU) {
        snprintf(text, sizeof text, "device=%s", ember__device_name(dev, t->storage->device));
        suffix(&s, &line_len, text);
    }
    put(&s, ")");
    if (cpu != t) ember_tensor_release(cpu);
end:
    if (cap > 0) buf[s.len < cap ? s.len : cap - 1] = 0;
    return s.len + 1;
}

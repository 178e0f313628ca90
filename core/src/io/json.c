/* json.c: the strict JSON reader of json.h (recursive descent over the
   text, at most 64 levels deep; every read is bounded by the text's end),
   and the text buffer its writers append to. */
#include "json.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

typedef struct {
    const char *s;
    size_t len, pos;   /* pos: the next byte, from 0 */
    int depth;
    char *msg;
    size_t msg_cap;
} parser;

/* "invalid JSON: <what> at byte <at + 1>"; returns -1 */
static int fail(parser *p, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(parser *p, size_t at, const char *fmt, ...)
{
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(p->msg, p->msg_cap, "invalid JSON: %s at byte %zu", what, at + 1);
    return -1;
}

/* s[0, n) quoted as Lua's %q quotes it (the messages read as json.lua's) */
static void quote(char *out, size_t cap, const char *s, size_t n)
{
    size_t k = 0;
    if (cap < 8) return;
    out[k++] = '"';
    for (size_t i = 0; i < n && k + 6 < cap; i++) {
        char c = s[i];
        if (c == '"' || c == '\\' || c == '\n') out[k++] = '\\', out[k++] = c;
        else if (c == '\r') out[k++] = '\\', out[k++] = 'r';
        else if (c == 0) out[k++] = '\\', out[k++] = '0';
        else out[k++] = c;
    }
    out[k++] = '"';
    out[k] = 0;
}

static int peek(const parser *p) { return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1; }

static void skip_ws(parser *p)
{
    while (p->pos < p->len) {
        char c = p->s[p->pos];
        if (c != ' ' && c != '\t' && c != '\r' && c != '\n') break;
        p->pos++;
    }
}

static int hex4(const parser *p, size_t at, unsigned *cp)
{
    if (at + 4 > p->len) return 0;
    unsigned v = 0;
    for (size_t i = at; i < at + 4; i++) {
        char c = p->s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        v = v * 16 + (unsigned)d;
    }
    *cp = v;
    return 1;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12); o[1] = (char)(0x80 | (cp >> 6 & 63)); o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18); o[1] = (char)(0x80 | (cp >> 12 & 63));
    o[2] = (char)(0x80 | (cp >> 6 & 63)); o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* The string at p->pos (its opening quote), decoded into a new buffer. The
   decoded text is never longer than the source, so one allocation does. */
static int parse_string(parser *p, char **out, size_t *out_len)
{
    size_t open = p->pos, i = p->pos + 1;
    size_t end = i;   /* the closing quote, or the text's end: the decoded text is no longer */
    while (end < p->len && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    if (end > p->len) end = p->len;
    char *o = malloc(end - i + 1);
    if (!o) return -2;
    size_t k = 0;
    while (i < p->len) {
        unsigned char c = (unsigned char)p->s[i];
        if (c == '"') break;
        if (c < 0x20) {
            free(o);
            return fail(p, i, "control character in string");
        }
        if (c != '\\') {
            o[k++] = (char)c;
            i++;
            continue;
        }
        int e = i + 1 < p->len ? (unsigned char)p->s[i + 1] : -1;
        if (e == 'u') {
            unsigned cp, lo;
            if (!hex4(p, i + 2, &cp)) {
                free(o);
                return fail(p, i, "bad \\u escape");
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                if (!(i + 7 < p->len && p->s[i + 6] == '\\' && p->s[i + 7] == 'u' && hex4(p, i + 8, &lo) && lo >= 0xDC00 &&
                      lo <= 0xDFFF)) {
                    free(o);
                    return fail(p, i, "lone surrogate");
                }
                cp = 0x10000 + (cp - 0xD800) * 1024 + (lo - 0xDC00);
                i += 6;
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                free(o);
                return fail(p, i, "lone surrogate");
            }
            k += put_utf8(o + k, cp);
            i += 6;
            continue;
        }
        const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
        const char *hit = e > 0 ? strchr(from, e) : NULL;
        if (!hit) {
            free(o);
            return fail(p, i, "bad escape");
        }
        o[k++] = to[hit - from];
        i += 2;
    }
    if (i >= p->len) {
        free(o);
        return fail(p, open, "unterminated string");
    }
    o[k] = 0;
    p->pos = i + 1;
    *out = o;
    *out_len = k;
    return 0;
}

static size_t digits(const parser *p, size_t i)
{
    while (i < p->len && p->s[i] >= '0' && p->s[i] <= '9') i++;
    return i;
}

static int parse_number(parser *p, json_node *n)
{
    size_t start = p->pos, i = p->pos;
    if (i < p->len && p->s[i] == '-') i++;
    if (i < p->len && p->s[i] == '0') i++;
    else if (i < p->len && p->s[i] >= '1' && p->s[i] <= '9') i = digits(p, i);
    else return fail(p, start, "bad number");
    if (i < p->len && p->s[i] == '.') {
        size_t e = digits(p, i + 1);
        if (e == i + 1) return fail(p, start, "bad number");
        i = e;
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-')) i++;
        size_t e = digits(p, i);
        if (e == i) return fail(p, start, "bad number");
        i = e;
    }
    char buf[64], *big = NULL, *text = buf;
    size_t n_ch = i - start;
    if (n_ch >= sizeof buf) {
        big = malloc(n_ch + 1);
        if (!big) return -2;
        text = big;
    }
    memcpy(text, p->s + start, n_ch);
    text[n_ch] = 0;
    double v = strtod(text, NULL);
    free(big);
    if (isnan(v) || isinf(v)) return fail(p, start, "number out of range");
    n->type = JSON_NUMBER;
    n->num = v;
    p->pos = i;
    return 0;
}

static int by_key(const void *a, const void *b)
{
    const json_node *x = *(const json_node *const *)a, *y = *(const json_node *const *)b;
    size_t m = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, m);
    if (c) return c;
    if (x->key_len != y->key_len) return x->key_len < y->key_len ? -1 : 1;
    return x->text < y->text ? -1 : x->text > y->text;
}

/* An object's keys are told apart once it is read: sorted, neighbours
   compared; the duplicate named is the one met first in the text. */
static int check_duplicates(parser *p, const json_node *obj)
{
    if (obj->n < 2) return 0;
    const json_node **v = malloc((size_t)obj->n * sizeof *v);
    if (!v) return -2;
    for (int i = 0; i < obj->n; i++) v[i] = &obj->items[i];
    qsort(v, (size_t)obj->n, sizeof *v, by_key);
    const json_node *dup = NULL;
    for (int i = 1; i < obj->n; i++)
        if (v[i]->key_len == v[i - 1]->key_len && memcmp(v[i]->key, v[i - 1]->key, v[i]->key_len) == 0 &&
            (!dup || v[i]->text < dup->text))
            dup = v[i];
    free(v);
    if (!dup) return 0;
    char q[120];
    quote(q, sizeof q, dup->key, dup->key_len);
    return fail(p, dup->key_pos, "duplicate key %s", q);
}

static int parse_value(parser *p, json_node *n);

static int push(json_node **items, int *n, int *cap)
{
    if (*n < *cap) return 0;
    int nc = *cap ? *cap * 2 : 4;
    json_node *ni = realloc(*items, (size_t)nc * sizeof *ni);
    if (!ni) return -2;
    *items = ni;
    *cap = nc;
    return 0;
}

static int parse_container(parser *p, json_node *n, int is_object)
{
    char close = is_object ? '}' : ']';
    if (++p->depth > MAX_DEPTH) return fail(p, p->pos, "nesting deeper than %d", MAX_DEPTH);
    n->type = is_object ? JSON_OBJECT : JSON_ARRAY;
    int cap = 0, rc = 0;
    p->pos++;
    skip_ws(p);
    if (peek(p) != close) {
        for (;;) {
            if ((rc = push(&n->items, &n->n, &cap)) < 0) return rc;
            json_node *it = &n->items[n->n];
            memset(it, 0, sizeof *it);
            if (is_object) {
                if (peek(p) != '"') return fail(p, p->pos, "expected a string key");
                n->n++;   /* owned from here, so json_free frees its key */
                it->key_pos = p->pos;
                if ((rc = parse_string(p, &it->key, &it->key_len)) < 0) return rc;
                skip_ws(p);
                if (peek(p) != ':') return fail(p, p->pos, "expected ':'");
                p->pos++;
                skip_ws(p);
            } else {
                n->n++;
            }
            if ((rc = parse_value(p, it)) < 0) return rc;
            skip_ws(p);
            int c = peek(p);
            if (c == close) break;
            if (c != ',') return fail(p, p->pos, "expected ',' or '%c'", close);
            p->pos++;
            skip_ws(p);
        }
    }
    p->pos++;
    p->depth--;
    return is_object ? check_duplicates(p, n) : 0;
}

static int parse_value(parser *p, json_node *n)
{
    int c = peek(p);
    size_t start = p->pos;
    int rc = 0;
    n->text = p->s + start;
    if (c == '{' || c == '[') {
        rc = parse_container(p, n, c == '{');
    } else if (c == '"') {
        n->type = JSON_STRING;
        rc = parse_string(p, &n->str, &n->len);
    } else if (c == '-' || (c >= '0' && c <= '9')) {
        rc = parse_number(p, n);
    } else {
        static const struct { const char *word; json_type type; } WORDS[] = {
            {"true", JSON_TRUE}, {"false", JSON_FALSE}, {"null", JSON_NULL}};
        for (int i = 0; i < 3; i++) {
            size_t k = strlen(WORDS[i].word);
            if (c == WORDS[i].word[0] && p->len - p->pos >= k && memcmp(p->s + p->pos, WORDS[i].word, k) == 0) {
                n->type = WORDS[i].type;
                p->pos += k;
                n->text_len = k;
                return 0;
            }
        }
        if (c < 0) return fail(p, p->pos, "unexpected end");
        char q[16], ch = (char)c;
        quote(q, sizeof q, &ch, 1);
        return fail(p, p->pos, "unexpected character %s", q);
    }
    n->text_len = p->pos - start;
    return rc;
}

int json_parse(const char *text, size_t len, json_node *root, char *msg, size_t msg_cap)
{
    parser p = {text, len, 0, 0, msg, msg_cap};
    memset(root, 0, sizeof *root);
    skip_ws(&p);
    int rc = parse_value(&p, root);
    if (rc == 0) {
        skip_ws(&p);
        if (p.pos < len) rc = fail(&p, p.pos, "trailing characters");
    }
    if (rc < 0) {
        json_free(root);
        memset(root, 0, sizeof *root);
        if (rc == -2) snprintf(msg, msg_cap, "out of memory reading the JSON");
    }
    return rc;
}

void json_free(json_node *node)
{
    if (!node) return;
    for (int i = 0; i < node->n; i++) {
        free(node->items[i].key);
        json_free(&node->items[i]);
    }
    free(node->items);
    free(node->str);
    node->items = NULL;
    node->str = NULL;
    node->n = 0;
}

const json_node *json_get(const json_node *obj, const char *key)
{
    size_t k = strlen(key);
    for (int i = 0; obj && i < obj->n; i++)
        if (obj->items[i].key_len == k && memcmp(obj->items[i].key, key, k) == 0) return &obj->items[i];
    return NULL;
}

int json_valid_utf8(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        int need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) need = 0;
        else if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0) lo = 0xA0;
            else if (c == 0xED) hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0) lo = 0x90;
            else if (c == 0xF4) hi = 0x8F;
        } else {
            return 0;
        }
        for (int k = 1; k <= need; k++) {
            if (i + (size_t)k >= n) return 0;
            unsigned cc = s[i + (size_t)k];
            if (cc < (k == 1 ? lo : 0x80) || cc > (k == 1 ? hi : 0xBF)) return 0;
        }
        i += (size_t)need + 1;
    }
    return 1;
}

/* ------------------------------------------------------------------ writing */
/* room for n more bytes and a NUL; false (oom set) when memory ran out */
static int reserve(json_text *t, size_t n)
{
    if (t->oom) return 0;
    if (t->len + n + 1 <= t->cap) return 1;
    size_t nc = t->cap ? t->cap : 256;
    while (nc < t->len + n + 1) nc *= 2;
    char *np = realloc(t->p, nc);
    if (!np) {
        t->oom = 1;
        return 0;
    }
    t->p = np;
    t->cap = nc;
    return 1;
}

void json_put(json_text *t, const char *s, size_t n)
{
    if (!reserve(t, n)) return;
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = 0;
}

void json_puts(json_text *t, const char *s) { json_put(t, s, strlen(s)); }

void json_printf(json_text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (k < 0) t->oom = 1;
    if (k < 0 || !reserve(t, (size_t)k)) return;
    va_start(ap, fmt);
    vsnprintf(t->p + t->len, (size_t)k + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)k;
}

void json_put_string(json_text *t, const char *s, size_t n)
{
    json_put(t, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        json_put(t, s + run, i - run);
        run = i + 1;
        if (c == '"') json_puts(t, "\\\"");
        else if (c == '\\') json_puts(t, "\\\\");
        else if (c == '\n') json_puts(t, "\\n");
        else if (c == '\t') json_puts(t, "\\t");
        else if (c == '\r') json_puts(t, "\\r");
        else json_printf(t, "\\u%04x", c);
    }
    json_put(t, s + run, n - run);
    json_put(t, "\"", 1);
}

/* safetensors.c: ember's one safetensors codec (ember.save / ember.load from
   Lua go through it too). File layout (little-endian): an 8-byte header
   length N, N bytes of JSON header {"__metadata__": {"k": "v", ...}, "name":
   {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
   padded with spaces to a multiple of 8, then the tensors' bytes tiling the
   rest of the file. The reader trusts nothing: the header is strict JSON
   (json.c), every entry is checked, and the ranges must tile the data
   exactly, before a byte of tensor data is read or allocated
   (core/tests/fuzz/fuzz_safetensors.c fuzzes it). The writer writes a
   temporary file beside the target, fsyncs it and renames it over it, so a
   failure at any point leaves the old file as it was. Messages read
   "load: <path>: <what>" and "save: <path>: <what>". */
#include "../internal.h"
#include "../platform.h"
#include "json.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INT 9007199254740992.0   /* 2^53: offsets and sizes are exact below it */
#define IO_CHUNK ((size_t)1 << 30)

static const struct {
    const char *code;
    int dtype;
} DTYPES[] = {{"F32", EMBER_FLOAT32}, {"F64", EMBER_FLOAT64}, {"F16", EMBER_FLOAT16}, {"BF16", EMBER_BFLOAT16},
              {"I32", EMBER_INT32},   {"I64", EMBER_INT64},   {"U8", EMBER_UINT8},    {"BOOL", EMBER_BOOL}};

const char *ember_st_dtype_name(int dtype)
{
    for (size_t i = 0; i < sizeof DTYPES / sizeof *DTYPES; i++)
        if (DTYPES[i].dtype == dtype) return DTYPES[i].code;
    return NULL;
}

/* "<op>: <what>: <message>" as the error, with status */
static int failv(int status, const char *op, const char *what, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return ember__fail(status, "%s: %s: %s", op, what, msg);
}

static int load_fail(const char *what, const char *fmt, ...) EMBER_PRINTF(2, 3);
static int load_fail(const char *what, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = failv(EMBER_ERR_IO, "load", what, fmt, ap);
    va_end(ap);
    return rc;
}

/* ------------------------------------------------------------------ reading */
typedef struct {
    char *name;
    size_t name_len;
    int dtype, ndim;
    int64_t shape[EMBER_MAX_DIMS];
    uint64_t begin, end;
} st_entry;

typedef struct {
    char *key, *value;
    size_t key_len, value_len;
} st_meta;

struct ember_st_file {
    int fd;                     /* -1: the bytes are mem[0, mem_len) */
    const unsigned char *mem;
    uint64_t size, data_start;
    char *what;                 /* the path, for messages */
    int n, nmeta;
    st_entry *entries;          /* sorted by offset */
    st_meta *meta;
};

/* Reads exactly n bytes at off; retries partial reads and EINTR. */
static int read_at(ember_st_file *f, void *buf, uint64_t n, uint64_t off)
{
    if (f->fd < 0) {
        if (off > f->size || n > f->size - off)
            return load_fail(f->what, "truncated: expected %llu bytes at offset %llu", (unsigned long long)n,
                             (unsigned long long)off);
        if (n) memcpy(buf, f->mem + off, (size_t)n);
        return EMBER_OK;
    }
    uint64_t done = 0;
    while (done < n) {
        size_t chunk = n - done < IO_CHUNK ? (size_t)(n - done) : IO_CHUNK;
        int64_t r = ember__file_read_at(f->fd, (char *)buf + done, chunk, off + done);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return load_fail(f->what, "read failed: %s", strerror(errno));
        if (r == 0)
            return load_fail(f->what, "truncated: expected %llu bytes at offset %llu, got %llu", (unsigned long long)n,
                             (unsigned long long)off, (unsigned long long)done);
        done += (uint64_t)r;
    }
    return EMBER_OK;
}

static int is_uint(const json_node *v)
{
    return v->type == JSON_NUMBER && v->num >= 0 && v->num <= MAX_INT && v->num == (double)(uint64_t)v->num;
}

/* a JSON value as Lua's tostring would show the decoded value, for messages */
static const char *shown(char *buf, size_t cap, const json_node *v)
{
    if (v->type == JSON_NUMBER) snprintf(buf, cap, "%.14g", v->num);
    else if (v->type == JSON_STRING) snprintf(buf, cap, "%s", v->str);
    else snprintf(buf, cap, "%.*s", (int)(v->text_len < 40 ? v->text_len : 40), v->text);
    return buf;
}

/* One header entry {"dtype", "shape", "data_offsets"} into e; other keys are ignored. */
static int check_entry(ember_st_file *f, const json_node *it, st_entry *e)
{
    const char *name = it->key;
    if (it->type != JSON_OBJECT) return load_fail(f->what, "entry '%s' is not an object", name);
    const json_node *dt = json_get(it, "dtype"), *shape = json_get(it, "shape"), *offs = json_get(it, "data_offsets");
    if (!dt || dt->type != JSON_STRING) return load_fail(f->what, "tensor '%s': dtype missing or not a string", name);
    e->dtype = -1;
    for (size_t i = 0; i < sizeof DTYPES / sizeof *DTYPES; i++)
        if (strlen(DTYPES[i].code) == dt->len && memcmp(DTYPES[i].code, dt->str, dt->len) == 0) e->dtype = DTYPES[i].dtype;
    if (e->dtype < 0) return load_fail(f->what, "tensor '%s': unknown dtype '%s'", name, dt->str);
    if (!shape || shape->type != JSON_ARRAY) return load_fail(f->what, "tensor '%s': shape missing or not an array", name);
    if (shape->n > EMBER_MAX_DIMS)
        return load_fail(f->what, "tensor '%s': %d dims (at most %d are supported)", name, shape->n, EMBER_MAX_DIMS);
    double numel = 1;
    char sb[64], dims[EMBER_MAX_DIMS * 22 + 1] = "";
    size_t dl = 0;
    for (int d = 0; d < shape->n; d++) {
        const json_node *v = &shape->items[d];
        if (!is_uint(v))
            return load_fail(f->what, "tensor '%s': bad size %s at position %d of the shape", name, shown(sb, sizeof sb, v),
                             d + 1);
        e->shape[d] = (int64_t)v->num;
        numel *= v->num;
        dl += (size_t)snprintf(dims + dl, sizeof dims - dl, "%s%lld", d ? "," : "", (long long)e->shape[d]);
    }
    e->ndim = shape->n;
    if (numel > MAX_INT) return load_fail(f->what, "tensor '%s': absurd shape (%g elements)", name, numel);
    if (!offs || offs->type != JSON_ARRAY || offs->n != 2 || !is_uint(&offs->items[0]) || !is_uint(&offs->items[1]))
        return load_fail(f->what, "tensor '%s': data_offsets must be an array of two non-negative integers", name);
    e->begin = (uint64_t)offs->items[0].num;
    e->end = (uint64_t)offs->items[1].num;
    unsigned long long b = e->begin, en = e->end;
    if (en < b) return load_fail(f->what, "tensor '%s': data_offsets [%llu,%llu] end before they begin", name, b, en);
    uint64_t need = (uint64_t)numel * (uint64_t)ember_dtype_size(e->dtype);
    if (en - b != need)
        return load_fail(f->what, "tensor '%s': data_offsets [%llu,%llu] hold %llu bytes but %s of shape {%s} needs %llu",
                         name, b, en, en - b, dt->str, dims, (unsigned long long)need);
    return EMBER_OK;
}

static int name_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

static int by_offset(const void *pa, const void *pb)
{
    const st_entry *a = pa, *b = pb;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    return name_cmp(a->name, a->name_len, b->name, b->name_len);
}

/* Moves a string out of the tree (the tree is freed after). */
static char *take(char **s)
{
    char *r = *s;
    *s = NULL;
    return r;
}

/* The entries and metadata of the header object root. */
static int read_entries(ember_st_file *f, json_node *root)
{
    f->entries = calloc((size_t)root->n + 1, sizeof *f->entries);
    if (!f->entries) return ember__fail(EMBER_ERR_OOM, "load: %s: out of memory", f->what);
    for (int i = 0; i < root->n; i++) {
        json_node *it = &root->items[i];
        if (strcmp(it->key, "__metadata__") == 0 && it->key_len == 12) {
            if (it->type != JSON_OBJECT) return load_fail(f->what, "__metadata__ is not an object");
            for (int k = 0; k < it->n; k++)
                if (it->items[k].type != JSON_STRING)
                    return load_fail(f->what, "__metadata__ value of '%s' is not a string", it->items[k].key);
            f->meta = calloc((size_t)it->n + 1, sizeof *f->meta);
            if (!f->meta) return ember__fail(EMBER_ERR_OOM, "load: %s: out of memory", f->what);
            for (int k = 0; k < it->n; k++) {
                json_node *m = &it->items[k];
                f->meta[k] = (st_meta){take(&m->key), take(&m->str), m->key_len, m->len};
                f->nmeta++;
            }
            continue;
        }
        st_entry *e = &f->entries[f->n];
        EMBER_TRY(check_entry(f, it, e));
        e->name_len = it->key_len;
        e->name = take(&it->key);
        f->n++;
    }
    qsort(f->entries, (size_t)f->n, sizeof *f->entries, by_offset);
    /* safetensors: the ranges tile the data buffer exactly, in order */
    unsigned long long data_len = f->size - f->data_start, cursor = 0;
    for (int i = 0; i < f->n; i++) {
        const st_entry *e = &f->entries[i];
        unsigned long long b = e->begin, en = e->end;
        if (en > data_len)
            return load_fail(f->what, "tensor '%s': data_offsets [%llu,%llu] go past the end of the data "
                             "(%llu bytes; truncated file?)", e->name, b, en, data_len);
        if (b < cursor)
            return load_fail(f->what, "tensor '%s': data_offsets [%llu,%llu] overlap the previous tensor (which ends at %llu)",
                             e->name, b, en, cursor);
        if (b > cursor)
            return load_fail(f->what, "tensor '%s': data_offsets [%llu,%llu] leave a gap after byte %llu", e->name, b, en,
                             cursor);
        cursor = en;
    }
    if (cursor != data_len)
        return load_fail(f->what, "%llu unexpected bytes after the last tensor (data is %llu bytes, tensors cover %llu)",
                         data_len - cursor, data_len, cursor);
    return EMBER_OK;
}

static int read_header(ember_st_file *f)
{
    if (f->size < 8)
        return load_fail(f->what, "file too short (%llu bytes) to hold a safetensors header", (unsigned long long)f->size);
    unsigned char b8[8];
    EMBER_TRY(read_at(f, b8, 8, 0));
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | b8[i];
    if (n > EMBER_ST_MAX_HEADER)
        return load_fail(f->what, "header length %.0f exceeds the %d MB limit", (double)n, EMBER_ST_MAX_HEADER / 1000000);
    if (n > f->size - 8)
        return load_fail(f->what, "header length %llu exceeds the file size (%llu bytes)", (unsigned long long)n,
                         (unsigned long long)f->size);
    if (n < 2) return load_fail(f->what, "header length %llu is too small", (unsigned long long)n);
    f->data_start = 8 + n;
    char *text = malloc((size_t)n);
    if (!text) return ember__fail(EMBER_ERR_OOM, "load: %s: out of memory reading a header of %llu bytes", f->what,
                                  (unsigned long long)n);
    int rc = read_at(f, text, n, 8);
    if (rc == EMBER_OK && text[0] != '{')
        rc = load_fail(f->what, "header is not a JSON object (it does not start with '{')");
    json_node root;
    char msg[256];
    int jrc = rc == EMBER_OK ? json_parse(text, (size_t)n, &root, msg, sizeof msg) : 0;
    free(text);
    if (rc < 0) return rc;
    if (jrc == -2) return ember__fail(EMBER_ERR_OOM, "load: %s: out of memory reading the header", f->what);
    if (jrc < 0) return load_fail(f->what, "header: %s", msg);
    rc = root.type == JSON_OBJECT ? read_entries(f, &root) : load_fail(f->what, "header is not a JSON object");
    json_free(&root);
    return rc;
}

void ember_st_close(ember_st_file *f)
{
    if (!f) return;
    if (f->fd >= 0) ember__file_close(f->fd);
    for (int i = 0; i < f->n; i++) free(f->entries[i].name);
    for (int i = 0; i < f->nmeta; i++) {
        free(f->meta[i].key);
        free(f->meta[i].value);
    }
    free(f->entries);
    free(f->meta);
    free(f->what);
    free(f);
}

static int st_new(const char *what, ember_st_file **out)
{
    *out = NULL;
    ember_st_file *f = calloc(1, sizeof *f);
    if (f) f->what = strdup(what);
    if (!f || !f->what) {
        free(f);
        return ember__fail(EMBER_ERR_OOM, "load: %s: out of memory", what);
    }
    f->fd = -1;
    *out = f;
    return EMBER_OK;
}

static int st_finish(ember_st_file *f, ember_st_file **out)
{
    int rc = read_header(f);
    if (rc < 0) {
        ember_st_close(f);
        return rc;
    }
    *out = f;
    return EMBER_OK;
}

int ember_st_open(const char *path, ember_st_file **out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "load: NULL argument");
    *out = NULL;
    if (!path) return ember__fail(EMBER_ERR_ARG, "load: NULL argument");
    ember_st_file *f;
    EMBER_TRY(st_new(path, &f));
    f->fd = ember__file_open_read(path);   /* a FIFO must not block the open */
    int rc = EMBER_OK, kind = 0;
    uint64_t size = 0;
    if (f->fd < 0) rc = load_fail(path, "cannot open: %s", strerror(errno));
    else if (ember__file_stat(f->fd, &kind, &size) != 0) rc = load_fail(path, "cannot read its size: %s", strerror(errno));
    else if (kind == EMBER_FILE_DIR) rc = load_fail(path, "read failed: %s", strerror(EISDIR));
    else if (kind != EMBER_FILE_REGULAR) rc = load_fail(path, "not a regular file (a safetensors file is read by offset)");
    if (rc < 0) {
        ember_st_close(f);
        return rc;
    }
    f->size = size;
    return st_finish(f, out);
}

int ember__st_open_mem(const unsigned char *buf, size_t len, const char *what, ember_st_file **out)
{
    ember_st_file *f;
    EMBER_TRY(st_new(what, &f));
    f->mem = buf;
    f->size = len;
    return st_finish(f, out);
}

int ember_st_count(const ember_st_file *f) { return f ? f->n : 0; }
int ember_st_meta_count(const ember_st_file *f) { return f ? f->nmeta : 0; }

int ember_st_entry(const ember_st_file *f, int i, const char **name, size_t *name_len, int *dtype, int *ndim,
                   const int64_t **shape, uint64_t *begin, uint64_t *end)
{
    if (!f || i < 0 || i >= f->n) return ember__fail(EMBER_ERR_ARG, "st_entry: no entry %d", i);
    const st_entry *e = &f->entries[i];
    if (name) *name = e->name;
    if (name_len) *name_len = e->name_len;
    if (dtype) *dtype = e->dtype;
    if (ndim) *ndim = e->ndim;
    if (shape) *shape = e->shape;
    if (begin) *begin = e->begin;
    if (end) *end = e->end;
    return EMBER_OK;
}

int ember_st_meta(const ember_st_file *f, int i, const char **key, size_t *key_len, const char **value, size_t *value_len)
{
    if (!f || i < 0 || i >= f->nmeta) return ember__fail(EMBER_ERR_ARG, "st_meta: no metadata entry %d", i);
    if (key) *key = f->meta[i].key;
    if (key_len) *key_len = f->meta[i].key_len;
    if (value) *value = f->meta[i].value;
    if (value_len) *value_len = f->meta[i].value_len;
    return EMBER_OK;
}

int ember_st_read(ember_st_file *f, int i, ember_tensor **out)
{
    if (!out) return ember__fail(EMBER_ERR_ARG, "st_read: NULL argument");
    *out = NULL;
    if (!f || i < 0 || i >= f->n) return ember__fail(EMBER_ERR_ARG, "st_read: no entry %d", i);
    const st_entry *e = &f->entries[i];
    ember_tensor *t = NULL;
    int rc = ember__new(e->ndim, e->shape, e->dtype, EMBER_CPU, &t);
    if (rc < 0) {   /* out of memory, or a shape ember cannot make */
        char inner[512];
        snprintf(inner, sizeof inner, "%s", ember_last_error());
        return ember__fail(rc == EMBER_ERR_OOM ? rc : EMBER_ERR_IO, "load: %s: tensor '%s': %s", f->what, e->name, inner);
    }
    unsigned char *p = (unsigned char *)ember__ptr(t);
    uint64_t n = e->end - e->begin;
    rc = read_at(f, p, n, f->data_start + e->begin);
    if (rc < 0) {
        ember_tensor_release(t);
        return rc;
    }
    if (e->dtype == EMBER_BOOL)   /* any nonzero byte is true, as a cast to bool makes it */
        for (uint64_t k = 0; k < n; k++) p[k] = p[k] != 0;
    *out = t;
    return EMBER_OK;
}

/* ------------------------------------------------------------------ the list API over the reader */
struct ember_named_tensors {
    int n;
    char **names;
    ember_tensor **tensors;
};

void ember_named_free(ember_named_tensors *l)
{
    if (!l) return;
    for (int i = 0; i < l->n; i++) {
        free(l->names[i]);
        ember_tensor_release(l->tensors[i]);
    }
    free(l->names);
    free(l->tensors);
    free(l);
}

int ember_named_count(const ember_named_tensors *l) { return l ? l->n : 0; }
const char *ember_named_name(const ember_named_tensors *l, int i) { return l && i >= 0 && i < l->n ? l->names[i] : NULL; }
ember_tensor *ember_named_tensor(const ember_named_tensors *l, int i)
{
    return l && i >= 0 && i < l->n ? l->tensors[i] : NULL;
}

ember_tensor *ember_named_find(const ember_named_tensors *l, const char *name)
{
    for (int i = 0; l && name && i < l->n; i++)
        if (strcmp(l->names[i], name) == 0) return l->tensors[i];
    return NULL;
}

int ember_load(const char *path, ember_named_tensors **out)
{
    if (!path || !out) return ember__fail(EMBER_ERR_ARG, "load: NULL argument");
    *out = NULL;
    ember_st_file *f;
    EMBER_TRY(ember_st_open(path, &f));
    ember_named_tensors *l = calloc(1, sizeof *l);
    if (l) {
        l->names = calloc((size_t)f->n + 1, sizeof *l->names);
        l->tensors = calloc((size_t)f->n + 1, sizeof *l->tensors);
    }
    int rc = l && l->names && l->tensors ? EMBER_OK : ember__fail(EMBER_ERR_OOM, "load: %s: out of memory", path);
    for (int i = 0; rc == EMBER_OK && i < f->n; i++) {
        rc = ember_st_read(f, i, &l->tensors[i]);
        if (rc < 0) break;
        l->names[i] = strdup(f->entries[i].name);
        l->n++;
        if (!l->names[i]) rc = ember__fail(EMBER_ERR_OOM, "load: %s: out of memory", path);
    }
    ember_st_close(f);
    if (rc < 0) {
        ember_named_free(l);
        return rc;
    }
    *out = l;
    return EMBER_OK;
}

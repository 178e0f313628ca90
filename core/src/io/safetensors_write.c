/* safetensors_write.c: the writer of the safetensors codec (safetensors.c
   reads). The header is written as ember has always written it, byte for
   byte: compact JSON, "__metadata__" first when there is one, then the
   entries in the caller's order (ember.save sorts them by name), strings
   escaped as ember.json.encode_string escapes them, the whole padded with
   spaces to a multiple of 8. The file is written beside the target under
   `<path>.tmp.<pid>.<n>`, fsynced, renamed over it and its folder fsynced. */
#include "../dtr.h"
#include "../internal.h"
#include "../platform.h"
#include "json.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifndef PATH_MAX   /* Windows: MAX_PATH (260) is too few for the long paths it allows */
#define PATH_MAX 4096
#endif

#define IO_CHUNK ((size_t)1 << 30)

static int save_fail(int status, const char *path, const char *fmt, ...) EMBER_PRINTF(3, 4);
static int save_fail(int status, const char *path, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ember__fail(status, "save: %s: %s", path, msg);
}

/* ------------------------------------------------------------------ checks */
static int cmp_str(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

typedef struct {
    const char *s;
    size_t n;
} str_ref;

static int by_str(const void *a, const void *b)
{
    const str_ref *x = a, *y = b;
    return cmp_str(x->s, x->n, y->s, y->n);
}

/* The first of strs[0, n) met twice, or NULL; -1 in *oom when memory ran out. */
static const char *duplicate(const str_ref *strs, int n, int *oom)
{
    *oom = 0;
    if (n < 2) return NULL;
    str_ref *v = malloc((size_t)n * sizeof *v);
    if (!v) {
        *oom = 1;
        return NULL;
    }
    memcpy(v, strs, (size_t)n * sizeof *v);
    qsort(v, (size_t)n, sizeof *v, by_str);
    const char *dup = NULL;
    for (int i = 1; i < n && !dup; i++)
        if (by_str(&v[i - 1], &v[i]) == 0) dup = v[i].s;
    free(v);
    return dup;
}

static int check_args(const char *path, int n, const ember_st_named *entries, int nmeta, const ember_st_kv *meta)
{
    if (!path || n < 0 || (n > 0 && !entries) || (nmeta > 0 && !meta))
        return ember__fail(EMBER_ERR_ARG, "save: NULL argument");
    str_ref *names = malloc(((size_t)n + (size_t)(nmeta > 0 ? nmeta : 0) + 1) * sizeof *names);
    if (!names) return save_fail(EMBER_ERR_OOM, path, "out of memory");
    int rc = EMBER_OK, oom;
    for (int i = 0; i < n && rc == EMBER_OK; i++) {
        const ember_st_named *e = &entries[i];
        if (!e->name || !e->tensor || e->tensor->refcount <= 0)
            rc = save_fail(EMBER_ERR_ARG, path, "entry %d has no name or no live tensor", i + 1);
        else if (e->name_len == 12 && memcmp(e->name, "__metadata__", 12) == 0)
            rc = save_fail(EMBER_ERR_ARG, path, "'__metadata__' is reserved and cannot name a tensor");
        else if (!json_valid_utf8(e->name, e->name_len))
            rc = save_fail(EMBER_ERR_ARG, path, "tensor name '%.*s' is not valid UTF-8", (int)e->name_len, e->name);
        else if (!ember_st_dtype_name(e->tensor->dtype))
            rc = save_fail(EMBER_ERR_DTYPE, path, "tensor '%s': dtype %s has no safetensors name", e->name,
                           ember_dtype_name(e->tensor->dtype));
        names[i] = (str_ref){e->name, e->name_len};
    }
    const char *dup = rc == EMBER_OK ? duplicate(names, n, &oom) : NULL;
    if (rc == EMBER_OK && oom) rc = save_fail(EMBER_ERR_OOM, path, "out of memory");
    if (dup) rc = save_fail(EMBER_ERR_ARG, path, "name '%s' appears twice", dup);
    for (int i = 0; i < nmeta && rc == EMBER_OK; i++) {
        const ember_st_kv *m = &meta[i];
        if (!m->key || !m->value) rc = ember__fail(EMBER_ERR_ARG, "save: NULL argument");
        else if (!json_valid_utf8(m->key, m->key_len))
            rc = save_fail(EMBER_ERR_ARG, path, "metadata key '%.*s' is not valid UTF-8", (int)m->key_len, m->key);
        else if (!json_valid_utf8(m->value, m->value_len))
            rc = save_fail(EMBER_ERR_ARG, path, "metadata value of '%s' is not valid UTF-8", m->key);
        names[i] = (str_ref){m->key, m->key_len};
    }
    dup = rc == EMBER_OK ? duplicate(names, nmeta, &oom) : NULL;
    if (rc == EMBER_OK && oom) rc = save_fail(EMBER_ERR_OOM, path, "out of memory");
    if (dup) rc = save_fail(EMBER_ERR_ARG, path, "metadata key '%s' appears twice", dup);
    free(names);
    return rc;
}

/* The 8-byte length and the padded header, in t. */
static void build_header(json_text *t, int n, const ember_st_named *entries, int nmeta, const ember_st_kv *meta)
{
    json_put(t, "\0\0\0\0\0\0\0\0{", 9);
    if (nmeta >= 0) {
        json_puts(t, "\"__metadata__\":{");
        for (int i = 0; i < nmeta; i++) {
            if (i) json_puts(t, ",");
            json_put_string(t, meta[i].key, meta[i].key_len);
            json_puts(t, ":");
            json_put_string(t, meta[i].value, meta[i].value_len);
        }
        json_puts(t, n ? "}," : "}");
    }
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const ember_tensor *x = entries[i].tensor;
        uint64_t bytes = (uint64_t)x->numel * (uint64_t)ember_dtype_size(x->dtype);
        if (i) json_puts(t, ",");
        json_put_string(t, entries[i].name, entries[i].name_len);
        json_printf(t, ":{\"dtype\":\"%s\",\"shape\":[", ember_st_dtype_name(x->dtype));
        for (int d = 0; d < x->ndim; d++) json_printf(t, "%s%lld", d ? "," : "", (long long)x->shape[d]);
        json_printf(t, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                    (unsigned long long)(offset + bytes));
        offset += bytes;
    }
    json_puts(t, "}");
    while ((t->len - 8) % 8) json_puts(t, " ");
    if (t->oom) return;
    uint64_t hl = t->len - 8;
    for (int i = 0; i < 8; i++) t->p[i] = (char)(unsigned char)(hl >> (8 * i));
}

/* ------------------------------------------------------------------ the file */
/* Temporaries `<path>.tmp.<pid>.<n>` whose writer is gone (killed mid-write)
   are removed; those of live processes are left alone. */
typedef struct {
    char dir[PATH_MAX], prefix[PATH_MAX];
    int np, removed;
} stale_scan;

static void remove_if_stale(const char *name, void *arg)
{
    stale_scan *sc = arg;
    if (strncmp(name, sc->prefix, (size_t)sc->np) != 0) return;
    char *endp = NULL;
    long pid = strtol(name + sc->np, &endp, 10);
    if (pid <= 0 || !endp || *endp != '.') return;
    if (ember__process_alive(pid)) return;   /* its writer may still be at work */
    char full[PATH_MAX * 2];
    snprintf(full, sizeof full, "%s/%s", sc->dir, name);
    if (ember__file_remove(full) == 0) sc->removed++;
}

int ember_remove_stale_temps(const char *path)
{
    if (!path) return ember__fail(EMBER_ERR_ARG, "remove_stale_temps: path is NULL");
    stale_scan sc = {.removed = 0};
    const char *slash = ember__path_last_sep(path);
    const char *base = slash ? slash + 1 : path;
    if (slash) snprintf(sc.dir, sizeof sc.dir, "%.*s", (int)(slash - path) > 0 ? (int)(slash - path) : 1, path);
    else snprintf(sc.dir, sizeof sc.dir, ".");
    sc.np = snprintf(sc.prefix, sizeof sc.prefix, "%s.tmp.", base);
    if (sc.np <= 0 || (size_t)sc.np >= sizeof sc.prefix) return EMBER_OK;
    if (!ember__dir_each(sc.dir, remove_if_stale, &sc)) return EMBER_OK;
    return sc.removed;
}

/* Writes exactly n bytes; retries partial writes and EINTR. */
static int write_all(int fd, const char *path, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        int64_t r = ember__file_write(fd, p, n < IO_CHUNK ? n : IO_CHUNK);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return save_fail(EMBER_ERR_IO, path, "write failed: %s", strerror(errno));
        if (r == 0) return save_fail(EMBER_ERR_IO, path, "write failed: no progress");
        p += r;
        n -= (size_t)r;
    }
    return EMBER_OK;
}

static int open_temp(const char *path, char *tmp, size_t cap)
{
    static unsigned counter;
    for (int tries = 0; tries < 16; tries++) {
        unsigned k = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
        int w = snprintf(tmp, cap, "%s.tmp.%ld.%x%04x", path, ember__process_id(), k,
                         (unsigned)((unsigned long)clock() ^ (unsigned long)time(NULL)) & 0xffff);
        if (w < 0 || (size_t)w >= cap) return save_fail(EMBER_ERR_IO, path, "the path is too long");
        int fd = ember__file_create_new(tmp);
        if (fd >= 0) return fd;
        if (errno != EEXIST) return save_fail(EMBER_ERR_IO, path, "cannot create %s: %s", tmp, strerror(errno));
    }
    return save_fail(EMBER_ERR_IO, path, "cannot create a temporary file next to it");
}

/* One tensor's bytes, from the CPU (a copy from another device first) in its logical order. */
static int write_tensor(int fd, const char *path, const ember_st_named *e)
{
    ember_tensor *host = NULL, *c = NULL;
    int rc = EMBER_OK;
    if (e->tensor->numel == 0) return EMBER_OK;
    if (e->tensor->storage->device != EMBER_CPU) rc = ember_to_device(e->tensor, EMBER_CPU, &host);
    if (rc == EMBER_OK) rc = ember_contiguous(host ? host : e->tensor, &c);
    if (rc == EMBER_OK && ember__dtr_on) rc = ember__dtr_ready(c);   /* evicted: remade before it is read */
    if (rc < 0) {
        char inner[512];
        snprintf(inner, sizeof inner, "%s", ember_last_error());
        rc = save_fail(rc, path, "tensor '%s': %s", e->name, inner);
    } else {
        rc = write_all(fd, path, ember__ptr(c), (size_t)c->numel * (size_t)ember_dtype_size(c->dtype));
    }
    ember_tensor_release(c);
    ember_tensor_release(host);
    return rc;
}

int ember_st_save(const char *path, int n, const ember_st_named *entries, int nmeta, const ember_st_kv *meta)
{
    EMBER_TRY(check_args(path, n, entries, nmeta, meta));
    json_text h = {0};
    build_header(&h, n, entries, nmeta, meta);
    if (h.oom) {
        free(h.p);
        return save_fail(EMBER_ERR_OOM, path, "out of memory building the header");
    }
    ember_remove_stale_temps(path);   /* what a writer killed mid-save left beside the file */
    char tmp[PATH_MAX + 64];
    int fd = open_temp(path, tmp, sizeof tmp);
    if (fd < 0) {
        free(h.p);
        return fd;
    }
    int rc = write_all(fd, path, h.p, h.len);
    free(h.p);
    for (int i = 0; i < n && rc == EMBER_OK; i++) rc = write_tensor(fd, path, &entries[i]);
    if (rc == EMBER_OK && ember__file_sync(fd) != 0)
        rc = save_fail(EMBER_ERR_IO, path, "fsync failed: %s", strerror(errno));
    if (ember__file_close(fd) != 0 && rc == EMBER_OK)
        rc = save_fail(EMBER_ERR_IO, path, "close failed: %s", strerror(errno));
    if (rc == EMBER_OK && ember__file_replace(tmp, path) != 0)
        rc = save_fail(EMBER_ERR_IO, path, "cannot rename %s over it: %s", tmp, strerror(errno));
    if (rc < 0) {
        ember__file_remove(tmp);
        return rc;
    }
    ember__dir_sync(path);
    return EMBER_OK;
}

int ember_save(const char *path, int n, const char *const *names, ember_tensor *const *tensors)
{
    if (!path || n < 0 || (n > 0 && (!names || !tensors))) return ember__fail(EMBER_ERR_ARG, "save: NULL argument");
    ember_st_named *e = calloc((size_t)n + 1, sizeof *e);
    if (!e) return save_fail(EMBER_ERR_OOM, path, "out of memory");
    for (int i = 0; i < n; i++) e[i] = (ember_st_named){names[i], names[i] ? strlen(names[i]) : 0, tensors[i]};
    int rc = ember_st_save(path, n, e, -1, NULL);
    free(e);
    return rc;
}

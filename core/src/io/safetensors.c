/* safetensors.c: the safetensors format from C, so a host can load weights
   trained in Lua and save its own: an 8-byte little-endian header length, a
   JSON header {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets":
   [begin, end]}, ..., "__metadata__": {...}}, then the data. The reader
   trusts nothing in the file: every length, offset, shape and string is
   checked against the bytes actually there before anything is allocated
   (core/tests/fuzz_safetensors.c fuzzes it). Writes are atomic: a temporary
   file beside the target, renamed over it. */
#include "../internal.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_HEADER ((uint64_t)100 << 20)   /* as the reference implementation */

struct ember_named_tensors {
    int n;
    char **names;
    ember_tensor **tensors;
};

static const struct {
    const char *code;
    int dtype;
} DTYPES[] = {{"F32", EMBER_FLOAT32}, {"F64", EMBER_FLOAT64}, {"F16", EMBER_FLOAT16}, {"BF16", EMBER_BFLOAT16},
              {"I32", EMBER_INT32},   {"I64", EMBER_INT64},   {"U8", EMBER_UINT8},    {"BOOL", EMBER_BOOL}};

/* ------------------------------------------------------------------ a strict little JSON reader */
typedef struct {
    const char *p, *end;
    const char *what;   /* for messages: the file */
} cursor;

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int expect(cursor *c, char ch)
{
    skip_ws(c);
    if (c->p >= c->end || *c->p != ch)
        return ember__fail(EMBER_ERR_IO, "load: %s: bad header: expected '%c'%s", c->what, ch,
                           c->p >= c->end ? " before its end" : "");
    c->p++;
    return EMBER_OK;
}

/* A JSON string into out (at most cap - 1 bytes, NUL-terminated); escapes
   other than \" \\ \/ are refused (tensor names do not need them). */
static int read_string(cursor *c, char *out, size_t cap)
{
    EMBER_TRY(expect(c, '"'));
    size_t n = 0;
    while (c->p < c->end && *c->p != '"') {
        char ch = *c->p++;
        if ((unsigned char)ch < 0x20) return ember__fail(EMBER_ERR_IO, "load: %s: bad header: control character in a string", c->what);
        if (ch == '\\') {
            if (c->p >= c->end) break;
            ch = *c->p++;
            if (ch != '"' && ch != '\\' && ch != '/')
                return ember__fail(EMBER_ERR_IO, "load: %s: bad header: unsupported escape \\%c in a string", c->what, ch);
        }
        if (n + 1 >= cap) return ember__fail(EMBER_ERR_IO, "load: %s: bad header: a string longer than %zu bytes", c->what, cap - 1);
        out[n++] = ch;
    }
    if (c->p >= c->end) return ember__fail(EMBER_ERR_IO, "load: %s: bad header: unterminated string", c->what);
    c->p++;
    out[n] = 0;
    return EMBER_OK;
}

static int read_uint(cursor *c, uint64_t *v)
{
    skip_ws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
        return ember__fail(EMBER_ERR_IO, "load: %s: bad header: expected a non-negative integer", c->what);
    uint64_t x = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        unsigned d = (unsigned)(*c->p++ - '0');
        if (x > (UINT64_MAX - d) / 10) return ember__fail(EMBER_ERR_IO, "load: %s: bad header: an integer overflows", c->what);
        x = x * 10 + d;
    }
    *v = x;
    return EMBER_OK;
}

/* Skips a JSON string of any length (metadata values hold free text and
   ember.save's nested structure), checking its escapes as RFC 8259 does. */
static int skip_string(cursor *c)
{
    EMBER_TRY(expect(c, '"'));
    while (c->p < c->end && *c->p != '"') {
        unsigned char ch = (unsigned char)*c->p++;
        if (ch < 0x20) return ember__fail(EMBER_ERR_IO, "load: %s: bad header: control character in a string", c->what);
        if (ch != '\\' || c->p >= c->end) continue;
        ch = (unsigned char)*c->p++;
        if (ch == 'u') {
            for (int i = 0; i < 4; i++, c->p++)
                if (c->p >= c->end || !isxdigit((unsigned char)*c->p))
                    return ember__fail(EMBER_ERR_IO, "load: %s: bad header: bad \\u escape in a string", c->what);
        } else if (ch == 0 || !strchr("\"\\/bfnrt", ch)) {
            return ember__fail(EMBER_ERR_IO, "load: %s: bad header: unsupported escape \\%c in a string", c->what, ch);
        }
    }
    return expect(c, '"');
}

/* skips any JSON value (for __metadata__), nesting at most 64 deep */
static int skip_value(cursor *c, int depth)
{
    if (depth > 64) return ember__fail(EMBER_ERR_IO, "load: %s: bad header: nested too deeply", c->what);
    skip_ws(c);
    if (c->p >= c->end) return ember__fail(EMBER_ERR_IO, "load: %s: bad header: truncated", c->what);
    char ch = *c->p;
    if (ch == '"') return skip_string(c);
    if (ch == '{' || ch == '[') {
        char close = ch == '{' ? '}' : ']';
        c->p++;
        skip_ws(c);
        if (c->p < c->end && *c->p == close) {
            c->p++;
            return EMBER_OK;
        }
        for (;;) {
            if (ch == '{') {
                EMBER_TRY(skip_string(c));
                EMBER_TRY(expect(c, ':'));
            }
            EMBER_TRY(skip_value(c, depth + 1));
            skip_ws(c);
            if (c->p < c->end && *c->p == ',') {
                c->p++;
                continue;
            }
            return expect(c, close);
        }
    }
    /* numbers, true, false, null */
    const char *start = c->p;
    while (c->p < c->end && (strchr("+-.eE", *c->p) || (*c->p >= '0' && *c->p <= '9') || (*c->p >= 'a' && *c->p <= 'z')))
        c->p++;
    if (c->p == start) return ember__fail(EMBER_ERR_IO, "load: %s: bad header: unexpected character '%c'", c->what, ch);
    return EMBER_OK;
}

/* ------------------------------------------------------------------ parsing */
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

static int add_entry(ember_named_tensors *l, const char *name, ember_tensor *t)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], name) == 0) return ember__fail(EMBER_ERR_IO, "load: tensor '%s' appears twice", name);
    char **nn = realloc(l->names, (size_t)(l->n + 1) * sizeof *nn);
    if (nn) l->names = nn;
    ember_tensor **nt = realloc(l->tensors, (size_t)(l->n + 1) * sizeof *nt);
    if (nt) l->tensors = nt;
    char *copy = strdup(name);
    if (!nn || !nt || !copy) {
        free(copy);
        return ember__fail(EMBER_ERR_OOM, "load: out of memory");
    }
    l->names[l->n] = copy;
    l->tensors[l->n] = t;
    l->n++;
    return EMBER_OK;
}

/* One entry: {"dtype": ..., "shape": [...], "data_offsets": [b, e]} over data[0, data_len). */
static int parse_entry(cursor *c, const char *name, const unsigned char *data, uint64_t data_len, ember_tensor **out)
{
    char key[64], code[16] = "";
    int64_t shape[EMBER_MAX_DIMS];
    int ndim = -1, have_offsets = 0;
    uint64_t begin = 0, end = 0;
    EMBER_TRY(expect(c, '{'));
    for (;;) {
        EMBER_TRY(read_string(c, key, sizeof key));
        EMBER_TRY(expect(c, ':'));
        if (strcmp(key, "dtype") == 0) {
            EMBER_TRY(read_string(c, code, sizeof code));
        } else if (strcmp(key, "shape") == 0 || strcmp(key, "data_offsets") == 0) {
            int is_shape = key[0] == 's', n = 0;
            uint64_t v[EMBER_MAX_DIMS];
            EMBER_TRY(expect(c, '['));
            skip_ws(c);
            if (c->p < c->end && *c->p == ']') {
                c->p++;
            } else {
                for (;;) {
                    if (n == (is_shape ? EMBER_MAX_DIMS : 2))
                        return ember__fail(EMBER_ERR_IO, "load: %s: tensor '%s': too many entries in %s", c->what, name, key);
                    EMBER_TRY(read_uint(c, &v[n++]));
                    skip_ws(c);
                    if (c->p < c->end && *c->p == ',') {
                        c->p++;
                        continue;
                    }
                    EMBER_TRY(expect(c, ']'));
                    break;
                }
            }
            if (is_shape) {
                ndim = n;
                for (int d = 0; d < n; d++) {
                    if (v[d] > ((uint64_t)1 << 50))
                        return ember__fail(EMBER_ERR_IO, "load: %s: tensor '%s': a size of %llu", c->what, name,
                                           (unsigned long long)v[d]);
                    shape[d] = (int64_t)v[d];
                }
            } else {
                if (n != 2) return ember__fail(EMBER_ERR_IO, "load: %s: tensor '%s': data_offsets needs two numbers", c->what, name);
                begin = v[0];
                end = v[1];
                have_offsets = 1;
            }
        } else {
            EMBER_TRY(skip_value(c, 1));
        }
        skip_ws(c);
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        EMBER_TRY(expect(c, '}'));
        break;
    }
    int dtype = -1;
    for (size_t i = 0; i < sizeof DTYPES / sizeof *DTYPES; i++)
        if (strcmp(DTYPES[i].code, code) == 0) dtype = DTYPES[i].dtype;
    if (dtype < 0) return ember__fail(EMBER_ERR_IO, "load: %s: tensor '%s': dtype '%s' is not one ember reads", c->what, name, code);
    if (ndim < 0 || !have_offsets)
        return ember__fail(EMBER_ERR_IO, "load: %s: tensor '%s': shape or data_offsets missing", c->what, name);
    int64_t numel;
    if (ember__check_shape("load", ndim, shape, &numel) < 0) {
        char sb[200];
        return ember__fail(EMBER_ERR_IO, "load: %s: tensor '%s': shape %s is too large", c->what, name,
                           ember__shape_str(sb, ndim, shape));
    }
    uint64_t need = (uint64_t)numel * (uint64_t)ember_dtype_size(dtype);
    if (begin > end || end > data_len || end - begin != need)
        return ember__fail(EMBER_ERR_IO,
                           "load: %s: tensor '%s': data_offsets [%llu, %llu] do not hold its %llu bytes within the %llu "
                           "bytes of data", c->what, name, (unsigned long long)begin, (unsigned long long)end,
                           (unsigned long long)need, (unsigned long long)data_len);
    if (dtype == EMBER_BOOL)
        for (uint64_t i = begin; i < end; i++)
            if (data[i] > 1) return ember__fail(EMBER_ERR_IO, "load: %s: tensor '%s': a bool that is neither 0 nor 1", c->what, name);
    EMBER_TRY(ember__new(ndim, shape, dtype, EMBER_CPU, out));
    if (need) memcpy(ember__ptr(*out), data + begin, (size_t)need);   /* little-endian, as this machine */
    return EMBER_OK;
}

int ember__safetensors_parse(const unsigned char *buf, size_t len, const char *what, ember_named_tensors **out)
{
    *out = NULL;
    if (len < 8) return ember__fail(EMBER_ERR_IO, "load: %s: %zu bytes is too short for a safetensors file", what, len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | buf[i];
    if (hlen > MAX_HEADER || hlen > len - 8)
        return ember__fail(EMBER_ERR_IO, "load: %s: a header of %llu bytes does not fit a file of %zu bytes", what,
                           (unsigned long long)hlen, len);
    cursor c = {(const char *)buf + 8, (const char *)buf + 8 + hlen, what};
    const unsigned char *data = buf + 8 + hlen;
    uint64_t data_len = len - 8 - hlen;
    ember_named_tensors *l = calloc(1, sizeof *l);
    if (!l) return ember__fail(EMBER_ERR_OOM, "load: out of memory");
    int rc = expect(&c, '{');
    skip_ws(&c);
    if (rc == EMBER_OK && c.p < c.end && *c.p == '}') {
        c.p++;
    } else {
        while (rc == EMBER_OK) {
            char name[1024];
            rc = read_string(&c, name, sizeof name);
            if (rc == EMBER_OK) rc = expect(&c, ':');
            if (rc < 0) break;
            if (strcmp(name, "__metadata__") == 0) {
                rc = skip_value(&c, 1);
            } else {
                ember_tensor *t = NULL;
                rc = parse_entry(&c, name, data, data_len, &t);
                if (rc == EMBER_OK) rc = add_entry(l, name, t);
                if (rc < 0) ember_tensor_release(t);
            }
            if (rc < 0) break;
            skip_ws(&c);
            if (c.p < c.end && *c.p == ',') {
                c.p++;
                continue;
            }
            rc = expect(&c, '}');
            break;
        }
    }
    if (rc == EMBER_OK) {
        skip_ws(&c);
        if (c.p != c.end) rc = ember__fail(EMBER_ERR_IO, "load: %s: bad header: bytes after the closing brace", what);
    }
    if (rc < 0) {
        ember_named_free(l);
        return rc;
    }
    *out = l;
    return EMBER_OK;
}

int ember_load(const char *path, ember_named_tensors **out)
{
    if (!path || !out) return ember__fail(EMBER_ERR_ARG, "load: NULL argument");
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return ember__fail(EMBER_ERR_IO, "load: cannot open %s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || st.st_size < 0) {
        fclose(f);
        return ember__fail(EMBER_ERR_IO, "load: cannot read the size of %s", path);
    }
    size_t len = (size_t)st.st_size;
    unsigned char *buf = malloc(len ? len : 1);
    if (!buf) {
        fclose(f);
        return ember__fail(EMBER_ERR_OOM, "load: %s: out of memory reading %zu bytes", path, len);
    }
    size_t got = fread(buf, 1, len, f);
    fclose(f);
    int rc = got == len ? ember__safetensors_parse(buf, len, path, out)
                        : ember__fail(EMBER_ERR_IO, "load: %s: read %zu of %zu bytes", path, got, len);
    free(buf);
    return rc;
}

/* ------------------------------------------------------------------ writing */
/* Temporaries `<path>.tmp.<pid>.<n>` whose writer is gone (killed mid-write)
   are removed; those of live processes are left alone. */
int ember_remove_stale_temps(const char *path)
{
    if (!path) return ember__fail(EMBER_ERR_ARG, "remove_stale_temps: path is NULL");
    char dir[PATH_MAX], prefix[PATH_MAX];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path) > 0 ? (int)(slash - path) : 1, path);
    else snprintf(dir, sizeof dir, ".");
    int np = snprintf(prefix, sizeof prefix, "%s.tmp.", base);
    if (np <= 0 || (size_t)np >= sizeof prefix) return EMBER_OK;
    DIR *d = opendir(dir);
    if (!d) return EMBER_OK;
    int removed = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, prefix, (size_t)np) != 0) continue;
        char *endp = NULL;
        long pid = strtol(e->d_name + np, &endp, 10);
        if (pid <= 0 || !endp || *endp != '.') continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;   /* its writer may still be at work */
        char full[PATH_MAX * 2];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        if (unlink(full) == 0) removed++;
    }
    closedir(d);
    return removed;
}

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n > 0) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int ember_save(const char *path, int n, const char *const *names, ember_tensor *const *tensors)
{
    if (!path || n < 0 || (n > 0 && (!names || !tensors))) return ember__fail(EMBER_ERR_ARG, "save: NULL argument");
    for (int i = 0; i < n; i++) {
        if (!names[i] || !tensors[i] || tensors[i]->refcount <= 0)
            return ember__fail(EMBER_ERR_ARG, "save: entry %d has no name or no live tensor", i + 1);
        for (const char *s = names[i]; *s; s++)
            if ((unsigned char)*s < 0x20 || *s == '"' || *s == '\\')
                return ember__fail(EMBER_ERR_ARG, "save: name '%s' has a character safetensors names cannot hold", names[i]);
        if (tensors[i]->storage->device != EMBER_CPU)
            return ember__fail(EMBER_ERR_DEVICE, "save: '%s' is not on the CPU; copy it there first", names[i]);
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0) return ember__fail(EMBER_ERR_ARG, "save: name '%s' appears twice", names[i]);
    }
    /* the header, padded with spaces to a multiple of 8 as the format asks */
    size_t cap = 64, len = 0;
    char *h = malloc(cap);
    uint64_t offset = 0;
    int rc = EMBER_OK;
#define APPEND(...)                                                                              \
    do {                                                                                         \
        int k_ = snprintf(h ? h + len : NULL, h ? cap - len : 0, __VA_ARGS__);                   \
        if (h && k_ >= 0 && (size_t)k_ >= cap - len) {                                           \
            size_t nc = (cap + (size_t)k_) * 2;                                                  \
            char *nh = realloc(h, nc);                                                           \
            if (!nh) { free(h); h = NULL; } else { h = nh; cap = nc; }                           \
            if (h) k_ = snprintf(h + len, cap - len, __VA_ARGS__);                               \
        }                                                                                        \
        if (h && k_ > 0) len += (size_t)k_;                                                      \
    } while (0)
    APPEND("{");
    for (int i = 0; i < n && h; i++) {
        const ember_tensor *t = tensors[i];
        const char *code = NULL;
        for (size_t k = 0; k < sizeof DTYPES / sizeof *DTYPES; k++)
            if (DTYPES[k].dtype == t->dtype) code = DTYPES[k].code;
        uint64_t bytes = (uint64_t)t->numel * (uint64_t)ember_dtype_size(t->dtype);
        APPEND("%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", names[i], code ? code : "?");
        for (int d = 0; d < t->ndim; d++) APPEND("%s%lld", d ? "," : "", (long long)t->shape[d]);
        APPEND("],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset, (unsigned long long)(offset + bytes));
        offset += bytes;
    }
    APPEND("}");
    while (h && len % 8) APPEND(" ");
#undef APPEND
    if (!h) return ember__fail(EMBER_ERR_OOM, "save: out of memory building the header");
    ember_remove_stale_temps(path);
    char tmp[PATH_MAX + 64];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld.%lx", path, (long)getpid(), (unsigned long)(uintptr_t)h & 0xffffff);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) {
        free(h);
        return ember__fail(EMBER_ERR_IO, "save: cannot create %s: %s", tmp, strerror(errno));
    }
    unsigned char le[8];
    for (int i = 0; i < 8; i++) le[i] = (unsigned char)((uint64_t)len >> (8 * i));
    if (write_all(fd, le, 8) < 0 || write_all(fd, h, len) < 0) rc = EMBER_ERR_IO;
    for (int i = 0; i < n && rc == EMBER_OK; i++) {
        ember_tensor *c = NULL;
        if (ember_contiguous(tensors[i], &c) < 0) {
            rc = EMBER_ERR_OOM;
            break;
        }
        size_t bytes = (size_t)c->numel * (size_t)ember_dtype_size(c->dtype);
        if (bytes && write_all(fd, ember__ptr(c), bytes) < 0) rc = EMBER_ERR_IO;
        ember_tensor_release(c);
    }
    int err = errno;
    if (rc == EMBER_OK && fsync(fd) != 0) {
        rc = EMBER_ERR_IO;
        err = errno;
    }
    if (close(fd) != 0 && rc == EMBER_OK) rc = EMBER_ERR_IO;
    free(h);
    if (rc == EMBER_OK && rename(tmp, path) != 0) {
        err = errno;
        rc = EMBER_ERR_IO;
    }
    if (rc < 0) {
        unlink(tmp);
        return ember__fail(rc, "save: %s: %s", path, rc == EMBER_ERR_OOM ? "out of memory" : strerror(err));
    }
    return EMBER_OK;
}

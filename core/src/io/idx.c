/* idx.c: the IDX format of MNIST-style data sets, read through zlib (gzip'd
   and plain files alike). Every failure names the path and what is wrong. */
#include "../internal.h"
#include "../platform.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

/* deflate cannot expand data by more than this factor (RFC 1951's longest
   match, 258 bytes, coded in about two bits) */
#define MAX_DEFLATE_RATIO 1032

static int read_exact(gzFile f, void *buf, size_t n, size_t *got)
{
    size_t total = 0;
    while (total < n) {
        unsigned chunk = n - total > (1u << 30) ? (1u << 30) : (unsigned)(n - total);
        int r = gzread(f, (char *)buf + total, chunk);
        if (r <= 0) break;
        total += (size_t)r;
    }
    *got = total;
    return total == n ? EMBER_OK : EMBER_ERR_IO;
}

int ember_load_idx(const char *path, ember_tensor **out)
{
    if (!path || !out) return ember__fail(EMBER_ERR_ARG, "load_idx: NULL argument");
    *out = NULL;
    gzFile f = gzopen(path, "rb");
    if (!f) return ember__fail(EMBER_ERR_IO, "load_idx: cannot open %s: %s", path, strerror(errno ? errno : ENOENT));
    unsigned char magic[4];
    size_t got;
    int rc = EMBER_OK;
    ember_tensor *t = NULL;
    if (read_exact(f, magic, 4, &got) < 0 || magic[0] != 0 || magic[1] != 0) {
        rc = ember__fail(EMBER_ERR_IO, "load_idx: %s: not an IDX file (bad magic)", path);
        goto done;
    }
    int type = magic[2], ndim = magic[3], src_size, dtype;
    switch (type) {
    case 0x08: src_size = 1; dtype = EMBER_UINT8; break;
    case 0x09: src_size = 1; dtype = EMBER_INT32; break;
    case 0x0B: src_size = 2; dtype = EMBER_INT32; break;
    case 0x0C: src_size = 4; dtype = EMBER_INT32; break;
    case 0x0D: src_size = 4; dtype = EMBER_FLOAT32; break;
    case 0x0E: src_size = 8; dtype = EMBER_FLOAT64; break;
    default:
        rc = ember__fail(EMBER_ERR_IO, "load_idx: %s: unknown IDX data type 0x%02x", path, type);
        goto done;
    }
    if (ndim < 1 || ndim > EMBER_MAX_DIMS) {
        rc = ember__fail(EMBER_ERR_IO, "load_idx: %s: %d dims (1 to %d supported)", path, ndim, EMBER_MAX_DIMS);
        goto done;
    }
    int64_t shape[EMBER_MAX_DIMS];
    for (int d = 0; d < ndim; d++) {
        unsigned char b[4];
        if (read_exact(f, b, 4, &got) < 0) {
            rc = ember__fail(EMBER_ERR_IO, "load_idx: %s: truncated header", path);
            goto done;
        }
        shape[d] = ((int64_t)b[0] << 24) | ((int64_t)b[1] << 16) | ((int64_t)b[2] << 8) | b[3];
    }
    int64_t n;
    if (ember__check_shape("load_idx", ndim, shape, &n) < 0 || n > ((int64_t)1 << 36)) {
        char sb[200];
        rc = ember__fail(EMBER_ERR_IO, "load_idx: %s: absurd dims %s", path, ember__shape_str(sb, ndim, shape));
        goto done;
    }
    size_t bytes = (size_t)n * (size_t)src_size;
    {   /* the file must be able to hold the data before it is allocated */
        size_t header = 4 + 4 * (size_t)ndim;
        int64_t file_size = ember__path_size(path);
        if (file_size >= 0) {
            size_t size = (size_t)file_size;
            size_t room = gzdirect(f) ? (size > header ? size - header : 0)
                                      : (size > (SIZE_MAX / MAX_DEFLATE_RATIO) ? SIZE_MAX : size * MAX_DEFLATE_RATIO);
            if (bytes > room) {
                char sb[200];
                rc = ember__fail(EMBER_ERR_IO,
                                 "load_idx: %s: truncated: dims %s need %zu bytes of data, a %s file of %zu bytes "
                                 "cannot hold them", path, ember__shape_str(sb, ndim, shape), bytes,
                                 gzdirect(f) ? "plain" : "gzip'd", size);
                goto done;
            }
        }
    }
    EMBER_CHECK(ember__new(ndim, shape, dtype, EMBER_CPU, &t));
    if (src_size == 1 && dtype == EMBER_UINT8) {
        if (read_exact(f, ember__ptr(t), bytes, &got) < 0) goto truncated;
    } else {
        unsigned char *buf = ember__alloc(bytes);
        if (!buf) {
            rc = ember__fail(EMBER_ERR_OOM, "load_idx: %s: out of memory", path);
            goto done;
        }
        if (read_exact(f, buf, bytes, &got) < 0) {
            ember__free(buf, bytes);
            goto truncated;
        }
        char *dst = ember__ptr(t);
        for (int64_t i = 0; i < n; i++) {
            const unsigned char *p = buf + i * src_size;
            uint64_t v = 0;
            for (int k = 0; k < src_size; k++) v = (v << 8) | p[k];   /* big-endian */
            switch (type) {
            case 0x09: ((int32_t *)dst)[i] = (int8_t)v; break;
            case 0x0B: ((int32_t *)dst)[i] = (int16_t)v; break;
            case 0x0C: ((int32_t *)dst)[i] = (int32_t)(uint32_t)v; break;
            case 0x0D: { uint32_t u = (uint32_t)v; memcpy(dst + i * 4, &u, 4); } break;
            default: memcpy(dst + i * 8, &v, 8); break;
            }
        }
        ember__free(buf, bytes);
    }
    *out = t;
    t = NULL;
    goto done;
truncated:
    rc = ember__fail(EMBER_ERR_IO, "load_idx: %s: truncated: expected %zu bytes of data, got %zu", path, bytes, got);
done:
    ember_tensor_release(t);
    gzclose(f);
    return rc;
}

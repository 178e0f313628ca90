/* test_safetensors.c: the safetensors codec from C: ember_save / ember_load,
   a round trip of every dtype, a zero-size tensor and a strided view; files
   damaged in each way a reader must survive (spec/io_spec.lua has the rest,
   through ember.load); the ember_st_* calls with metadata and bad arguments;
   the stale temporary a killed writer leaves. */
#define _DEFAULT_SOURCE
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _WIN32   /* mingw-w64 has no mkdtemp: a name from _mktemp, made with _mkdir */
#include <direct.h>
#include <io.h>
static char *mkdtemp(char *tmpl) { return _mktemp(tmpl) && _mkdir(tmpl) == 0 ? tmpl : NULL; }
#endif

static void write_file(const char *path, const void *buf, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) return;
    fwrite(buf, 1, n, f);
    fclose(f);
}

/* a safetensors file made of this header (unpadded) and these data bytes */
static void write_st(const char *path, const char *header, const char *data, size_t data_len)
{
    size_t h = strlen(header);
    char *buf = malloc(8 + h + data_len);
    if (!buf) return;
    for (int i = 0; i < 8; i++) buf[i] = (char)((uint64_t)h >> (8 * i));
    memcpy(buf + 8, header, h);
    memcpy(buf + 8 + h, data, data_len);
    write_file(path, buf, 8 + h + data_len);
    free(buf);
}

static void damaged(const char *dir, const char *header, const char *data, size_t data_len, const char *want)
{
    char path[512];
    snprintf(path, sizeof path, "%s/damaged.safetensors", dir);
    write_st(path, header, data, data_len);
    ember_named_tensors *l = (ember_named_tensors *)&l;
    CHECK(ember_load(path, &l) == EMBER_ERR_IO);
    CHECK(l == NULL);
    if (!strstr(ember_last_error(), want)) {
        fprintf(stderr, "damaged file %s: expected '%s' in '%s'\n", header, want, ember_last_error());
        failures++;
    }
}

int main(void)
{
#ifdef _WIN32
    char dir[] = "ember_st_XXXXXX";   /* in the working folder (ctest's: the build folder) */
#else
    char dir[] = "/tmp/ember_st_XXXXXX";
#endif
    if (!mkdtemp(dir)) return 1;
    char path[512];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);

    /* every dtype, a 0-d tensor, a zero-size tensor, a transposed view */
    const int dts[8] = {EMBER_FLOAT32, EMBER_FLOAT64, EMBER_FLOAT16, EMBER_BFLOAT16, EMBER_INT32, EMBER_INT64,
                        EMBER_UINT8, EMBER_BOOL};
    const int64_t s23[2] = {2, 3}, s0[2] = {0, 4};
    const double vals[6] = {1, 0, 3, 1, 5, 1};
    ember_tensor *ts[11] = {0};
    const char *names[11] = {"f32", "f64", "f16", "bf16", "i32", "i64", "u8", "bool", "scalar", "empty", "layer.0.weight_t"};
    for (int i = 0; i < 8; i++) CHECK(ember_from_data(vals, EMBER_FLOAT64, 2, s23, dts[i], EMBER_CPU, &ts[i]) == EMBER_OK);
    CHECK(ember_scalar(2.5, EMBER_FLOAT64, 0, &ts[8]) == EMBER_OK);
    CHECK(ember_empty(2, s0, EMBER_FLOAT32, EMBER_CPU, &ts[9]) == EMBER_OK);
    CHECK(ember_transpose(ts[0], 0, 1, &ts[10]) == EMBER_OK);
    CHECK(ember_save(path, 11, names, ts) == EMBER_OK);

    ember_named_tensors *l = NULL;
    CHECK(ember_load(path, &l) == EMBER_OK);
    CHECK(ember_named_count(l) == 11);
    for (int i = 0; i < ember_named_count(l) && i < 11; i++) {
        ember_tensor *t = ember_named_tensor(l, i);
        CHECK(strcmp(ember_named_name(l, i), names[i]) == 0);
        CHECK(ember_tensor_dtype(t) == ember_tensor_dtype(ts[i]));
        CHECK(ember_tensor_ndim(t) == ember_tensor_ndim(ts[i]));
        CHECK(ember_tensor_numel(t) == ember_tensor_numel(ts[i]));
        int64_t n = ember_tensor_numel(t);
        double *a = malloc((size_t)(n ? n : 1) * sizeof *a), *b = malloc((size_t)(n ? n : 1) * sizeof *b);
        CHECK(ember_copy_to_buffer(t, a, EMBER_FLOAT64) == EMBER_OK);
        CHECK(ember_copy_to_buffer(ts[i], b, EMBER_FLOAT64) == EMBER_OK);
        CHECK(n == 0 || memcmp(a, b, (size_t)n * sizeof *a) == 0);
        free(a);
        free(b);
    }
    CHECK(ember_named_name(l, 11) == NULL && ember_named_tensor(l, -1) == NULL);
    for (int i = 0; i < 11; i++) CHECK(ember_named_find(l, names[i]) == ember_named_tensor(l, i));
    CHECK(ember_named_find(l, "no such name") == NULL && ember_named_find(l, "") == NULL);
    CHECK(ember_named_find(NULL, names[0]) == NULL && ember_named_find(l, NULL) == NULL);
    ember_named_free(l);

    /* what a reader must refuse, each with its reason */
    damaged(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", "1234", 4, "go past the end of the data");
    damaged(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", "12345678", 8, "end before they begin");
    damaged(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1125899906842624,16],\"data_offsets\":[0,8]}}", "12345678", 8, "absurd shape");
    damaged(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,8]}}", "12345678", 8, "bad size 1e+20 at position 1");
    damaged(dir, "{\"a\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[0,4]}}", "1234", 4, "unknown dtype 'I16'");
    damaged(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
            "1234", 4, "duplicate key \"a\"");
    damaged(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1]", "", 0, "invalid JSON: expected ',' or '}' at byte 32");
    damaged(dir, "{\"__metadata__\":{\"k\":\"\\x\"}}", "", 0, "invalid JSON: bad escape at byte 23");
    damaged(dir, "{\"__metadata__\":{\"k\":\"\\u12\"}}", "", 0, "bad \\u escape");
    damaged(dir, "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x", "1234", 4, "trailing characters");
    {   /* a header length past the end of the file */
        unsigned char buf[16] = {0x40, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
        write_file(path, buf, 10);
        CHECK(ember_load(path, &l) == EMBER_ERR_IO && strstr(ember_last_error(), "header length 64 exceeds the file size (10 bytes)"));
    }
    {   /* metadata strings of any length, with any JSON escape (ember.save's nested structure) */
        const char *head = "{\"__metadata__\":{\"note\":\"a\\nb\\t\\u00e9\\\"\\\\\\/\\b\\f\\r\",\"long\":\"";
        const char *tail = "\"},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
        size_t n = 100000;
        char *header = malloc(strlen(head) + n + strlen(tail) + 1);
        strcpy(header, head);
        memset(header + strlen(head), 'x', n);
        strcpy(header + strlen(head) + n, tail);
        write_st(path, header, "\0\0\x80\x3f", 4);
        free(header);
        CHECK(ember_load(path, &l) == EMBER_OK && ember_named_count(l) == 1);
        double v = 0;
        CHECK(ember_item(ember_named_tensor(l, 0), &v) == EMBER_OK && v == 1.0);
        ember_named_free(l);
    }
    CHECK(ember_load("/nonexistent/x.safetensors", &l) == EMBER_ERR_IO);
    CHECK(ember_save(path, 1, names, NULL) == EMBER_ERR_ARG);
    {   /* any UTF-8 name is escaped in the header; bytes that are not UTF-8 are refused */
        const char *odd[1] = {"quote\"d\\ \n\x01 \xc3\xa9"}, *bad[1] = {"bad\xff"};
        CHECK(ember_save(path, 1, odd, ts) == EMBER_OK);
        CHECK(ember_load(path, &l) == EMBER_OK && ember_named_count(l) == 1);
        CHECK(l && strcmp(ember_named_name(l, 0), odd[0]) == 0);
        ember_named_free(l);
        CHECK(ember_save(path, 1, bad, ts) == EMBER_ERR_ARG && strstr(ember_last_error(), "is not valid UTF-8"));
        const char *twice[2] = {"w", "w"};
        ember_tensor *two[2] = {ts[0], ts[1]};
        CHECK(ember_save(path, 2, twice, two) == EMBER_ERR_ARG && strstr(ember_last_error(), "name 'w' appears twice"));
    }
    {   /* bool bytes other than 0 and 1 read as true, as a cast to bool makes them */
        write_st(path, "{\"a\":{\"dtype\":\"BOOL\",\"shape\":[3],\"data_offsets\":[0,3]}}", "\x01\x07\x00", 3);
        CHECK(ember_load(path, &l) == EMBER_OK && ember_named_count(l) == 1);
        double v[3] = {0};
        CHECK(ember_copy_to_buffer(ember_named_tensor(l, 0), v, EMBER_FLOAT64) == EMBER_OK);
        CHECK(v[0] == 1 && v[1] == 1 && v[2] == 0);
        ember_named_free(l);
    }

    {   /* the codec's own calls: metadata with a NUL kept, the header alone, and bad arguments */
        ember_st_named e[2] = {{"w", 1, ts[0]}, {"s", 1, ts[8]}};
        ember_st_kv kv[2] = {{"k", 1, "a\0b", 3}, {"note", 4, "x", 1}};
        CHECK(ember_st_save(path, 2, e, 2, kv) == EMBER_OK);
        ember_st_file *f = NULL;
        CHECK(ember_st_open(path, &f) == EMBER_OK);
        CHECK(ember_st_count(f) == 2 && ember_st_meta_count(f) == 2);
        const char *k = NULL, *v = NULL, *name = NULL;
        size_t kl = 0, vl = 0, nl = 0;
        CHECK(ember_st_meta(f, 0, &k, &kl, &v, &vl) == EMBER_OK && kl == 1 && vl == 3 && memcmp(v, "a\0b", 3) == 0);
        int dtype = -1, ndim = -1;
        const int64_t *shape = NULL;
        uint64_t b = 1, en = 0;
        CHECK(ember_st_entry(f, 0, &name, &nl, &dtype, &ndim, &shape, &b, &en) == EMBER_OK);
        CHECK(nl == 1 && name[0] == 'w' && dtype == EMBER_FLOAT32 && ndim == 2 && shape[0] == 2 && shape[1] == 3 && b == 0 &&
              en == 24);
        CHECK(ember_st_entry(f, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL) == EMBER_OK);
        ember_tensor *t = NULL;
        CHECK(ember_st_read(f, 1, &t) == EMBER_OK && ember_tensor_ndim(t) == 0);
        ember_tensor_release(t);
        CHECK(ember_st_entry(f, 2, &name, NULL, NULL, NULL, NULL, NULL, NULL) == EMBER_ERR_ARG);
        CHECK(ember_st_meta(f, -1, &k, NULL, NULL, NULL) == EMBER_ERR_ARG);
        CHECK(ember_st_read(f, 5, &t) == EMBER_ERR_ARG && t == NULL);
        CHECK(ember_st_read(f, 0, NULL) == EMBER_ERR_ARG);
        ember_st_close(f);
        ember_st_close(NULL);
        CHECK(ember_st_count(NULL) == 0 && ember_st_meta_count(NULL) == 0);
        CHECK(ember_st_entry(NULL, 0, &name, NULL, NULL, NULL, NULL, NULL, NULL) == EMBER_ERR_ARG);
        CHECK(ember_st_read(NULL, 0, &t) == EMBER_ERR_ARG);
        CHECK(ember_st_open(NULL, &f) == EMBER_ERR_ARG && f == NULL);
        CHECK(ember_st_open(path, NULL) == EMBER_ERR_ARG);
        CHECK(ember_st_save(NULL, 2, e, 2, kv) == EMBER_ERR_ARG);
        CHECK(ember_st_save(path, 1, NULL, -1, NULL) == EMBER_ERR_ARG);
        CHECK(ember_st_save(path, 0, NULL, 1, NULL) == EMBER_ERR_ARG);
        ember_st_kv nokey[1] = {{NULL, 0, "v", 1}}, twice[2] = {{"k", 1, "1", 1}, {"k", 1, "2", 1}};
        CHECK(ember_st_save(path, 0, NULL, 1, nokey) == EMBER_ERR_ARG);
        CHECK(ember_st_save(path, 0, NULL, 2, twice) == EMBER_ERR_ARG && strstr(ember_last_error(), "metadata key 'k' appears twice"));
        ember_st_named reserved[1] = {{"__metadata__", 12, ts[0]}}, none[1] = {{"x", 1, NULL}};
        CHECK(ember_st_save(path, 1, reserved, -1, NULL) == EMBER_ERR_ARG && strstr(ember_last_error(), "is reserved"));
        CHECK(ember_st_save(path, 1, none, -1, NULL) == EMBER_ERR_ARG && strstr(ember_last_error(), "no live tensor"));
        CHECK(ember_st_dtype_name(EMBER_BFLOAT16) && strcmp(ember_st_dtype_name(EMBER_BFLOAT16), "BF16") == 0);
        CHECK(ember_st_dtype_name(-1) == NULL);
        CHECK(ember_st_open(path, &f) == EMBER_OK && ember_st_count(f) == 2);   /* the failed saves left the file */
        ember_st_close(f);
    }

    /* a writer killed mid-write leaves a temporary; the next save removes it */
    char stale[600];
    snprintf(stale, sizeof stale, "%s.tmp.%d.dead", path, 999999);   /* no such process */
    write_file(stale, "partial", 7);
    char live[600];
    snprintf(live, sizeof live, "%s.tmp.%d.busy", path, (int)getpid());   /* a live writer's: kept */
    write_file(live, "partial", 7);
    CHECK(ember_save(path, 1, names, ts) == EMBER_OK);
    CHECK(access(stale, F_OK) != 0);
    CHECK(access(live, F_OK) == 0);
    unlink(live);
    CHECK(ember_load(path, &l) == EMBER_OK && ember_named_count(l) == 1);
    ember_named_free(l);

    for (int i = 0; i < 11; i++) ember_tensor_release(ts[i]);
    unlink(path);
    char dpath[600];
    snprintf(dpath, sizeof dpath, "%s/damaged.safetensors", dir);
    unlink(dpath);
    rmdir(dir);
    printf("test_safetensors: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

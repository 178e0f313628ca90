/* fuzz_safetensors.c: libFuzzer harness for the safetensors codec's reader
   (core/src/io/safetensors.c and its JSON reader json.c): the header, the
   metadata and every tensor. Any input must parse or fail with a message;
   ASan and UBSan watch every read. Seeds: core/tests/fuzz/safetensors_corpus. */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ember_st_file *f = NULL;
    if (ember__st_open_mem(data, size, "<fuzz>", &f) != EMBER_OK) {
        if (ember_last_error()[0] == 0) abort();   /* a failure must say why */
        return 0;
    }
    for (int i = 0; i < ember_st_meta_count(f); i++) {   /* touch what was read */
        const char *k, *v;
        size_t kl, vl;
        if (ember_st_meta(f, i, &k, &kl, &v, &vl) != EMBER_OK || memchr(k, 0, kl + 1) == NULL || v[vl] != 0) abort();
    }
    for (int i = 0; i < ember_st_count(f); i++) {
        const char *name;
        const int64_t *shape;
        int dtype, ndim;
        uint64_t b, e;
        if (ember_st_entry(f, i, &name, NULL, &dtype, &ndim, &shape, &b, &e) != EMBER_OK || e < b) abort();
        ember_tensor *t = NULL;
        if (ember_st_read(f, i, &t) != EMBER_OK) abort();   /* the header was checked: the bytes are there */
        if (ember_tensor_numel(t) * ember_dtype_size(dtype) != (int64_t)(e - b)) abort();
        ember_tensor_release(t);
    }
    ember_st_close(f);
    return 0;
}

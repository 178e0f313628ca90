/* fuzz_idx.c: libFuzzer harness for the IDX reader (core/src/io/idx.c),
   which reads from a path through zlib: each input is written to a file of
   this process and read back, plain, or gzip'd when it starts with gzip's
   magic. Seeds: core/tests/fuzz/idx_corpus. */
#define _DEFAULT_SOURCE
#include "internal.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char path[64];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) snprintf(path, sizeof path, "/tmp/ember_fuzz_idx.%d", (int)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    fwrite(data, 1, size, f);
    fclose(f);
    ember_tensor *t = NULL;
    if (ember_load_idx(path, &t) == EMBER_OK) {
        if (!t || ember_tensor_numel(t) < 0) abort();
        ember_tensor_release(t);
    } else if (ember_last_error()[0] == 0) {
        abort();
    }
    return 0;
}

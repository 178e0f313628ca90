/* fuzz_safetensors.c: libFuzzer harness for the safetensors reader
   (core/src/io/safetensors.c). Any input must parse or fail with a message;
   ASan and UBSan watch every read. Seeds: core/tests/fuzz/safetensors_corpus. */
#include "internal.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ember_named_tensors *l = NULL;
    if (ember__safetensors_parse(data, size, "<fuzz>", &l) == EMBER_OK) {
        for (int i = 0; i < ember_named_count(l); i++) {   /* touch what was read */
            ember_tensor *t = ember_named_tensor(l, i);
            if (!ember_named_name(l, i) || !t || ember_tensor_numel(t) < 0) abort();
        }
        ember_named_free(l);
    } else if (ember_last_error()[0] == 0) {
        abort();   /* a failure must say why */
    }
    return 0;
}

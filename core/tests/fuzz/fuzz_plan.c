/* fuzz_plan.c: libFuzzer harness for the plan reader (core/src/plan/plan_io.c)
   over the safetensors codec: the graph's JSON, its slots, entries and
   attributes. A plan that loads is run twice on zero inputs of the shapes
   it declares (the second run in the arena the first laid out); any input
   must load or fail with a message, and a loaded plan must run or fail
   with one. Seeds: core/tests/fuzz/plan_corpus. */
#include "internal.h"
#include "plan/plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    ember_st_file *f = NULL;
    if (ember__st_open_mem(data, size, "<fuzz>", &f) != EMBER_OK) return 0;
    ember_plan *p = NULL;
    int rc = ember__plan_from_st(f, "<fuzz>", &p);
    ember_st_close(f);
    if (rc != EMBER_OK) {
        if (ember_last_error()[0] == 0) abort();   /* a failure must say why */
        return 0;
    }
    ember_tensor *in[64] = {NULL}, *out[64] = {NULL};
    int ok = 1;
    for (int i = 0; i < p->ninputs && ok; i++)
        ok = ember_full(p->inputs_ndim[i], p->inputs_shape[i], 0, p->inputs_dtype[i], EMBER_CPU, &in[i]) == EMBER_OK;
    /* twice: the first run lays out the loaded plan's arena, the second runs in it */
    for (int run = 0; run < 2 && ok; run++) {
        if (ember_plan_run(p, in, p->ninputs, out, p->noutputs) != EMBER_OK) {
            if (ember_last_error()[0] == 0) abort();
            ok = 0;
        }
        for (int i = 0; i < 64; i++) {
            ember_tensor_release(out[i]);
            out[i] = NULL;
        }
    }
    for (int i = 0; i < 64; i++) ember_tensor_release(in[i]);
    ember_plan_free(p);
    return 0;
}

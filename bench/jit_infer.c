/* bench/jit_infer.c: batch-1 inference from a saved plan in a C host (the
   C API alone, no Lua): loads the plan, runs it on one input of the shape
   it declares (ones) `warm` times, then `iters` times timed, and prints
   JSON {"us_per_call": ...}. bench/jit_infer.lua builds and runs it. Given
   a probes file (safetensors: the input "x" and the output "y" the plan
   gave in Lua), the input is its x, and the output must be its y to the
   bit ("same_bits" in the JSON; bench/convnets_plan.lua).
   Build: cc -O2 bench/jit_infer.c -Icore/include -Lbuild -lember -Wl,-rpath,build
   Run:   jit_infer model.plan [iters [threads [probes.safetensors]]] */
#include "ember.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the probes' tensor of that name (NULL: none) */
static ember_tensor *probe(const ember_named_tensors *list, const char *name)
{
    for (int i = 0; list && i < ember_named_count(list); i++)
        if (strcmp(ember_named_name(list, i), name) == 0) return ember_named_tensor(list, i);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: jit_infer model.plan [iters [threads [probes.safetensors]]]\n");
        return 2;
    }
    int iters = argc > 2 ? atoi(argv[2]) : 20000;
    if (argc > 3) ember_set_num_threads(atoi(argv[3]));
    ember_plan *p = NULL;
    ember_named_tensors *probes = NULL;
    ember_tensor *x = NULL, *y = NULL, *want = NULL;
    int64_t shape[2] = {1, 784};
    if (ember_plan_load(argv[1], &p) < 0 || (argc > 4 && ember_load(argv[4], &probes) < 0) ||
        (!probes && ember_full(2, shape, 1.0, EMBER_FLOAT32, EMBER_CPU, &x) < 0)) {
        fprintf(stderr, "jit_infer: %s\n", ember_last_error());
        return 1;
    }
    if (probes) {
        x = probe(probes, "x"), want = probe(probes, "y");
        if (!x || !want) {
            fprintf(stderr, "jit_infer: %s holds no tensors x and y\n", argv[4]);
            return 1;
        }
        ember_tensor_retain(x);
    }
    int same = -1;   /* no probes: not checked */
    for (int i = 0; i < iters / 10 + 10; i++) {
        if (ember_plan_run(p, &x, 1, &y, 1) < 0) {
            fprintf(stderr, "jit_infer: %s\n", ember_last_error());
            return 1;
        }
        if (want && same != 0) {
            int64_t n = ember_tensor_numel(y);
            int dt = ember_tensor_dtype(y);
            same = n == ember_tensor_numel(want) && dt == ember_tensor_dtype(want) &&
                   memcmp(ember_tensor_data(y), ember_tensor_data(want), (size_t)n * (size_t)ember_dtype_size(dt)) == 0;
        }
        ember_tensor_release(y);
    }
    double t0 = ember_clock();
    for (int i = 0; i < iters; i++) {
        ember_plan_run(p, &x, 1, &y, 1);
        ember_tensor_release(y);
    }
    double t = ember_clock() - t0;
    printf("{\"us_per_call\": %.4f, \"iters\": %d, \"same_bits\": %d}\n", t / iters * 1e6, iters, same);
    ember_tensor_release(x);
    ember_named_free(probes);
    ember_plan_free(p);
    return 0;
}

/* run_plan.c: a C host that runs a plan traced and saved in Lua
   (save_plan.lua), through ember's C API alone (libember, no Lua):
   ember_plan_load reads the model's forward, graph and weights, from one
   file; ember_plan_run runs it on each probe input, and the host checks
   that it gets the outputs Lua got, bit for bit, then prints the classes.
   Exits 0 when all is right, non-zero otherwise.

   Run:  run_plan model.plan probes.safetensors */
#include "ember.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: run_plan model.plan probes.safetensors\n");
        return 2;
    }
    ember_plan *plan = NULL;
    ember_named_tensors *probes = NULL;
    int bad = 0;
    if (ember_plan_load(argv[1], &plan) < 0 || ember_load(argv[2], &probes) < 0) {
        fprintf(stderr, "run_plan: %s\n", ember_last_error());
        ember_plan_free(plan);
        return 1;
    }
    for (int i = 1; i <= 5; i++) {
        char nx[8], ny[8];
        snprintf(nx, sizeof nx, "x%d", i);
        snprintf(ny, sizeof ny, "y%d", i);
        ember_tensor *x = ember_named_find(probes, nx), *want = ember_named_find(probes, ny), *y = NULL;
        if (!x || !want) {
            fprintf(stderr, "run_plan: the probes have no tensor '%s'\n", x ? ny : nx);
            bad = 1;
            break;
        }
        if (ember_plan_run(plan, &x, 1, &y, 1) < 0) {
            fprintf(stderr, "run_plan: %s\n", ember_last_error());
            bad = 1;
            break;
        }
        const float *got = ember_tensor_data(y), *exp = ember_tensor_data(want);
        int64_t n = ember_tensor_numel(y);
        int same = n == ember_tensor_numel(want) && memcmp(got, exp, (size_t)n * sizeof *got) == 0, best = 0;
        for (int k = 1; k < n; k++)
            if (got[k] > got[best]) best = k;
        printf("probe %d: class %d (logits %.4f %.4f %.4f)%s\n", i, best + 1, got[0], n > 1 ? got[1] : 0.0,
               n > 2 ? got[2] : 0.0, same ? "" : "  DIFFERS from Lua's");
        bad |= !same;
        ember_tensor_release(y);
    }
    ember_named_free(probes);
    ember_plan_free(plan);
    if (!bad) printf("OK\n");
    return bad;
}

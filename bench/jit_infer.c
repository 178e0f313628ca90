/* bench/jit_infer.c: batch-1 inference from a saved plan in a C host (the
   C API alone, no Lua): loads the plan, runs it on one input of the shape
   it declares (ones) `warm` times, then `iters` times timed, and prints
   JSON {"us_per_call": ...}. bench/jit_infer.lua builds and runs it.
   Build: cc -O2 bench/jit_infer.c -Icore/include -Lbuild -lember -Wl,-rpath,build
   Run:   jit_infer model.plan [iters [threads]] */
#include "ember.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: jit_infer model.plan [iters]\n");
        return 2;
    }
    int iters = argc > 2 ? atoi(argv[2]) : 20000;
    if (argc > 3) ember_set_num_threads(atoi(argv[3]));
    ember_plan *p = NULL;
    ember_tensor *x = NULL, *y = NULL;
    int64_t shape[2] = {1, 784};
    if (ember_plan_load(argv[1], &p) < 0 || ember_full(2, shape, 1.0, EMBER_FLOAT32, EMBER_CPU, &x) < 0) {
        fprintf(stderr, "jit_infer: %s\n", ember_last_error());
        return 1;
    }
    for (int i = 0; i < iters / 10 + 10; i++) {
        if (ember_plan_run(p, &x, 1, &y, 1) < 0) {
            fprintf(stderr, "jit_infer: %s\n", ember_last_error());
            return 1;
        }
        ember_tensor_release(y);
    }
    double t0 = ember_clock();
    for (int i = 0; i < iters; i++) {
        ember_plan_run(p, &x, 1, &y, 1);
        ember_tensor_release(y);
    }
    double t = ember_clock() - t0;
    printf("{\"us_per_call\": %.4f, \"iters\": %d}\n", t / iters * 1e6, iters);
    ember_tensor_release(x);
    ember_plan_free(p);
    return 0;
}

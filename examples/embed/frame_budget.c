/* frame_budget.c: training inside a game's frame loop with a budget per
   frame (API.md, "In a host's frame loop"). The Lua side (frame_model.lua)
   trains an 8-layer MLP; each frame the host gives it one call:
     oneshot   a whole training step every frame (gm:backward)
     budget    a step spread over frames: the forward pass in one frame, then
               backward BUDGET seconds at a time (gm:backward_steps, run:step)
   and prints the distribution of the time those calls take (median, p99,
   max). Then it trains the same steps deterministically on 1 and on 2
   threads and prints a hash of the parameters after each: they must agree.
   Exits non-zero if a call fails, training does not progress or the hashes
   differ; the times are printed, never checked (machines are noisy).

     frame_budget [frame_model.lua] [frames] [budget_ms] */
#include "ember_lua.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef FRAME_MODEL_LUA
#define FRAME_MODEL_LUA "frame_model.lua"
#endif

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int number_of(ember_lua *E, const char *fn, double *v)
{
    ember_tensor *t = NULL;
    int rc = ember_lua_call(E, fn, 0, NULL, 1, &t);
    if (rc == EMBER_OK) rc = ember_item(t, v);
    ember_tensor_release(t);
    return rc;
}

/* frames calls of tick(budget) in `mode` (or, with until_steps > 0, as many
   as it takes to complete that many steps); frame times in ms into times[] */
static int play(ember_lua *E, const char *mode, int threads, int deterministic, int frames, int until_steps,
                double budget, double *times, double *steps, double *loss)
{
    char setup[128];
    snprintf(setup, sizeof setup, "setup('%s', %d, %s)", mode, threads, deterministic ? "true" : "false");
    if (ember_lua_dostring(E, setup) != EMBER_OK) return -1;
    ember_tensor *b = NULL, *done = NULL;
    if (ember_scalar(budget, EMBER_FLOAT64, 0, &b) != EMBER_OK) return -1;
    int rc = EMBER_OK;
    *steps = 0;
    for (int f = 0; (until_steps > 0 ? *steps < until_steps : f < frames) && rc == EMBER_OK; f++) {
        double t0 = ember_clock();
        rc = ember_lua_call(E, "tick", 1, &b, 1, &done);
        if (times) times[f] = (ember_clock() - t0) * 1e3;
        if (rc == EMBER_OK) rc = ember_item(done, steps);
        ember_tensor_release(done);
        done = NULL;
    }
    ember_tensor_release(b);
    if (rc == EMBER_OK) rc = number_of(E, "loss", loss);
    return rc;
}

static void report(const char *what, double *times, int frames, double steps, double loss)
{
    qsort(times, (size_t)frames, sizeof *times, cmp_double);
    printf("%-22s frame ms: median %6.2f  p99 %6.2f  max %6.2f   %4.0f steps, loss %.3g\n", what,
           times[frames / 2], times[(int)(frames * 0.99)], times[frames - 1], steps, loss);
}

int main(int argc, char **argv)
{
    const char *script = argc > 1 ? argv[1] : FRAME_MODEL_LUA;
    int frames = argc > 2 ? atoi(argv[2]) : 300;
    double budget = (argc > 3 ? atof(argv[3]) : 2.0) * 1e-3;
    if (frames < 20) frames = 20;
    ember_lua *E = ember_lua_open();
    if (!E || ember_lua_dofile(E, script) != EMBER_OK) {
        fprintf(stderr, "frame_budget: %s\n", ember_lua_error(E));
        ember_lua_close(E);
        return 1;
    }
    double *times = malloc((size_t)frames * sizeof *times);
    double steps = 0, loss = 0, first_loss = 0;
    int status = 0;
    if (!times) return 1;

    /* the same number of frames each way; one-shot finishes a step a frame */
    if (play(E, "oneshot", 2, 0, 1, 0, 0, NULL, &steps, &first_loss) != EMBER_OK ||
        play(E, "oneshot", 2, 0, frames, 0, 0, times, &steps, &loss) != EMBER_OK) {
        fprintf(stderr, "frame_budget: %s\n", ember_lua_error(E));
        status = 1;
    } else {
        report("one-shot backward", times, frames, steps, loss);
    }
    if (status == 0) {
        char what[64];
        snprintf(what, sizeof what, "budget %.1f ms", budget * 1e3);
        if (play(E, "budget", 2, 0, frames, 0, budget, times, &steps, &loss) != EMBER_OK) {
            fprintf(stderr, "frame_budget: %s\n", ember_lua_error(E));
            status = 1;
        } else {
            report(what, times, frames, steps, loss);
            if (!(steps >= 2 && loss < first_loss)) {
                fprintf(stderr, "frame_budget: budgeted training did not progress (%g steps, loss %g -> %g)\n",
                        steps, first_loss, loss);
                status = 1;
            }
        }
    }

    /* determinism: the same 6 training steps, however many frames they take, on 1 and on 2 threads */
    double hash[2] = {0, 0};
    for (int threads = 1; threads <= 2 && status == 0; threads++) {
        if (play(E, "budget", threads, 1, 0, 6, budget, NULL, &steps, &loss) != EMBER_OK ||
            number_of(E, "param_hash", &hash[threads - 1]) != EMBER_OK) {
            fprintf(stderr, "frame_budget: %s\n", ember_lua_error(E));
            status = 1;
            break;
        }
        printf("deterministic, %d thread%s: %2.0f steps, parameter hash %06x\n", threads, threads > 1 ? "s" : "",
               steps, (unsigned)hash[threads - 1]);
    }
    if (status == 0 && hash[0] != hash[1]) {
        fprintf(stderr, "frame_budget: the parameters differ between 1 and 2 threads\n");
        status = 1;
    }
    if (status == 0) printf("OK\n");
    free(times);
    ember_lua_close(E);
    return status;
}

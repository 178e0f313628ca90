/* busy_host.c: a host whose own threads keep the CPU busy, as a game's do:
   a render-like thread that spins for RENDER_DUTY of every 16.7 ms frame
   (1: all the time) and a main thread that spends LOGIC_MS of each frame on
   its own work before it gives ember one training step (tick() of
   bench/thread_policy_model.lua, which alternates the thread settings 1, 2
   and auto step by step and times each step). Prints the model's JSON
   report: the median step time per setting. bench/thread_policy.lua runs
   it; ctest runs it briefly (exit status only: the times are for reading).

     busy_host [model.lua] [small|medium|large] [rounds] [steps] [render_duty] [logic_ms] */
#define _POSIX_C_SOURCE 200809L
#include "ember_lua.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef THREAD_POLICY_MODEL_LUA
#define THREAD_POLICY_MODEL_LUA "thread_policy_model.lua"
#endif

static atomic_int stop;
static double duty = 1.0;
static volatile double sink;

static void spin_for(double seconds)
{
    double t0 = ember_clock(), x = 1.0;
    while (ember_clock() - t0 < seconds)
        for (int i = 0; i < 1000; i++) x = x * 1.0000001 + 1e-9;   /* render-like arithmetic */
    sink = x;
}

static void *render_main(void *arg)
{
    (void)arg;
    const double frame = 1.0 / 60;
    while (!atomic_load(&stop)) {
        spin_for(frame * duty);
        if (duty < 1.0) {
            double rest = frame * (1.0 - duty);
            struct timespec ts = {0, (long)(rest * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *model = argc > 1 ? argv[1] : THREAD_POLICY_MODEL_LUA;
    const char *size = argc > 2 ? argv[2] : "small";
    int rounds = argc > 3 ? atoi(argv[3]) : 1;
    int steps = argc > 4 ? atoi(argv[4]) : 5;
    duty = argc > 5 ? atof(argv[5]) : 1.0;
    double logic_ms = argc > 6 ? atof(argv[6]) : 1.0;
    if (rounds < 1 || steps < 1 || !(duty >= 0 && duty <= 1) || !(logic_ms >= 0)) {
        fprintf(stderr, "usage: busy_host [model.lua] [small|medium|large] [rounds>=1] [steps>=1] [render_duty 0..1] [logic_ms>=0]\n");
        return 2;
    }
    ember_lua *E = ember_lua_open();
    if (!E) {
        fprintf(stderr, "busy_host: %s\n", ember_lua_error(NULL));
        return 1;
    }
    char setup[160];
    snprintf(setup, sizeof setup, "setup('%s', %d, %d)", size, rounds, steps);
    if (ember_lua_dofile(E, model) != EMBER_OK || ember_lua_dostring(E, setup) != EMBER_OK) {
        fprintf(stderr, "busy_host: %s\n", ember_lua_error(E));
        ember_lua_close(E);
        return 1;
    }
    pthread_t render;
    if (pthread_create(&render, NULL, render_main, NULL) != 0) {
        fprintf(stderr, "busy_host: cannot start the render thread\n");
        ember_lua_close(E);
        return 1;
    }
    int rc = EMBER_OK;
    double done = 0;
    while (rc == EMBER_OK && done == 0) {
        spin_for(logic_ms * 1e-3);   /* the game's own work on its main thread */
        ember_tensor *t = NULL;
        rc = ember_lua_call(E, "tick", 0, NULL, 1, &t);
        if (rc == EMBER_OK) rc = ember_item(t, &done);
        ember_tensor_release(t);
    }
    atomic_store(&stop, 1);
    pthread_join(render, NULL);
    if (rc == EMBER_OK) rc = ember_lua_dostring(E, "print(report('host'))");
    if (rc != EMBER_OK) fprintf(stderr, "busy_host: %s\n", ember_lua_error(E));
    ember_lua_close(E);
    return rc == EMBER_OK ? 0 : 1;
}

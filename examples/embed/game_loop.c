/* game_loop.c: a C host driving a Lua-defined model frame by frame, the way a
   game would. Each frame the host draws a batch of samples of its signal
   y = sin(3x) into its own frame buffer, and the Lua side (regressor.lua)
   takes one training step on it; the buffer reaches Lua as a tensor without a
   copy (ember_from_blob). The loss it prints falls as the model learns.
   Exits non-zero if anything fails or the loss does not fall.

     game_loop [regressor.lua] [frames] */
#include "ember_lua.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef REGRESSOR_LUA
#define REGRESSOR_LUA "regressor.lua"
#endif

enum { N = 64 };   /* samples per frame */

static int buffer_released;
static void on_release(void *ctx, void *data)
{
    (void)data;
    *(int *)ctx = 1;
}

/* the host's own data: an {N, 2} row-major float buffer of (x, y) pairs */
static void draw_frame(float *frame, unsigned *seed)
{
    for (int i = 0; i < N; i++) {
        *seed = *seed * 1664525u + 1013904223u;
        float x = (float)(*seed >> 8) / (float)(1u << 24) * 2.0f - 1.0f;   /* [-1, 1) */
        frame[2 * i] = x;
        frame[2 * i + 1] = sinf(3.0f * x);
    }
}

int main(int argc, char **argv)
{
    const char *script = argc > 1 ? argv[1] : REGRESSOR_LUA;
    int frames = argc > 2 ? atoi(argv[2]) : 400;
    if (frames < 20) frames = 20;

    ember_lua *E = ember_lua_open();
    if (!E) {
        fprintf(stderr, "game_loop: %s\n", ember_lua_error(NULL));
        return 1;
    }
    if (ember_lua_dofile(E, script) != EMBER_OK) {
        fprintf(stderr, "game_loop: %s\n", ember_lua_error(E));
        ember_lua_close(E);
        return 1;
    }

    static float buffer[N * 2];
    const int64_t shape[2] = { N, 2 };
    ember_tensor *frame = NULL;
    if (ember_from_blob(buffer, 2, shape, NULL, EMBER_FLOAT32, on_release, &buffer_released,
                        &frame) != EMBER_OK) {
        fprintf(stderr, "game_loop: %s\n", ember_last_error());
        ember_lua_close(E);
        return 1;
    }

    unsigned seed = 12345;
    double first = 0, last = 0, early = 0, late = 0;
    int status = 0;
    for (int f = 0; f < frames; f++) {
        draw_frame(buffer, &seed);
        ember_tensor_bump_version(frame);   /* the host wrote into the tensor */
        ember_tensor *loss = NULL;
        double v = 0;
        if (ember_lua_call(E, "step", 1, &frame, 1, &loss) != EMBER_OK ||
            ember_item(loss, &v) != EMBER_OK) {
            fprintf(stderr, "game_loop: frame %d: %s\n", f, ember_lua_error(E));
            ember_tensor_release(loss);
            status = 1;
            break;
        }
        ember_tensor_release(loss);
        if (f == 0) first = v;
        if (f < 20) early += v / 20;
        if (f >= frames - 20) late += v / 20;
        last = v;
        if (f % 50 == 0 || f == frames - 1) printf("frame %4d  loss %.5f\n", f, v);
    }

    /* the model answers the host: predict at x = 0.5 (sin(1.5) = 0.997) */
    if (status == 0) {
        float q[1] = { 0.5f };
        const int64_t qshape[2] = { 1, 1 };
        ember_tensor *x = NULL, *y = NULL;
        double v = 0;
        if (ember_from_blob(q, 2, qshape, NULL, EMBER_FLOAT32, NULL, NULL, &x) != EMBER_OK ||
            ember_lua_call(E, "predict", 1, &x, 1, &y) != EMBER_OK || ember_item(y, &v) != EMBER_OK) {
            fprintf(stderr, "game_loop: predict: %s\n", ember_lua_error(E));
            status = 1;
        } else {
            printf("predict(0.5) = %.3f (target %.3f)\n", v, sin(1.5));
        }
        ember_tensor_release(x);
        ember_tensor_release(y);
    }

    ember_tensor_release(frame);
    ember_lua_close(E);   /* Lua's references go: the buffer is handed back */
    if (!buffer_released) {
        fprintf(stderr, "game_loop: the frame buffer was never released\n");
        status = 1;
    }
    if (status == 0) {
        printf("loss %.5f -> %.5f (mean of first 20 frames %.5f, last 20 %.5f)\n", first, last,
               early, late);
        if (!(late < 0.5 * early)) {
            fprintf(stderr, "game_loop: the loss did not fall\n");
            status = 1;
        } else {
            printf("OK\n");
        }
    }
    return status;
}

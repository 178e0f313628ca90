/* test_threads.c: several host threads use ember at once, each on its own
   tensors (ember.h, "Threads"): creation, elementwise ops and products,
   reductions, random draws, in-place writes, views, convolutions, and a
   recording with a backward through the pull loop, checked against values
   computed here.
   Built and run by ctest; scripts/test.sh also runs it under ThreadSanitizer.

     test_threads [threads] [iterations] */
#include "ember.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int n_iter = 200;

typedef struct {
    int id;
    int failures;
    char first[256];
} worker;

#define CHECK(w, cond)                                                                              \
    do {                                                                                            \
        if (!(cond)) {                                                                              \
            if (!(w)->failures)                                                                     \
                snprintf((w)->first, sizeof (w)->first, "line %d: %s (%s)", __LINE__, #cond,         \
                         ember_last_error());                                                       \
            (w)->failures++;                                                                        \
        }                                                                                           \
    } while (0)

static double item(ember_tensor *t)
{
    double v = NAN;
    ember_item(t, &v);
    return v;
}

/* y = sum((x * w + x) * 2) through the C API; dy/dw = 2 x, dy/dx = 2 (w + 1) */
static void one_backward(worker *w, float base)
{
    const int64_t n = 64;
    float xv[64], wv[64];
    for (int i = 0; i < n; i++) {
        xv[i] = base + (float)i;
        wv[i] = (float)(i % 7) - 3;
    }
    ember_tensor *x = NULL, *wt = NULL, *xw = NULL, *s = NULL, *t2 = NULL, *y = NULL;
    CHECK(w, ember_from_data(xv, EMBER_FLOAT32, 1, &n, EMBER_FLOAT32, EMBER_CPU, &x) == EMBER_OK);
    CHECK(w, ember_from_data(wv, EMBER_FLOAT32, 1, &n, EMBER_FLOAT32, EMBER_CPU, &wt) == EMBER_OK);
    int key = 0;
    CHECK(w, ember_key_new(0, &key) == EMBER_OK);
    CHECK(w, ember_key_record(key) == EMBER_OK);
    CHECK(w, ember_key_track(key, x) == EMBER_OK);
    CHECK(w, ember_key_track(key, wt) == EMBER_OK);
    ember_tensor *two = NULL;
    CHECK(w, ember_scalar(2, EMBER_FLOAT32, 1, &two) == EMBER_OK);
    CHECK(w, ember_mul(x, wt, &xw) == EMBER_OK);
    CHECK(w, ember_add(xw, x, &s) == EMBER_OK);
    CHECK(w, ember_mul(s, two, &t2) == EMBER_OK);
    CHECK(w, ember_sum(t2, 0, NULL, 0, &y) == EMBER_OK);
    ember_backward_run *run = NULL;
    ember_backward_req req;
    int got = 0;
    if (ember_backward_begin(key, 1, &y, NULL, &run) == EMBER_OK) {
        for (;;) {
            int rc = ember_backward_step(run, &req);
            if (rc != EMBER_NEED_LUA) {
                CHECK(w, rc == EMBER_DONE);
                break;
            }
            const float *g = ember_tensor_data(req.grads[0]);
            int ok = 1;
            for (int i = 0; i < n; i++) {
                float want = req.tensor == wt ? 2 * xv[i] : 2 * (wv[i] + 1);
                ok &= g[i] == want;
            }
            CHECK(w, ok);
            got |= req.tensor == wt ? 1 : 2;
        }
    } else {
        CHECK(w, 0);
    }
    ember_backward_end(run);
    CHECK(w, got == 3);
    ember_key_free(key);
    ember_tensor *all[] = {x, wt, xw, s, t2, y, two};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) ember_tensor_release(all[i]);
}

/* conv2d of ones (1, 2, 6, 6) by ones (3, 2, 3, 3), padding 1, and its weight
   gradient for a gradient of ones: the threads share oneDNN's primitives
   (made by whichever thread comes first) and their cache. An output counts
   the taps inside the input, 2 x 9 in the middle and 2 x 4 in a corner; a
   weight element the positions its tap reads, 36 for the middle tap and 25
   for a corner one. */
static void one_conv(worker *w)
{
    const int64_t xs[4] = {1, 2, 6, 6}, ws[4] = {3, 2, 3, 3}, ys[4] = {1, 3, 6, 6};
    const int64_t one[2] = {1, 1};
    ember_tensor *x = NULL, *wt = NULL, *y = NULL, *gy = NULL, *gw = NULL;
    CHECK(w, ember_full(4, xs, 1, EMBER_FLOAT32, EMBER_CPU, &x) == EMBER_OK);
    CHECK(w, ember_full(4, ws, 1, EMBER_FLOAT32, EMBER_CPU, &wt) == EMBER_OK);
    CHECK(w, ember_full(4, ys, 1, EMBER_FLOAT32, EMBER_CPU, &gy) == EMBER_OK);
    if (ember_conv2d(x, wt, one, one, one, 1, &y) == EMBER_OK) {
        const float *v = ember_tensor_data(y);
        CHECK(w, v[0] == 8 && v[2 * 6 + 2] == 18 && v[36 + 7] == 18);
    } else {
        CHECK(w, 0);
    }
    if (ember_conv2d_backward_weight(x, gy, ws, one, one, one, 1, &gw) == EMBER_OK) {
        const float *v = ember_tensor_data(gw);
        CHECK(w, v[0] == 25 && v[4] == 36 && v[9 + 4] == 36);
    } else {
        CHECK(w, 0);
    }
    ember_tensor *all[] = {x, wt, y, gy, gw};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) ember_tensor_release(all[i]);
}

static void *work(void *arg)
{
    worker *w = arg;
    for (int it = 0; it < n_iter; it++) {
        const int64_t shape[2] = {17 + w->id, 33};
        ember_tensor *a = NULL, *b = NULL, *c = NULL, *d = NULL, *m = NULL, *r = NULL, *v = NULL, *s = NULL;
        CHECK(w, ember_full(2, shape, w->id + 1, EMBER_FLOAT32, EMBER_CPU, &a) == EMBER_OK);
        CHECK(w, ember_full(2, shape, 0.5, EMBER_FLOAT32, EMBER_CPU, &b) == EMBER_OK);
        CHECK(w, ember_add(a, b, &c) == EMBER_OK);                 /* id + 1.5 */
        CHECK(w, ember_mul_(c, b) == EMBER_OK);                    /* (id + 1.5) / 2 */
        CHECK(w, ember_transpose(c, 0, 1, &v) == EMBER_OK);
        CHECK(w, ember_matmul(c, v, &m) == EMBER_OK);               /* 33 ((id + 1.5) / 2)^2 */
        CHECK(w, ember_sum(m, 0, NULL, 0, &s) == EMBER_OK);
        double e = (w->id + 1.5) / 2, rows = 17 + w->id;
        CHECK(w, fabs(item(s) - rows * rows * 33 * e * e) <= 1e-4 * rows * rows * 33 * e * e);
        const int64_t big[1] = {20000};
        CHECK(w, ember_rand(1, big, EMBER_FLOAT32, EMBER_CPU, &r) == EMBER_OK);
        ember_tensor *mean = NULL;
        CHECK(w, ember_mean(r, 0, NULL, 0, &mean) == EMBER_OK);
        CHECK(w, fabs(item(mean) - 0.5) < 0.02);
        CHECK(w, ember_exp(c, &d) == EMBER_OK);
        CHECK(w, fabs(((float *)ember_tensor_data(d))[7] - expf((float)e)) < 1e-4f * expf((float)e));
        ember_tensor *all[] = {a, b, c, d, m, r, v, s, mean};
        for (size_t i = 0; i < sizeof all / sizeof *all; i++) ember_tensor_release(all[i]);
        one_backward(w, (float)(w->id * 100 + it % 5));
        one_conv(w);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int n_threads = argc > 1 ? atoi(argv[1]) : 8;
    if (argc > 2) n_iter = atoi(argv[2]);
    if (n_threads < 1 || n_threads > 64) n_threads = 8;
    pthread_t th[64];
    worker ws[64];
    memset(ws, 0, sizeof ws);
    ember_memory_stats_t before, after;
    ember_memory_stats(&before);
    for (int i = 0; i < n_threads; i++) {
        ws[i].id = i;
        if (pthread_create(&th[i], NULL, work, &ws[i]) != 0) {
            fprintf(stderr, "test_threads: cannot start thread %d\n", i);
            return 1;
        }
    }
    int failures = 0;
    for (int i = 0; i < n_threads; i++) {
        pthread_join(th[i], NULL);
        if (ws[i].failures) fprintf(stderr, "thread %d: %d failures, first: %s\n", i, ws[i].failures, ws[i].first);
        failures += ws[i].failures;
    }
    ember_memory_stats(&after);
    if (after.live_tensors != before.live_tensors || after.bytes_in_use != before.bytes_in_use) {
        fprintf(stderr, "test_threads: %lld tensors and %lld bytes left behind\n",
                (long long)(after.live_tensors - before.live_tensors),
                (long long)(after.bytes_in_use - before.bytes_in_use));
        failures++;
    }
    printf("test_threads: %d threads x %d iterations, %s\n", n_threads, n_iter, failures ? "FAILED" : "ok");
    return failures != 0;
}

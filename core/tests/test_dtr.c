/* test_dtr.c: DTR from C (ember_dtr_enable, ember_dtr_disable,
   ember_dtr_stats): a chain of tanh(h w) under a budget of a few of its
   activations evicts and recomputes, and gives the gradient of w bit for
   bit as without DTR, never passing the budget; a budget nothing fits
   fails the op with EMBER_ERR_OOM naming the budget, asks the host's GC
   for a collection (ember_dtr_gc_wanted), and everything goes on after
   disable; bad arguments fail. */
#include "check.h"

#include <stdlib.h>
#include <string.h>

#define N 128
#define LAYERS 8
#define ACT ((int64_t)N * N * 4)

/* the gradient of sum(tanh(...tanh(x w)... w)) for w into grad[N * N] */
static int chain_grad(float *grad)
{
    const int64_t shape[2] = {N, N};
    float *xv = malloc(sizeof(float) * N * N), *wv = malloc(sizeof(float) * N * N);
    for (int i = 0; i < N * N; i++) {
        xv[i] = (float)((i * 37) % 101) / 101.0f - 0.5f;
        wv[i] = (float)((i * 53) % 97) / 970.0f - 0.05f;
    }
    ember_tensor *x = NULL, *w = NULL, *h = NULL, *y = NULL;
    CHECK(ember_from_data(xv, EMBER_FLOAT32, 2, shape, EMBER_FLOAT32, EMBER_CPU, &x) == EMBER_OK);
    CHECK(ember_from_data(wv, EMBER_FLOAT32, 2, shape, EMBER_FLOAT32, EMBER_CPU, &w) == EMBER_OK);
    free(xv);
    free(wv);
    int key = 0, got = 0, rc = EMBER_OK;
    CHECK(ember_key_new(0, &key) == EMBER_OK);
    CHECK(ember_key_record(key) == EMBER_OK);
    CHECK(ember_key_track(key, w) == EMBER_OK);
    h = x;
    ember_tensor_retain(h);
    for (int l = 0; l < LAYERS && rc == EMBER_OK; l++) {
        ember_tensor *m = NULL, *t = NULL;
        rc = ember_matmul(h, w, &m);
        if (rc == EMBER_OK) rc = ember_tanh(m, &t);
        ember_tensor_release(m);
        ember_tensor_release(h);
        h = t;
    }
    if (rc == EMBER_OK) rc = ember_sum(h, 0, NULL, 0, &y);
    ember_backward_run *run = NULL;
    ember_backward_req req;
    if (rc == EMBER_OK && (rc = ember_backward_begin(key, 1, &y, NULL, &run)) == EMBER_OK) {
        for (;;) {
            int s = ember_backward_step(run, &req);
            if (s != EMBER_NEED_LUA) {
                if (s != EMBER_DONE) rc = s;
                break;
            }
            if (req.tensor == w) got = ember_copy_to_buffer(req.grads[0], grad, EMBER_FLOAT32) == EMBER_OK;
        }
    }
    ember_backward_end(run);
    ember_key_free(key);
    ember_tensor *all[] = {x, w, h, y};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) ember_tensor_release(all[i]);
    return rc < 0 ? rc : got ? EMBER_OK : -1;
}

int main(void)
{
    static float want[N * N], got[N * N];
    ember_dtr_stats_t st;
    CHECK(chain_grad(want) == EMBER_OK);

    /* under a budget of x, w and 6 of the 16 products and activations */
    int64_t budget = ember_bytes_in_use() + 8 * ACT;
    CHECK(ember_dtr_enable(budget, 0) == EMBER_OK);
    CHECK(chain_grad(got) == EMBER_OK);
    CHECK(ember_dtr_stats(&st) == EMBER_OK);
    CHECK(st.enabled == 1 && st.budget == budget && st.min_size == 0);
    CHECK(st.evictions > 0 && st.recomputes > 0 && st.recompute_s >= 0);
    CHECK(st.peak_bytes <= budget);
    CHECK(memcmp(want, got, sizeof want) == 0);
    CHECK(ember_dtr_disable() == EMBER_OK);
    CHECK(ember_dtr_stats(&st) == EMBER_OK && st.enabled == 0 && st.tracked == 0);

    /* x, w and one product fit, not its tanh beside it: the op fails, naming the budget */
    CHECK(ember_dtr_enable(ember_bytes_in_use() + 3 * ACT, 0) == EMBER_OK);
    CHECK(ember_dtr_gc_wanted() == 0);
    CHECK(chain_grad(got) == EMBER_ERR_OOM);
    CHECK(strstr(ember_last_error(), "DTR budget") != NULL);
    CHECK(ember_dtr_gc_wanted() == 1);   /* nothing was left to evict: the host's GC is asked for, once */
    CHECK(ember_dtr_gc_wanted() == 0);
    CHECK(ember_dtr_disable() == EMBER_OK);
    memset(got, 0, sizeof got);
    CHECK(chain_grad(got) == EMBER_OK);
    CHECK(memcmp(want, got, sizeof want) == 0);

    /* the default min_size: budget / 1024 under 1 MiB */
    CHECK(ember_dtr_enable((int64_t)1 << 20, -1) == EMBER_OK);
    CHECK(ember_dtr_stats(&st) == EMBER_OK && st.min_size == 1024);
    CHECK(ember_dtr_disable() == EMBER_OK);

    CHECK(ember_dtr_enable(0, 0) == EMBER_ERR_ARG);
    CHECK(ember_dtr_enable(-5, 0) == EMBER_ERR_ARG);
    CHECK(ember_dtr_stats(NULL) == EMBER_ERR_ARG);
    CHECK(ember_dtr_disable() == EMBER_OK);   /* off already: nothing to do */
    if (failures) fprintf(stderr, "test_dtr: %d failures\n", failures);
    return failures != 0;
}

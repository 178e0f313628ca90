/* test_core.c: the tensor core and the autograd engine through the C API
   alone (no Lua): creation, refcounts, views and versions, broadcasting,
   promotion, errors, and a forward + backward driven by the pull loop. */
#include "check.h"

#include <math.h>
#include <stdio.h>
#include <string.h>


static ember_tensor *vec(const float *v, int64_t n)
{
    ember_tensor *t = NULL;
    CHECK(ember_from_data(v, EMBER_FLOAT32, 1, &n, EMBER_FLOAT32, EMBER_CPU, &t) == EMBER_OK);
    return t;
}

static void test_creation(void)
{
    int64_t shape[2] = {2, 3};
    ember_tensor *t = NULL;
    CHECK(ember_full(2, shape, 7, EMBER_INT64, EMBER_CPU, &t) == EMBER_OK);
    CHECK(ember_tensor_ndim(t) == 2 && ember_tensor_numel(t) == 6);
    CHECK(ember_tensor_dtype(t) == EMBER_INT64);
    CHECK(ember_tensor_version(t) == 0);
    double v = 0;
    CHECK(ember_item(t, &v) == EMBER_ERR_SHAPE);
    CHECK(strstr(ember_last_error(), "{2, 3}") != NULL);
    CHECK(((int64_t *)ember_tensor_data(t))[5] == 7);
    ember_tensor_retain(t);
    CHECK(ember_tensor_refcount(t) == 2);
    ember_tensor_release(t);
    ember_tensor_release(t);
    ember_tensor_release(NULL);

    int64_t bad[2] = {1000000000000LL, 1000000000000LL};
    ember_tensor *u = (ember_tensor *)1;
    CHECK(ember_empty(2, bad, EMBER_FLOAT32, EMBER_CPU, &u) == EMBER_ERR_OOM);
    CHECK(u == NULL);
    int64_t neg = -1;
    CHECK(ember_empty(1, &neg, EMBER_FLOAT32, EMBER_CPU, &u) == EMBER_ERR_SHAPE);
    CHECK(ember_empty(9, bad, EMBER_FLOAT32, EMBER_CPU, &u) == EMBER_ERR_SHAPE);
    CHECK(ember_empty(1, shape, 42, EMBER_CPU, &u) == EMBER_ERR_DTYPE);
    CHECK(ember_empty(1, shape, EMBER_FLOAT32, 5, &u) == EMBER_ERR_DEVICE);
}

static void test_broadcast_and_promotion(void)
{
    const float av[6] = {1, 2, 3, 4, 5, 6}, bv[3] = {10, 20, 30};
    int64_t s23[2] = {2, 3};
    ember_tensor *a = NULL, *b = vec(bv, 3), *c = NULL, *d = NULL;
    CHECK(ember_from_data(av, EMBER_FLOAT32, 2, s23, EMBER_FLOAT32, EMBER_CPU, &a) == EMBER_OK);
    CHECK(ember_add(a, b, &c) == EMBER_OK);
    const float *p = ember_tensor_data(c);
    CHECK(p[0] == 11 && p[5] == 36);
    ember_tensor *four = NULL;
    int64_t s4 = 4;
    CHECK(ember_full(1, &s4, 1, EMBER_FLOAT32, EMBER_CPU, &four) == EMBER_OK);
    CHECK(ember_mul(a, four, &d) == EMBER_ERR_SHAPE);
    CHECK(d == NULL);
    CHECK(strcmp(ember_last_error(), "mul: shapes {2, 3} and {4} cannot be broadcast") == 0);
    CHECK(ember_add(a, NULL, &d) == EMBER_ERR_ARG);

    /* int32 tensor + wrapped 1.5 -> float32; + wrapped 2 -> int32 */
    ember_tensor *i32 = NULL, *w = NULL, *r = NULL;
    CHECK(ember_full(1, &s4, 3, EMBER_INT32, EMBER_CPU, &i32) == EMBER_OK);
    CHECK(ember_scalar(1.5, EMBER_FLOAT64, 1, &w) == EMBER_OK);
    CHECK(ember_add(i32, w, &r) == EMBER_OK);
    CHECK(ember_tensor_dtype(r) == EMBER_FLOAT32);
    CHECK(((float *)ember_tensor_data(r))[0] == 4.5f);
    ember_tensor_release(r);
    ember_tensor_release(w);
    CHECK(ember_scalar(2, EMBER_INT64, 1, &w) == EMBER_OK);
    CHECK(ember_add(i32, w, &r) == EMBER_OK);
    CHECK(ember_tensor_dtype(r) == EMBER_INT32);
    ember_tensor_release(r);
    ember_tensor_release(w);
    ember_tensor_release(i32);
    ember_tensor_release(four);
    ember_tensor_release(a);
    ember_tensor_release(b);
    ember_tensor_release(c);
}

static void test_inplace_and_versions(void)
{
    const float v[3] = {1, 2, 3};
    ember_tensor *a = vec(v, 3), *b = vec(v, 3), *d = NULL;
    CHECK(ember_detach(a, &d) == EMBER_OK);
    CHECK(ember_tensor_same_storage(a, d));
    CHECK(ember_mul_(d, b) == EMBER_OK);
    CHECK(ember_tensor_version(a) == 1);
    CHECK(((float *)ember_tensor_data(a))[2] == 9);
    CHECK(ember_unary_(a, "sqrt") == EMBER_OK);
    CHECK(fabsf(((float *)ember_tensor_data(a))[1] - 2) < 1e-6f);
    CHECK(ember_unary_(a, "frobnicate") == EMBER_ERR_ARG);
    ember_tensor_release(d);
    ember_tensor_release(a);
    ember_tensor_release(b);
}

/* y = sum(x * w + x) through the C API; dy/dw = x, dy/dx = w + 1 */

/* y = sum(x * w + x) recorded on a new key, x = {1, 3, 5}, w = {2, 4, 6}:
   dy/dw = x, dy/dx = w + 1 */
typedef struct {
    ember_tensor *x, *w, *xw, *s, *y;
    int key;
} small_graph;

static void build_graph(small_graph *g)
{
    const float xv[3] = {1, 3, 5}, wv[3] = {2, 4, 6};
    memset(g, 0, sizeof *g);
    g->x = vec(xv, 3);
    g->w = vec(wv, 3);
    CHECK(ember_key_new(0, &g->key) == EMBER_OK);
    CHECK(ember_key_record(g->key) == EMBER_OK);
    CHECK(ember_key_record(g->key) == EMBER_ERR_STATE);
    CHECK(ember_key_track(g->key, g->x) == EMBER_OK);
    CHECK(ember_key_track(g->key, g->w) == EMBER_OK);
    CHECK(ember_mul(g->x, g->w, &g->xw) == EMBER_OK);
    CHECK(ember_add(g->xw, g->x, &g->s) == EMBER_OK);
    CHECK(ember_sum(g->s, 0, NULL, 0, &g->y) == EMBER_OK);
}

static void free_graph(small_graph *g)
{
    ember_key_free(g->key);
    ember_tensor *all[5] = {g->x, g->w, g->xw, g->s, g->y};
    for (int i = 0; i < 5; i++) ember_tensor_release(all[i]);
}

/* The same graph with a deadline already passed: one node per call, writes
   into what the open run needs refused, the same gradients at the end. */
static void test_budgeted_backward(void)
{
    small_graph G;
    build_graph(&G);
    ember_tensor *x = G.x, *w = G.w, *y = G.y;
    ember_backward_run *run = NULL;
    ember_backward_req req;
    CHECK(ember_backward_begin(G.key, 1, &y, NULL, &run) == EMBER_OK);
    CHECK(ember_mul_(w, w) == EMBER_ERR_STATE);   /* MulBackward still needs w */
    CHECK(strstr(ember_last_error(), "needed by a backward run") != NULL);
    int got = 0, pauses = 0;
    double t0 = ember_clock();
    for (;;) {
        int rc = ember_backward_step_until(run, &req, 0);
        if (rc == EMBER_DONE) break;
        if (rc == EMBER_PAUSED) {
            pauses++;
            continue;
        }
        CHECK(rc == EMBER_NEED_LUA && req.kind == EMBER_REQ_LEAF);
        if (rc != EMBER_NEED_LUA) break;
        const float *g = ember_tensor_data(req.grads[0]);
        if (req.tensor == w) got |= (g[0] == 1 && g[1] == 3 && g[2] == 5) ? 1 : 0;
        if (req.tensor == x) got |= (g[0] == 3 && g[1] == 5 && g[2] == 7) ? 2 : 0;
    }
    CHECK(ember_clock() >= t0);
    CHECK(got == 3);
    CHECK(pauses >= 2);   /* sum, add and mul ran one a call */
    ember_backward_end(run);
    CHECK(ember_mul_(w, w) == EMBER_OK);   /* the run is over */
    free_graph(&G);
}

static void test_backward(void)
{
    small_graph G;
    build_graph(&G);
    ember_tensor *x = G.x, *w = G.w, *y = G.y;
    int key = G.key;
    CHECK(ember_grad_fn(y, NULL) != NULL);
    CHECK(strcmp(ember_node_name(ember_grad_fn(y, NULL)), "SumBackward") == 0);
    CHECK(strcmp(ember_node_label(ember_grad_fn(y, NULL)), "sum (SumBackward)") == 0);
    CHECK(strcmp(ember_node_label(NULL), "") == 0);

    ember_backward_run *run = NULL;
    ember_backward_req req;
    CHECK(ember_backward_begin(key, 1, &y, NULL, &run) == EMBER_OK);
    int got = 0;
    for (;;) {
        int rc = ember_backward_step(run, &req);
        if (rc == EMBER_DONE) break;
        CHECK(rc == EMBER_NEED_LUA);
        if (rc != EMBER_NEED_LUA) break;
        CHECK(req.kind == EMBER_REQ_LEAF);
        const float *g = ember_tensor_data(req.grads[0]);
        if (req.tensor == w) {
            CHECK(g[0] == 1 && g[1] == 3 && g[2] == 5);
            got |= 1;
        } else if (req.tensor == x) {
            CHECK(g[0] == 3 && g[1] == 5 && g[2] == 7);
            got |= 2;
        }
    }
    CHECK(got == 3);
    ember_backward_end(run);
    CHECK(!ember_key_is_recording(key));
    ember_autograd_stats_t st;
    ember_autograd_stats(&st);
    CHECK(st.live_nodes == 0 && st.saved_tensors == 0);
    free_graph(&G);
}

/* a state read with ember_get_rng_state and set again repeats the draws
   made after it; reading it draws nothing */
static void test_rng_state(void)
{
    const int64_t n[1] = {6};
    ember_tensor *a = NULL, *b = NULL, *c = NULL;
    uint64_t seed = 0, offset = 0, offset2 = 0;
    ember_manual_seed(3);
    CHECK(ember_rand(1, n, EMBER_FLOAT32, EMBER_CPU, &a) == EMBER_OK);
    CHECK(ember_get_rng_state(&seed, &offset) == EMBER_OK);
    CHECK(seed == 3 && offset > 0);
    CHECK(ember_get_rng_state(&seed, &offset2) == EMBER_OK && offset2 == offset);
    CHECK(ember_randn(1, n, EMBER_FLOAT32, EMBER_CPU, &b) == EMBER_OK);
    ember_manual_seed(99);
    ember_set_rng_state(seed, offset);
    CHECK(ember_randn(1, n, EMBER_FLOAT32, EMBER_CPU, &c) == EMBER_OK);
    CHECK(memcmp(ember_tensor_data(b), ember_tensor_data(c), 6 * sizeof(float)) == 0);
    CHECK(memcmp(ember_tensor_data(a), ember_tensor_data(b), 6 * sizeof(float)) != 0);
    ember_tensor_release(a);
    ember_tensor_release(b);
    ember_tensor_release(c);
}

/* a private generator: the same seed gives the default generator's stream,
   its draws leave the default one where it was, and its state repeats */
static void test_generator(void)
{
    const int64_t n[1] = {5};
    ember_tensor *a = NULL, *b = NULL, *c = NULL, *e = NULL;
    ember_generator *g = NULL;
    uint64_t s0, o0, s1, o1, gs, go;
    CHECK(ember_generator_new(11, &g) == EMBER_OK && g != NULL);
    CHECK(ember_generator_initial_seed(g) == 11);
    ember_manual_seed(4);
    CHECK(ember_get_rng_state(&s0, &o0) == EMBER_OK);
    CHECK(ember_rand_gen(g, 1, n, EMBER_FLOAT64, EMBER_CPU, &a) == EMBER_OK);
    CHECK(ember_generator_get_state(g, &gs, &go) == EMBER_OK && gs == 11 && go == 3);
    CHECK(ember_exponential_gen_(g, a, 2.0) == EMBER_OK);
    CHECK(ember_geometric_gen_(g, a, 0.5) == EMBER_OK);
    CHECK(ember_bernoulli_gen_(g, a, 0.5) == EMBER_OK);
    CHECK(ember_get_rng_state(&s1, &o1) == EMBER_OK && s1 == s0 && o1 == o0);
    ember_generator_set_state(g, 11, 0);
    CHECK(ember_rand_gen(g, 1, n, EMBER_FLOAT64, EMBER_CPU, &b) == EMBER_OK);
    ember_manual_seed(11);
    CHECK(ember_rand(1, n, EMBER_FLOAT64, EMBER_CPU, &c) == EMBER_OK);
    CHECK(memcmp(ember_tensor_data(b), ember_tensor_data(c), 5 * sizeof(double)) == 0);
    CHECK(ember_generator_get_state(ember_default_generator(), &gs, &go) == EMBER_OK && gs == 11 && go == 3);
    /* geometric draws of p = 1 are all 1; a bad probability is refused */
    CHECK(ember_randint_gen(g, 0, 10, 1, n, EMBER_INT64, EMBER_CPU, &e) == EMBER_OK);
    CHECK(ember_geometric_gen_(g, e, 1.0) == EMBER_OK);
    for (int i = 0; i < 5; i++) CHECK(((const int64_t *)ember_tensor_data(e))[i] == 1);
    CHECK(ember_geometric_gen_(g, e, 0.0) == EMBER_ERR_ARG);
    CHECK(ember_exponential_gen_(g, e, 1.0) == EMBER_ERR_DTYPE);
    ember_generator_free(g);
    ember_generator_free(ember_default_generator());   /* never freed: a no-op */
    ember_tensor_release(a);
    ember_tensor_release(b);
    ember_tensor_release(c);
    ember_tensor_release(e);
}

int main(void)
{
    test_creation();
    test_broadcast_and_promotion();
    test_inplace_and_versions();
    test_backward();
    test_budgeted_backward();
    test_rng_state();
    test_generator();
    ember_memory_stats_t m;
    ember_memory_stats(&m);
    CHECK(m.live_tensors == 0);
    CHECK(m.bytes_in_use == 0);
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    else printf("test_core: all checks passed\n");
    return failures != 0;
}

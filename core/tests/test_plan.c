/* test_plan.c: traces and plans from C (core/src/plan/, docs/plans.md): a
   step traced with ember_trace_begin/end replays bit for bit as the same
   calls made eagerly, live tensors updated in place, constants and random
   draws as eager makes them; dead entries dropped; budgeted runs; and the
   errors: a value read while tracing, nested traces, inputs of another
   shape, a run read before it is done; the arena's size and the names of a
   plan's live tensors; an Adam step saved, loaded and trained from. */
#include "check.h"

#include <stdio.h>
#include <string.h>

static ember_tensor *vec(int64_t n, double v)
{
    ember_tensor *t = NULL;
    CHECK(ember_full(1, &n, v, EMBER_FLOAT32, EMBER_CPU, &t) == EMBER_OK);
    return t;
}

static ember_tensor *rnd(int64_t n)
{
    ember_tensor *t = NULL;
    CHECK(ember_randn(1, &n, EMBER_FLOAT32, EMBER_CPU, &t) == EMBER_OK);
    return t;
}

static int same_bits(ember_tensor *a, ember_tensor *b)
{
    return ember_tensor_numel(a) == ember_tensor_numel(b) && ember_tensor_dtype(a) == ember_tensor_dtype(b) &&
           memcmp(ember_tensor_data(a), ember_tensor_data(b), (size_t)ember_tensor_numel(a) * 4) == 0;
}

/* the step: y = relu(x * w + c) * noise, s = sum(y); w += 0.5 * s (in
   place, a live tensor); an unused product (dead); returns s */
static ember_tensor *step(ember_tensor *x, ember_tensor *w)
{
    ember_tensor *c = vec(8, 0.25), *m = NULL, *a = NULL, *r = NULL, *noise = rnd(8), *y = NULL, *s = NULL,
                 *half = NULL, *d = NULL, *dead = NULL;
    CHECK(ember_mul(x, w, &m) == EMBER_OK);
    CHECK(ember_add(m, c, &a) == EMBER_OK);
    CHECK(ember_relu(a, &r) == EMBER_OK);
    CHECK(ember_mul(r, noise, &y) == EMBER_OK);
    CHECK(ember_sum(y, 0, NULL, 0, &s) == EMBER_OK);
    CHECK(ember_mul(x, x, &dead) == EMBER_OK);
    CHECK(ember_scalar(0.5, EMBER_FLOAT32, 1, &half) == EMBER_OK);
    CHECK(ember_mul(s, half, &d) == EMBER_OK);
    CHECK(ember_add_(w, d) == EMBER_OK);
    ember_tensor *drop[] = {c, m, a, r, noise, y, half, d, dead};
    for (size_t i = 0; i < sizeof drop / sizeof *drop; i++) ember_tensor_release(drop[i]);
    return s;
}

static ember_tensor *grad_of(ember_tensor *x, ember_tensor *p)
{
    ember_tensor *t = NULL, *g = NULL;
    CHECK(ember_mul(x, p, &t) == EMBER_OK);
    CHECK(ember_mul(t, x, &g) == EMBER_OK);
    ember_tensor_release(t);
    return g;
}

/* an Adam update traced from C, saved and loaded: the loaded plan's runs
   are eager's steps, bit for bit, its moments its own copies by name, its
   step count saved and advanced; the runs after its first use its arena */
static void adam_saved(void)
{
    ember_tensor *p1 = rnd(8), *m1 = vec(8, 0), *v1 = vec(8, 0), *x = rnd(8), *p2 = NULL, *m2 = NULL, *v2 = NULL,
                 *g = NULL, *g2 = NULL;
    CHECK(ember_clone(p1, &p2) == EMBER_OK && ember_clone(m1, &m2) == EMBER_OK && ember_clone(v1, &v2) == EMBER_OK);
    /* the gradient g = (x p) x, a temporary between; step 1 eagerly on (p1, m1, v1), traced on (p2, m2, v2) */
    CHECK((g = grad_of(x, p1)) != NULL);
    CHECK(ember_adam_step_(p1, g, m1, v1, NULL, 1e-2, 0.9, 0.999, 1e-8, 1e-2, 1, 0, 1) == EMBER_OK);
    ember_tensor_release(g);
    CHECK(ember_trace_begin(1, &x) == EMBER_OK);
    CHECK((g2 = grad_of(x, p2)) != NULL);
    CHECK(ember_adam_step_(p2, g2, m2, v2, NULL, 1e-2, 0.9, 0.999, 1e-8, 1e-2, 1, 0, 1) == EMBER_OK);
    ember_plan *tp = NULL, *lp = NULL;
    CHECK(ember_trace_end(1, &g2, &tp) == EMBER_OK);
    CHECK(ember_plan_name(tp, p2, "p") == 1 && ember_plan_name(tp, m2, "p.exp_avg") == 1 &&
          ember_plan_name(tp, v2, "p.exp_avg_sq") == 1);
    CHECK(ember_plan_save(tp, "test_plan_adam.plan") == EMBER_OK);
    CHECK(ember_plan_load("test_plan_adam.plan", &lp) == EMBER_OK);
    int n = 0;
    int64_t *steps = ember_plan_counters(lp, &n);
    CHECK(n == 1 && steps[0] == 2);
    ember_plan_stats_t st;
    for (int k = 2; k <= 4; k++) {
        ember_tensor *o = NULL;
        CHECK((g = grad_of(x, p1)) != NULL);
        CHECK(ember_adam_step_(p1, g, m1, v1, NULL, 1e-2, 0.9, 0.999, 1e-8, 1e-2, 1, 0, k) == EMBER_OK);
        CHECK(ember_plan_run(lp, &x, 1, &o, 1) == EMBER_OK && o && same_bits(o, g));
        ember_plan_stats(lp, &st);
        CHECK(st.arena_bytes > 0 && st.peak_bytes > 0);   /* laid out by the first run */
        ember_tensor_release(g);
        ember_tensor_release(o);
    }
    CHECK(steps[0] == 5);
    const char *names[3] = {"p", "p.exp_avg", "p.exp_avg_sq"};
    ember_tensor *want[3] = {p1, m1, v1};
    for (int k = 0; k < 3; k++) {
        ember_tensor *t = NULL;
        CHECK(ember_plan_tensor(lp, names[k], &t) == EMBER_OK && same_bits(t, want[k]));
        ember_tensor_release(t);
    }
    remove("test_plan_adam.plan");
    ember_plan_free(tp);
    ember_plan_free(lp);
    ember_tensor *drop[] = {p1, m1, v1, x, p2, m2, v2, g2};
    for (size_t i = 0; i < sizeof drop / sizeof *drop; i++) ember_tensor_release(drop[i]);
}

int main(void)
{
    ember_manual_seed(3);
    ember_tensor *w1 = rnd(8), *w2 = NULL, *x0 = rnd(8);
    CHECK(ember_clone(w1, &w2) == EMBER_OK);

    /* eager step 1 on w1; traced step 1 on w2: the same draws */
    uint64_t seed, off;
    ember_get_rng_state(&seed, &off);
    ember_tensor *s1 = step(x0, w1);
    ember_set_rng_state(seed, off);
    CHECK(ember_trace_begin(1, &x0) == EMBER_OK);
    CHECK(ember_is_tracing() == 1);
    CHECK(ember_trace_begin(1, &x0) < 0);   /* no nesting */
    double v;
    CHECK(ember_item(x0, &v) < 0 && strstr(ember_last_error(), "inside ember.jit.trace"));
    ember_tensor *s2 = step(x0, w2);
    ember_plan *p = NULL;
    CHECK(ember_trace_end(1, &s2, &p) == EMBER_OK);
    CHECK(ember_is_tracing() == 0);
    CHECK(same_bits(s1, s2) && same_bits(w1, w2));
    ember_plan_stats_t st;
    ember_plan_stats(p, &st);
    CHECK(st.removed == 1);   /* x * x */
    /* x * w + c, relu, * noise: one fused loop; then sum, half, the update */
    CHECK(st.ops == 5 && st.fused == 1 && st.peak_bytes > 0);
    /* the temporaries (the fused loop's result, s * 0.5) in the arena, at the allocator's 64-byte alignment */
    CHECK(st.arena_bytes > 0 && st.arena_bytes % 64 == 0 && st.patterns == 0);
    /* names: the live weight, not the input; names of the unnamed ones' form and quotes refused */
    ember_tensor *named = NULL;
    CHECK(ember_plan_name(p, w2, "weight") == 1 && ember_plan_name(p, x0, "x") == 0);
    CHECK(ember_plan_name(p, w2, "w3") < 0 && ember_plan_name(p, w2, "a\"b") < 0 && ember_plan_name(p, w2, "") < 0);
    CHECK(ember_plan_tensor(p, "weight", &named) == EMBER_OK && named == w2);   /* a new reference */
    ember_tensor_release(named);
    CHECK(ember_plan_tensor(p, "nope", &named) < 0 && !named && strstr(ember_last_error(), "'nope'"));

    /* replays against eager steps on new inputs: whole, then one entry a step */
    for (int k = 0; k < 4; k++) {
        ember_tensor *x = rnd(8), *e = NULL, *o = NULL;
        ember_get_rng_state(&seed, &off);
        e = step(x, w1);
        ember_set_rng_state(seed, off);
        if (k % 2 == 0) {
            CHECK(ember_plan_run(p, &x, 1, &o, 1) == EMBER_OK);
        } else {
            int done = 0, steps = 0;
            CHECK(ember_plan_start(p, &x, 1) == EMBER_OK);
            CHECK(ember_plan_result(p, &o, 1) < 0);   /* not done */
            while (!done) {
                CHECK(ember_plan_step(p, 0, &done) == EMBER_OK);
                steps++;
            }
            CHECK(steps == st.ops);
            CHECK(ember_plan_result(p, &o, 1) == EMBER_OK);
        }
        CHECK(o && same_bits(e, o));
        CHECK(same_bits(w1, w2));
        ember_tensor_release(x);
        ember_tensor_release(e);
        ember_tensor_release(o);
    }

    /* another shape; a wrong count */
    ember_tensor *bad = rnd(9), *o = NULL;
    CHECK(ember_plan_run(p, &bad, 1, &o, 1) < 0 && strstr(ember_last_error(), "input 1 is float32 {9}"));
    CHECK(ember_plan_run(p, &x0, 0, &o, 1) < 0);
    CHECK(ember_plan_run(p, &x0, 1, &o, 2) < 0);
    ember_plan *none = NULL;
    CHECK(ember_trace_end(1, &s2, &none) < 0 && !none);   /* no trace open */

    /* an aborted trace leaves nothing open */
    CHECK(ember_trace_begin(1, &x0) == EMBER_OK);
    ember_tensor *z = step(x0, w2);
    ember_trace_abort();
    CHECK(ember_is_tracing() == 0);
    CHECK(ember_item(s1, &v) == EMBER_OK);

    ember_plan_free(p);
    ember_plan_free(NULL);
    adam_saved();
    ember_tensor *drop[] = {w1, w2, x0, s1, s2, bad, z};
    for (size_t i = 0; i < sizeof drop / sizeof *drop; i++) ember_tensor_release(drop[i]);
    if (failures) fprintf(stderr, "test_plan: %d failures\n", failures);
    return failures != 0;
}

/* run_plan.c: a C host that runs a plan traced and saved in Lua
   (save_plan.lua), through ember's C API alone (libember, no Lua):
   ember_plan_load reads the model's forward, graph and weights, from one
   file; ember_plan_run runs it on each probe input, and the host checks
   that it gets the outputs Lua got, bit for bit, then prints the classes.
   Given the training step save_plan.lua saved, it trains from it: five
   runs of ember_plan_run update the plan's own copies of the weights, and
   the host checks each loss and, through ember_plan_tensor, each trained
   weight against Lua's eager steps, bit for bit. Given the AdamW step too,
   it trains 5 steps from that one the same way, and checks the losses,
   weights, the optimizer's state (exp_avg, exp_avg_sq by name) and the
   step counts (ember_plan_counters) against Lua's.
   Exits 0 when all is right, non-zero otherwise.

   Run:  run_plan model.plan probes.safetensors [step.plan [adam.plan]] */
#include "ember.h"

#include <stdio.h>
#include <string.h>

static ember_tensor *find(const ember_named_tensors *list, const char *name)
{
    ember_tensor *t = ember_named_find(list, name);
    if (!t) fprintf(stderr, "run_plan: the probes have no tensor '%s'\n", name);
    return t;
}

static int same_bits(const ember_tensor *a, const ember_tensor *b)
{
    int64_t n = ember_tensor_numel(a);
    return n == ember_tensor_numel(b) && ember_tensor_dtype(a) == ember_tensor_dtype(b) &&
           memcmp(ember_tensor_data(a), ember_tensor_data(b), (size_t)n * 4) == 0;   /* float32 */
}

/* five training steps from the saved step: losses and weights (the probes
   under prefix: <prefix>loss<i>, <prefix>trained.<name>) as Lua's */
static int train(const char *path, const ember_named_tensors *probes, const char *prefix)
{
    ember_plan *step = NULL;
    if (ember_plan_load(path, &step) < 0) {
        fprintf(stderr, "run_plan: %s\n", ember_last_error());
        return 1;
    }
    ember_tensor *in[2] = {find(probes, "train_x"), find(probes, "train_y")};
    int bad = !in[0] || !in[1];
    for (int i = 1; i <= 5 && !bad; i++) {
        char nl[32];
        snprintf(nl, sizeof nl, "%sloss%d", prefix, i);
        ember_tensor *want = find(probes, nl), *loss = NULL;
        if (!want || ember_plan_run(step, in, 2, &loss, 1) < 0) {
            fprintf(stderr, "run_plan: %s\n", want ? ember_last_error() : "no loss");
            bad = 1;
            break;
        }
        int same = same_bits(loss, want);
        printf("step %d: loss %.6f%s\n", i, *(const float *)ember_tensor_data(loss), same ? "" : "  DIFFERS from Lua's");
        bad |= !same;
        ember_tensor_release(loss);
    }
    int checked = 0;
    char tp[32];
    size_t np = (size_t)snprintf(tp, sizeof tp, "%strained.", prefix);
    for (int i = 0; i < ember_named_count(probes) && !bad; i++) {
        const char *name = ember_named_name(probes, i);
        if (strncmp(name, tp, np) != 0) continue;
        ember_tensor *w = NULL;
        if (ember_plan_tensor(step, name + np, &w) < 0) {
            fprintf(stderr, "run_plan: %s\n", ember_last_error());
            bad = 1;
            break;
        }
        if (!same_bits(w, ember_named_tensor(probes, i))) {
            printf("weight %s DIFFERS from Lua's\n", name + np);
            bad = 1;
        }
        checked++;
        ember_tensor_release(w);
    }
    ember_tensor *next = ember_named_find(probes, "adam.next_step");
    if (!bad && *prefix && next) {   /* Adam's step counts: each update's next step as Lua's */
        int n = 0;
        const int64_t *steps = ember_plan_counters(step, &n);
        for (int k = 0; k < n; k++)
            if (steps[k] != *(const int64_t *)ember_tensor_data(next)) {
                printf("update %d's step count %lld DIFFERS from Lua's\n", k + 1, (long long)steps[k]);
                bad = 1;
            }
        bad |= n == 0;
    }
    ember_plan_stats_t st;
    ember_plan_stats(step, &st);   /* the first run laid the arena out; the later ones ran in it */
    if (!bad && st.arena_bytes <= 0) {
        printf("the loaded step has no arena\n");
        bad = 1;
    }
    if (!bad)
        printf("trained 5 steps from %s: %d tensors as Lua's (arena %lld bytes)\n", path, checked,
               (long long)st.arena_bytes);
    ember_plan_free(step);
    return bad || checked == 0;
}

int main(int argc, char **argv)
{
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: run_plan model.plan probes.safetensors [step.plan [adam.plan]]\n");
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
    if (!bad && argc >= 4) bad = train(argv[3], probes, "");
    if (!bad && argc == 5) bad = train(argv[4], probes, "adam.");
    ember_named_free(probes);
    ember_plan_free(plan);
    if (!bad) printf("OK\n");
    return bad;
}

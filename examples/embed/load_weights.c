/* load_weights.c: a C host that runs weights trained in Lua, through
   ember's C API alone (libember, no Lua). save_weights.lua trains a
   1 -> 16 -> 1 tanh MLP and saves a whole checkpoint with ember.save; its
   tensors are ordinary safetensors entries under dotted names
   ("model.1.weight", "probe.x"), which ember_load reads. The host finds the
   layers by name, runs the model on the probe inputs and checks that it gets
   the outputs Lua got, bit for bit (the same ops in the same order, on the
   OpenBLAS kernels libember chose in both processes: core/src/blas.c), then
   prints its predictions. Exits 0 when all is right, non-zero otherwise.

   Run:  load_weights checkpoint.safetensors
   N probe samples, H hidden units */
#include "ember.h"

#include <math.h>
#include <stdio.h>

#define TRY(expr)                                                                          \
    do {                                                                                   \
        rc = (expr);                                                                       \
        if (rc < 0) goto done;                                                             \
    } while (0)

/* nn.Linear: x w^T + b, as F.linear computes it */
static int linear(ember_tensor *x, ember_tensor *w, ember_tensor *b, ember_tensor **out)
{
    ember_tensor *xw = NULL;
    int rc = ember_linear(x, w, &xw);
    if (rc == EMBER_OK) rc = ember_add(xw, b, out);
    ember_tensor_release(xw);
    return rc;
}

/* the model: Linear(1, 16), Tanh, Linear(16, 1); x (N, 1) -> (N, 1) */
static int forward(ember_tensor *const *p, ember_tensor *x, ember_tensor **y)
{
    ember_tensor *z = NULL, *h = NULL;
    int rc;
    TRY(linear(x, p[0], p[1], &z));   /* (N, H) */
    TRY(ember_tanh(z, &h));
    TRY(linear(h, p[2], p[3], y));    /* (N, 1) */
done:
    ember_tensor_release(z);
    ember_tensor_release(h);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: load_weights <checkpoint.safetensors>\n");
        return 2;
    }
    ember_named_tensors *list = NULL;
    if (ember_load(argv[1], &list) != EMBER_OK) {
        fprintf(stderr, "load_weights: %s\n", ember_last_error());
        return 1;
    }
    /* the layers' parameters p[0..3], then the probe inputs and Lua's outputs (borrowed) */
    static const char *const names[6] = {"model.1.weight", "model.1.bias", "model.3.weight", "model.3.bias",
                                         "probe.x", "probe.y"};
    ember_tensor *p[6], *y = NULL;
    int ok = 1, rc = EMBER_OK;
    for (int i = 0; i < 6; i++)
        if (!(p[i] = ember_named_find(list, names[i]))) {
            fprintf(stderr, "load_weights: the checkpoint has no tensor '%s'\n", names[i]);
            ok = 0;
        }
    ember_tensor *x = p[4], *want = p[5];
    if (ok) {
        rc = forward(p, x, &y);
        if (rc < 0) fprintf(stderr, "load_weights: forward: %s\n", ember_last_error());
    }
    if (y) {
        int64_t n = ember_tensor_numel(y);
        double got[64], lua[64], xs[64];
        ok = n == ember_tensor_numel(want) && n <= 64 && ember_copy_to_buffer(y, got, EMBER_FLOAT64) == EMBER_OK &&
             ember_copy_to_buffer(want, lua, EMBER_FLOAT64) == EMBER_OK &&
             ember_copy_to_buffer(x, xs, EMBER_FLOAT64) == EMBER_OK;
        for (int64_t i = 0; ok && i < n; i++) {
            printf("x = %5.2f  model %8.5f  (Lua %8.5f)  sin(3x) %8.5f\n", xs[i], got[i], lua[i], sin(3 * xs[i]));
            if (got[i] != lua[i]) {
                fprintf(stderr, "load_weights: output %d is %.9g, Lua computed %.9g\n", (int)i, got[i], lua[i]);
                ok = 0;
            }
        }
    }
    ember_tensor_release(y);
    ember_named_free(list);
    printf("%s\n", ok && rc == EMBER_OK ? "OK" : "FAILED");
    return ok && rc == EMBER_OK ? 0 : 1;
}

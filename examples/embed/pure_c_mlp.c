/* pure_c_mlp.c: a tiny MLP trained through ember's C API alone: no Lua, no
   LuaJIT, only libember. Forward with ops, backward with the autograd engine's
   pull loop (a key records the ops; backward_step hands back each parameter's
   gradient), a check of every gradient entry against central finite
   differences in float64, then a few steps of gradient descent. Prints OK and
   exits 0 when all is right; non-zero otherwise.

   loss = mean((tanh(x W1 + b1) W2 + b2 - y)^2)
   N samples, D inputs, H hidden units, O outputs */
#include "ember.h"

#include <math.h>
#include <stdio.h>

enum { N = 4, D = 3, H = 5, O = 2, NPARAM = 4 };

#define TRY(expr)                                                                          \
    do {                                                                                   \
        rc = (expr);                                                                       \
        if (rc < 0) goto done;                                                             \
    } while (0)

static ember_tensor *randn(int ndim, const int64_t *shape)
{
    ember_tensor *t = NULL;
    if (ember_randn(ndim, shape, EMBER_FLOAT64, EMBER_CPU, &t) != EMBER_OK)
        fprintf(stderr, "pure_c_mlp: randn: %s\n", ember_last_error());
    return t;
}

/* loss of the MLP on (x, y); intermediates are released as soon as used */
static int forward(ember_tensor *const *p, ember_tensor *x, ember_tensor *y, ember_tensor **loss)
{
    ember_tensor *xw = NULL, *z = NULL, *h = NULL, *hw = NULL, *out = NULL, *d = NULL, *d2 = NULL;
    int rc;
    *loss = NULL;
    TRY(ember_matmul(x, p[0], &xw));     /* (N, H) */
    TRY(ember_add(xw, p[1], &z));        /* + b1 (H), broadcast */
    TRY(ember_tanh(z, &h));
    TRY(ember_matmul(h, p[2], &hw));     /* (N, O) */
    TRY(ember_add(hw, p[3], &out));      /* + b2 (O) */
    TRY(ember_sub(out, y, &d));
    TRY(ember_mul(d, d, &d2));
    TRY(ember_mean(d2, 0, NULL, 0, loss));   /* all dims: a 0-d tensor */
done:
    ember_tensor_release(xw);
    ember_tensor_release(z);
    ember_tensor_release(h);
    ember_tensor_release(hw);
    ember_tensor_release(out);
    ember_tensor_release(d);
    ember_tensor_release(d2);
    return rc;
}

static int loss_value(ember_tensor *const *p, ember_tensor *x, ember_tensor *y, double *v)
{
    ember_tensor *loss = NULL;
    int rc = forward(p, x, y, &loss);
    if (rc == EMBER_OK) rc = ember_item(loss, v);
    ember_tensor_release(loss);
    return rc;
}

/* grads[i] = d loss / d p[i] (new references), by recording and backward */
static int gradients(ember_tensor *const *p, ember_tensor *x, ember_tensor *y, double *v,
                     ember_tensor **grads)
{
    int key = 0, rc;
    ember_tensor *loss = NULL;
    ember_backward_run *run = NULL;
    for (int i = 0; i < NPARAM; i++) grads[i] = NULL;
    TRY(ember_key_new(0, &key));
    TRY(ember_key_record(key));
    for (int i = 0; i < NPARAM; i++) TRY(ember_key_track(key, p[i]));   /* attach */
    TRY(forward(p, x, y, &loss));
    TRY(ember_item(loss, v));
    TRY(ember_backward_begin(key, 1, &loss, NULL, &run));   /* dy = 1 for a 0-d loss */
    for (;;) {
        ember_backward_req req;
        rc = ember_backward_step(run, &req);
        if (rc == EMBER_DONE) break;
        if (rc < 0) goto done;
        if (rc != EMBER_NEED_LUA) continue;
        if (req.kind == EMBER_REQ_LEAF) {   /* an attached tensor's gradient is complete */
            for (int i = 0; i < NPARAM; i++) {
                if (req.tensor == p[i] && req.grads[0]) {
                    ember_tensor_release(grads[i]);
                    ember_tensor_retain(req.grads[0]);   /* borrowed: keep our own reference */
                    grads[i] = req.grads[0];
                }
            }
        } else {   /* a node asking for its rule: the built-in one */
            TRY(ember_backward_builtin(run, req.num_grads, req.grads));
        }
    }
    rc = EMBER_OK;
done:
    if (run) ember_backward_end(run);   /* also releases the recording */
    if (key) {
        ember_key_release(key);
        ember_key_free(key);
    }
    ember_tensor_release(loss);
    for (int i = 0; rc < 0 && i < NPARAM; i++) {
        ember_tensor_release(grads[i]);
        grads[i] = NULL;
    }
    return rc;
}

/* every entry of every gradient against (L(p + e) - L(p - e)) / 2e */
static int check_gradients(ember_tensor *const *p, ember_tensor *x, ember_tensor *y,
                           ember_tensor *const *grads, double *worst)
{
    const double eps = 1e-6;
    *worst = 0;
    for (int i = 0; i < NPARAM; i++) {
        if (!grads[i]) {
            fprintf(stderr, "pure_c_mlp: parameter %d got no gradient\n", i);
            return EMBER_ERR_STATE;
        }
        double *w = ember_tensor_data(p[i]);
        const double *g = ember_tensor_data(grads[i]);
        for (int64_t j = 0; j < ember_tensor_numel(p[i]); j++) {
            double orig = w[j], lp = 0, lm = 0;
            int rc;
            w[j] = orig + eps;
            ember_tensor_bump_version(p[i]);
            rc = loss_value(p, x, y, &lp);
            w[j] = orig - eps;
            ember_tensor_bump_version(p[i]);
            if (rc == EMBER_OK) rc = loss_value(p, x, y, &lm);
            w[j] = orig;
            ember_tensor_bump_version(p[i]);
            if (rc < 0) return rc;
            double fd = (lp - lm) / (2 * eps);
            double err = fabs(fd - g[j]) / fmax(1.0, fabs(fd));
            if (err > *worst) *worst = err;
            if (err > 1e-6) {
                fprintf(stderr, "pure_c_mlp: param %d entry %lld: backward %.9g, finite difference %.9g\n",
                        i, (long long)j, g[j], fd);
                return EMBER_ERR_STATE;
            }
        }
    }
    return EMBER_OK;
}

/* p -= lr * grad, in place */
static int sgd_step(ember_tensor *const *p, ember_tensor *const *grads, double lr)
{
    ember_tensor *s = NULL, *u = NULL;
    int rc;
    TRY(ember_scalar(lr, EMBER_FLOAT64, 1, &s));
    for (int i = 0; i < NPARAM; i++) {
        TRY(ember_mul(grads[i], s, &u));
        TRY(ember_sub_(p[i], u));
        ember_tensor_release(u);
        u = NULL;
    }
done:
    ember_tensor_release(s);
    ember_tensor_release(u);
    return rc;
}

/* bad input gives a status and a message, never a crash */
static int check_bad_input(ember_tensor *x)
{
    ember_tensor *out = NULL;
    int rc = ember_matmul(NULL, x, &out);
    printf("matmul(NULL, x): status %d, \"%s\"\n", rc, ember_last_error());
    if (rc != EMBER_ERR_ARG || out != NULL) return 0;
    rc = ember_matmul(x, x, &out);   /* (N, D) x (N, D) */
    printf("matmul(x, x): status %d, \"%s\"\n", rc, ember_last_error());
    if (rc != EMBER_ERR_SHAPE || out != NULL) return 0;
    return 1;
}

int main(void)
{
    const int64_t sx[2] = { N, D }, sy[2] = { N, O }, s1[2] = { D, H }, sb1[1] = { H },
                  s2[2] = { H, O }, sb2[1] = { O };
    int ok = 1;
    printf("BLAS: %s\n", ember_blas_info());   /* libember chose the kernels, as for every host */
    ember_manual_seed(1);
    ember_tensor *x = randn(2, sx), *y = randn(2, sy);
    ember_tensor *p[NPARAM] = { randn(2, s1), randn(1, sb1), randn(2, s2), randn(1, sb2) };
    ember_tensor *grads[NPARAM] = { NULL, NULL, NULL, NULL };
    double loss0 = 0, loss = 0, worst = 0;
    for (int i = 0; i < NPARAM; i++) ok = ok && p[i];
    if (!ok || !x || !y) goto done;

    if (gradients(p, x, y, &loss0, grads) != EMBER_OK ||
        check_gradients(p, x, y, grads, &worst) != EMBER_OK) {
        fprintf(stderr, "pure_c_mlp: %s\n", ember_last_error());
        ok = 0;
        goto done;
    }
    printf("loss %.6f; gradients of %d parameters match finite differences (worst rel. error %.2e)\n",
           loss0, NPARAM, worst);

    for (int step = 0; step < 100; step++) {
        for (int i = 0; i < NPARAM; i++) ember_tensor_release(grads[i]);
        if (gradients(p, x, y, &loss, grads) != EMBER_OK || sgd_step(p, grads, 0.1) != EMBER_OK) {
            fprintf(stderr, "pure_c_mlp: step %d: %s\n", step, ember_last_error());
            ok = 0;
            goto done;
        }
        if (step % 25 == 0) printf("step %3d  loss %.6f\n", step, loss);
    }
    if (!(loss < 0.5 * loss0)) {
        fprintf(stderr, "pure_c_mlp: the loss did not fall (%.6f -> %.6f)\n", loss0, loss);
        ok = 0;
    }
    ok = ok && check_bad_input(x);

done:
    for (int i = 0; i < NPARAM; i++) {
        ember_tensor_release(p[i]);
        ember_tensor_release(grads[i]);
    }
    ember_tensor_release(x);
    ember_tensor_release(y);
    ember_memory_stats_t m;
    ember_memory_stats(&m);
    if (m.live_tensors != 0) {
        fprintf(stderr, "pure_c_mlp: %lld tensors leaked\n", (long long)m.live_tensors);
        ok = 0;
    }
    if (ok) printf("OK\n");
    return ok ? 0 : 1;
}

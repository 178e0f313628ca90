/* optim.c: fused optimizer updates. One pass over each parameter reads the
   gradient and the state and writes the parameter and the state, where the
   same update composed of tensor ops makes four to eight passes and as many
   temporaries. The formulas are PyTorch's (torch.optim.SGD, Adam, AdamW),
   computed in the parameter's dtype (float32 or float64).

   Their constants (1 - beta1, 1 - beta2, 1 - dampening, lr / (1 - beta1^t),
   1 - lr wd, ...) are computed in double and rounded to the dtype once, as
   PyTorch computes them in Python: 1 - beta2 worked out in float32 is
   0.00099998713 for beta2 = 0.999, which moved exp_avg_sq 1.3e-5 off.

   These are not recorded by autograd: an update is a write to a leaf. They
   bump the version of every tensor they write, so a recording that saved
   one of them still detects the change. Parameters on a device go to its
   backend's kernels; the arithmetic of one element, for both devices, is
   optim_math.h's. Operands
   they do not take (other dtypes or layouts) fail with EMBER_ERR_UNSUPPORTED,
   and callers fall back to composed ops.

   State that decays geometrically (a momentum buffer, Adam's moments, for a
   parameter whose gradient has gone to zero) is flushed to zero once it falls
   below the smallest normal number. Otherwise it lingers for ~150 steps in
   the subnormal range, where every multiply takes a microcode assist of ~100
   cycles. What is dropped is below 1e-38, far under the precision of any
   parameter it would be added to. */
#include "ops.h"
#include "../backend.h"
#include "../dtr.h"
#include "../optim_math.h"
#include "../plan/plan.h"

#include <math.h>
#include <string.h>

/* whether a and b (one shape) step through memory alike: the same strides
   in every dim longer than 1 */
static bool same_layout(const ember_tensor *a, const ember_tensor *b)
{
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] > 1 && a->strides[d] != b->strides[d]) return false;
    return true;
}

/* p, g and each state tensor: float32 or float64, one dtype, one shape,
   dense and laid out alike, on one device, no two sharing storage. */
static int check_operands(const char *op, ember_tensor *p, ember_tensor *const *others, const char *const *names,
                          int n)
{
    char s1[200], s2[200];
    if (!p) return ember__fail(EMBER_ERR_ARG, "%s: the parameter is NULL", op);
    if (p->dtype != EMBER_FLOAT32 && p->dtype != EMBER_FLOAT64)
        return ember__fail(EMBER_ERR_UNSUPPORTED, "%s: fused updates take float32 or float64 parameters, got %s",
                           op, ember_dtype_name(p->dtype));
    /* dense in any order (a channels_last conv weight), the others with the
       same strides: the update runs over the memory, element for element */
    if (!ember__dense(p))
        return ember__fail(EMBER_ERR_UNSUPPORTED, "%s: fused updates take dense parameters", op);
    if (p->storage->pins > 0)
        return ember__fail(EMBER_ERR_STATE,
                           "%s: the parameter (shape %s) is needed by a backward run that has not finished "
                           "(gm:backward_steps); finish or cancel the run first", op, ember__tshape(s1, p));
    for (int i = 0; i < n; i++) {
        ember_tensor *t = others[i];
        if (!t) return ember__fail(EMBER_ERR_ARG, "%s: %s is NULL", op, names[i]);
        if (t->dtype != p->dtype || !ember__dense(t))
            return ember__fail(EMBER_ERR_UNSUPPORTED, "%s: %s must be a dense %s tensor like the parameter",
                               op, names[i], ember_dtype_name(p->dtype));
        if (t->storage->device != p->storage->device)
            return ember__fail(EMBER_ERR_DEVICE, "%s: %s is on %s, the parameter on %s", op, names[i],
                               ember__device_name(s1, t->storage->device),
                               ember__device_name(s2, p->storage->device));
        if (t->ndim != p->ndim || memcmp(t->shape, p->shape, sizeof(int64_t) * (size_t)p->ndim) != 0)
            return ember__fail(EMBER_ERR_SHAPE, "%s: %s has shape %s, the parameter %s", op, names[i],
                               ember__tshape(s1, t), ember__tshape(s2, p));
        if (!same_layout(t, p))
            return ember__fail(EMBER_ERR_UNSUPPORTED, "%s: %s is laid out otherwise than the parameter", op, names[i]);
        if (t->storage == p->storage)
            return ember__fail(EMBER_ERR_ARG, "%s: %s shares memory with the parameter", op, names[i]);
        for (int j = 0; j < i; j++)
            if (others[j] && others[j]->storage == t->storage)
                return ember__fail(EMBER_ERR_ARG, "%s: %s shares memory with %s", op, names[i], names[j]);
    }
    if (EMBER_UNLIKELY(ember__dtr_on)) {   /* written in place (the gradient only read) */
        EMBER_TRY(ember__dtr_write(p, NULL));
        for (int i = 0; i < n; i++) EMBER_TRY(ember__dtr_write(others[i], NULL));
    }
    return EMBER_OK;
}

/* a device whose backend has no fused kernel: callers fall back to composed ops */
static int no_kernel(const char *op, const ember_tensor *p)
{
    char name[32];
    return ember__fail(EMBER_ERR_UNSUPPORTED, "%s: no fused kernel for %s", op,
                       ember__device_name(name, p->storage->device));
}

/* ------------------------------------------------------------------ SGD */
typedef struct {
    char *p, *buf;
    const char *g;
    ember__sgd_args a;
} sgd_ctx;

/* optim_math.h's step over elements [b, e), each loop with one form of the
   step (none, the first or a later with momentum) so that it vectorises */
#define SGD_RANGE(T, SUF)                                                                      \
    EMBER_SIMD static void sgd_range_##SUF(void *vctx, int64_t b, int64_t e)                   \
    {                                                                                          \
        const sgd_ctx *c = vctx;                                                               \
        T *restrict p = (T *)c->p + b;                                                         \
        T *restrict buf = c->buf ? (T *)c->buf + b : NULL;                                     \
        const T *restrict g = (const T *)c->g + b;                                             \
        const ember__sgd_consts_##SUF k = ember__sgd_consts_of_##SUF(&c->a);                   \
        const int64_t n = e - b;                                                               \
        if (!buf) {                                                                            \
            for (int64_t i = 0; i < n; i++) p[i] = ember__sgd_##SUF(&k, p[i], g[i]);           \
        } else if (c->a.first) {                                                               \
            for (int64_t i = 0; i < n; i++) p[i] = ember__sgd_momentum_##SUF(&k, 1, p[i], g[i], &buf[i]); \
        } else {                                                                               \
            for (int64_t i = 0; i < n; i++) p[i] = ember__sgd_momentum_##SUF(&k, 0, p[i], g[i], &buf[i]); \
        }                                                                                      \
    }
SGD_RANGE(float, f32)
SGD_RANGE(double, f64)

int ember__sgd_check(ember_tensor *p, ember_tensor *g, ember_tensor *buf)
{
    ember_tensor *others[2] = {g, buf};
    const char *names[2] = {"the gradient", "the momentum buffer"};
    return check_operands("sgd_step_", p, others, names, buf ? 2 : 1);
}

void ember__sgd_range(ember_tensor *p, const ember_tensor *g, ember_tensor *buf, const ember__sgd_args *a, int64_t b,
                      int64_t e)
{
    sgd_ctx c = {ember__ptr(p), buf ? ember__ptr(buf) : NULL, ember__ptr(g), *a};
    (p->dtype == EMBER_FLOAT64 ? sgd_range_f64 : sgd_range_f32)(&c, b, e);
}

static int sgd_step(ember_tensor *p, ember_tensor *g, ember_tensor *buf, double lr, double momentum,
                    double dampening, double weight_decay, int nesterov, int maximize, int first_step)
{
    EMBER_TRY(ember__sgd_check(p, g, buf));
    ember__sgd_args a = {lr, momentum, dampening, weight_decay, nesterov != 0, maximize != 0, first_step != 0};
    if (p->storage->device != EMBER_CPU) {
        const ember_backend *be = ember__backend(p->storage->device);
        EMBER_TRY(be->sgd_step ? be->sgd_step(p, g, buf, &a) : no_kernel("sgd_step_", p));
    } else {
        sgd_ctx c = {ember__ptr(p), buf ? ember__ptr(buf) : NULL, ember__ptr(g), a};
        ember__parallel_for(p->numel, EMBER_PARALLEL_GRAIN, p->dtype == EMBER_FLOAT64 ? sgd_range_f64 : sgd_range_f32,
                            &c);
    }
    p->storage->version++;
    if (buf) buf->storage->version++;
    return EMBER_OK;
}

/* Under a trace (plan.h) an update is one entry; a first step (which makes
   the momentum buffer) is not what later steps do, and is refused. */
int ember_sgd_step_(ember_tensor *p, ember_tensor *g, ember_tensor *buf, double lr, double momentum,
                    double dampening, double weight_decay, int nesterov, int maximize, int first_step)
{
    if (EMBER_LIKELY(!ember__trace_on))
        return sgd_step(p, g, buf, lr, momentum, dampening, weight_decay, nesterov, maximize, first_step);
    if (first_step && buf)
        return ember__fail(EMBER_ERR_STATE, "sgd_step_: the first step of a momentum buffer inside ember.jit.trace: "
                                            "it makes the buffer, which later steps update; run one step eagerly "
                                            "before tracing");
    int depth = ember__trace_enter();
    ember_tensor *in[3] = {p, g, buf};
    ember__call_args args = {{nesterov != 0, maximize != 0}, {lr, momentum, dampening, weight_decay}};
    return ember__trace_leave(depth, sgd_step(p, g, buf, lr, momentum, dampening, weight_decay, nesterov, maximize, 0),
                              PE_SGD, 0, 3, in, 0, NULL, NULL, &args);
}

/* ------------------------------------------------------------------ Adam, AdamW */
typedef struct {
    char *p, *m, *v, *vmax;
    const char *g;
    ember__adam_args a;
} adam_ctx;

/* optim_math.h's step over elements [b, e): two loops, so that the common
   one (no amsgrad) has no store under a condition and the compiler
   vectorises it */
#define ADAM_RANGE(T, SUF)                                                                     \
    EMBER_SIMD static void adam_range_##SUF(void *vctx, int64_t b, int64_t e)                  \
    {                                                                                          \
        const adam_ctx *c = vctx;                                                              \
        T *restrict p = (T *)c->p + b, *restrict m = (T *)c->m + b, *restrict v = (T *)c->v + b; \
        T *restrict vmax = c->vmax ? (T *)c->vmax + b : NULL;                                  \
        const T *restrict g = (const T *)c->g + b;                                             \
        const ember__adam_consts_##SUF k = ember__adam_consts_of_##SUF(&c->a);                 \
        const int64_t n = e - b;                                                               \
        if (vmax) {                                                                            \
            for (int64_t i = 0; i < n; i++) {                                                  \
                T mi = m[i], vi = v[i], pd = ember__adam_moments_##SUF(&k, p[i], g[i], &mi, &vi); \
                m[i] = mi;                                                                     \
                v[i] = vi;                                                                     \
                vi = ember__amsgrad_##SUF(vmax[i], vi);                                        \
                vmax[i] = vi;                                                                  \
                p[i] = ember__adam_weight_##SUF(&k, pd, mi, vi);                               \
            }                                                                                  \
        } else {                                                                               \
            for (int64_t i = 0; i < n; i++) {                                                  \
                T mi = m[i], vi = v[i], pd = ember__adam_moments_##SUF(&k, p[i], g[i], &mi, &vi); \
                m[i] = mi;                                                                     \
                v[i] = vi;                                                                     \
                p[i] = ember__adam_weight_##SUF(&k, pd, mi, vi);                               \
            }                                                                                  \
        }                                                                                      \
    }
ADAM_RANGE(float, f32)
ADAM_RANGE(double, f64)

static int adam_step(ember_tensor *p, ember_tensor *g, ember_tensor *m, ember_tensor *v, ember_tensor *vmax,
                     double lr, double beta1, double beta2, double eps, double weight_decay, int decoupled,
                     int maximize, int64_t step)
{
    ember_tensor *others[4] = {g, m, v, vmax};
    const char *names[4] = {"the gradient", "exp_avg", "exp_avg_sq", "max_exp_avg_sq"};
    EMBER_TRY(check_operands("adam_step_", p, others, names, vmax ? 4 : 3));
    if (step < 1) return ember__fail(EMBER_ERR_ARG, "adam_step_: step must be >= 1, got %lld", (long long)step);
    ember__adam_args a = {lr, beta1, beta2, eps, weight_decay, 1 - pow(beta1, (double)step),
                          sqrt(1 - pow(beta2, (double)step)), decoupled != 0, maximize != 0};
    if (p->storage->device != EMBER_CPU) {
        const ember_backend *be = ember__backend(p->storage->device);
        EMBER_TRY(be->adam_step ? be->adam_step(p, g, m, v, vmax, &a) : no_kernel("adam_step_", p));
    } else {
        adam_ctx c = {ember__ptr(p), ember__ptr(m), ember__ptr(v), vmax ? ember__ptr(vmax) : NULL, ember__ptr(g), a};
        ember__parallel_for(p->numel, EMBER_PARALLEL_GRAIN, p->dtype == EMBER_FLOAT64 ? adam_range_f64 : adam_range_f32,
                            &c);
    }
    p->storage->version++;
    m->storage->version++;
    v->storage->version++;
    if (vmax) vmax->storage->version++;
    return EMBER_OK;
}

/* Under a trace an update is one entry whose step count advances with each
   run of the plan (ember_plan_counters). */
int ember_adam_step_(ember_tensor *p, ember_tensor *g, ember_tensor *m, ember_tensor *v, ember_tensor *vmax,
                     double lr, double beta1, double beta2, double eps, double weight_decay, int decoupled,
                     int maximize, int64_t step)
{
    if (EMBER_LIKELY(!ember__trace_on))
        return adam_step(p, g, m, v, vmax, lr, beta1, beta2, eps, weight_decay, decoupled, maximize, step);
    int depth = ember__trace_enter();
    ember_tensor *in[5] = {p, g, m, v, vmax};
    ember__call_args args = {{decoupled != 0, maximize != 0, 0, step}, {lr, beta1, beta2, eps, weight_decay}};
    return ember__trace_leave(depth, adam_step(p, g, m, v, vmax, lr, beta1, beta2, eps, weight_decay, decoupled,
                                               maximize, step),
                              PE_ADAM, 0, 5, in, 0, NULL, NULL, &args);
}


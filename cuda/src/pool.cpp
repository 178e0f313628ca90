/* pool.cpp: max_pool2d, avg_pool2d and their adjoints on the device. The
   core plans the geometry and the errors (ember__pool_plan_make, as on the
   CPU); each op is one kernel of pool.cu over contiguous operands, computing
   as pool.c does (float for float32, float16 and bfloat16, double for
   float64). */
#include "cuda_backend.h"
#include "kernels/pool.h"

using ember_cuda::pool_args;

int ecu_operand_init(ecu_operand *o, ember_tensor *t)
{
    if (!t->is_contiguous) {
        EMBER_TRY(ecu_fwd_to_dtype(EMBER_OP_CLONE, 1, &t, NULL, &o->copy.t));
        t = o->copy.t;
    }
    o->data = ecu_data(t);
    return EMBER_OK;
}

static pool_args args_of(const ember__pool_geom &p, int dt) { return pool_args{p, dt, ecu_core->dtype_size(dt)}; }

/* Fails naming the first index outside its plane, when the kernel found one
   (*bad below ULLONG_MAX: the smallest k whose index is bad). */
static int check_bad_index(const char *name, const ember__pool_geom &p, const int64_t *idx, unsigned long long *bad)
{
    unsigned long long k;
    EMBER_TRY(ecu_memcpy(&k, bad, sizeof k, 1));
    if (k == ~0ULL) return EMBER_OK;
    int64_t ix;
    EMBER_TRY(ecu_memcpy(&ix, idx + k, sizeof ix, 1));
    return ecu_core->fail(EMBER_ERR_ARG, "%s: index %lld is outside a %lld x %lld plane", name, (long long)ix,
                          (long long)p.H, (long long)p.W);
}

/* gx = 0, then g added at its indices, in the compute type; an index outside
   its plane fails by name (one read back: the kernel marks the first) */
static int scatter_max(const char *name, const ember__pool_geom &p, ember_tensor *g, ember_tensor *idx,
                       ember_tensor *gx)
{
    EMBER_TRY(ecu_fill(gx, 0));
    if (g->numel == 0) return EMBER_OK;
    ecu_operand cg, ci;
    EMBER_TRY(ecu_operand_init(&cg, g));
    EMBER_TRY(ecu_operand_init(&ci, idx));
    unsigned long long *bad = (unsigned long long *)ecu_alloc(sizeof *bad);
    if (!bad) return ecu_core->fail(EMBER_ERR_OOM, "%s: out of device memory", name);
    pool_args a = args_of(p, g->dtype);
    int rc = ecu_check(cudaMemset(bad, 0xff, sizeof *bad), name);
    if (rc == EMBER_OK)
        rc = ecu_check(ecu_launch_max_pool_backward(&a, cg.data, (const int64_t *)ci.data, ecu_data(gx), bad), name);
    if (rc == EMBER_OK) rc = check_bad_index(name, p, (const int64_t *)ci.data, bad);
    ecu_free(bad, sizeof *bad);
    return rc;
}

static int max_pool_backward(int op, const ember__pool_geom &p, ember_tensor *const *in, const int64_t *xs,
                             ember_tensor **out)
{
    const char *name = ecu_core->op_names[op];
    ember_tensor *g = in[0];
    int dt = g->dtype, cdt = dt == EMBER_FLOAT64 ? EMBER_FLOAT64 : EMBER_FLOAT32, dev = g->storage->device;
    EMBER_TRY(ecu_core->new_tensor(4, xs, dt, dev, out));
    if ((*out)->numel == 0) return EMBER_OK;
    if (dt == cdt) return scatter_max(name, p, g, in[1], *out);
    ecu_owned acc;   /* float16, bfloat16: summed in float, rounded once */
    EMBER_TRY(ecu_core->new_tensor(4, xs, cdt, dev, &acc.t));
    EMBER_TRY(scatter_max(name, p, g, in[1], acc.t));
    return ecu_copy(*out, acc.t);
}

/* max_pool2d (values and indices), avg_pool2d and both adjoints */
int ecu_fwd_pool(int op, int nin, ember_tensor *const *in, const ember_attrs *at, ember_tensor **out)
{
    EMBER_UNUSED(nin);
    ember__pool_geom p;
    int64_t rs[4];
    EMBER_TRY(ecu_core->pool_plan(op, in, at, &p, rs));
    if (op == EMBER_OP_MAX_POOL2D_BACKWARD) return max_pool_backward(op, p, in, rs, out);
    ember_tensor *src = in[0];
    int dt = src->dtype, dev = src->storage->device;
    EMBER_TRY(ecu_core->new_tensor(4, rs, dt, dev, &out[0]));
    int64_t *idx = NULL;
    if (op == EMBER_OP_MAX_POOL2D) {
        EMBER_TRY(ecu_core->new_tensor(4, rs, EMBER_INT64, dev, &out[1]));
        idx = (int64_t *)ecu_data(out[1]);
    }
    if (out[0]->numel == 0) return EMBER_OK;
    ecu_operand s;
    EMBER_TRY(ecu_operand_init(&s, src));
    pool_args a = args_of(p, dt);
    return ecu_check(ecu_launch_pool(op, &a, s.data, ecu_data(out[0]), idx), ecu_core->op_names[op]);
}

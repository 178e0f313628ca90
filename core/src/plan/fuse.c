/* fuse.c: elementwise chains of a traced plan in one loop (docs/plans.md,
   "Passes"). A chain is a run of adjacent float32 CPU entries of the ops
   below, each reading the one before's result (read by nothing else) with
   operands of the chain's shape or 0-d. Each op of the set is one correctly
   rounded IEEE operation or an exact select, and the project compiles with
   -ffp-contract=off, so one loop gives the bits the kernels give (whatever
   their vectorisation) while the intermediate results never reach memory.
   The per-element forms are ops.def's float32 expressions. */
#include "plan.h"
#include "../formulas.h"
#include "../polygamma.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { FUSE_MAX_STEPS = 6, FUSE_MAX_INPUTS = 8 };

static int fusable_op(int op)
{
    switch (op) {
    case EMBER_OP_ADD: case EMBER_OP_SUB: case EMBER_OP_MUL: case EMBER_OP_DIV: case EMBER_OP_MAXIMUM:
    case EMBER_OP_MINIMUM: case EMBER_OP_NEG: case EMBER_OP_ABS: case EMBER_OP_RELU: case EMBER_OP_SQRT: return 1;
    default: return 0;
    }
}

/* ops.def's float32 forms */
static inline float binary_f32(int op, float x, float y)
{
    switch (op) {
#define OP(...)
#define UNARY(...)
#define COMPARE(...)
#define BINARY(E, n, grad, flags, save, F32, F64, INT) case EMBER_OP_##E: return (F32);
#define BINARY_FLOAT(E, n, grad, flags, save, F32, F64) case EMBER_OP_##E: return (F32);
#include "../ops/ops.def"
    default: return NAN;
    }
}

static inline float unary_f32(int op, float x)
{
    switch (op) {
#define OP(...)
#define BINARY(...)
#define BINARY_FLOAT(...)
#define COMPARE(...)
#define UNARY(E, n, grad, flags, save, F32, F64) case EMBER_OP_##E: return (F32);
#include "../ops/ops.def"
    default: return NAN;
    }
}

static int same_shape(const ember_tensor *a, const ember_tensor *b)
{
    return a->ndim == b->ndim && memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof *a->shape) == 0;
}

/* an entry a chain may hold: its result float32, fresh and contiguous on the
   CPU; its operands float32 of the result's shape, or 0-d numbers */
static int fusable(const plan_entry *e, ember_tensor *const *held)
{
    if (e->kind != PE_OP || e->nout != 1 || !fusable_op(e->op) || e->slots[e->nin] < 0) return 0;
    const ember_tensor *o = held[e->slots[e->nin]];
    if (o->dtype != EMBER_FLOAT32 || !o->is_contiguous || o->is_view || o->storage->device != EMBER_CPU) return 0;
    for (int i = 0; i < e->nin; i++) {
        const ember_tensor *t = held[e->slots[i]];
        if (t->storage->device != EMBER_CPU) return 0;
        if (t->ndim == 0 && (t->dtype == EMBER_FLOAT32 || t->dtype == EMBER_FLOAT64)) continue;
        if (t->dtype != EMBER_FLOAT32 || !same_shape(t, o)) return 0;
    }
    return 1;
}

/* Makes entries[0, len) one PE_FUSED entry in *f; 0 when its operands are too many. */
static int make_fused(const plan_entry *chain, int len, plan_entry *f)
{
    int32_t ext[FUSE_MAX_INPUTS];
    int next = 0;
    memset(f, 0, sizeof *f);
    f->args.i[0] = len;
    for (int k = 0; k < len; k++) {
        const plan_entry *e = &chain[k];
        f->args.i[1 + 3 * k] = e->op;
        f->args.i[3 + 3 * k] = -2;   /* no second operand */
        for (int j = 0; j < e->nin; j++) {
            int s = e->slots[j], ref = -1;
            if (k == 0 || s != chain[k - 1].slots[chain[k - 1].nin]) {
                for (ref = 0; ref < next && ext[ref] != s; ref++) {}
                if (ref == next) {
                    if (next == FUSE_MAX_INPUTS) return 0;
                    ext[next++] = s;
                }
            }
            f->args.i[2 + 3 * k + j] = ref;
        }
    }
    f->slots = malloc((size_t)(next + 1) * sizeof *f->slots);
    f->sub = malloc((size_t)len * sizeof *f->sub);
    if (!f->slots || !f->sub) {
        free(f->slots);
        free(f->sub);
        return ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
    }
    memcpy(f->slots, ext, (size_t)next * sizeof *ext);
    f->slots[next] = chain[len - 1].slots[chain[len - 1].nin];
    memcpy(f->sub, chain, (size_t)len * sizeof *chain);
    f->kind = PE_FUSED;
    f->nin = next;
    f->nout = 1;
    f->nsub = len;
    return 1;
}

/* per slot, how many entries read it (an output: as many as can be); NULL: out of memory */
static int *count_reads(const ember_plan *p)
{
    int *reads = calloc((size_t)p->nslots + 1, sizeof *reads);
    if (!reads) return NULL;
    for (int e = 0; e < p->nentries; e++)
        for (int i = 0; i < p->entries[e].nin; i++)
            if (p->entries[e].slots[i] >= 0) reads[p->entries[e].slots[i]]++;
    for (int k = 0; k < p->noutputs; k++) reads[p->outputs[k]] += 1 << 20;
    return reads;
}

int ember__plan_fuse(ember_plan *p, ember_tensor *const *held)
{
    int *reads = count_reads(p);
    if (!reads) return ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
    int w = 0, e = 0, rc = EMBER_OK;
    plan_entry *en = p->entries;
    while (e < p->nentries) {
        int len = 0;
        if (fusable(&en[e], held)) {
            const ember_tensor *shape = held[en[e].slots[en[e].nin]];
            len = 1;
            while (e + len < p->nentries && len < FUSE_MAX_STEPS) {
                const plan_entry *prev = &en[e + len - 1], *next = &en[e + len];
                int acc = prev->slots[prev->nin], uses = 0;
                if (!fusable(next, held) || !same_shape(held[next->slots[next->nin]], shape)) break;
                for (int i = 0; i < next->nin; i++) uses += next->slots[i] == acc;
                if (uses == 0 || uses != reads[acc]) break;
                len++;
            }
        }
        plan_entry f;
        int made = len >= 2 ? make_fused(&en[e], len, &f) : 0;
        if (made < 0) {
            rc = made;
            break;
        }
        if (made) {
            en[w++] = f;
            e += len;
        } else {
            en[w++] = en[e++];
        }
    }
    for (; e < p->nentries; e++) en[w++] = en[e];   /* after a failure: the entries not yet moved */
    p->nentries = w;
    free(reads);
    return rc;
}

/* ------------------------------------------------------------------ patterns */
/* Whether entries e, e + 1, e + 2 are linear(x, w) -> y, add(y, b) or
   add(b, y) -> z, relu(z) -> r, with y and z read by nothing else and b a
   vector of w's rows in y's dtype: linear_relu(x, w, b) computes the same
   bits (matmul.c: linear's product, then the sum and the select per element,
   or the three ops themselves where it does not fuse). */
static int linear_add_relu(const plan_entry *en, int e, int n, const int *reads, ember_tensor *const *held)
{
    if (e + 2 >= n) return 0;
    const plan_entry *l = &en[e], *a = &en[e + 1], *r = &en[e + 2];
    if (l->kind != PE_OP || l->op != EMBER_OP_LINEAR || a->kind != PE_OP || a->op != EMBER_OP_ADD ||
        r->kind != PE_OP || r->op != EMBER_OP_RELU)
        return 0;
    int y = l->slots[2], z = a->slots[2];
    if (y < 0 || z < 0 || r->slots[0] != z || reads[y] != 1 || reads[z] != 1 || r->slots[1] < 0) return 0;
    int b = a->slots[0] == y ? a->slots[1] : a->slots[1] == y ? a->slots[0] : -1;
    if (b < 0 || b == y || l->slots[0] < 0 || l->slots[1] < 0) return 0;
    const ember_tensor *tb = held[b], *ty = held[y], *tw = held[l->slots[1]], *tz = held[z];
    return tb->ndim == 1 && tw->ndim == 2 && tb->shape[0] == tw->shape[0] && tb->dtype == ty->dtype &&
           tz->dtype == ty->dtype && !tb->wrapped_number && tb->storage->device == ty->storage->device &&
           (ty->dtype == EMBER_FLOAT32 || ty->dtype == EMBER_FLOAT64);
}

int ember__plan_patterns(ember_plan *p, ember_tensor *const *held)
{
    int *reads = count_reads(p);
    if (!reads) return ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
    plan_entry *en = p->entries;
    int w = 0, e = 0, n = p->nentries;
    while (e < n) {
        if (!linear_add_relu(en, e, n, reads, held)) {
            en[w++] = en[e++];
            continue;
        }
        plan_entry *l = &en[e], *a = &en[e + 1], *r = &en[e + 2];
        int32_t *slots = l->slots;   /* x, w, y: becomes x, w, b, r */
        int32_t *grown = realloc(slots, 5 * sizeof *slots);
        if (!grown) {
            free(reads);
            return ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
        }
        grown[2] = a->slots[0] == grown[2] ? a->slots[1] : a->slots[0];
        grown[3] = r->slots[1];
        l->slots = grown;
        l->op = EMBER_OP_LINEAR_RELU;
        l->nin = 3;
        free(a->slots);
        free(r->slots);
        en[w++] = *l;
        p->patterns++;
        e += 3;
    }
    p->nentries = w;
    free(reads);
    return EMBER_OK;
}

/* ------------------------------------------------------------------ running */
typedef struct fused_ctx {
    const int64_t *prog;
    int nsteps;
    const float *in[FUSE_MAX_INPUTS];   /* NULL: a number, in num */
    float num[FUSE_MAX_INPUTS];
    float *out;
} fused_ctx;

static void fused_range(void *vctx, int64_t b, int64_t e)
{
    const fused_ctx *c = vctx;
    for (int64_t i = b; i < e; i++) {
        float acc = 0;
        for (int k = 0; k < c->nsteps; k++) {
            const int64_t *st = c->prog + 1 + 3 * k;
            float v[2];
            for (int j = 0; j < 2; j++) {
                int64_t r = st[1 + j];
                v[j] = r == -1 ? acc : r < 0 ? 0 : c->in[r] ? c->in[r][i] : c->num[r];
            }
            acc = st[2] == -2 ? unary_f32((int)st[0], v[0]) : binary_f32((int)st[0], v[0], v[1]);
        }
        c->out[i] = acc;
    }
}

int ember__fused_run(const plan_entry *e, ember_tensor *const *in, ember_tensor **out)
{
    char sa[200], sb[200];
    ember_tensor *dense[FUSE_MAX_INPUTS] = {NULL};
    const ember_tensor *shape = NULL;
    fused_ctx c = {e->args.i, (int)e->args.i[0], {NULL}, {0}, NULL};
    for (int k = 0; k < e->nin; k++)
        if (in[k]->ndim > 0) shape = in[k];
    int rc = EMBER_OK;
    for (int k = 0; k < e->nin && rc >= 0; k++) {
        ember_tensor *t = in[k];
        if (t->ndim == 0) {
            c.num[k] = (float)ember__load(ember__ptr(t), t->dtype);
        } else if (!same_shape(t, shape) || t->dtype != EMBER_FLOAT32 || t->storage->device != EMBER_CPU) {
            rc = ember__fail(EMBER_ERR_SHAPE, "plan: a fused chain's operand %s %s, traced as float32 %s",
                             ember_dtype_name(t->dtype), ember__tshape(sa, t), ember__tshape(sb, shape));
        } else {
            rc = ember_contiguous(t, &dense[k]);
            if (rc >= 0) c.in[k] = (const float *)(void *)ember__ptr(dense[k]);
        }
    }
    if (rc >= 0) rc = ember__new(shape ? shape->ndim : 0, shape ? shape->shape : NULL, EMBER_FLOAT32, EMBER_CPU, out);
    if (rc >= 0) {
        c.out = (float *)(void *)ember__ptr(*out);
        ember__parallel_for((*out)->numel, EMBER_PARALLEL_GRAIN / 4, fused_range, &c);
    }
    for (int k = 0; k < e->nin; k++) ember_tensor_release(dense[k]);
    return rc;
}

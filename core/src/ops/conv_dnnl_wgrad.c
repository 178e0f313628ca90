/* conv_dnnl_wgrad.c: a convolution's weight gradient through oneDNN, with
   the same bits on any number of threads. oneDNN's own weight gradient sums
   over the samples in a split that follows its thread count: its bits
   changed between 1 and 2 threads at most geometries tried
   (spec/thread_bits_spec.lua), where its forward and its data gradient did
   not. So ember fixes the split itself: the samples in WGRAD_GROUPS groups
   fixed by N (the last one smaller), each group's gradient one
   single-threaded primitive, the groups run on ember's pool (as many
   threads as the policy gives the job) and their sums added in group
   order. */
#include "conv_dnnl.h"

#ifdef EMBER_HAVE_DNNL
#include <stdatomic.h>

#define WGRAD_GROUPS 8

typedef struct {
    const conv_geom *g;
    int64_t per;            /* samples a group */
    dnnl_conv *c[2];        /* the primitives for a full group and for the last one */
    const char *x;
    size_t es;              /* bytes of an operand's element: 4, or 2 (bfloat16) */
    const char *gy;         /* in ember's layout, or (gy_inner) in the primitives' */
    bool gy_inner;
    size_t gy_sample;       /* bytes of one sample of gy */
    float *gw, *part;       /* group 0 writes gw, group i > 0 part + (i - 1) O K */
    atomic_int failed;
} wgrad_job;

static void wgrad_groups(void *vctx, int64_t i0, int64_t i1)
{
    wgrad_job *j = vctx;
    const conv_geom *g = j->g;
#ifdef DNNL_OMP
    int omp_before = omp_get_max_threads();
    omp_set_num_threads(1);
#endif
    for (int64_t i = i0; i < i1; i++) {
        int64_t n0 = i * j->per;
        const dnnl_conv *c = n0 + j->per <= g->N ? j->c[0] : j->c[1];
        void *gy = (void *)(j->gy + n0 * j->gy_sample);
        float *res = i == 0 ? j->gw : j->part + (i - 1) * g->O * g->K;
        void *user[NARGS] = {(void *)(j->x + n0 * g->C * g->H * g->W * j->es), j->gy_inner ? NULL : gy, res};
        void *inner[NARGS] = {NULL, j->gy_inner ? gy : NULL, NULL};
        if (!ember__dnnl_conv_execute(c, CONV_BWD_WEIGHT, user, inner, NULL))
            atomic_store_explicit(&j->failed, 1, memory_order_relaxed);
    }
#ifdef DNNL_OMP
    omp_set_num_threads(omp_before);
#endif
}

bool ember__dnnl_weight_grad(const conv_geom *g, int variant, const void *x, const void *gy, int gy_layout, float *gw)
{
    int64_t groups = g->N < WGRAD_GROUPS ? g->N : WGRAD_GROUPS, per = (g->N + groups - 1) / groups;
    groups = (g->N + per - 1) / per;
    conv_geom gg[2] = {*g, *g};
    gg[0].N = per;
    gg[1].N = g->N - (groups - 1) * per;
    const size_t es = variant == DNNL_BF16 ? 2 : sizeof(float);
    wgrad_job j = {g, per, {NULL, NULL}, x, es, gy, gy_layout != 0, 0, gw, NULL, 0};
    bool owned[2] = {false, false}, ok = true;
#ifdef DNNL_OMP
    int omp_before = omp_get_max_threads();
    omp_set_num_threads(1);   /* the primitives are made for one thread */
#endif
    for (int k = 0; k < 2 && ok; k++) {
        if (k == 1 && gg[1].N == per) {
            j.c[1] = j.c[0];
            break;
        }
        int64_t key[KEY_LEN];
        ember__dnnl_conv_key(CONV_BWD_WEIGHT, variant, &gg[k], 1, key);
        j.c[k] = ember__dnnl_conv_get(CONV_BWD_WEIGHT, variant, &gg[k], key, &owned[k]);
        const dnnl_conv *c = j.c[k];
        ok = c && c->conv;
        /* gy as the caller holds it: ember's layout, or the same layout as the group's */
        if (ok && gy_layout == GZ_NCHW) ok = dnnl_memory_desc_equal(&c->inner[ARG_B], &c->user[ARG_B]);
        if (ok && gy_layout == GZ_BLOCKED) ok = ember__dnnl_blocked16(&c->inner[ARG_B], &gg[k]);
    }
#ifdef DNNL_OMP
    omp_set_num_threads(omp_before);
#endif
    const int64_t OK = g->O * g->K;
    size_t part_bytes = (size_t)((groups - 1) * OK) * sizeof(float);
    if (ok) {
        j.gy_sample = gy_layout == GZ_BLOCKED ? (size_t)((g->O + 15) / 16 * 16 * g->Ho * g->Wo) * es
                                              : (size_t)(g->O * g->Ho * g->Wo) * es;
        if (part_bytes && !(j.part = ember__alloc(part_bytes))) ok = false;
    }
    if (ok) {
        ember__parallel_for(groups, 1, wgrad_groups, &j);
        ok = !atomic_load(&j.failed);
    }
    if (ok)   /* the groups' sums in group order */
        for (int64_t i = 1; i < groups; i++) {
            const float *src = j.part + (i - 1) * OK;
            for (int64_t e = 0; e < OK; e++) gw[e] += src[e];
        }
    if (j.part) ember__free(j.part, part_bytes);
    for (int k = 0; k < 2; k++)
        if (owned[k]) ember__dnnl_conv_destroy(j.c[k]);
    return ok;
}

#endif

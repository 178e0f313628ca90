/* taps.c: a forward's convolutions whose kernel has taps that only ever
   read padding (a 3x3 convolution on planes of 1x1 or 2x2, ResNet's and
   MobileNet's last stages) crop their weight to the live taps at every call
   (ops/conv_taps.c: a pass over the whole weight, 40% of ResNet-18's batch-1
   replay). In a plan whose weight is a live tensor the plan does not write,
   the crop becomes two entries before the convolution, a view of the live
   taps and its contiguous copy, which hoisting (hoist.c) runs once, and the
   convolution reads the copy with the padding that gives the same output:
   the product conv2d then runs is the one it ran on the cropped weight
   (the same geometry, the same values), so the bits are the same. */
#include "plan.h"
#include "../ops/conv.h"

#include <stdlib.h>
#include <string.h>

/* Whether entry e is such a convolution: its cropped geometry and first live tap. */
static int croppable(const ember_plan *p, ember_tensor *const *held, const plan_entry *en, conv_geom *gc,
                     int64_t *i0, int64_t *j0)
{
    if (en->kind != PE_OP || (en->op != EMBER_OP_CONV2D && en->op != EMBER_OP_CONV2D_RELU)) return 0;
    int x = en->slots[0], w = en->slots[1];
    if (x < 0 || w < 0 || (p->slots[w].kind != SLOT_LIVE && p->slots[w].kind != SLOT_CONST) || p->slots[w].written)
        return 0;
    const ember_tensor *tx = held[x], *tw = held[w];
    if (tx->storage->device != EMBER_CPU || tw->storage->device != EMBER_CPU || tx->ndim != 4 || tw->ndim != 4 ||
        (tw->dtype != EMBER_FLOAT32 && tw->dtype != EMBER_FLOAT64))
        return 0;
    conv_geom g;
    int64_t rs[4];
    ember_tensor *in[2] = {(ember_tensor *)tx, (ember_tensor *)tw};
    if (ember__conv_plan_make(en->op, in, &en->at, &g, rs) < 0) return 0;   /* it ran in the trace: not here */
    return ember__conv_live_taps(&g, gc, i0, j0);
}

int ember__plan_crop_taps(ember_plan *p, ember_tensor *const *held, ember_tensor ***held_out)
{
    *held_out = NULL;
    int n = p->nentries, ncrop = 0;
    for (int e = 0; e < n; e++) {
        int k = p->entries[e].kind;
        if (k != PE_OP && k != PE_VIEW) return EMBER_OK;   /* only in a forward's plan, where hoisting runs */
    }
    conv_geom gc;
    int64_t i0, j0;
    for (int e = 0; e < n; e++) ncrop += croppable(p, held, &p->entries[e], &gc, &i0, &j0);
    if (!ncrop) return EMBER_OK;
    int ns = p->nslots, ns2 = ns + 2 * ncrop;
    plan_entry *ent = calloc((size_t)(n + 2 * ncrop) + 1, sizeof *ent);
    ember_tensor **h2 = calloc((size_t)ns2 + 1, sizeof *h2);
    plan_slot *slots = realloc(p->slots, ((size_t)ns2 + 1) * sizeof *slots);
    if (slots) p->slots = slots;
    uint8_t *owned = realloc(p->owned, (size_t)ns2 + 1);
    if (owned) p->owned = owned;
    ember_tensor **vals = realloc(p->vals, ((size_t)ns2 + 1) * sizeof *vals);
    if (vals) p->vals = vals;
    char **names = realloc(p->names, ((size_t)ns2 + 1) * sizeof *names);
    if (names) p->names = names;
    if (!ent || !h2 || !slots || !owned || !vals || !names) {
        free(ent);
        free(h2);
        return ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
    }
    memcpy(h2, held, (size_t)ns * sizeof *h2);
    for (int s = ns; s < ns2; s++) {
        p->slots[s] = (plan_slot){.kind = SLOT_TEMP, .last_use = -1};
        p->owned[s] = 1, p->vals[s] = NULL, p->names[s] = NULL;
    }
    int m = 0, s = ns, rc = EMBER_OK;
    for (int e = 0; e < n; e++) {
        plan_entry *en = &p->entries[e];
        int32_t *vs = NULL, *cs = NULL;
        if (rc >= 0 && croppable(p, h2, en, &gc, &i0, &j0) && (!(vs = malloc(2 * sizeof *vs)) ||
                                                              !(cs = malloc(2 * sizeof *cs)))) {
            free(vs);
            vs = NULL;
            rc = ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
        }
        if (vs) {
            const ember_tensor *tw = h2[en->slots[1]];
            plan_entry *v = &ent[m++], *c = &ent[m++];
            v->slots = vs, c->slots = cs;
            /* the live taps: (O, Cg, kH', kW') from tap (i0, j0), the weight's strides */
            v->kind = PE_VIEW, v->nin = 1, v->nout = 1, vs[0] = en->slots[1], vs[1] = s;
            int64_t *a = v->args.i, shape[4] = {gc.O, gc.Cg, gc.kH, gc.kW};
            a[0] = 4, a[1] = tw->offset + i0 * tw->strides[2] + j0 * tw->strides[3];
            for (int d = 0; d < 4; d++) a[2 + d] = shape[d], a[2 + EMBER_MAX_DIMS + d] = tw->strides[d];
            c->kind = PE_OP, c->op = EMBER_OP_CLONE, c->nin = 1, c->nout = 1, cs[0] = s, cs[1] = s + 1;
            rc = ember__make_view((ember_tensor *)tw, 4, &a[2], &a[2 + EMBER_MAX_DIMS], a[1], &h2[s]);
            if (rc >= 0) rc = ember__run_nograd(EMBER_OP_CLONE, 1, &h2[s], NULL, &h2[s + 1]);
            en->slots[1] = s + 1;
            en->at.i[2] = gc.ph, en->at.i[3] = gc.pw;   /* the padding that keeps the output's size */
            s += 2;
        }
        ent[m++] = *en;
    }
    for (int e = m; e < n + 2 * ncrop; e++) ent[e].slots = NULL;
    free(p->entries);
    p->entries = ent;
    p->nentries = m;
    p->nslots = s;
    *held_out = h2;
    return rc;
}

/* conv_taps.c: a convolution whose kernel reaches past the input on every
   output (a 3x3 kernel padded by 1 on a 1x1 plane: ResNet's last stage on
   small images) runs as the convolution of the kernel's live taps only.

   A tap (i, j) is dead when no output position reads inside the input
   through it: it only ever multiplies padding, so it adds nothing to the
   output or to the input gradient, and its weight gradient is 0. The live
   taps form a rectangle [i0, i1) x [j0, j1) (the rows i that some output
   row reads inside the plane are consecutive, likewise the columns); the
   convolution equals the one with that sub-kernel and the padding less i0
   dh and j0 dw, where that keeps the output's size. ResNet-18's 3x3
   convolutions on 1x1 planes become 1x1 ones (one product over the batch,
   a ninth of the weights read), its stride-2 one onto a 1x1 plane 2x2. */
#include "conv.h"

#include <stdlib.h>
#include <string.h>

/* the taps t of a kernel of k along a dim (input n, output m, stride s,
   padding p, dilation d) that some output reads inside the input: [*t0, *t1) */
static void live(int64_t n, int64_t m, int64_t k, int64_t s, int64_t p, int64_t d, int64_t *t0, int64_t *t1)
{
    *t0 = k, *t1 = 0;
    for (int64_t t = 0; t < k; t++) {
        int64_t first = t * d - p;   /* output 0 reads here; output o at first + o s */
        int64_t o = first >= 0 ? 0 : (-first + s - 1) / s;
        if (o < m && first + o * s < n) {
            if (t < *t0) *t0 = t;
            *t1 = t + 1;
        }
    }
}

bool ember__conv_live_taps(const conv_geom *g, conv_geom *gc, int64_t *i0, int64_t *j0)
{
    int64_t i1, j1;
    live(g->H, g->Ho, g->kH, g->sh, g->ph, g->dh, i0, &i1);
    live(g->W, g->Wo, g->kW, g->sw, g->pw, g->dw, j0, &j1);
    if (i1 <= *i0 || j1 <= *j0 || (i1 - *i0 == g->kH && j1 - *j0 == g->kW)) return false;
    *gc = *g;
    gc->kH = i1 - *i0, gc->kW = j1 - *j0;
    gc->ph = g->ph - *i0 * g->dh, gc->pw = g->pw - *j0 * g->dw;
    if (gc->ph < 0 || gc->pw < 0) return false;
    /* the same output size: the padding is symmetric, so the far side must still reach */
    if (nn_out_size(g->H, gc->kH, g->sh, gc->ph, g->dh) != g->Ho || nn_out_size(g->W, gc->kW, g->sw, gc->pw, g->dw) != g->Wo)
        return false;
    gc->K = g->Cg * gc->kH * gc->kW;
    return true;
}

/* w (O, Cg, kH, kW) <-> wc (O, Cg, kH', kW'), the taps from (i0, j0); to_full
   writes wc's taps into w (whose other taps the caller zeroed) */
void ember__conv_crop(const conv_geom *g, const conv_geom *gc, int64_t i0, int64_t j0, int es, char *w, char *wc,
                      bool to_full)
{
    const size_t row = (size_t)(gc->kW * es);
    for (int64_t oc = 0; oc < g->O * g->Cg; oc++)
        for (int64_t i = 0; i < gc->kH; i++) {
            char *full = w + ((oc * g->kH + i0 + i) * g->kW + j0) * es, *part = wc + (oc * gc->kH + i) * gc->kW * es;
            if (to_full) memcpy(full, part, row);
            else memcpy(part, full, row);
        }
}

/* The live taps' weight of w (its contents at cb, contiguous in cdt), kept
   on w's storage (internal.h's ember__derived) while its version lasts, for
   weights ember__derived_keepable allows: a batch-1 forward otherwise copied
   the taps out of every cell of a 512 x 512 x 3 x 3 weight on each call
   (ResNet-18's NCHW forward: 4 of its 5.6 ms of convolutions), and the copy
   kept is a weight whose own oneDNN layout is then kept too
   (conv_dnnl_wcache.c). At most TAPS_PER_STORAGE views' copies per storage;
   a stale one, or one of other taps, is made again. */
enum { TAPS_PER_STORAGE = 2 };

typedef struct {
    ember__derived link;   /* first: the storage's list links these */
    ember_tensor *wc;
    int64_t i0, j0, kh, kw;
    int cdt;
} taps_entry;

static void taps_free(ember__derived *d)
{
    ember_tensor_release(((taps_entry *)d)->wc);
    free(d);
}

int ember__conv_live_weight(const conv_geom *g, const conv_geom *gc, int64_t i0, int64_t j0, int cdt,
                            const ember_tensor *w, ember_tensor *cb, ember_tensor **wc, bool *kept)
{
    *kept = false;
    const int64_t ws[4] = {g->O, g->Cg, gc->kH, gc->kW};
    const int es = ember_dtype_size(cdt);
    int others = 0;
    taps_entry *e = NULL;
    bool keep = w && w->ndim == 4 && ember__derived_keepable(w);
    if (keep) {
        e = (taps_entry *)ember__derived_find(w, taps_free, NULL, NULL, &others);
        if (e && e->link.version == w->storage->version && e->cdt == cdt && e->i0 == i0 && e->j0 == j0 &&
            e->kh == gc->kH && e->kw == gc->kW) {
            ember_tensor_retain(e->wc);
            *wc = e->wc;
            *kept = true;
            return EMBER_OK;
        }
        keep = e || others < TAPS_PER_STORAGE;
    }
    EMBER_TRY(ember__new(4, ws, cdt, EMBER_CPU, wc));
    ember__conv_crop(g, gc, i0, j0, es, ember__ptr(cb), ember__ptr(*wc), false);
    if (!keep) return EMBER_OK;
    taps_entry *fresh = calloc(1, sizeof *fresh);
    if (!fresh) return EMBER_OK;   /* not kept: the call goes on with its own */
    if (e) {   /* this view's copy, stale or of other taps: replaced */
        ember__derived_remove(w->storage, &e->link);
        taps_free(&e->link);
    }
    ember_tensor_retain(*wc);
    *fresh = (taps_entry){{.free = taps_free}, *wc, i0, j0, gc->kH, gc->kW, cdt};
    ember__derived_key(&fresh->link, w);
    ember__derived_add(w->storage, &fresh->link);
    *kept = true;
    return EMBER_OK;
}

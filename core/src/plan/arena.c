/* arena.c: a traced plan's memory plan (docs/plans.md, "Passes"). The
   temporaries of a CPU plan share one block, the arena: each storage a
   replay makes for a temporary gets an offset in it, worked out once from
   the temporaries' lifetimes by a greedy best-fit over the schedule (as
   ggml's graph allocator does), so buffers whose lifetimes do not overlap
   reuse the same bytes. The arena is allocated at the plan's first run and
   freed with the plan. A run offers each entry the regions planned for its
   outputs (ember__plan_offer); ember__new hands an op's new storage of a
   region's exact size that region (ember__plan_claim) instead of memory of
   the allocator. After the entry, each region claimed must be held by the
   output it was planned for, or be free again: anything else (a storage an
   op kept) turns the arena off for the plan, and the arena block lives on
   until the last storage in it is released, so nothing is ever overwritten
   while a tensor still reads it. Outputs of the plan, and temporaries that
   share memory with one, with an input or with a live tensor, stay outside. */
#include "plan.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

enum { ALIGN = 64 };   /* the allocator's alignment (alloc.c) */

typedef struct plan_region {
    struct plan_arena *arena;
    int64_t offset, nbytes;
    ember_storage *holder;   /* the storage in it now, NULL: free */
} plan_region;

struct plan_arena {
    _Atomic int refs;   /* the plan's, and one per storage in it */
    char *data;
    size_t nbytes;
    int nregions;
    plan_region regions[];
};

EMBER_TLS ember__arena_offer *ember__plan_offer;

static void arena_unref(plan_arena *a)
{
    if (atomic_fetch_sub(&a->refs, 1) != 1) return;
    ember__free(a->data, a->nbytes);
    ember__stats_bytes(-(int64_t)a->nbytes);
    free(a);
}

static void region_release(void *ctx, void *data)
{
    (void)data;
    plan_region *r = ctx;
    plan_arena *a = r->arena;
    r->holder = NULL;
    arena_unref(a);
}

void ember__plan_claim(ember_storage *s)
{
    ember__arena_offer *o = ember__plan_offer;
    for (int k = 0; k < o->n; k++) {
        plan_region *r = o->r[k];
        if (o->taken[k] || r->holder || (size_t)r->nbytes != s->nbytes) continue;
        o->taken[k] = 1;
        r->holder = s;
        atomic_fetch_add(&r->arena->refs, 1);
        s->data = r->arena->data + r->offset;
        s->release = region_release;
        s->release_ctx = r;
        return;
    }
}

/* ------------------------------------------------------------------ planning */
typedef struct { const ember_storage *st; int32_t slot; } by_storage;

static int cmp_storage(const void *x, const void *y)
{
    const by_storage *a = x, *b = y;
    if (a->st != b->st) return (uintptr_t)a->st < (uintptr_t)b->st ? -1 : 1;
    return a->slot - b->slot;
}

typedef struct { int64_t off, size; } free_block;

/* best fit among the free blocks (sorted by offset), else the last block
   grown when it ends the arena, else the end; *end grows */
static int64_t place(free_block *fb, int *nfb, int64_t size, int64_t *end)
{
    int best = -1;
    for (int i = 0; i < *nfb; i++)
        if (fb[i].size >= size && (best < 0 || fb[i].size < fb[best].size)) best = i;
    if (best < 0) {
        int64_t off = *end;
        if (*nfb > 0 && fb[*nfb - 1].off + fb[*nfb - 1].size == *end) off = fb[--*nfb].off;
        *end = off + size;
        return off;
    }
    int64_t off = fb[best].off;
    fb[best].off += size;
    fb[best].size -= size;
    if (fb[best].size == 0) {
        memmove(&fb[best], &fb[best + 1], (size_t)(*nfb - best - 1) * sizeof *fb);
        (*nfb)--;
    }
    return off;
}

static void unplace(free_block *fb, int *nfb, int64_t off, int64_t size)
{
    int i = 0;
    while (i < *nfb && fb[i].off < off) i++;
    memmove(&fb[i + 1], &fb[i], (size_t)(*nfb - i) * sizeof *fb);
    fb[i] = (free_block){off, size};
    (*nfb)++;
    if (i + 1 < *nfb && fb[i].off + fb[i].size == fb[i + 1].off) {   /* merge with the next */
        fb[i].size += fb[i + 1].size;
        memmove(&fb[i + 1], &fb[i + 2], (size_t)(*nfb - i - 2) * sizeof *fb);
        (*nfb)--;
    }
    if (i > 0 && fb[i - 1].off + fb[i - 1].size == fb[i].off) {   /* and the one before */
        fb[i - 1].size += fb[i].size;
        memmove(&fb[i], &fb[i + 1], (size_t)(*nfb - i - 1) * sizeof *fb);
        (*nfb)--;
    }
}

/* groups bucketed by key (each in [0, n]): by[start[k] .. start[k + 1]) */
static void bucket(int ng, const int32_t *key, int n, int32_t *start, int32_t *by)
{
    memset(start, 0, ((size_t)n + 2) * sizeof *start);
    for (int g = 0; g < ng; g++) start[key[g] + 1]++;
    for (int k = 0; k <= n; k++) start[k + 1] += start[k];
    for (int g = 0; g < ng; g++) by[start[key[g]]++] = g;
    for (int k = n; k > 0; k--) start[k] = start[k - 1];   /* back to the bucket starts */
    start[0] = 0;
}

/* Best fit along the schedule: at entry e the groups last read before e
   give their bytes back, then e's outputs are placed. The arena's size;
   -1 when out of memory. */
static int64_t schedule_fit(int ng, const int32_t *gfirst, const int32_t *glast, const int64_t *gsize,
                            const int32_t *def, int n, int64_t *goff, free_block *fb)
{
    int32_t *born = malloc(((size_t)ng + 1) * sizeof *born), *freed = malloc(((size_t)ng + 1) * sizeof *freed);
    int32_t *bstart = malloc(((size_t)n + 2) * sizeof *bstart), *fstart = malloc(((size_t)n + 2) * sizeof *fstart);
    int32_t *bkey = calloc((size_t)ng + 1, sizeof *bkey);
    int64_t end = -1;
    if (born && freed && bstart && fstart && bkey) {
        for (int g = 0; g < ng; g++) bkey[g] = def[gfirst[g]];
        bucket(ng, bkey, n, bstart, born);
        for (int g = 0; g < ng; g++) bkey[g] = glast[g] + 1 < n ? glast[g] + 1 : n;   /* given back before this */
        bucket(ng, bkey, n, fstart, freed);
        int nfb = 0;
        end = 0;
        for (int e = 0; e < n; e++) {
            for (int k = fstart[e]; k < fstart[e + 1]; k++) unplace(fb, &nfb, goff[freed[k]], gsize[freed[k]]);
            for (int k = bstart[e]; k < bstart[e + 1]; k++) goff[born[k]] = place(fb, &nfb, gsize[born[k]], &end);
        }
    }
    free(born);
    free(freed);
    free(bstart);
    free(fstart);
    free(bkey);
    return end;
}

enum { SIZE_FIRST_MAX = 2048 };   /* quadratic in the groups: past this, the schedule's fit alone */

static const int64_t *sort_sizes;
static int cmp_size(const void *x, const void *y)
{
    int a = *(const int32_t *)x, b = *(const int32_t *)y;
    if (sort_sizes[a] != sort_sizes[b]) return sort_sizes[a] > sort_sizes[b] ? -1 : 1;
    return a - b;
}

/* Largest first, each at the lowest offset where it overlaps no group
   placed before it that is alive at the same time. The arena's size. */
static int64_t size_first(int ng, const int32_t *gfirst, const int32_t *glast, const int64_t *gsize,
                          const int32_t *def, int64_t *goff, int32_t *order)
{
    for (int g = 0; g < ng; g++) order[g] = g;
    sort_sizes = gsize;
    qsort(order, (size_t)ng, sizeof *order, cmp_size);
    int64_t end = 0;
    for (int i = 0; i < ng; i++) {
        int g = order[i];
        int64_t off = 0;
        for (int moved = 1; moved;) {   /* past every clash, until none is left */
            moved = 0;
            for (int k = 0; k < i; k++) {
                int h = order[k];
                if (glast[h] < def[gfirst[g]] || glast[g] < def[gfirst[h]]) continue;   /* not alive together */
                if (goff[h] < off + gsize[g] && off < goff[h] + gsize[h]) {
                    off = goff[h] + gsize[h];
                    moved = 1;
                }
            }
        }
        goff[g] = off;
        if (off + gsize[g] > end) end = off + gsize[g];
    }
    return end;
}

/* A group of slots on one storage in the trace: the arena holds it when
   every slot is a temporary (no output, input, live tensor or constant, no
   result of a hoisted entry), its
   first slot owns its memory, and it lives on the CPU. */
static int group_fits(const ember_plan *p, ember_tensor *const *held, const by_storage *g, int n, const int32_t *def,
                      int *first)
{
    *first = -1;
    for (int k = 0; k < n; k++) {
        const plan_slot *sl = &p->slots[g[k].slot];
        if (sl->kind != SLOT_TEMP || sl->is_output) return 0;
        if (def[g[k].slot] < 0) continue;
        if (p->hoisted && p->hoisted[def[g[k].slot]]) return 0;   /* kept across runs (hoist.c) */
        if (*first < 0 || def[g[k].slot] < def[*first]) *first = g[k].slot;
    }
    if (*first < 0) return 0;
    const ember_tensor *t = held[*first];
    const ember_storage *st = t->storage;
    return !t->is_view && t->offset == 0 && st->device == EMBER_CPU && !st->release && st->nbytes > 0 &&
           (size_t)t->numel * (size_t)ember_dtype_size(t->dtype) == st->nbytes;
}

int ember__plan_arena_layout(ember_plan *p, ember_tensor *const *held)
{
    int ns = p->nslots, n = p->nentries, rc = EMBER_OK;
    int32_t *def = malloc(((size_t)ns + 1) * sizeof *def);
    by_storage *bs = malloc(((size_t)ns + 1) * sizeof *bs);
    int64_t *goff = malloc(((size_t)ns + 1) * sizeof *goff), *gsize = malloc(((size_t)ns + 1) * sizeof *gsize);
    int32_t *gfirst = malloc(((size_t)ns + 1) * sizeof *gfirst), *glast = malloc(((size_t)ns + 1) * sizeof *glast);
    free_block *fb = malloc(((size_t)ns + 1) * sizeof *fb);
    int64_t *goff2 = malloc(((size_t)ns + 1) * sizeof *goff2), *gbytes = malloc(((size_t)ns + 1) * sizeof *gbytes);
    int32_t *order = malloc(((size_t)ns + 1) * sizeof *order);
    p->region_of = malloc(((size_t)ns + 1) * sizeof *p->region_of);
    if (!def || !bs || !goff || !gsize || !gfirst || !glast || !fb || !goff2 || !gbytes || !order || !p->region_of) {
        rc = ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
        goto done;
    }
    for (int s = 0; s < ns; s++) def[s] = -1, p->region_of[s] = -1;
    for (int e = 0; e < n; e++) {
        const plan_entry *en = &p->entries[e];
        for (int k = 0; k < en->nout; k++)
            if (en->slots[en->nin + k] >= 0) def[en->slots[en->nin + k]] = e;
    }
    int nb = 0;
    for (int s = 0; s < ns; s++)
        if (held[s]) bs[nb++] = (by_storage){held[s]->storage, s};   /* all kinds: a group with another is out */
    qsort(bs, (size_t)nb, sizeof *bs, cmp_storage);
    /* the groups the arena holds: their first entry, last reader, size */
    int ng = 0;
    for (int i = 0; i < nb;) {
        int j = i;
        while (j < nb && bs[j].st == bs[i].st) j++;
        int first;
        if (group_fits(p, held, &bs[i], j - i, def, &first)) {
            int lastuse = def[first];
            for (int k = i; k < j; k++) {
                int s = bs[k].slot;
                if (def[s] > lastuse) lastuse = def[s];
                if (p->slots[s].last_use > lastuse) lastuse = p->slots[s].last_use;
            }
            gfirst[ng] = first;
            glast[ng] = lastuse;
            gbytes[ng] = (int64_t)held[first]->storage->nbytes;
            gsize[ng] = (gbytes[ng] + ALIGN - 1) / ALIGN * ALIGN;
            p->region_of[first] = ng;
            ng++;
        }
        i = j;
    }
    /* two layouts, the smaller kept: best fit along the schedule, and the
       largest first, each at the lowest offset clear of those placed whose
       lifetimes overlap it (as TFLite's planner) */
    int64_t end = schedule_fit(ng, gfirst, glast, gsize, def, n, goff, fb);
    if (end < 0) {
        rc = ember__fail(EMBER_ERR_OOM, "jit.trace: out of memory");
        goto done;
    }
    int64_t end2 = ng <= SIZE_FIRST_MAX ? size_first(ng, gfirst, glast, gsize, def, goff2, order) : -1;
    if (end2 >= 0 && end2 < end) {
        int64_t *t = goff;
        goff = goff2;
        goff2 = t;
        end = end2;
    }
    p->nregions = ng;
    p->region_off = goff;
    p->region_bytes = gbytes;   /* a region goes to a storage of its exact size */
    goff = gbytes = NULL;
    p->arena_bytes = end;
done:
    free(def);
    free(bs);
    free(goff);
    free(gsize);
    free(gfirst);
    free(glast);
    free(fb);
    free(goff2);
    free(gbytes);
    free(order);
    return rc;
}

/* ------------------------------------------------------------------ running */
int ember__plan_arena_begin(ember_plan *p)
{
    if (p->arena_off || p->nregions == 0) return EMBER_OK;
    plan_arena *a = p->arena;
    if (a && atomic_load(&a->refs) != 1) {   /* a storage of an earlier run is still in it */
        p->arena_off = 1;
        return EMBER_OK;
    }
    if (a) return EMBER_OK;
    size_t nbytes = (size_t)p->arena_bytes;
    if (ember__reserve(nbytes) < 0) return ember__fail_prefix(EMBER_ERR_OOM, "plan: the plan's arena");
    a = calloc(1, sizeof *a + (size_t)p->nregions * sizeof *a->regions);
    if (a) a->data = ember__alloc(nbytes);
    if (!a || !a->data) {
        free(a);
        return ember__fail(EMBER_ERR_OOM, "plan: out of memory: %zu bytes for the plan's arena", nbytes);
    }
    ember__stats_bytes((int64_t)nbytes);
    atomic_init(&a->refs, 1);
    a->nbytes = nbytes;
    a->nregions = p->nregions;
    for (int g = 0; g < p->nregions; g++) a->regions[g] = (plan_region){a, p->region_off[g], p->region_bytes[g], NULL};
    p->arena = a;
    return EMBER_OK;
}

int ember__plan_arena_offer(const ember_plan *p, const plan_entry *e, ember__arena_offer *o)
{
    o->n = 0;
    if (!p->arena || p->arena_off) return 0;
    for (int k = 0; k < e->nout && o->n < EMBER__OFFER_MAX; k++) {
        int s = e->slots[e->nin + k];
        if (s < 0 || p->region_of[s] < 0) continue;
        o->slot[o->n] = s;
        o->taken[o->n] = 0;
        o->r[o->n++] = &p->arena->regions[p->region_of[s]];
    }
    return o->n;
}

void ember__plan_arena_check(ember_plan *p, const ember__arena_offer *o, ember_tensor *const *vals)
{
    for (int k = 0; k < o->n; k++) {
        const plan_region *r = o->r[k];
        if (r->holder && (!vals[o->slot[k]] || vals[o->slot[k]]->storage != r->holder)) p->arena_off = 1;
    }
}

void ember__plan_arena_free(ember_plan *p)
{
    if (p->arena) arena_unref(p->arena);
    p->arena = NULL;
    free(p->region_of);
    free(p->region_off);
    free(p->region_bytes);
}

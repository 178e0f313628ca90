/* conv_dnnl_wcache.c: convolution weights kept in oneDNN's layout between
   calls.

   A oneDNN convolution reads its weight in a blocked layout of its own
   (OIhw16i16o and the like), into which conv_dnnl.c's reorder copies
   ember's (O, C/G, kH, kW) or (O, kH, kW, C/G) weight on every call. Where
   the weight's storage has not been written since (every in-place write,
   an optimizer's step included, bumps its version), that copy is the same
   bytes each time: it is kept on the weight's storage
   (internal.h's ember__derived list), keyed on the storage's version, the
   weight tensor's view (offset, shape, strides, dtype), and the two layouts
   (ember's and the primitive's), and read instead of reordering again.
   The reorder is exact (a copy of the same floats), so the results' bits
   are those of the uncached path.

   Only for weights no recording tracks (inference, evaluation under
   no_grad): in a training step the version moves every step, so a kept
   copy serves only the input gradient after the forward, which measured
   no faster on ResNet-18's step (1 thread, loaded machine: 0.95-1.14 of the
   step without) while the copies raised its peak by a copy of the weights
   (130 MB to 162 over the step, PyTorch's 151).

   Bounded: at most WCACHE_PER_STORAGE layouts per storage (the forward's
   and the input gradient's, where they differ) and WCACHE_MAX_BYTES over
   all storages; past either, or where the memory limit would be passed,
   the call reorders into a block of its own as before. A stale entry (an
   older version) is dropped when its layout is asked for again. The kept
   bytes count in ember_memory_stats as tensors' bytes do, and are freed
   with the storage. Not kept: weights in memory ember does not own
   (ember_from_blob: the owner may write it without a version bump). */
#include "conv_dnnl.h"

#ifdef EMBER_HAVE_DNNL

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

enum { WCACHE_PER_STORAGE = 2 };
#define WCACHE_MAX_BYTES ((int64_t)512 << 20)

typedef struct ember__dnnl_wentry {
    ember__derived link;   /* first: the storage's list links these; its view and version */
    ember_storage *storage;
    int users;             /* calls reading data now */
    bool listed;           /* in the storage's list (else freed by its last user) */
    dnnl_memory_desc_t user, inner;
    size_t bytes;
    void *data;
} wentry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int64_t kept_bytes;

static void entry_free(wentry *e)
{
    ember__free(e->data, e->bytes);
    ember__stats_bytes(-(int64_t)e->bytes);
    atomic_fetch_sub(&kept_bytes, (int64_t)e->bytes);
    free(e);
}

/* the storage's free: nobody reads its entries (a reader holds the weight) */
static void derived_free(ember__derived *d) { entry_free((wentry *)d); }

/* the same layouts (ember__derived_find has matched the view) */
static bool same_layout(const ember__derived *d, const void *ctx)
{
    const wentry *e = (const wentry *)d;
    const dnnl_conv *c = ctx;
    return dnnl_memory_desc_equal(&e->user, &c->user[ARG_B]) && dnnl_memory_desc_equal(&e->inner, &c->inner[ARG_B]);
}

/* takes e out of its storage's list (mu held); freed now or by its last user */
static void unlist(wentry *e)
{
    ember__derived_remove(e->storage, &e->link);
    e->listed = false;
    if (e->users == 0) entry_free(e);
}

/* wdata (ember's layout, c->user[ARG_B]) into e->data (c->inner[ARG_B]) */
static bool reorder_weight(const dnnl_conv *c, const void *wdata, void *data)
{
    dnnl_engine_t engine = ember__dnnl_engine();
    dnnl_stream_t stream = NULL;
    dnnl_memory_t from = NULL, to = NULL;
    bool ok = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags) == dnnl_success &&
              dnnl_memory_create(&from, &c->user[ARG_B], engine, (void *)wdata) == dnnl_success &&
              dnnl_memory_create(&to, &c->inner[ARG_B], engine, data) == dnnl_success;
    if (ok) {
        dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}};
        ok = dnnl_primitive_execute(c->reorder[ARG_B], stream, 2, ra) == dnnl_success &&
             dnnl_stream_wait(stream) == dnnl_success;
    }
    dnnl_memory_destroy(from);
    dnnl_memory_destroy(to);
    dnnl_stream_destroy(stream);
    return ok;
}

/* Weight w of the product c reads (its contents at wdata, in ember's layout
   c->user[ARG_B]: w itself, or a contiguous float32 copy of it) in the
   primitive's layout, kept or made now; NULL where it is not kept (the call
   reorders as before). The caller reads ember__dnnl_wcache_data(e) and
   then gives e back with ember__dnnl_wcache_done. */
wentry *ember__dnnl_wcache_get(const dnnl_conv *c, const ember_tensor *w, const void *wdata)
{
    ember_storage *s = w->storage;
    if (!c->reorder[ARG_B] || !ember__derived_keepable(w)) return NULL;
    pthread_mutex_lock(&mu);
    int n = 0;
    wentry *old = (wentry *)ember__derived_find(w, derived_free, same_layout, c, &n);
    if (old && old->link.version == s->version) {
        old->users++;
        pthread_mutex_unlock(&mu);
        return old;
    }
    if (old) unlist(old);   /* written since: its layout is made again below */
    pthread_mutex_unlock(&mu);
    const size_t bytes = c->inner_bytes[ARG_B];
    if (n >= WCACHE_PER_STORAGE || atomic_load(&kept_bytes) + (int64_t)bytes > WCACHE_MAX_BYTES ||
        ember__reserve(bytes) != EMBER_OK)
        return NULL;
    wentry *e = calloc(1, sizeof *e);
    if (e && !(e->data = ember__alloc(bytes))) free(e), e = NULL;
    if (!e) return NULL;
    e->bytes = bytes;
    ember__stats_bytes((int64_t)bytes);
    atomic_fetch_add(&kept_bytes, (int64_t)bytes);
    e->link.free = derived_free;
    e->storage = s;
    ember__derived_key(&e->link, w);
    e->user = c->user[ARG_B];
    e->inner = c->inner[ARG_B];
    e->users = 1;
    if (!reorder_weight(c, wdata, e->data)) {
        entry_free(e);
        return NULL;
    }
    /* listed unless another call listed the same meanwhile (then e is this call's alone) */
    pthread_mutex_lock(&mu);
    const ember__derived *twin = ember__derived_find(w, derived_free, same_layout, c, NULL);
    if (!twin || twin->version != e->link.version) {
        ember__derived_add(s, &e->link);
        e->listed = true;
    }
    pthread_mutex_unlock(&mu);
    return e;
}

const void *ember__dnnl_wcache_data(const wentry *e) { return e->data; }

void ember__dnnl_wcache_done(wentry *e)
{
    if (!e) return;
    pthread_mutex_lock(&mu);
    bool drop = --e->users == 0 && !e->listed;
    pthread_mutex_unlock(&mu);
    if (drop) entry_free(e);
}

int64_t ember__dnnl_wcache_bytes(void) { return atomic_load(&kept_bytes); }

#endif

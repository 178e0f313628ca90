/* ember/dtr.h: dynamic tensor rematerialization (docs/dtr.md).
   A part of ember.h, which includes the parts in order (its conventions hold
   here): include <ember.h>, not this file. */
#ifndef EMBER_H
#error "ember/dtr.h is a part of ember.h: include <ember.h>"
#endif

/* ffi:begin */
/* Dynamic tensor rematerialization (DTR, docs/dtr.md): while it is on and a
   recording is open, storages ops make remember how to be remade; when an
   allocation would take bytes_in_use past `budget`, they are evicted by the
   heuristic cost / (size x staleness), never one under min_size bytes (< 0:
   MegEngine's 1 MiB, or budget / 1024 when smaller), and remade from their
   inputs when read. Training gives
   the same bits as without it. When nothing more can be evicted the
   allocation fails with EMBER_ERR_OOM naming the op, the bytes and the
   budget. enable again changes the budget and zeroes the counters; disable
   remakes what is still evicted and held, then forgets every recipe.
   For one training thread: enable, train and disable on it (other threads'
   allocations and ops pass DTR by; the tensors it tracks must be released
   on that thread). */
typedef struct ember_dtr_stats_t {
    int enabled;
    int64_t budget, min_size;
    int64_t evictions;       /* storages evicted to stay under the budget */
    int64_t drops;           /* freed as soon as only recipes held them */
    int64_t recomputes;      /* storages remade (parents included) */
    double recompute_s;      /* seconds spent remaking */
    int64_t peak_bytes;      /* the most bytes_in_use any allocation reached since enable */
    int64_t tracked;         /* recipes alive now */
    int64_t evicted;         /* of them, evicted now */
} ember_dtr_stats_t;
EMBER_API int ember_dtr_enable(int64_t budget, int64_t min_size);
EMBER_API int ember_dtr_disable(void);
EMBER_API int ember_dtr_stats(ember_dtr_stats_t *out);
/* 1 once after eviction could not make room, or the bytes it cannot free
   grew by an eighth of the room the budget leaves above them: a host whose wrappers hold tensors until
   its garbage collector runs (the Lua binding) should collect now. */
EMBER_API int ember_dtr_gc_wanted(void);
/* ffi:end */

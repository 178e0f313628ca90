/* alloc.c: the host allocator. Blocks up to 64 MiB come from size classes
   (64 B, 96 B, 128 B, 192 B, ...: powers of two and the halfway steps, so a
   block wastes at most a third) whose freed blocks are kept for reuse (a
   small caching allocator), so a loop of tensors does not call malloc, nor
   fault in fresh pages, each time; larger blocks go to the C library
   directly. The cache holds at most CACHE_LIMIT bytes and forgets by age:
   past the cap, or once a block has waited through AGE_LIMIT later frees
   without being reused, the blocks freed longest ago go back to the C
   library, so what a process ran before (a few large tensors) does not keep
   the cache full of sizes nothing asks for. Sanitizer builds (EMBER_NO_CACHE)
   allocate each block at its exact size and free it at once, so ASan sees
   every overrun and every use after free. Also the counters behind
   ember_memory_stats(). */
#include "internal.h"
#include "dtr.h"
#include "platform.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MIN_CLASS 6    /* 64 B */
#define MAX_CLASS 26   /* 64 MiB */
#define NCLASS (2 * MAX_CLASS + 1)
#define CACHE_LIMIT ((size_t)256 << 20)
#define AGE_LIMIT ((uint64_t)1 << 16)

/* a cached block: in its class's list (newest first) and in the cache's age
   order (by the time it was freed); the smallest block (64 B) holds it */
typedef struct free_block {
    struct free_block *next, *prev;
    struct free_block *older, *newer;
    uint64_t stamp;   /* the cache's clock when it was freed */
    int cls;
} free_block;

/* The cache of freed blocks is per thread (a block freed by another thread
   than the one that allocated it joins the freeing thread's cache); the
   counters are shared and atomic. */
typedef struct thread_cache {
    free_block *lists[NCLASS];
    free_block *oldest, *newest;
    size_t bytes;
    uint64_t clock;   /* frees into this cache */
    int64_t hits, misses, evictions;
} thread_cache;
static EMBER_TLS thread_cache *tc;

#ifndef EMBER_NO_CACHE   /* sanitizer builds keep no cache */
static thread_cache *cache(void)
{
    if (EMBER_LIKELY(tc != NULL)) return tc;
    tc = calloc(1, sizeof *tc);
    if (tc) ember__thread_uses_state();
    return tc;
}

/* the class of an n-byte block (n <= 2^MAX_CLASS) and its size */
static int size_class(size_t n, size_t *size)
{
    int c = MIN_CLASS;
    while (((size_t)1 << c) < n) c++;
    size_t half = (size_t)3 << (c - 2);   /* 0.75 * 2^c */
    if (c > MIN_CLASS && n <= half) {
        *size = half;
        return 2 * c - 1;
    }
    *size = (size_t)1 << c;
    return 2 * c;
}

static size_t class_size(int cls) { return cls & 1 ? (size_t)3 << (cls / 2 - 1) : (size_t)1 << (cls / 2); }

/* takes b out of its class list and the age order */
static void unlink_block(thread_cache *k, free_block *b)
{
    if (b->prev) b->prev->next = b->next;
    else k->lists[b->cls] = b->next;
    if (b->next) b->next->prev = b->prev;
    if (b->older) b->older->newer = b->newer;
    else k->oldest = b->newer;
    if (b->newer) b->newer->older = b->older;
    else k->newest = b->older;
    k->bytes -= class_size(b->cls);
}

static void evict_oldest(thread_cache *k)
{
    free_block *b = k->oldest;
    unlink_block(k, b);
    k->evictions++;
    ember__aligned_free(b);
}
#endif
static _Atomic int64_t live_tensors, bytes_in_use, peak_bytes, memory_limit;

void *ember__alloc(size_t nbytes)
{
    if (nbytes == 0) nbytes = 1;
#ifdef EMBER_NO_CACHE
    /* sanitizer builds: the exact size, so that ASan reports a write past the
       end of a tensor instead of it landing in a size class's slack */
    return ember__aligned_alloc(64, nbytes);
#else
    if (nbytes <= ((size_t)1 << MAX_CLASS)) {
        size_t size;
        int c = size_class(nbytes, &size);
        thread_cache *k = cache();
        free_block *b = k ? k->lists[c] : NULL;
        if (b) {
            unlink_block(k, b);
            k->hits++;
            return b;
        }
        if (k) k->misses++;
        return ember__aligned_alloc(64, size);
    }
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    if (rounded < nbytes) return NULL;
    return ember__aligned_alloc(64, rounded);
#endif
}

void ember__free(void *p, size_t nbytes)
{
    if (!p) return;
    if (nbytes == 0) nbytes = 1;
#ifndef EMBER_NO_CACHE   /* sanitizer builds free every block, so ASan sees reuse */
    if (nbytes <= ((size_t)1 << MAX_CLASS)) {
        size_t size;
        int c = size_class(nbytes, &size);
        thread_cache *k = cache();
        if (k) {
            free_block *b = p;
            b->cls = c;
            b->stamp = ++k->clock;
            b->prev = NULL;
            b->next = k->lists[c];
            if (b->next) b->next->prev = b;
            k->lists[c] = b;
            b->newer = NULL;
            b->older = k->newest;
            if (b->older) b->older->newer = b;
            else k->oldest = b;
            k->newest = b;
            k->bytes += size;
            /* past the cap, and once they are old, the oldest go (b last of all) */
            while (k->bytes > CACHE_LIMIT) evict_oldest(k);
            while (k->oldest && k->clock - k->oldest->stamp > AGE_LIMIT) evict_oldest(k);
            return;
        }
    }
#endif
    ember__aligned_free(p);
}

void ember_empty_cache(void)
{
#ifndef EMBER_NO_CACHE
    if (!tc) return;
    while (tc->oldest) {
        free_block *b = tc->oldest;
        unlink_block(tc, b);
        ember__aligned_free(b);
    }
#endif
}

void ember__free_thread_caches(void)
{
    ember_empty_cache();
    free(tc);
    tc = NULL;
}

int ember_set_memory_limit(int64_t bytes)
{
    if (bytes < 0)
        return ember__fail(EMBER_ERR_ARG, "set_memory_limit: expected a number of bytes >= 0 (0: no limit), got %lld",
                           (long long)bytes);
    memory_limit = bytes;
    return EMBER_OK;
}

/* Each thread batches its changes to the shared counters (an atomic add costs
   as much as a small op's allocation): tensor counts in steps of 64, bytes in
   steps of 64 KiB. A thread's reads, and the limit check, flush its own batch
   first, so one thread sees exact figures; another thread's unflushed batch
   is at most 64 tensors and 64 KiB (and the peak may miss as much). */
static EMBER_TLS int64_t pending_tensors, pending_bytes;
#define PENDING_TENSORS 64
#define PENDING_BYTES ((int64_t)64 << 10)

void ember__flush_stats(void)
{
    if (pending_tensors) {
        live_tensors += pending_tensors;
        pending_tensors = 0;
    }
    if (pending_bytes) {
        int64_t now = atomic_fetch_add(&bytes_in_use, pending_bytes) + pending_bytes;
        int64_t peak = atomic_load(&peak_bytes);
        pending_bytes = 0;
        while (now > peak && !atomic_compare_exchange_weak(&peak_bytes, &peak, now)) {}
    }
}

int ember__reserve(size_t nbytes)
{
    ember__flush_stats();
    if (EMBER_UNLIKELY(ember__dtr_on)) {   /* DTR evicts first (what it frees is counted at once) */
        EMBER_TRY(ember__dtr_make_room(nbytes, memory_limit));
        ember__flush_stats();
    }
    if (memory_limit > 0 && (nbytes > (size_t)memory_limit || bytes_in_use > memory_limit - (int64_t)nbytes))
        return ember__fail(EMBER_ERR_OOM, "out of memory: %zu bytes would pass the memory limit of %lld bytes "
                           "(%lld in use)", nbytes, (long long)memory_limit, (long long)bytes_in_use);
    return EMBER_OK;
}

void ember__stats_tensor(int delta)
{
    pending_tensors += delta;
    if (pending_tensors > PENDING_TENSORS || pending_tensors < -PENDING_TENSORS) ember__flush_stats();
}

void ember__stats_bytes(int64_t delta)
{
    pending_bytes += delta;
    if (pending_bytes > PENDING_BYTES || pending_bytes < -PENDING_BYTES) ember__flush_stats();
}

void ember_memory_stats(ember_memory_stats_t *out)
{
    if (!out) return;
    ember__flush_stats();
    out->live_tensors = live_tensors;
    out->bytes_in_use = bytes_in_use;
    out->peak_bytes = peak_bytes;
    out->bytes_cached = tc ? (int64_t)tc->bytes : 0;   /* the calling thread's cache */
    out->limit = memory_limit;
    out->cache_hits = tc ? tc->hits : 0;
    out->cache_misses = tc ? tc->misses : 0;
    out->cache_evictions = tc ? tc->evictions : 0;
#ifdef EMBER_NO_CACHE
    out->cache_limit = 0;   /* no cache: sanitizer builds */
#else
    out->cache_limit = (int64_t)CACHE_LIMIT;
#endif
}

void ember_reset_peak(void)
{
    ember__flush_stats();
    peak_bytes = bytes_in_use;
}

int64_t ember_bytes_in_use(void) { return bytes_in_use + pending_bytes; }   /* as this thread sees it */

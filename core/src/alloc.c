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
   every overrun and every use after free. Blocks of HUGE_MIN bytes and more
   (the block's size: a class's, or the request's rounded up) are mappings of
   their own, 2 MiB-aligned and backed by huge pages where the OS has them
   (platform.h), unless EMBER_HUGEPAGES=0: a gather over a 30 MB table, or a
   pass over a 16 MB operand, then misses the TLB a 512th as often
   (docs/performance.md). Sanitizer builds keep ASan's allocator. Also the
   counters behind ember_memory_stats(). */
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
#define HUGE_MIN ((size_t)8 << 20)   /* 8 MiB (classes from 4 MiB are 2 MiB multiples): docs/performance.md */

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

static _Atomic int64_t huge_bytes;   /* in blocks on huge pages, in use or cached */

#ifndef EMBER_NO_CACHE   /* sanitizer builds keep no cache, and ASan's allocator every block */
/* whether a block of `size` bytes is on huge pages: decided once per process
   (the first such block), so that a block is freed the way it came */
static bool huge_block(size_t size)
{
    static _Atomic int state;   /* 0: not yet decided, 1: huge pages, 2: not */
    if (size < HUGE_MIN) return false;
    int s = atomic_load_explicit(&state, memory_order_relaxed);
    if (EMBER_UNLIKELY(s == 0)) {
        const char *env = getenv("EMBER_HUGEPAGES");   /* "0" or "1": the Lua package refuses others */
        int want = (env && strcmp(env, "0") == 0) || !ember__huge_pages() ? 2 : 1;
        s = atomic_compare_exchange_strong(&state, &s, want) ? want : s;
    }
    return s == 1;
}

/* a block of `size` bytes (a multiple of 64), 64-byte aligned */
static void *block_alloc(size_t size)
{
    if (!huge_block(size)) return ember__aligned_alloc(64, size);
    size_t len = (size + EMBER_HUGE_PAGE - 1) & ~(EMBER_HUGE_PAGE - 1);
    void *p = len >= size ? ember__huge_alloc(len) : NULL;
    if (p) atomic_fetch_add(&huge_bytes, (int64_t)len);
    return p;
}

static void block_free(void *p, size_t size)
{
    if (!huge_block(size)) {
        ember__aligned_free(p);
        return;
    }
    size_t len = (size + EMBER_HUGE_PAGE - 1) & ~(EMBER_HUGE_PAGE - 1);
    ember__huge_free(p, len);
    atomic_fetch_sub(&huge_bytes, (int64_t)len);
}

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
    block_free(b, class_size(b->cls));
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
        return block_alloc(size);
    }
    size_t rounded = (nbytes + 63) & ~(size_t)63;
    if (rounded < nbytes) return NULL;
    return block_alloc(rounded);
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
        block_free(p, size);   /* no cache (its allocation failed) */
        return;
    }
    block_free(p, (nbytes + 63) & ~(size_t)63);
#else
    ember__aligned_free(p);
#endif
}

void ember_empty_cache(void)
{
#ifndef EMBER_NO_CACHE
    if (!tc) return;
    while (tc->oldest) {
        free_block *b = tc->oldest;
        unlink_block(tc, b);
        block_free(b, class_size(b->cls));
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
    out->huge_bytes = huge_bytes;
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

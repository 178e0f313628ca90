/* alloc.c: the host allocator. Blocks up to 64 MiB come from power-of-two size
   classes whose freed blocks are kept for reuse (a small caching allocator), so
   a loop of small tensors does not call malloc each time; larger blocks go to
   the C library directly. Sanitizer builds (EMBER_NO_CACHE) allocate each
   block at its exact size and free it at once, so ASan sees every overrun and
   every use after free. Also the counters behind ember_memory_stats(). */
#include "internal.h"
#include "platform.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define MIN_CLASS 6    /* 64 B */
#define MAX_CLASS 26   /* 64 MiB */
#define CACHE_LIMIT ((size_t)256 << 20)

typedef struct free_block { struct free_block *next; } free_block;

/* The cache of freed blocks is per thread (a block freed by another thread
   than the one that allocated it joins the freeing thread's cache); the
   counters are shared and atomic. */
typedef struct thread_cache {
    free_block *lists[MAX_CLASS + 1];
    size_t bytes;
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
#endif
static _Atomic int64_t live_tensors, bytes_in_use, peak_bytes, memory_limit;

#ifndef EMBER_NO_CACHE
static int size_class(size_t n)
{
    int c = MIN_CLASS;
    while (((size_t)1 << c) < n) c++;
    return c;
}
#endif

void *ember__alloc(size_t nbytes)
{
    if (nbytes == 0) nbytes = 1;
#ifdef EMBER_NO_CACHE
    /* sanitizer builds: the exact size, so that ASan reports a write past the
       end of a tensor instead of it landing in a size class's slack */
    return ember__aligned_alloc(64, nbytes);
#else
    if (nbytes <= ((size_t)1 << MAX_CLASS)) {
        int c = size_class(nbytes);
        thread_cache *k = cache();
        free_block *b = k ? k->lists[c] : NULL;
        if (b) {
            k->lists[c] = b->next;
            k->bytes -= (size_t)1 << c;
            return b;
        }
        return ember__aligned_alloc(64, (size_t)1 << c);
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
        int c = size_class(nbytes);
        thread_cache *k = cache();
        if (k && k->bytes + ((size_t)1 << c) <= CACHE_LIMIT) {
            free_block *b = p;
            b->next = k->lists[c];
            k->lists[c] = b;
            k->bytes += (size_t)1 << c;
            return;
        }
    }
#endif
    ember__aligned_free(p);
}

void ember_empty_cache(void)
{
    if (!tc) return;
    for (int c = MIN_CLASS; c <= MAX_CLASS; c++) {
        free_block *b = tc->lists[c];
        while (b) {
            free_block *next = b->next;
            ember__aligned_free(b);
            b = next;
        }
        tc->lists[c] = NULL;
    }
    tc->bytes = 0;
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
}

void ember_reset_peak(void)
{
    ember__flush_stats();
    peak_bytes = bytes_in_use;
}

int64_t ember_bytes_in_use(void) { return bytes_in_use + pending_bytes; }   /* as this thread sees it */

/* alloc.cpp: the caching device allocator. cudaMalloc and cudaFree cost tens
   of microseconds and cudaFree synchronises the device, while a training loop
   frees and asks for the same sizes every step; so a freed block goes to a
   free list of its size class and the next request of that class takes it.
   Size classes are 4 per power of two from 512 bytes (a request is rounded up
   by at most 25%), so any block of a class fits any request of it and the
   class of a block is known from the size the core frees it with.
   The backend queues all its work on the legacy default stream, so a block
   freed while a kernel still reads it is only handed to work queued after that
   kernel: stream order keeps reuse safe. (Per-stream pools come with streams.)
   When cudaMalloc fails, the cache goes back to CUDA and it is tried once more. */
#include "cuda_backend.h"
#include "size_class.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct {
    void **blocks;   /* a stack of free blocks of one class */
    int n, cap;
} free_list;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static free_list lists[ECU_NCLASSES];
static ember_cuda_memory_stats_t stats;

static bool push(free_list *l, void *p)
{
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 16;
        void **b = (void **)realloc(l->blocks, (size_t)cap * sizeof *b);
        if (!b) return false;
        l->blocks = b;
        l->cap = cap;
    }
    l->blocks[l->n++] = p;
    return true;
}

/* returns every cached block to CUDA; the lock is held */
static cudaError_t release_cached(void)
{
    cudaError_t first = cudaSuccess;
    for (int c = 0; c < ECU_NCLASSES; c++) {
        free_list *l = &lists[c];
        while (l->n > 0) {
            cudaError_t rc = cudaFree(l->blocks[--l->n]);
            if (first == cudaSuccess) first = rc;
            stats.bytes_cached -= (int64_t)ecu_class_bytes(c);
        }
    }
    return first;
}

static void *device_malloc(size_t bytes)
{
    void *p = NULL;
    if (cudaMalloc(&p, bytes) == cudaSuccess) return p;
    cudaGetLastError();
    release_cached();
    if (cudaMalloc(&p, bytes) == cudaSuccess) return p;
    cudaGetLastError();
    return NULL;
}

void *ecu_alloc(size_t nbytes)
{
    int c = ecu_size_class(nbytes);
    size_t bytes = ecu_class_bytes(c);
    void *p = NULL;
    pthread_mutex_lock(&lock);
    if (lists[c].n > 0) {
        p = lists[c].blocks[--lists[c].n];
        stats.bytes_cached -= (int64_t)bytes;
        stats.cache_hits++;
    } else if ((p = device_malloc(bytes))) {
        stats.device_allocs++;
    }
    if (p) {
        stats.bytes_in_use += (int64_t)bytes;
        if (stats.bytes_in_use > stats.peak_bytes) stats.peak_bytes = stats.bytes_in_use;
    }
    pthread_mutex_unlock(&lock);
    return p;
}

void ecu_free(void *p, size_t nbytes)
{
    if (!p) return;
    int c = ecu_size_class(nbytes);
    size_t bytes = ecu_class_bytes(c);
    pthread_mutex_lock(&lock);
    stats.bytes_in_use -= (int64_t)bytes;
    if (push(&lists[c], p)) stats.bytes_cached += (int64_t)bytes;
    else cudaFree(p);   /* no room to remember it: give it back */
    pthread_mutex_unlock(&lock);
}

int ecu_memory_stats(ember_cuda_memory_stats_t *out)
{
    pthread_mutex_lock(&lock);
    *out = stats;
    pthread_mutex_unlock(&lock);
    return EMBER_OK;
}

int ecu_empty_cache(void)
{
    pthread_mutex_lock(&lock);
    cudaError_t rc = release_cached();
    pthread_mutex_unlock(&lock);
    return ecu_check(rc, "empty_cache");
}

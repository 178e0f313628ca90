/* parallel.c: a small thread pool for kernels on large tensors. Workers sleep
   on a condition variable between jobs (no spinning, so they do not fight
   OpenBLAS's own pool); the calling thread takes chunks too. Work is split into
   contiguous ranges, so results never depend on the number of threads.
   EMBER_NUM_THREADS sets the size (default: the number of online CPUs). */
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#define MAX_THREADS 64

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static pthread_t workers[MAX_THREADS];
static int n_workers = -1;     /* -1: not started */
static int n_threads = 1;      /* workers + the caller */
static uint64_t generation;
static int busy;               /* workers still on the current job */
static int in_parallel;

static struct {
    ember__range_fn fn;
    void *ctx;
    int64_t n, chunk;
    atomic_llong next;
} job;

static void run_chunks(void)
{
    for (;;) {
        int64_t b = atomic_fetch_add(&job.next, job.chunk);
        if (b >= job.n) return;
        int64_t e = b + job.chunk < job.n ? b + job.chunk : job.n;
        job.fn(job.ctx, b, e);
    }
}

static void *worker_main(void *arg)
{
    EMBER_UNUSED(arg);
    uint64_t seen = 0;
    pthread_mutex_lock(&mu);
    for (;;) {
        while (generation == seen) pthread_cond_wait(&wake, &mu);
        seen = generation;
        pthread_mutex_unlock(&mu);
        run_chunks();
        pthread_mutex_lock(&mu);
        if (--busy == 0) pthread_cond_signal(&done_cv);
    }
    return NULL;
}

static void start_pool(int want)
{
    if (want < 1) want = 1;
    if (want > MAX_THREADS) want = MAX_THREADS;
    n_workers = 0;
    for (int i = 0; i < want - 1; i++) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 1 << 20);
        if (pthread_create(&workers[n_workers], &attr, worker_main, NULL) == 0) {
            pthread_detach(workers[n_workers]);
            n_workers++;
        }
        pthread_attr_destroy(&attr);
    }
    n_threads = n_workers + 1;
}

static void ensure_pool(void)
{
    if (n_workers >= 0) return;
    const char *env = getenv("EMBER_NUM_THREADS");
    long want = env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    start_pool(want > 0 ? (int)want : 1);
}

int ember_num_threads(void)
{
    ensure_pool();
    return n_threads;
}

/* Shrinking keeps the sleeping workers but stops handing them work. */
void ember_set_num_threads(int n)
{
    ensure_pool();
    if (n < 1) n = 1;
    if (n > n_workers + 1) n = n_workers + 1;
    n_threads = n;
}

void ember__parallel_for(int64_t n, int64_t grain, ember__range_fn fn, void *ctx)
{
    if (n <= 0) return;
    ensure_pool();
    if (grain < 1) grain = 1;
    if (n_threads <= 1 || n < 2 * grain || in_parallel) {
        fn(ctx, 0, n);
        return;
    }
    int use = n_threads;
    if (n / grain < use) use = (int)(n / grain);
    /* a few chunks per thread balance uneven cores without much overhead */
    int64_t chunk = (n + (int64_t)use * 4 - 1) / ((int64_t)use * 4);
    if (chunk < grain) chunk = grain;
    in_parallel = 1;
    pthread_mutex_lock(&mu);
    job.fn = fn;
    job.ctx = ctx;
    job.n = n;
    job.chunk = chunk;
    atomic_store(&job.next, 0);
    busy = n_workers;
    generation++;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&mu);
    run_chunks();
    pthread_mutex_lock(&mu);
    while (busy > 0) pthread_cond_wait(&done_cv, &mu);
    pthread_mutex_unlock(&mu);
    in_parallel = 0;
}

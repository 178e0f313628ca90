/* parallel.c: the thread pool for kernels on large tensors. The calling
   thread takes chunks too, and work is split into contiguous ranges, so
   results never depend on the number of threads. EMBER_NUM_THREADS sets the
   size (default: the number of online CPUs).

   Where libember runs oneDNN on OpenMP (EMBER_OMP_POOL), the pool is
   libgomp's team: ember's kernels and oneDNN's products and convolutions
   then share one set of workers, which stay awake for a short spin after a
   job (lua/ember/init.lua bounds it with GOMP_SPINCOUNT), so the next op of a
   step finds them running. Two pools of sleeping workers cost a wake-up per
   op instead, and on a VM a wake-up is an interrupt between CPUs: 60-70 us,
   more than a 128x256x128 product takes (docs/nn.md, "Threads").

   Otherwise, and in a forked child (libgomp's team does not survive fork),
   the pool is ember's own: workers sleep on a condition variable between
   jobs. They are joined when libember is unloaded or the process exits, so
   no thread is left running code that has been unmapped; a forked child
   starts a pool of its own when it first needs one. */
#include "internal.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>
#ifdef EMBER_OMP_POOL
#include <omp.h>
#endif

#define MAX_THREADS 64

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wake = PTHREAD_COND_INITIALIZER, done_cv = PTHREAD_COND_INITIALIZER;
static pthread_t workers[MAX_THREADS];
static int n_workers = -1;     /* ember's own workers; -1: not started */
static int max_threads = 1;    /* the pool's size: workers (its own or the team's) + the caller */
static int n_threads = 1;      /* how many of them take jobs (ember_set_num_threads) */
static uint64_t generation;
static int quitting;           /* set by stop_pool, under mu */
static EMBER_TLS int in_parallel;

/* One parallel_for call. It lives on the caller's stack; workers join it
   only while it is `current` (under mu), so a worker that wakes late never
   touches a job that has already returned. */
typedef struct job {
    ember__range_fn fn;
    void *ctx;
    int64_t n, chunk;
    atomic_llong next;
    int seats;    /* workers that may still join */
    int active;   /* workers inside run_chunks */
} job_t;
static job_t *current;   /* guarded by mu */
/* Host threads may make their first call at the same moment: one of them
   starts the pool, the others wait for it. */
static pthread_mutex_t start_mu = PTHREAD_MUTEX_INITIALIZER;
static atomic_int pool_ready;

static void run_chunks(job_t *j)
{
    for (;;) {
        int64_t b = atomic_fetch_add(&j->next, j->chunk);
        if (b >= j->n) return;
        int64_t e = b + j->chunk < j->n ? b + j->chunk : j->n;
        j->fn(j->ctx, b, e);
    }
}

static void *worker_main(void *arg)
{
    EMBER_UNUSED(arg);
    uint64_t seen = 0;
    in_parallel = 1;   /* kernels a worker runs never fan out again */
    pthread_mutex_lock(&mu);
    for (;;) {
        while (generation == seen && !quitting) pthread_cond_wait(&wake, &mu);
        if (quitting) break;
        seen = generation;
        job_t *j = current;
        if (!j || j->seats == 0) continue;
        j->seats--;
        j->active++;
        pthread_mutex_unlock(&mu);
        run_chunks(j);
        pthread_mutex_lock(&mu);
        if (--j->active == 0) pthread_cond_broadcast(&done_cv);
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

/* dlclose (a Lua state closing its ffi.load) or exit: every job has returned
   by then, so the workers are all asleep or about to be. */
__attribute__((destructor)) static void stop_pool(void)
{
    if (n_workers <= 0) return;
    pthread_mutex_lock(&mu);
    quitting = 1;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&mu);
    for (int i = 0; i < n_workers; i++) pthread_join(workers[i], NULL);
    n_workers = -1;
    quitting = 0;
}

/* The OpenMP team serves jobs unless this process is a forked child of one
   that may have started it (and never in builds without OpenMP). */
static int forked_child;
#ifdef EMBER_OMP_POOL
static atomic_flag omp_busy = ATOMIC_FLAG_INIT;   /* a host thread's job holds the team */
static bool omp_pool(void) { return !forked_child; }
#else
static bool omp_pool(void) { return false; }
#endif

/* A child of fork has only the thread that forked: forget the parent's pool. */
static void forget_pool_in_child(void)
{
    forked_child = 1;
    pthread_mutex_init(&mu, NULL);
    pthread_mutex_init(&start_mu, NULL);
    pthread_cond_init(&wake, NULL);
    pthread_cond_init(&done_cv, NULL);
    current = NULL;
    n_workers = -1;
    n_threads = 1;
    in_parallel = 0;
}

static void start_pool(int want)
{
    if (want < 1) want = 1;
    if (want > MAX_THREADS) want = MAX_THREADS;
    static int atfork_done;
    if (!atfork_done) {
        pthread_atfork(NULL, NULL, forget_pool_in_child);
        atfork_done = 1;
    }
    n_workers = 0;
    if (omp_pool()) {   /* libgomp starts its team's threads on the first job */
        max_threads = n_threads = want;
        return;
    }
    for (int i = 0; i < want - 1; i++) {
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setstacksize(&attr, 1 << 20);
        if (pthread_create(&workers[n_workers], &attr, worker_main, NULL) == 0) n_workers++;
        pthread_attr_destroy(&attr);
    }
    max_threads = n_threads = n_workers + 1;
}

static void start_default_pool(void)
{
    const char *env = getenv("EMBER_NUM_THREADS");
    long want = env ? strtol(env, NULL, 10) : sysconf(_SC_NPROCESSORS_ONLN);
    start_pool(want > 0 ? (int)want : 1);
}

static void ensure_pool(void)
{
    if (atomic_load_explicit(&pool_ready, memory_order_acquire) && n_workers >= 0) return;
    pthread_mutex_lock(&start_mu);
    if (n_workers < 0) start_default_pool();
    atomic_store_explicit(&pool_ready, 1, memory_order_release);
    pthread_mutex_unlock(&start_mu);
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
    if (n > max_threads) n = max_threads;
    n_threads = n;
    ember__set_blas_threads(n);
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
    job_t j = {fn, ctx, n, chunk, 0, use - 1, 0};
#ifdef EMBER_OMP_POOL
    if (omp_pool()) {
        if (atomic_flag_test_and_set(&omp_busy)) {   /* another host thread's job holds the team */
            fn(ctx, 0, n);
            return;
        }
#pragma omp parallel num_threads(use)
        {
            int outer = in_parallel;
            in_parallel = 1;
            run_chunks(&j);
            in_parallel = outer;
        }
        atomic_flag_clear(&omp_busy);
        return;
    }
#endif
    pthread_mutex_lock(&mu);
    if (current) {   /* another thread's job holds the pool: run this one inline */
        pthread_mutex_unlock(&mu);
        fn(ctx, 0, n);
        return;
    }
    current = &j;
    generation++;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&mu);
    in_parallel = 1;
    run_chunks(&j);
    in_parallel = 0;
    /* every chunk is claimed: close the job to late wakers, then wait only
       for the workers that joined and are still finishing a chunk */
    pthread_mutex_lock(&mu);
    current = NULL;
    while (j.active > 0) pthread_cond_wait(&done_cv, &mu);
    pthread_mutex_unlock(&mu);
}

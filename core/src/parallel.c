/* parallel.c: the thread pool for kernels on large tensors. The calling
   thread takes chunks too, and work is split into contiguous ranges whose
   results never depend on how many threads take them: a kernel that sums
   over pieces fixes the pieces by the shape (docs/frame_loop.md, "Threads",
   lists how each does). EMBER_NUM_THREADS fixes the count; by default it
   follows the thread policy below, up to the CPUs the process may use.

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
   starts a pool of its own when it first needs one.

   How many threads a job takes is the thread policy's (below, and
   docs/frame_loop.md, "Threads"): by default ("auto") a job runs on the
   calling thread when it is small, or when the machine has no core to
   spare for a worker (a host's busy thread, another process), or when
   workers came late to the last jobs, unless running large jobs on the
   whole team anyway measured faster ("the measured choice", below);
   ember_set_num_threads(n) fixes it.
   Since no kernel's bits depend on the count, a run repeats to the bit
   under either, whatever the load. */
#include "internal.h"
#include "thread_policy.h"
#include "platform.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
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
static pthread_mutex_t policy_mu = PTHREAD_MUTEX_INITIALIZER;   /* the measured choice (thread policy) */

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
#ifdef _WIN32   /* ember.dll is pinned (platform_win32.c): this runs at exit only, after Windows ended the workers */
    if (n_workers > 0) return;
#endif
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
    pthread_mutex_init(&policy_mu, NULL);
    current = NULL;
    n_workers = -1;
    n_threads = 1;
    in_parallel = 0;
}

/* ------------------------------------------------------------------ thread policy */
/* Policy "auto" (the default; ember_set_num_threads_auto or
   EMBER_NUM_THREADS=auto turn it back on) decides per job, in
   ember__job_threads:
   - a job of fewer than SMALL_WORK multiply-adds or element operations runs
     on the calling thread: a few microseconds of work cannot pay for a
     fork and join (2-5 us with the team awake, 60-70 us to wake it);
   - a job takes no more threads than the machine has cores to spare: every
     SAMPLE_NS the calling thread reads the runnable threads of the whole
     machine (/proc/loadavg), takes away itself and the workers still
     spinning after ember's last job, and leaves ember the cores nobody
     else wants. A host's busy render thread or another process on a
     2-core machine leaves none: jobs run inline, the workers go to sleep
     after their spin and stay asleep, and nothing of ember spins against
     the host's threads;
   - a job whose workers came late shows the cores are not free right now,
     whatever the sample said (a VM's stolen time, a core given to another
     thread between samples): jobs then run inline for `backoff`, which
     doubles on each late job (from 4 ms up to 1 s) and halves on each job
     that paid. Late is: a worker that should have been spinning (the
     team's last job ended within its spin) arrived to find every chunk
     taken by the caller, or the caller waited at the join longer than the
     job took and more than 50 us (a worker preempted inside its chunk). A
     team woken from sleep is not late for arriving after its wake-up (60-70
     us on a VM): the job after a back-off always finds it asleep, and
     counting that would keep the back-off growing on a quiet machine.
   A sample counts as busy only when the one before it was too (the larger
   of the two is used), so a daemon's moment on a core does not stop the
   team for 10 ms; lateness answers sudden contention at once.
   These rules are one arm of the measured choice below; its other arm
   gives every large job the whole team.
   A sample also says whether the cores are crowded: the other runnable
   threads alone are as many as the online cores, so that the calling thread
   itself shares a core (a busy host thread beside a busy process on two
   cores). The last two samples saying so put off the measured choice's
   trials of the team (below).
   ember_set_num_threads(n) (or EMBER_NUM_THREADS=n) switches this off:
   every job large enough for its grain takes n threads. */
#define SMALL_WORK ((int64_t)1 << 18)
#define SAMPLE_NS 10000000LL          /* 10 ms between load samples */
#define BACKOFF_MIN_NS 4000000LL
#define BACKOFF_MAX_NS 1000000000LL
#define LATE_WAIT_NS 50000LL          /* a join wait shorter than this is never late */

static atomic_int policy_fixed;      /* ember_set_num_threads(n) or EMBER_NUM_THREADS */
static atomic_llong inline_until;   /* ns on CLOCK_MONOTONIC */
static atomic_llong backoff_ns = BACKOFF_MIN_NS;
static atomic_llong next_sample;
static atomic_int spare = MAX_THREADS;   /* cores the last two samples left ember (caller included) */
static atomic_int spare_prev = MAX_THREADS;   /* the last sample's own count */
static atomic_int crowded;           /* the last two samples found the cores taken without ember's workers */
static atomic_int crowded_prev;      /* the last sample's own finding */
static atomic_llong last_join_end;   /* when ember's last team job ended (oneDNN's too) */
static atomic_int last_team;         /* and how many threads it had */
static atomic_llong n_parallel, n_inline_small, n_inline_busy, n_late, n_samples;
static int online_cpus = 1;
static int crowd_rule = 1;          /* 0 under EMBER_POLICY_NO_CROWD (a bench's switch) */
static long long spin_ns;            /* how long libgomp's workers spin after a job; <0: for ever */

static void ensure_pool(void);

static long long now_ns(void) { return ember__now_ns(); }

/* libgomp's workers spin GOMP_SPINCOUNT rounds (300000 unset, none under
   OMP_WAIT_POLICY=passive, for ever under active) after a job; a round
   takes about 20 ns on the Xeons measured (30000 rounds: 0.6 ms). */
static void read_spin_policy(void)
{
    const char *wp = getenv("OMP_WAIT_POLICY"), *sc = getenv("GOMP_SPINCOUNT");
    long long rounds = 300000;
    if (wp && (!strcasecmp(wp, "passive"))) rounds = 0;
    if (wp && (!strcasecmp(wp, "active"))) rounds = -1;
    if (sc) {
        if (!strncasecmp(sc, "inf", 3)) rounds = -1;
        else {
            char *end;
            long long v = strtoll(sc, &end, 10);
            if (end != sc && v >= 0) {
                if (*end == 'k' || *end == 'K') v *= 1000;
                else if (*end == 'M') v *= 1000000;
                rounds = v;
            }
        }
    }
    spin_ns = rounds < 0 ? -1 : rounds * 30 + 500000;   /* a margin over 20 ns a round */
}

/* Runnable threads on the whole machine (the 4th field of /proc/loadavg,
   "R/T"), or -1 where it cannot be read. */
static int runnable_threads(void) { return ember__runnable_threads(); }

/* Cores ember may use now (the calling thread included), from a sample;
   *crowd: the other runnable threads were as many as the online cores, so
   that the calling thread itself shares a core (a busy host thread and
   another busy process on two cores). */
static int sample_spare(long long now, int *crowd)
{
    *crowd = 0;
    atomic_fetch_add_explicit(&n_samples, 1, memory_order_relaxed);
    int r = runnable_threads();
    if (r < 0) return MAX_THREADS;
    int ours = 1;   /* this thread */
    long long since = now - atomic_load_explicit(&last_join_end, memory_order_relaxed);
    int team = atomic_load_explicit(&last_team, memory_order_relaxed);
    if (team > 1 && omp_pool() && (spin_ns < 0 || since < spin_ns)) ours += team - 1;   /* still spinning */
    int others = r - ours;
    if (others < 0) others = 0;
    *crowd = others >= online_cpus;
    int s = online_cpus - others;
    return s < 1 ? 1 : s;
}

/* The threads for a large job under auto, by the sample and the back-off.
   The sample is taken during a back-off too, so that `crowded` stays
   current for the measured choice. */
static int sampled_threads(int n)
{
    long long now = now_ns();
    long long due = atomic_load_explicit(&next_sample, memory_order_relaxed);
    if (now >= due && atomic_compare_exchange_strong(&next_sample, &due, now + SAMPLE_NS)) {
        int crowd, s = sample_spare(now, &crowd), prev = atomic_exchange_explicit(&spare_prev, s, memory_order_relaxed);
        atomic_store_explicit(&spare, s > prev ? s : prev, memory_order_relaxed);
        int crowd_prev = atomic_exchange_explicit(&crowded_prev, crowd, memory_order_relaxed);
        atomic_store_explicit(&crowded, crowd && crowd_prev, memory_order_relaxed);
    }
    if (now < atomic_load_explicit(&inline_until, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&n_inline_busy, 1, memory_order_relaxed);
        return 1;
    }
    int s = atomic_load_explicit(&spare, memory_order_relaxed);
    if (s < n) n = s;
    if (n <= 1) {
        atomic_fetch_add_explicit(&n_inline_busy, 1, memory_order_relaxed);
        return 1;
    }
    atomic_fetch_add_explicit(&n_parallel, 1, memory_order_relaxed);
    return n;
}

/* ------------------------------------------------------------------ the measured choice */
/* The load sample guesses; it cannot see how the kernel's scheduler will
   share a core. Beside one busy process a second thread still gets half a
   core, and a medium step ran 15% faster on two threads than on the one
   the sample left; beside a busy host thread and a busy process, two
   threads made the same step 4.4 times slower. So auto measures which of
   two arms is faster and runs that one: "sampled" (the rules above) or
   "team" (every large job on all n threads, whatever the sample and the
   back-off say). Any thread count gives the same bits, so switching arms
   changes only the time.

   Large jobs run in phases: an exploit phase of the arm that won the last
   comparison (16 jobs to 512, longer where a trial of the other arm costs
   much), then a trial of the other arm (16 jobs).
   Each large job's time (the caller's, from the decision to the join) goes
   to its kind (a product's shape, else the kernel with its job's size and
   grain, or a convolution's multiply-adds). thread_policy.c holds the
   rules: a trial's jobs against the winner's recent times of the same
   kinds, by a ratio of totals in which a rare slow job (a worker preempted
   by a busy neighbour) counts no more than the usual slow one; an early
   end of a trial only when most of its jobs are far slower; a lost trial
   judged again on the winner's jobs right after it (the load may have
   risen); trials of the slower arm as frequent as a budget of 0.5% of the
   time allows, and about every 512 jobs unless that costs over 2%, since
   which arm is faster changes with the load; and a team exploit phase cut
   short when the machine gets busier.
   While the cores are crowded, a trial of the team is put off, 16 jobs at
   a time, until a sample finds a core free of others' threads (or for
   2048 large jobs at most, in case the threads that crowd them leave the
   cores to ember: a nice-19 process, short-lived ones): with three
   busy threads on two cores the calling thread either has a core to itself
   or shares one, and that placement, not the thread count, sets a step's
   time (one thread 12-14 ms a large step, or 23-30; two threads 26-28 in
   either); a trial's team jobs only make the scheduler place the threads
   again, and drew the caller a shared core at the next step in 8 of 12
   cases against 13% after steps without (docs/frame_loop.md,
   "Measured"). EMBER_POLICY_NO_CROWD in the environment (any value, read
   when the pool starts) turns this rule off, so that a bench can set the
   policy with it against the policy without it in one build. */
static ember__policy policy;         /* under policy_mu */
static atomic_int policy_arm;        /* policy.arm, read without the lock */
/* a job ember__job_threads sized, until ember__team_done ends it */
static EMBER_TLS struct {
    uint64_t key;
    int arm;
    long long t0;
} pending;

/* Threads for a large job under auto, and the arm that chose them. */
static int large_job_threads(int n, int *arm)
{
    *arm = atomic_load_explicit(&policy_arm, memory_order_relaxed);
    if (*arm == EMBER__ARM_SAMPLED) return sampled_threads(n);
    atomic_fetch_add_explicit(&n_parallel, 1, memory_order_relaxed);
    return n;
}

static void policy_done(uint64_t key, int arm, long long ns)
{
    pthread_mutex_lock(&policy_mu);
    if (ember__policy_record(&policy, key | 1, arm, (double)ns)) {
        /* a trial of the team while the cores are crowded only draws the
           scheduler's placement again: put it off (see above) */
        if (crowd_rule && policy.arm == EMBER__ARM_TEAM && policy.winner != EMBER__ARM_TEAM
            && atomic_load_explicit(&crowded, memory_order_relaxed))
            (void)ember__policy_postpone(&policy);
        atomic_store_explicit(&policy_arm, policy.arm, memory_order_relaxed);
    }
    pthread_mutex_unlock(&policy_mu);
}

int ember__job_threads(int64_t work)
{
    ensure_pool();
    pending.key = 0;
    int n = n_threads;
    if (n <= 1 || in_parallel) return 1;
    if (atomic_load_explicit(&policy_fixed, memory_order_relaxed)) return n;
    if (work > 0 && work < SMALL_WORK) {
        atomic_fetch_add_explicit(&n_inline_small, 1, memory_order_relaxed);
        return 1;
    }
    n = large_job_threads(n, &pending.arm);
    pending.key = (uint64_t)work * 0xD6E8FEB86659FD93ULL + 0x5851F42D4C957F2DULL;
    pending.t0 = now_ns();
    return n;
}

/* A job its caller runs on its own thread whatever the policy (a product
   too small to be cut into blocks, gemm.c): counted with the small jobs
   under auto, as ember__job_threads counts those it keeps inline. Inside a
   pool task (a product of conv2d's tasks) it is part of that job, as there,
   and not counted. */
void ember__job_inline(void)
{
    if (!in_parallel && !atomic_load_explicit(&policy_fixed, memory_order_relaxed))
        atomic_fetch_add_explicit(&n_inline_small, 1, memory_order_relaxed);
}

/* After a job on `team` threads: late (the workers did not pay) or not. */
static void job_ended(int team, bool late, long long end)
{
    atomic_store_explicit(&last_join_end, end, memory_order_relaxed);
    atomic_store_explicit(&last_team, team, memory_order_relaxed);
    if (atomic_load_explicit(&policy_fixed, memory_order_relaxed)) return;
    long long b = atomic_load_explicit(&backoff_ns, memory_order_relaxed);
    if (late) {
        atomic_fetch_add_explicit(&n_late, 1, memory_order_relaxed);
        atomic_store_explicit(&inline_until, end + b, memory_order_relaxed);
        atomic_store_explicit(&backoff_ns, b * 2 > BACKOFF_MAX_NS ? BACKOFF_MAX_NS : b * 2, memory_order_relaxed);
    } else if (b > BACKOFF_MIN_NS) {
        atomic_store_explicit(&backoff_ns, b / 2 < BACKOFF_MIN_NS ? BACKOFF_MIN_NS : b / 2, memory_order_relaxed);
    }
}

void ember__team_done(int threads)
{
    if (pending.key) {
        policy_done(pending.key, pending.arm, now_ns() - pending.t0);
        pending.key = 0;
    }
    if (threads <= 1) return;
    atomic_store_explicit(&last_join_end, now_ns(), memory_order_relaxed);
    atomic_store_explicit(&last_team, threads, memory_order_relaxed);
}

/* The CPUs this process may run on (its affinity mask), else the online ones. */
static int usable_cpus(void) { return ember__usable_cpus(); }

/* ------------------------------------------------------------------ the pool's size */
static void start_pool(int want)
{
    if (want < 1) want = 1;
    if (want > MAX_THREADS) want = MAX_THREADS;
    static int atfork_done;
    if (!atfork_done) {
#ifdef _WIN32   /* no fork */
        (void)forget_pool_in_child;
#else
        pthread_atfork(NULL, NULL, forget_pool_in_child);
#endif
        atfork_done = 1;
        ember__policy_init(&policy, EMBER__ARM_SAMPLED);
        online_cpus = ember__online_cpus();
        read_spin_policy();
        crowd_rule = !getenv("EMBER_POLICY_NO_CROWD");   /* set (any value): trials go on while crowded */
    }
    n_workers = 0;
    if (omp_pool()) {   /* libgomp starts its team's threads on the first job */
        max_threads = MAX_THREADS;
        n_threads = want;
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

/* EMBER_NUM_THREADS=n (a whole number >= 1) fixes the count (as
   ember_set_num_threads(n)); unset or "auto" (anything else: the Lua package
   refuses other values when it loads), the auto policy runs over a pool as
   large as the CPUs this process may use. */
static void start_default_pool(void)
{
    const char *env = getenv("EMBER_NUM_THREADS");
    char *end = NULL;
    long want = env ? strtol(env, &end, 10) : 0;
    bool fixed = env && end != env && *end == 0 && want > 0;
    atomic_store(&policy_fixed, fixed ? 1 : 0);
    start_pool(fixed ? (int)want : usable_cpus());
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

int ember_max_threads(void)
{
    ensure_pool();
    return max_threads;
}

/* Shrinking keeps the sleeping workers but stops handing them work. */
void ember_set_num_threads(int n)
{
    ensure_pool();
    if (n < 1) n = 1;
    if (n > max_threads) n = max_threads;
    n_threads = n;
    atomic_store(&policy_fixed, 1);
}

void ember_set_num_threads_auto(void)
{
    ensure_pool();
    atomic_store(&policy_fixed, 0);
    atomic_store(&inline_until, 0);
    atomic_store(&backoff_ns, BACKOFF_MIN_NS);
    atomic_store(&next_sample, 0);
    const char *env = getenv("EMBER_NUM_THREADS");
    char *end = NULL;
    long want = env ? strtol(env, &end, 10) : 0;
    int n = env && end != env && *end == 0 && want > 0 ? (int)want : usable_cpus();
    if (n > max_threads) n = max_threads;
    n_threads = n;
}

int ember_threads_auto(void)
{
    ensure_pool();
    return !atomic_load(&policy_fixed);
}

void ember_thread_stats(ember_thread_stats_t *out)
{
    ensure_pool();
    memset(out, 0, sizeof *out);
    out->auto_policy = !atomic_load(&policy_fixed);
    out->threads = n_threads;
    out->max_threads = max_threads;
    int s = atomic_load(&spare);
    out->spare = s > online_cpus ? online_cpus : s;
    out->online_cpus = online_cpus;
    out->jobs_parallel = atomic_load(&n_parallel);
    out->jobs_inline_small = atomic_load(&n_inline_small);
    out->jobs_inline_busy = atomic_load(&n_inline_busy);
    out->late_jobs = atomic_load(&n_late);
    out->load_samples = atomic_load(&n_samples);
    long long left = atomic_load(&inline_until) - now_ns();
    out->inline_seconds_left = left > 0 ? (double)left * 1e-9 : 0.0;
    out->backoff_seconds = (double)atomic_load(&backoff_ns) * 1e-9;
    pthread_mutex_lock(&policy_mu);
    out->winner = policy.winner;
    out->trial = policy.arm != policy.winner;
    for (int i = 0; i < EMBER__POLICY_KINDS; i++) out->kinds += policy.kinds[i].key != 0;
    out->jobs_sampled = policy.arm_jobs[EMBER__ARM_SAMPLED];
    out->jobs_team = policy.arm_jobs[EMBER__ARM_TEAM];
    out->trials = policy.trials;
    out->trials_won = policy.flips;
    out->trials_stopped = policy.aborts;
    out->team_cuts = policy.cuts;
    out->last_trial_ratio = policy.last_ratio;
    out->trials_postponed = policy.postponed;
    out->crowded = atomic_load(&crowded);
    pthread_mutex_unlock(&policy_mu);
}

/* ------------------------------------------------------------------ jobs */
void ember__parallel_for(int64_t n, int64_t grain, ember__range_fn fn, void *ctx)
{
    ember__parallel_for_kind(n, grain, fn, ctx, 0);
}

void ember__parallel_for_kind(int64_t n, int64_t grain, ember__range_fn fn, void *ctx, uint64_t kind)
{
    if (n <= 0) return;
    ensure_pool();
    if (grain < 1) grain = 1;
    if (n_threads <= 1 || n < 2 * grain || in_parallel) {
        fn(ctx, 0, n);
        return;
    }
    /* grain is the smallest piece worth a thread: the job is not small */
    int arm = -1, use = n_threads;
    if (!atomic_load_explicit(&policy_fixed, memory_order_relaxed)) use = large_job_threads(use, &arm);
    const uint64_t key = kind ? kind : (uint64_t)(uintptr_t)fn ^ ((uint64_t)n * 0x9E3779B97F4A7C15ULL) ^ ((uint64_t)grain << 40);
    long long t0 = now_ns();
    if (n / grain < use) use = (int)(n / grain);
    if (use <= 1) {
        fn(ctx, 0, n);
        if (arm >= 0) policy_done(key, arm, now_ns() - t0);
        return;
    }
    /* a few chunks per thread balance uneven cores without much overhead */
    int64_t chunk = (n + (int64_t)use * 4 - 1) / ((int64_t)use * 4);
    if (chunk < grain) chunk = grain;
    job_t j = {fn, ctx, n, chunk, 0, use - 1, 0};
    long long t_caller = 0;
#ifdef EMBER_OMP_POOL
    if (omp_pool()) {
        /* the team's workers are spinning: they should come at once */
        long long since_last = t0 - atomic_load_explicit(&last_join_end, memory_order_relaxed);
        bool warm = atomic_load_explicit(&last_team, memory_order_relaxed) > 1 && (spin_ns < 0 || since_last < spin_ns);
        if (atomic_flag_test_and_set(&omp_busy)) {   /* another host thread's job holds the team */
            fn(ctx, 0, n);
            if (arm >= 0) policy_done(key, arm, now_ns() - t0);
            return;
        }
        atomic_int idle_workers = 0;   /* workers that arrived to find every chunk taken */
#pragma omp parallel num_threads(use)
        {
            int outer = in_parallel;
            in_parallel = 1;
            bool caller = omp_get_thread_num() == 0;
            if (!caller && atomic_load_explicit(&j.next, memory_order_relaxed) >= n)
                atomic_fetch_add_explicit(&idle_workers, 1, memory_order_relaxed);
            run_chunks(&j);
            if (caller) t_caller = now_ns();
            in_parallel = outer;
        }
        atomic_flag_clear(&omp_busy);
        long long t1 = now_ns(), wait = t1 - t_caller;
        job_ended(use, (warm && atomic_load(&idle_workers) > 0) || (wait > LATE_WAIT_NS && wait > t_caller - t0), t1);
        if (arm >= 0) policy_done(key, arm, t1 - t0);
        return;
    }
#endif
    pthread_mutex_lock(&mu);
    if (current) {   /* another thread's job holds the pool: run this one inline */
        pthread_mutex_unlock(&mu);
        fn(ctx, 0, n);
        if (arm >= 0) policy_done(key, arm, now_ns() - t0);
        return;
    }
    current = &j;
    generation++;
    pthread_cond_broadcast(&wake);
    pthread_mutex_unlock(&mu);
    in_parallel = 1;
    run_chunks(&j);
    in_parallel = 0;
    t_caller = now_ns();
    /* every chunk is claimed: close the job to late wakers, then wait only
       for the workers that joined and are still finishing a chunk */
    pthread_mutex_lock(&mu);
    current = NULL;
    while (j.active > 0) pthread_cond_wait(&done_cv, &mu);
    pthread_mutex_unlock(&mu);
    /* ember's own workers sleep between jobs: only a wait at the join is late */
    long long t1 = now_ns(), wait = t1 - t_caller;
    job_ended(1, wait > LATE_WAIT_NS && wait > t_caller - t0, t1);
    if (arm >= 0) policy_done(key, arm, t1 - t0);
}

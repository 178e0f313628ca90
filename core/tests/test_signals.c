/* test_signals.c: signals handled on a thread while it is inside ember's
   products leave the heap and the results sound (docs/hardening.md,
   "Profilers and other signals"). oneDNN's generated f32 GEMM kernels
   (before oneDNN 3.11) point rsp into a heap block while they run, so a
   signal frame pushed then lands in the heap: with a profiler's SIGPROF
   (LuaJIT's -jp) a MobileNetV2 training aborted in about half the runs with
   "corrupted size vs. prev_size while consolidating". Here a second thread
   sends SIGUSR1 to the main thread every 20 us while it runs float32
   products of the shapes MobileNetV2's training gives oneDNN (its linear
   layers' and convolutions' GEMMs), and a
   SIGPROF timer runs too; each handler writes 8 KB of its own stack. Every
   product must equal the one made with no signal coming, and the process
   must not abort. Before the fix it aborted in each of 5 runs. */
#define _POSIX_C_SOURCE 200809L
#include "ember.h"
#include <stdio.h>

#ifdef _WIN32
int main(void)
{
    puts("test_signals: skipped: no POSIX signals here");
    return 77;   /* ctest's SKIP_RETURN_CODE: reported as skipped, not passed */
}
#else
#include "check.h"
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t handled;
static void on_signal(int sig)
{
    volatile char buf[8192];   /* a handler with a large frame, as a profiler's unwinder */
    memset((char *)buf, 0xA5, sizeof buf);
    (void)sig;
    handled = handled + 1;
}

static pthread_t main_thread;
static volatile int stop;
static void *sender(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 20000};
    while (!stop) {
        pthread_kill(main_thread, SIGUSR1);
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void)
{
    ember_set_num_threads(1);   /* the products on this thread, where the signals go */
    /* {M, K, N}: (M, K) times (K, N) */
    static const int shapes[][3] = {{32, 160, 240}, {32, 960, 80}, {32, 1280, 160}, {32, 320, 240}, {240, 32, 160}};
    enum { NS = sizeof shapes / sizeof *shapes };
    ember_tensor *a[NS], *b[NS];
    float *want[NS];
    for (int s = 0; s < NS; s++) {
        const int M = shapes[s][0], K = shapes[s][1], N = shapes[s][2];
        const int64_t sa[2] = {M, K}, sb[2] = {K, N};
        float *da = malloc(sizeof(float) * M * K), *db = malloc(sizeof(float) * K * N);
        for (int64_t i = 0; i < (int64_t)M * K; i++) da[i] = (float)((i * 7919) % 13) - 6;
        for (int64_t i = 0; i < (int64_t)K * N; i++) db[i] = (float)((i * 104729) % 11) - 5;
        a[s] = b[s] = NULL;
        CHECK(ember_from_data(da, EMBER_FLOAT32, 2, sa, EMBER_FLOAT32, EMBER_CPU, &a[s]) == EMBER_OK);
        CHECK(ember_from_data(db, EMBER_FLOAT32, 2, sb, EMBER_FLOAT32, EMBER_CPU, &b[s]) == EMBER_OK);
        free(da), free(db);
        ember_tensor *c = NULL;
        want[s] = malloc(sizeof(float) * M * N);
        CHECK(ember_matmul(a[s], b[s], &c) == EMBER_OK);
        CHECK(c && ember_copy_to_buffer(c, want[s], EMBER_FLOAT32) == EMBER_OK);
        ember_tensor_release(c);
    }
    if (failures) return 1;

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGPROF, &sa, NULL);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_PROF, &it, NULL);
    main_thread = pthread_self();
    pthread_t th;
    CHECK(pthread_create(&th, NULL, sender, NULL) == 0);

    long products = 0, wrong = 0;
    const double t0 = now();
    float *got = malloc(sizeof(float) * 240 * 240);
    while (now() - t0 < 3.0) {
        for (int s = 0; s < NS; s++) {
            ember_tensor *c = NULL;
            CHECK(ember_matmul(a[s], b[s], &c) == EMBER_OK);
            CHECK(c && ember_copy_to_buffer(c, got, EMBER_FLOAT32) == EMBER_OK);
            if (memcmp(got, want[s], sizeof(float) * shapes[s][0] * shapes[s][2]) != 0) wrong++;
            ember_tensor_release(c);
            products++;
        }
    }
    stop = 1;
    pthread_join(th, NULL);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
    printf("%ld products under %ld signals handled (dnnl matmul %s): %ld wrong\n", products, (long)handled,
           ember_dnnl_matmul_enabled() ? "on" : "off", wrong);
    CHECK(wrong == 0);
    CHECK(handled > 100);
    free(got);
    for (int s = 0; s < NS; s++) ember_tensor_release(a[s]), ember_tensor_release(b[s]), free(want[s]);
    return failures != 0;
}
#endif

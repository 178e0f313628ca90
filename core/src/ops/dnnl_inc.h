/* dnnl_inc.h: oneDNN's header where the build has it (EMBER_HAVE_DNNL), and
   DNNL_OMP where that oneDNN runs on OpenMP, whose team size conv_dnnl.c and
   matmul_dnnl.c set for each call. */
#ifndef EMBER_DNNL_INC_H
#define EMBER_DNNL_INC_H

#ifdef EMBER_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#if DNNL_CPU_THREADING_RUNTIME == DNNL_RUNTIME_OMP
#include <omp.h>
#define DNNL_OMP 1
#endif
#endif

#if defined(EMBER_HAVE_DNNL) && !defined(_WIN32)
#include <pthread.h>
#include <signal.h>
/* oneDNN's generated f32 GEMM kernels (jit_avx512_common_gemm_f32 and the
   AVX2 one, before oneDNN 3.11: oneDNN issue #4845, fixed by PR #4855) point
   rsp into a heap workspace while they run. A signal handled on the thread
   then (a profiler's SIGPROF, SIGINT, SIGALRM, ...) has its frame written by
   the kernel into that heap block: "corrupted size vs. prev_size" or
   "free(): invalid pointer" later. The calls into oneDNN that can reach those
   kernels hold the asynchronous signals of the calling thread; a signal
   sent meanwhile is delivered as the call returns (docs/hardening.md,
   "Profilers and other signals"). The faults a kernel itself raises
   (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP) and SIGABRT are left alone. */
static inline void ember__dnnl_signals_hold(sigset_t *old)
{
    sigset_t s;
    sigfillset(&s);
    sigdelset(&s, SIGSEGV), sigdelset(&s, SIGBUS), sigdelset(&s, SIGFPE);
    sigdelset(&s, SIGILL), sigdelset(&s, SIGTRAP), sigdelset(&s, SIGABRT);
    pthread_sigmask(SIG_BLOCK, &s, old);
}
static inline void ember__dnnl_signals_release(const sigset_t *old) { pthread_sigmask(SIG_SETMASK, old, NULL); }
#define EMBER_DNNL_SIGNALS_HELD(stmt)                                                          \
    do {                                                                                       \
        sigset_t ember_dnnl_old_sigs_;                                                         \
        ember__dnnl_signals_hold(&ember_dnnl_old_sigs_);                                       \
        stmt;                                                                                  \
        ember__dnnl_signals_release(&ember_dnnl_old_sigs_);                                    \
    } while (0)
#else
#define EMBER_DNNL_SIGNALS_HELD(stmt)                                                          \
    do {                                                                                       \
        stmt;                                                                                  \
    } while (0)
#endif

#endif

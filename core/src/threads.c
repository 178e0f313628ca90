/* threads.c: per-thread state is freed when its thread exits. The first time
   a thread creates state of its own (a cache of freed blocks, tensor headers,
   autograd keys), it registers a thread-exit handler that frees it all
   (platform.h: a pthread key's destructor; on Windows a fiber-local slot's
   callback, which runs for threads of any origin); a thread that never did
   costs nothing. */
#include "internal.h"
#include "platform.h"

static EMBER_TLS int registered;

static void on_thread_exit(void *arg)
{
    EMBER_UNUSED(arg);
    ember__free_thread_autograd();   /* first: it may release tensors into the pools */
    ember__free_thread_pools();
    ember__free_thread_caches();
    ember__flush_stats();
    registered = 0;
}

void ember__thread_uses_state(void)
{
    if (registered) return;
    registered = 1;
    ember__at_thread_exit(on_thread_exit);
}

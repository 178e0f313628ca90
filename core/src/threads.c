/* threads.c: per-thread state is freed when its thread exits. The first time
   a thread creates state of its own (a cache of freed blocks, tensor headers,
   autograd keys), it registers with a pthread key whose destructor frees it
   all; a thread that never did costs nothing. */
#include "internal.h"

#include <pthread.h>

static pthread_key_t exit_key;
static pthread_once_t exit_once = PTHREAD_ONCE_INIT;
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

static void make_key(void) { pthread_key_create(&exit_key, on_thread_exit); }

void ember__thread_uses_state(void)
{
    if (registered) return;
    registered = 1;
    pthread_once(&exit_once, make_key);
    pthread_setspecific(exit_key, (void *)1);
}

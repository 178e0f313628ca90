/* profile.c: the op profiler (ember_profile_*). While it is on, dispatch.c
   times each op's forward (the kernel, the device backend's launch for a
   GPU tensor) and adds its own time, less that of the ops it runs inside,
   to the op's account; backward's ops are ops too, so a recipe's time is
   split by op. Off, it costs dispatch one test of a global per op. */
#include "platform.h"
#include "profile.h"

#include <string.h>

int ember__profiling;

static int64_t op_ns[EMBER_OP_COUNT], op_calls[EMBER_OP_COUNT];
/* the time of the ops run inside the current one, on this thread */
static EMBER_TLS int64_t nested_ns;

static int64_t now_ns(void) { return ember__now_ns(); }

ember__profile_mark ember__profile_enter(void)
{
    ember__profile_mark m = {now_ns(), nested_ns};
    nested_ns = 0;
    return m;
}

void ember__profile_leave(int op, ember__profile_mark m)
{
    int64_t spent = now_ns() - m.start;
    __atomic_fetch_add(&op_ns[op], spent - nested_ns, __ATOMIC_RELAXED);
    __atomic_fetch_add(&op_calls[op], 1, __ATOMIC_RELAXED);
    nested_ns = m.outer_nested + spent;
}

void ember_profile_enable(int on) { __atomic_store_n(&ember__profiling, on != 0, __ATOMIC_RELAXED); }

void ember_profile_reset(void)
{
    for (int op = 0; op < EMBER_OP_COUNT; op++) {
        __atomic_store_n(&op_ns[op], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&op_calls[op], 0, __ATOMIC_RELAXED);
    }
}

int ember_profile_read(int n, double *seconds, int64_t *calls)
{
    for (int op = 0; op < n && op < EMBER_OP_COUNT; op++) {
        if (seconds) seconds[op] = (double)__atomic_load_n(&op_ns[op], __ATOMIC_RELAXED) * 1e-9;
        if (calls) calls[op] = __atomic_load_n(&op_calls[op], __ATOMIC_RELAXED);
    }
    return EMBER_OP_COUNT;
}

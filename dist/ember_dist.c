/* ember_dist: see ember_dist.h. */
#define _GNU_SOURCE
#include <mpi.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember_dist.h"
#include "last_error.h"
#define EDIST_API
#define EXIT_TAG 7771
#define EXIT_GRACE_S 2.0   /* how long a wait goes on after a peer said it exited */

static int g_init, g_finalized, g_owner;   /* g_owner: we called MPI_Init */
static int g_rank, g_size = 1, g_local_rank;
static MPI_Comm g_data = MPI_COMM_NULL;    /* collectives of the user and of buckets */
static MPI_Comm g_meta = MPI_COMM_NULL;    /* bucket-layout checks */
static MPI_Comm g_exit = MPI_COMM_NULL;    /* exit notices */
static MPI_Request g_exit_req = MPI_REQUEST_NULL;
static int g_exit_buf, g_exits_seen, g_first_exited = -1, g_broken;
static double g_first_exit_time;

static MPI_Request *g_reqs;
static int g_nreqs, g_cap, g_pending;

static int mpi_fail(const char *op, int rc)
{
    char s[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, s, &len) != MPI_SUCCESS) snprintf(s, sizeof s, "MPI error %d", rc);
    return fail("distributed.%s: MPI: %s", op, s);
}

EDIST_API const char *edist_last_error(void) { return g_err; }
EDIST_API int edist_initialized(void) { return g_init; }
EDIST_API int edist_rank(void) { return g_rank; }
EDIST_API int edist_size(void) { return g_size; }
EDIST_API int edist_local_rank(void) { return g_local_rank; }
EDIST_API int edist_pending(void) { return g_pending; }

/* Looks for exit notices of other ranks (also progresses MPI). */
static void poll_exits(void)
{
    if (g_exit_req == MPI_REQUEST_NULL) return;
    int done = 0;
    MPI_Test(&g_exit_req, &done, MPI_STATUS_IGNORE);
    if (!done) return;
    if (g_first_exited < 0) {
        g_first_exited = g_exit_buf;
        g_first_exit_time = MPI_Wtime();
    }
    g_exits_seen++;
    if (g_exits_seen < g_size - 1)
        MPI_Irecv(&g_exit_buf, 1, MPI_INT, MPI_ANY_SOURCE, EXIT_TAG, g_exit, &g_exit_req);
}

static void sleep_us(long us)
{
    struct timespec ts = { us / 1000000, (us % 1000000) * 1000 };
    nanosleep(&ts, NULL);
}

static void at_exit(void)
{
    if (!g_init || g_finalized) return;
    g_finalized = 1;
    if (!g_owner) return;
    if (g_size > 1) {
        if (g_broken || g_pending > 0) {
            fprintf(stderr, "ember.distributed: rank %d exits with %s; aborting the job\n", g_rank,
                    g_broken ? "a failed collective behind it" : "collectives still in flight");
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_Request *sends = calloc((size_t)g_size, sizeof *sends);
        int me = g_rank;
        for (int p = 0; p < g_size; p++) {
            if (sends) sends[p] = MPI_REQUEST_NULL;
            if (p != g_rank && sends) MPI_Isend(&me, 1, MPI_INT, p, EXIT_TAG, g_exit, &sends[p]);
        }
        /* every rank's notice, that is: every rank is done with MPI */
        while (g_exits_seen < g_size - 1) {
            poll_exits();
            if (g_exits_seen < g_size - 1) sleep_us(200);
        }
        if (sends) {
            MPI_Waitall(g_size, sends, MPI_STATUSES_IGNORE);
            free(sends);
        }
    }
    MPI_Finalize();
}

EDIST_API int edist_init(void)
{
    if (g_init) return 0;
    int flag = 0;
    MPI_Initialized(&flag);
    if (!flag) {
        int rc = MPI_Init(NULL, NULL);
        if (rc != MPI_SUCCESS) return fail("distributed.init: MPI_Init failed (%d)", rc);
        g_owner = 1;
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_size);
    MPI_Comm_dup(MPI_COMM_WORLD, &g_data);
    MPI_Comm_dup(MPI_COMM_WORLD, &g_meta);
    MPI_Comm_dup(MPI_COMM_WORLD, &g_exit);
    MPI_Comm local;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, g_rank, MPI_INFO_NULL, &local) == MPI_SUCCESS) {
        MPI_Comm_rank(local, &g_local_rank);
        MPI_Comm_free(&local);
    }
    if (g_size > 1) MPI_Irecv(&g_exit_buf, 1, MPI_INT, MPI_ANY_SOURCE, EXIT_TAG, g_exit, &g_exit_req);
    g_init = 1;
    atexit(at_exit);
    return 0;
}

static int datatype(int dtype, MPI_Datatype *out, const char *op)
{
    switch (dtype) {
    case 0: *out = MPI_FLOAT; return 0;
    case 1: *out = MPI_DOUBLE; return 0;
    case 4: *out = MPI_INT32_T; return 0;
    case 5: *out = MPI_INT64_T; return 0;
    case 6: case 7: *out = MPI_UINT8_T; return 0;
    default: return fail("distributed.%s: MPI cannot carry dtype code %d", op, dtype);
    }
}

static int check_ready(const char *op, int64_t count)
{
    if (!g_init) return fail("distributed.%s: call ember.distributed.init() first", op);
    if (g_broken) return fail("distributed.%s: an earlier collective failed (rank %d exited); this rank cannot go on", op, g_first_exited);
    if (count < 0 || count > INT_MAX)
        return fail("distributed.%s: %lld elements; one call carries at most %d", op, (long long)count, INT_MAX);
    return 0;
}

static int new_handle(int *handle, MPI_Request **slot)
{
    for (int i = 0; i < g_nreqs; i++) {
        if (g_reqs[i] == MPI_REQUEST_NULL) { *handle = i; *slot = &g_reqs[i]; return 0; }
    }
    if (g_nreqs == g_cap) {
        int cap = g_cap ? 2 * g_cap : 64;
        MPI_Request *r = realloc(g_reqs, (size_t)cap * sizeof *r);
        if (!r) return fail("distributed: out of memory for request handles");
        g_reqs = r;
        g_cap = cap;
    }
    *handle = g_nreqs;
    g_reqs[g_nreqs] = MPI_REQUEST_NULL;
    *slot = &g_reqs[g_nreqs++];
    return 0;
}

static int started(int rc, const char *op, int handle)
{
    if (rc != MPI_SUCCESS) {
        g_reqs[handle] = MPI_REQUEST_NULL;
        return mpi_fail(op, rc);
    }
    g_pending++;
    return 0;
}

EDIST_API int edist_iallreduce(void *buf, int64_t count, int dtype, int op, int *handle)
{
    if (check_ready("all_reduce", count) < 0) return -1;
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    if (datatype(dtype, &dt, "all_reduce") < 0) return -1;
    MPI_Op mop = op == EDIST_SUM ? MPI_SUM : op == EDIST_MAX ? MPI_MAX : op == EDIST_MIN ? MPI_MIN : MPI_OP_NULL;
    if (mop == MPI_OP_NULL) return fail("distributed.all_reduce: unknown op code %d", op);
    MPI_Request *r;
    if (new_handle(handle, &r) < 0) return -1;
    return started(MPI_Iallreduce(MPI_IN_PLACE, buf, (int)count, dt, mop, g_data, r), "all_reduce", *handle);
}

/* Layout checks of the bucketed all-reduce: an element-wise max of int64s on a
   communicator of their own (so a mismatch never meets the data collectives). */
EDIST_API int edist_imeta_max(int64_t *buf, int n, int *handle)
{
    if (check_ready("make_allreduce_cb", n) < 0) return -1;
    MPI_Request *r;
    if (new_handle(handle, &r) < 0) return -1;
    return started(MPI_Iallreduce(MPI_IN_PLACE, buf, n, MPI_INT64_T, MPI_MAX, g_meta, r), "make_allreduce_cb", *handle);
}

EDIST_API int edist_ibroadcast(void *buf, int64_t count, int dtype, int root, int *handle)
{
    if (check_ready("broadcast", count) < 0) return -1;
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    if (datatype(dtype, &dt, "broadcast") < 0) return -1;
    if (root < 0 || root >= g_size) return fail("distributed.broadcast: root %d is not a rank of a world of %d", root, g_size);
    MPI_Request *r;
    if (new_handle(handle, &r) < 0) return -1;
    return started(MPI_Ibcast(buf, (int)count, dt, root, g_data, r), "broadcast", *handle);
}

EDIST_API int edist_iallgather(const void *send, void *recv, int64_t count, int dtype, int *handle)
{
    if (check_ready("all_gather", count) < 0) return -1;
    MPI_Datatype dt = MPI_DATATYPE_NULL;
    if (datatype(dtype, &dt, "all_gather") < 0) return -1;
    MPI_Request *r;
    if (new_handle(handle, &r) < 0) return -1;
    return started(MPI_Iallgather(send, (int)count, dt, recv, (int)count, dt, g_data, r), "all_gather", *handle);
}

static int valid(int handle, const char *op)
{
    if (handle < 0 || handle >= g_nreqs) return fail("distributed.%s: no request %d", op, handle);
    return 0;
}

EDIST_API int edist_test(int handle, int *done)
{
    *done = 0;
    if (valid(handle, "wait") < 0) return -1;
    if (g_reqs[handle] == MPI_REQUEST_NULL) { *done = 1; return 0; }
    int rc = MPI_Test(&g_reqs[handle], done, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) return mpi_fail("wait", rc);
    if (*done) { g_reqs[handle] = MPI_REQUEST_NULL; g_pending--; }
    poll_exits();
    return 0;
}

EDIST_API int edist_peer_exited(void)
{
    poll_exits();
    if (g_first_exited < 0 || MPI_Wtime() - g_first_exit_time <= EXIT_GRACE_S) return -1;
    g_broken = 1;
    return g_first_exited;
}

EDIST_API int edist_wait(int handle, const char *opname)
{
    const char *op = opname ? opname : "wait";
    if (valid(handle, op) < 0) return -1;
    for (unsigned spin = 0;; spin++) {
        int done = 0;
        if (g_reqs[handle] == MPI_REQUEST_NULL) return 0;
        int rc = MPI_Test(&g_reqs[handle], &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) { g_broken = 1; return mpi_fail(op, rc); }
        if (done) { g_reqs[handle] = MPI_REQUEST_NULL; g_pending--; return 0; }
        if (edist_peer_exited() >= 0)
            return fail("distributed.%s: rank %d exited while rank %d waited in %s (the ranks did not make the same collective calls, or rank %d failed)",
                        op, g_first_exited, g_rank, op, g_first_exited);
        if (spin > 1000) sched_yield();
    }
}

EDIST_API int edist_barrier(void)
{
    if (check_ready("barrier", 0) < 0) return -1;
    int h;
    MPI_Request *r;
    if (new_handle(&h, &r) < 0) return -1;
    if (started(MPI_Ibarrier(g_data, r), "barrier", h) < 0) return -1;
    return edist_wait(h, "barrier");
}

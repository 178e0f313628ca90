/* ember_nccl: see ember_nccl.h. */
#define _GNU_SOURCE
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ember.h"
#include "ember_nccl.h"
#include "last_error.h"

_Static_assert(ENCCL_ID_BYTES == NCCL_UNIQUE_ID_BYTES, "ncclUniqueId size");

/* the stream of ember's CUDA backend (cuda/src: every launch uses stream 0) */
#define STREAM cudaStreamLegacy

typedef struct {
    cudaEvent_t event;
    int busy;   /* a collective is in flight before the event */
} slot;

static ncclComm_t g_comm;
static int g_device = -1, g_broken, g_exit_registered;
static slot *g_slots;
static int g_nslots, g_pending;

static int nccl_fail(const char *op, ncclResult_t rc)
{
    const char *detail = ncclGetLastError(g_comm);
    if (detail && *detail) return fail("distributed.%s: NCCL: %s (%s)", op, ncclGetErrorString(rc), detail);
    return fail("distributed.%s: NCCL: %s", op, ncclGetErrorString(rc));
}

static int cuda_fail(const char *op, const char *call, cudaError_t rc)
{
    return fail("distributed.%s: %s: %s", op, call, cudaGetErrorString(rc));
}

const char *enccl_last_error(void) { return g_err; }
int enccl_initialized(void) { return g_comm != NULL; }
int enccl_pending(void) { return g_pending; }

int enccl_version(void)
{
    int v = 0;
    return ncclGetVersion(&v) == ncclSuccess ? v : -1;
}

static int datatype(int dtype, ncclDataType_t *out)
{
    switch (dtype) {
    case EMBER_FLOAT32: *out = ncclFloat32; return 0;
    case EMBER_FLOAT64: *out = ncclFloat64; return 0;
    case EMBER_FLOAT16: *out = ncclFloat16; return 0;
    case EMBER_BFLOAT16: *out = ncclBfloat16; return 0;
    case EMBER_INT32: *out = ncclInt32; return 0;
    case EMBER_INT64: *out = ncclInt64; return 0;
    default: return -1;
    }
}

int enccl_check_dtype(int dtype, const char *op)
{
    ncclDataType_t dt = ncclFloat32;
    if (datatype(dtype, &dt) == 0) return 0;
    return fail("distributed.%s: NCCL does not carry %s tensors here (float32, float64, float16, bfloat16, "
                "int32 and int64 only); convert with :to(\"float32\") or :to(\"int32\") first",
                op, ember_dtype_name(dtype));
}

/* The GPU of the rank with this local rank: one per process, in local rank
   order among the visible GPUs. It must be the one ember's CUDA backend uses
   (CUDA's current device; the backend drives that one only). */
int enccl_device(int local_rank, int *device)
{
    int n = 0, cur = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess) return cuda_fail("nccl", "cudaGetDeviceCount", rc);
    if (n == 0) return fail("distributed.nccl: no CUDA device is visible");
    rc = cudaGetDevice(&cur);
    if (rc != cudaSuccess) return cuda_fail("nccl", "cudaGetDevice", rc);
    *device = local_rank % n;
    if (*device != cur)
        return fail("distributed.nccl: local rank %d's GPU is device %d of the %d visible, but ember's CUDA "
                    "backend runs on device %d; start each rank with one GPU visible "
                    "(CUDA_VISIBLE_DEVICES=$OMPI_COMM_WORLD_LOCAL_RANK, docs/distributed.md)",
                    local_rank, *device, n, cur);
    return 0;
}

int enccl_unique_id(uint8_t *id)
{
    ncclUniqueId uid;
    ncclResult_t rc = ncclGetUniqueId(&uid);
    if (rc != ncclSuccess) return nccl_fail("nccl", rc);
    memcpy(id, uid.internal, ENCCL_ID_BYTES);
    return 0;
}

/* At exit: a communicator with nothing in flight is destroyed; after a
   failure, or with collectives still in flight, it is aborted, which never
   waits for the other ranks. */
static void at_exit(void)
{
    if (!g_comm) return;
    if (g_broken || g_pending > 0) ncclCommAbort(g_comm);
    else ncclCommDestroy(g_comm);
    g_comm = NULL;
}

int enccl_init(const uint8_t *id, int rank, int size, int device)
{
    if (g_comm) return 0;
    cudaError_t crc = cudaSetDevice(device);
    if (crc != cudaSuccess) return cuda_fail("nccl", "cudaSetDevice", crc);
    ncclUniqueId uid;
    memcpy(uid.internal, id, ENCCL_ID_BYTES);
    ncclComm_t comm = NULL;
    ncclResult_t rc = ncclCommInitRank(&comm, size, uid, rank);
    if (rc != ncclSuccess) return nccl_fail("nccl", rc);
    g_comm = comm;
    g_device = device;
    if (!g_exit_registered) {
        g_exit_registered = 1;
        atexit(at_exit);
    }
    return 0;
}

void enccl_abort(void)
{
    if (g_comm) ncclCommAbort(g_comm);
    g_comm = NULL;
    g_broken = 1;
    for (int i = 0; i < g_nslots; i++) g_slots[i].busy = 0;
    g_pending = 0;
}

/* The buffer must be memory of the communicator's device (an empty one
   carries nothing and is not looked at: its collective is not made). */
static int check_buffer(const char *op, const void *p, int64_t count)
{
    if (count == 0) return 0;
    struct cudaPointerAttributes a;
    cudaError_t rc = cudaPointerGetAttributes(&a, p);
    if (rc != cudaSuccess) return cuda_fail(op, "cudaPointerGetAttributes", rc);
    if (a.type != cudaMemoryTypeDevice || a.device != g_device)
        return fail("distributed.%s: the tensor is not in the memory of GPU %d, this rank's NCCL device", op, g_device);
    return 0;
}

static int check_ready(const char *op, int64_t count, int dtype, ncclDataType_t *dt)
{
    if (g_broken) return fail("distributed.%s: the NCCL communicator was aborted after a failure; this rank cannot go on", op);
    if (!g_comm) return fail("distributed.%s: NCCL is not initialised (enccl_init)", op);
    if (count < 0) return fail("distributed.%s: %lld elements", op, (long long)count);
    if (datatype(dtype, dt) < 0) return enccl_check_dtype(dtype, op);
    return 0;
}

static int new_slot(int *handle)
{
    int i = 0;
    while (i < g_nslots && g_slots[i].busy) i++;
    if (i == g_nslots) {
        int cap = g_nslots ? 2 * g_nslots : 16;
        slot *s = realloc(g_slots, (size_t)cap * sizeof *s);
        if (!s) return fail("distributed: out of memory for request handles");
        memset(s + g_nslots, 0, (size_t)(cap - g_nslots) * sizeof *s);
        g_slots = s;
        g_nslots = cap;
    }
    if (!g_slots[i].event) {
        cudaError_t rc = cudaEventCreateWithFlags(&g_slots[i].event, cudaEventDisableTiming);
        if (rc != cudaSuccess) return cuda_fail("nccl", "cudaEventCreateWithFlags", rc);
    }
    *handle = i;
    return 0;
}

/* After a collective was queued (rc): records its event. */
static int queued(const char *op, ncclResult_t rc, int *handle)
{
    if (rc != ncclSuccess) return nccl_fail(op, rc);
    if (new_slot(handle) < 0) return -1;
    cudaError_t crc = cudaEventRecord(g_slots[*handle].event, STREAM);
    if (crc != cudaSuccess) return cuda_fail(op, "cudaEventRecord", crc);
    g_slots[*handle].busy = 1;
    g_pending++;
    return 0;
}

int enccl_all_reduce(void *buf, int64_t count, int dtype, int op, int *handle)
{
    static const ncclRedOp_t OPS[] = {ncclSum, ncclMax, ncclMin, ncclAvg};
    ncclDataType_t dt = ncclFloat32;
    if (check_ready("all_reduce", count, dtype, &dt) < 0) return -1;
    if (op < ENCCL_SUM || op > ENCCL_AVG) return fail("distributed.all_reduce: unknown op code %d", op);
    if (check_buffer("all_reduce", buf, count) < 0) return -1;
    return queued("all_reduce", count ? ncclAllReduce(buf, buf, (size_t)count, dt, OPS[op], g_comm, STREAM) : ncclSuccess,
                  handle);
}

int enccl_broadcast(void *buf, int64_t count, int dtype, int root, int *handle)
{
    ncclDataType_t dt = ncclFloat32;
    if (check_ready("broadcast", count, dtype, &dt) < 0) return -1;
    if (check_buffer("broadcast", buf, count) < 0) return -1;
    return queued("broadcast", count ? ncclBroadcast(buf, buf, (size_t)count, dt, root, g_comm, STREAM) : ncclSuccess,
                  handle);
}

int enccl_all_gather(const void *send, void *recv, int64_t count, int dtype, int *handle)
{
    ncclDataType_t dt = ncclFloat32;
    if (check_ready("all_gather", count, dtype, &dt) < 0) return -1;
    if (check_buffer("all_gather", send, count) < 0 || check_buffer("all_gather", recv, count) < 0) return -1;
    return queued("all_gather", count ? ncclAllGather(send, recv, (size_t)count, dt, g_comm, STREAM) : ncclSuccess,
                  handle);
}

int enccl_test(int handle, int *done)
{
    *done = 0;
    if (g_broken) return fail("distributed.wait: the NCCL communicator was aborted after a failure; this collective did not complete");
    if (handle < 0 || handle >= g_nslots) return fail("distributed.wait: no request %d", handle);
    slot *s = &g_slots[handle];
    if (!s->busy) { *done = 1; return 0; }
    cudaError_t rc = cudaEventQuery(s->event);
    if (rc == cudaSuccess) {
        s->busy = 0;
        g_pending--;
        *done = 1;
        return 0;
    }
    if (rc != cudaErrorNotReady) return cuda_fail("wait", "cudaEventQuery", rc);
    ncclResult_t async = ncclSuccess;
    ncclResult_t qrc = ncclCommGetAsyncError(g_comm, &async);
    if (qrc != ncclSuccess || (async != ncclSuccess && async != ncclInProgress)) {
        nccl_fail("wait", qrc != ncclSuccess ? qrc : async);
        enccl_abort();
        return -1;
    }
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Polls the handle for up to `seconds` (the caller looks for failed peers
   between calls, so a wait never hangs on a rank that is gone). */
int enccl_wait(int handle, double seconds, int *done)
{
    double t0 = now();
    for (;;) {
        if (enccl_test(handle, done) < 0) return -1;
        if (*done || now() - t0 >= seconds) return 0;
        sched_yield();
    }
}

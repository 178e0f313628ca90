/* backend.cpp: libember_cuda's entry point. The core dlopens this library and
   calls ember_cuda_backend_init, which checks that both were built from one
   ember (the ABI version, and ops.def's op names in order: a backend built
   from another op table would run the wrong kernel for an op), finds the
   devices, and hands back the table of what runs on them. A NULL slot makes
   the op fail with "<op> is not implemented for cuda". */
#include "cuda_backend.h"
#include "kernels/elementwise.h"

#include <initializer_list>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const ember_core_services *ecu_core;

static const char *const OP_NAMES[EMBER_OP_COUNT] = {
#define OP(E, n, ...) #n,
#include "ops/ops.def"
};

int ecu_check(cudaError_t err, const char *what)
{
    if (err == cudaSuccess) return EMBER_OK;
    cudaGetLastError();
    return ecu_core->fail(err == cudaErrorMemoryAllocation ? EMBER_ERR_OOM : EMBER_ERR_DEVICE, "%s: %s (%s)",
                          what, cudaGetErrorString(err), cudaGetErrorName(err));
}

static bool say(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static bool say(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return false;
}

/* the core's op table against the one this library was built from */
static bool same_ops(const ember_core_services *core, char *err, size_t errlen)
{
    if (core->op_count != EMBER_OP_COUNT)
        return say(err, errlen, "libember_cuda was built for %d ops, libember has %d: rebuild them together",
                   EMBER_OP_COUNT, core->op_count);
    for (int k = 0; k < EMBER_OP_COUNT; k++)
        if (strcmp(core->op_names[k], OP_NAMES[k]) != 0)
            return say(err, errlen, "libember_cuda was built for another op table (op %d is %s here, %s in libember): "
                       "rebuild them together", k + 1, OP_NAMES[k], core->op_names[k]);
    return true;
}

/* the number of devices, or (0) why there are none */
static int count_devices(char *err, size_t errlen)
{
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    cudaGetLastError();
    if (rc == cudaSuccess && n > 0) return n;
    const char *why = rc == cudaErrorInsufficientDriver ? "no CUDA driver (none is installed, or it is older than "
                                                          "this CUDA 13 runtime)"
                      : rc == cudaErrorNoDevice || rc == cudaSuccess ? "no CUDA device"
                                                                     : "CUDA cannot start";
    say(err, errlen, "%s; cudaGetDeviceCount: %s", why, rc == cudaSuccess ? "0 devices" : cudaGetErrorString(rc));
    return 0;
}

static ember_backend make_table(int ndevices)
{
    ember_backend be = {};
    be.name = "cuda";
    be.device_count = ndevices;
    be.alloc = ecu_alloc;
    be.free = ecu_free;
    be.memcpy = ecu_memcpy;
    be.read_scalar = ecu_read_scalar;
    be.fill = ecu_fill;
    be.copy = ecu_copy;
    be.synchronize = ecu_synchronize;
    be.memory_stats = ecu_memory_stats;
    be.empty_cache = ecu_empty_cache;
    be.host_alloc = ecu_host_alloc;
    be.host_free = ecu_host_free;
    be.random = ecu_random;
    be.sgd_step = ecu_sgd_step;
    be.adam_step = ecu_adam_step;
#define OP(...)
#define BINARY(E, ...) \
    if (ember_cuda::has_binary(EMBER_OP_##E)) be.fwd[EMBER_OP_##E] = ecu_fwd_binary;
#define UNARY(E, ...) be.fwd[EMBER_OP_##E] = ecu_fwd_unary;
#include "ops/ops.def"
    be.fwd[EMBER_OP_GELU] = be.fwd[EMBER_OP_CLAMP] = ecu_fwd_unary;
    be.fwd[EMBER_OP_TO_DTYPE] = ecu_fwd_to_dtype;
    be.fwd[EMBER_OP_CLONE] = ecu_fwd_to_dtype;
    be.fwd[EMBER_OP_RELU_BACKWARD] = ecu_fwd_binary;
    be.fwd[EMBER_OP_WHERE] = ecu_fwd_where;
    be.fwd[EMBER_OP_MATMUL] = ecu_fwd_matmul;
    for (int op : {EMBER_OP_SUM, EMBER_OP_MEAN, EMBER_OP_AMAX_ALL, EMBER_OP_AMIN_ALL}) be.fwd[op] = ecu_fwd_reduce;
    be.fwd[EMBER_OP_SOFTMAX] = be.fwd[EMBER_OP_LOG_SOFTMAX] = ecu_fwd_softmax;
    for (int op : {EMBER_OP_MAX_POOL2D, EMBER_OP_MAX_POOL2D_BACKWARD, EMBER_OP_AVG_POOL2D, EMBER_OP_AVG_POOL2D_BACKWARD})
        be.fwd[op] = ecu_fwd_pool;
#ifdef EMBER_HAVE_CUDNN
    for (int op : {EMBER_OP_CONV2D, EMBER_OP_CONV2D_BACKWARD_INPUT, EMBER_OP_CONV2D_BACKWARD_WEIGHT})
        be.fwd[op] = ecu_fwd_conv;
#endif
    for (int op : {EMBER_OP_VAR, EMBER_OP_LOGSUMEXP, EMBER_OP_NORM}) be.fwd[op] = ecu_fwd_reduce;
    for (int op : {EMBER_OP_MAX_DIM, EMBER_OP_MIN_DIM, EMBER_OP_ARGMAX, EMBER_OP_ARGMIN}) be.fwd[op] = ecu_fwd_arg_reduce;
    be.fwd[EMBER_OP_INDEX_SELECT] = be.fwd[EMBER_OP_GATHER] = ecu_fwd_gather;
    be.fwd[EMBER_OP_SCATTER_ADD] = be.fwd[EMBER_OP_INDEX_ADD] = ecu_fwd_scatter_add;
    be.fwd[EMBER_OP_LSTM_CELL] = be.fwd[EMBER_OP_GRU_CELL] = ecu_fwd_cell;
    return be;
}

static ember_backend table;

/* The ops that have no forward in the table this library hands over and need
   one: every op but ops.def's OPF_ANY_DEVICE ones, which run their one
   forward on any device. Up to cap op numbers go to missing; returns how many
   there are. test_backend_load checks this on machines without a device, so
   an op added to ops.def without a device kernel fails CI. Without cuDNN the
   three convolution ops are left out on purpose (they fail by name). */
extern "C" __attribute__((visibility("default"))) int ember_cuda_backend_missing(int *missing, int cap)
{
    static const int FLAGS[EMBER_OP_COUNT] = {
#define OP(E, n, ni, no, fwd, grad, flags, save) (flags),
#include "ops/ops.def"
    };
    ember_backend be = make_table(0);
    int n = 0;
    for (int op = 0; op < EMBER_OP_COUNT; op++) {
        if (be.fwd[op] || (FLAGS[op] & OPF_ANY_DEVICE)) continue;
        if (n < cap) missing[n] = op;
        n++;
    }
    return n;
}

extern "C" __attribute__((visibility("default"))) const ember_backend *
ember_cuda_backend_init(const ember_core_services *core, char *err, size_t errlen)
{
    if (core->abi_version != EMBER_BACKEND_ABI) {
        say(err, errlen, "libember_cuda speaks backend ABI %d, libember %d: rebuild them together",
            EMBER_BACKEND_ABI, core->abi_version);
        return NULL;
    }
    if (!same_ops(core, err, errlen)) return NULL;
    if (count_devices(err, errlen) == 0) return NULL;
    ecu_core = core;
    /* cuda:0 only: the seam's memory slots carry no device yet, and kernels
       run on CUDA's current device */
    table = make_table(1);
    return &table;
}

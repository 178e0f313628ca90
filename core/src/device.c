/* device.c: device names and the run-time loading of device backends. The
   CUDA backend is libember_cuda.so beside libember.so (or the path in
   EMBER_CUDA_BACKEND); the core never links CUDA. */
#include "backend.h"
#include "dtr.h"
#include "platform.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const ember_backend *cuda_backend;
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT;   /* the backend loads once, whichever thread asks */
static char cuda_error[512];
static atomic_int allow_tf32;   /* ember_cuda_set_allow_tf32 */

const char *ember__device_name(char *buf, int device)
{
    if (device == EMBER_CPU) strcpy(buf, "cpu");
    else sprintf(buf, "cuda:%d", device - 1);
    return buf;
}

int ember__same_device(const char *op, int n, ember_tensor *const *ts)
{
    const ember_tensor *first = NULL;
    for (int i = 0; i < n; i++) {
        if (ember__host_number(ts[i])) continue;
        if (!first) first = ts[i];
        if (ts[i]->storage->device != first->storage->device) {
            char a[32], b[32];
            return ember__fail(EMBER_ERR_DEVICE,
                               "%s: expected all tensors on one device, got %s and %s", op,
                               ember__device_name(a, first->storage->device),
                               ember__device_name(b, ts[i]->storage->device));
        }
    }
    return EMBER_OK;
}

static const char *const OP_NAMES[EMBER_OP_COUNT] = {
#define OP(E, n, ...) #n,
#include "ops/ops.def"
};

static const ember_core_services SERVICES = {
    EMBER_BACKEND_ABI,  ember__fail,        ember__new,     ember_tensor_release, ember__broadcast_shape,
    ember_dtype_size,   ember_dtype_name,   ember__result_type, ember__unary_dtype, ember__binary_types,
    ember__matmul_plan_make,
    ember__reduce_plan_make, ember__conv_plan_make, ember__pool_plan_make, ember_cuda_allow_tf32,
    ember_is_deterministic, EMBER_OP_COUNT, OP_NAMES,
};

static void load_cuda_once(void);
static void load_cuda(void) { pthread_once(&cuda_once, load_cuda_once); }

static void load_cuda_once(void)
{
    char path[4096];
    const char *env = getenv("EMBER_CUDA_BACKEND");
    if (env && *env) {
        snprintf(path, sizeof path, "%s", env);
    } else {
        if (!ember__lib_path_of((void *)load_cuda_once, path, sizeof path)) {
            snprintf(cuda_error, sizeof cuda_error, "cannot locate libember itself");
            return;
        }
        char *slash = (char *)ember__path_last_sep(path);
        if (slash) slash[1] = 0;
        else path[0] = 0;
        strncat(path, EMBER_LIB_NAME("ember_cuda"), sizeof path - strlen(path) - 1);
    }
    char err[512];
    void *h = ember__lib_open(path, err, sizeof err);
    if (!h) {
        snprintf(cuda_error, sizeof cuda_error, "the CUDA backend could not be loaded (%.400s)", err);
        return;
    }
    typedef const ember_backend *(*init_fn)(const ember_core_services *, char *, size_t);
    init_fn init;
    void *p = ember__lib_symbol(h, "ember_cuda_backend_init");
    memcpy(&init, &p, sizeof init);   /* ISO C: object to function pointer */
    if (!init) {
        snprintf(cuda_error, sizeof cuda_error, "%.400s has no ember_cuda_backend_init", path);
        ember__lib_close(h);
        return;
    }
    const ember_backend *be = init(&SERVICES, cuda_error, sizeof cuda_error);
    if (!be) {
        ember__lib_close(h);
        return;
    }
    cuda_backend = be;
}

int ember__backend_get(int device, const ember_backend **out)
{
    char dev[32];
    *out = NULL;
    if (device < EMBER_CUDA0 || device > 64)
        return ember__fail(EMBER_ERR_DEVICE, "device cuda:%lld does not exist (devices cuda:0 to cuda:63)",
                           (long long)device - 1);
    load_cuda();
    if (!cuda_backend)
        return ember__fail(EMBER_ERR_DEVICE, "device %s is not available: %s",
                           ember__device_name(dev, device), cuda_error);
    if (device - 1 >= cuda_backend->device_count)
        return ember__fail(EMBER_ERR_DEVICE, "device %s is not available: the CUDA backend drives %d device(s)",
                           ember__device_name(dev, device), cuda_backend->device_count);
    *out = cuda_backend;
    return EMBER_OK;
}

const ember_backend *ember__backend(int device)
{
    EMBER_UNUSED(device);
    return cuda_backend;
}

int ember__copy_into(ember_tensor *dst, const ember_tensor *src)
{
    if (dst->storage->device == EMBER_CPU) return ember__copy_kernel(dst, src);
    return ember__backend(dst->storage->device)->copy(dst, src);
}

int ember_cuda_device_count(void)
{
    load_cuda();
    return cuda_backend ? cuda_backend->device_count : 0;
}

const char *ember_cuda_status(void)
{
    load_cuda();
    return cuda_backend ? "available" : cuda_error;
}

/* the loaded CUDA backend, or a failure naming op and why there is none */
static int cuda_for(const char *op, const ember_backend **be)
{
    int rc = ember__backend_get(EMBER_CUDA0, be);
    return rc < 0 ? ember__fail_prefix(rc, op) : rc;
}

int ember_cuda_memory_stats(ember_cuda_memory_stats_t *out)
{
    const ember_backend *be;
    if (!out) return ember__fail(EMBER_ERR_ARG, "cuda.memory_stats: the output pointer is NULL");
    EMBER_TRY(cuda_for("cuda.memory_stats", &be));
    return be->memory_stats(out);
}

int ember_cuda_empty_cache(void)
{
    const ember_backend *be;
    EMBER_TRY(cuda_for("cuda.empty_cache", &be));
    return be->empty_cache();
}

int ember_cuda_synchronize(void)
{
    const ember_backend *be;
    EMBER_TRY(cuda_for("cuda.synchronize", &be));
    return be->synchronize();
}

int ember_cuda_set_allow_tf32(int allow) { return atomic_exchange(&allow_tf32, allow != 0); }

int ember_cuda_allow_tf32(void) { return atomic_load(&allow_tf32); }

/* ------------------------------------------------------------------ pinned host memory
   A CPU tensor over a block the CUDA backend allocated page-locked, which it
   takes back when the storage goes, so that copies from it to the device can
   be queued without waiting (ember_to_device_async). */
static void release_pinned(void *backend, void *data)
{
    ((const ember_backend *)backend)->host_free(data);
}

int ember_is_pinned(const ember_tensor *a)
{
    return a && a->storage->release == release_pinned;
}

int ember_pin_memory(ember_tensor *a, ember_tensor **out)
{
    if (!a || !out) return ember__fail(EMBER_ERR_ARG, "pin_memory: %s is NULL", !a ? "the tensor" : "out");
    *out = NULL;
    char name[32], shape[200];
    if (a->storage->device != EMBER_CPU)
        return ember__fail(EMBER_ERR_DEVICE, "pin_memory: expected a CPU tensor, got one on %s",
                           ember__device_name(name, a->storage->device));
    if (ember__dtr_on) EMBER_TRY(ember__dtr_ready(a));   /* evicted: remade before it is read */
    if (ember_is_pinned(a)) {
        ember_tensor_retain(a);
        *out = a;
        return EMBER_OK;
    }
    const ember_backend *be;
    EMBER_TRY(cuda_for("pin_memory", &be));
    size_t nbytes = (size_t)a->numel * (size_t)ember_dtype_size(a->dtype);
    void *p = be->host_alloc(nbytes ? nbytes : 1);
    if (!p)
        return ember__fail(EMBER_ERR_OOM, "pin_memory: no pinned host memory for %zu bytes (a %s tensor of shape %s)",
                           nbytes, ember_dtype_name(a->dtype), ember__tshape(shape, a));
    int rc = ember_from_blob(p, a->ndim, a->shape, NULL, a->dtype, release_pinned, (void *)be, out);
    if (rc < 0) {
        be->host_free(p);
        return rc;
    }
    rc = ember__copy_into(*out, a);
    if (rc < 0) {
        ember_tensor_release(*out);
        *out = NULL;
    }
    return rc;
}

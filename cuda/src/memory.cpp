/* memory.cpp: the backend's memory slots: copies between host and device,
   reading one element, fill, the strided converting copy, and waiting for
   the device. */
#include "cuda_backend.h"
#include "kernels/dtype.h"

/* kind 3 is queued on the legacy default stream, where every kernel runs,
   so later work on the device sees the copy; the host does not wait */
int ecu_memcpy(void *dst, const void *src, size_t nbytes, int kind)
{
    static const cudaMemcpyKind KINDS[] = {cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                           cudaMemcpyDeviceToDevice, cudaMemcpyHostToDevice};
    static const char *const WHAT[] = {"to(cuda): host to device copy", "to(cpu): device to host copy",
                                       "to(cuda): device to device copy",
                                       "to(cuda, {non_blocking = true}): host to device copy"};
    cudaError_t rc = kind == 3 ? cudaMemcpyAsync(dst, src, nbytes, KINDS[kind], 0)
                               : cudaMemcpy(dst, src, nbytes, KINDS[kind]);
    return ecu_check(rc, WHAT[kind]);
}

int ecu_synchronize(void) { return ecu_check(cudaDeviceSynchronize(), "cuda.synchronize"); }

int ecu_read_scalar(const ember_tensor *t, double *out)
{
    int64_t esize = ecu_core->dtype_size(t->dtype);
    char buf[8];
    const char *p = (const char *)t->storage->data + t->offset * esize;
    EMBER_TRY(ecu_check(cudaMemcpy(buf, p, (size_t)esize, cudaMemcpyDeviceToHost), "item"));
    *out = ember__load(buf, t->dtype);
    return EMBER_OK;
}

int ecu_fill(ember_tensor *t, double value)
{
    ecu_iter it;
    ecu_iter_init(&it, 1, &t);
    return ecu_check(ecu_launch_fill(&it, value), "fill");
}

/* A host source (a CPU tensor copied into a device one) must be contiguous:
   it goes to a device block first. */
int ecu_copy(ember_tensor *dst, const ember_tensor *src)
{
    ember_tensor *ts[2] = {dst, (ember_tensor *)src};
    ecu_iter it;
    if (src->storage->device != EMBER_CPU) {
        ecu_iter_init(&it, 2, ts);
        return ecu_check(ecu_launch_convert(&it), "copy");
    }
    if (!src->is_contiguous)
        return ecu_core->fail(EMBER_ERR_DEVICE, "copy: a host source must be contiguous to be copied to cuda");
    size_t nbytes = (size_t)src->numel * (size_t)ecu_core->dtype_size(src->dtype);
    void *staged = ecu_alloc(nbytes);
    if (!staged) return ecu_core->fail(EMBER_ERR_OOM, "copy: out of device memory for %zu bytes", nbytes);
    ecu_iter_init(&it, 2, ts);
    it.data[1] = (char *)staged;
    int rc = ecu_memcpy(staged, (const char *)src->storage->data + src->offset * ecu_core->dtype_size(src->dtype),
                        nbytes, 0);
    if (rc == EMBER_OK) rc = ecu_check(ecu_launch_convert(&it), "copy");
    ecu_free(staged, nbytes);
    return rc;
}

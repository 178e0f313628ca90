/* kernel_test.h: what the host tests of the kernels that run the backend's
   host code (iter.cpp) add to check.h: the core services that code reads
   (element sizes) and small tensor helpers. */
#ifndef EMBER_CUDA_KERNEL_TEST_H
#define EMBER_CUDA_KERNEL_TEST_H

#include "check.h"
#include "src/cuda_backend.h"

/* iter.cpp reads element sizes through the core's services */
static ember_core_services services(void)
{
    ember_core_services s = {};
    s.abi_version = EMBER_BACKEND_ABI;
    s.dtype_size = ember_dtype_size;
    return s;
}
static const ember_core_services SERVICES = services();
const ember_core_services *ecu_core = &SERVICES;

static inline ember_tensor *from(const void *data, int dtype, int64_t n)
{
    ember_tensor *t;
    OK(ember_from_data(data, dtype, 1, &n, dtype, EMBER_CPU, &t));
    return t;
}

static inline ember_tensor *converted(ember_tensor *t, int dtype)
{
    ember_tensor *r;
    OK(ember_to_dtype(t, dtype, &r));
    return r;
}

#endif

/* kernel_test.h: what the host tests of the kernel arithmetic share (one
   test program per file includes it once): CHECK and its counts, OK for
   libember calls that must succeed, the core services the backend's host
   code reads (element sizes), and small tensor helpers. */
#ifndef EMBER_CUDA_KERNEL_TEST_H
#define EMBER_CUDA_KERNEL_TEST_H

#include <stdio.h>
#include <stdlib.h>

#include "ember.h"
#include "src/cuda_backend.h"

static int checks, failures;

#define CHECK(cond, ...)                                                          \
    do {                                                                          \
        checks++;                                                                 \
        if (!(cond)) {                                                            \
            if (failures++ < 60) {                                                \
                fprintf(stderr, "line %d: %s: ", __LINE__, #cond);                \
                fprintf(stderr, __VA_ARGS__);                                     \
                fprintf(stderr, "\n");                                            \
            }                                                                     \
        }                                                                         \
    } while (0)

#define OK(call)                                                                  \
    do {                                                                          \
        if ((call) != EMBER_OK) {                                                 \
            fprintf(stderr, "line %d: %s: %s\n", __LINE__, #call, ember_last_error()); \
            exit(1);                                                              \
        }                                                                         \
    } while (0)

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

/* the end of main: 0 when every check held */
static inline int report(const char *name)
{
    if (failures) {
        fprintf(stderr, "%s: %d of %d checks failed\n", name, failures, checks);
        return 1;
    }
    printf("%s: %d checks ok\n", name, checks);
    return 0;
}

#endif

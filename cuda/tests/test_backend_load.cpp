/* test_backend_load.cpp: what libember_cuda says when the core that loads it
   is not the one it was built with (another backend ABI, another op count,
   ops in another order), and that with matching services it either finds
   devices and fills the table or names why it cannot (on a machine without a
   GPU: no CUDA driver). Loads the library as the core does (dlopen, dlsym).

     test_backend_load path/to/libember_cuda.so */
#include "backend.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

typedef const ember_backend *(*init_fn)(const ember_core_services *, char *, size_t);

static int failures;

static const char *const OP_NAMES[EMBER_OP_COUNT] = {
#define OP(E, n, ...) #n,
#include "ops/ops.def"
};

static int no_fail(int status, const char *, ...) { return status; }

static ember_core_services services(void)
{
    ember_core_services s = {};
    s.abi_version = EMBER_BACKEND_ABI;
    s.fail = no_fail;
    s.op_count = EMBER_OP_COUNT;
    s.op_names = OP_NAMES;
    return s;
}

/* init refuses `s`, with a message that contains `expect` */
static void refused(init_fn init, const ember_core_services &s, const char *what, const char *expect)
{
    char err[512] = "";
    const ember_backend *be = init(&s, err, sizeof err);
    if (be || !strstr(err, expect)) {
        fprintf(stderr, "%s: expected a refusal naming '%s', got %s '%s'\n", what, expect, be ? "a table" : "",
                err);
        failures++;
    }
}

/* every op of ops.def runs on the device: a forward of the backend's own, or
   one the core runs on any device (OPF_ANY_DEVICE); the convolutions may be
   missing only from a build without cuDNN */
static void covered(void *h)
{
    typedef int (*missing_fn)(int *, int);
    missing_fn missing_ops = (missing_fn)dlsym(h, "ember_cuda_backend_missing");
    if (!missing_ops) {
        fprintf(stderr, "no ember_cuda_backend_missing\n");
        failures++;
        return;
    }
    int missing[EMBER_OP_COUNT];
    int n = missing_ops(missing, EMBER_OP_COUNT);
    for (int i = 0; i < n; i++) {
        int op = missing[i];
#ifndef EMBER_HAVE_CUDNN
        if (op == EMBER_OP_CONV2D || op == EMBER_OP_CONV2D_BACKWARD_INPUT || op == EMBER_OP_CONV2D_BACKWARD_WEIGHT)
            continue;
#endif
        fprintf(stderr, "%s has no forward on cuda (ops.def: give it a device kernel, or OPF_ANY_DEVICE "
                        "if its forward only runs other ops)\n", OP_NAMES[op]);
        failures++;
    }
    if (!failures) printf("test_backend_load: each of the %d ops has a forward on cuda\n", EMBER_OP_COUNT);
}

int main(int argc, char **argv)
{
    if (argc != 2) return fprintf(stderr, "usage: test_backend_load libember_cuda.so\n"), 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) return fprintf(stderr, "%s\n", dlerror()), 1;
    init_fn init = (init_fn)dlsym(h, "ember_cuda_backend_init");
    if (!init) return fprintf(stderr, "no ember_cuda_backend_init\n"), 1;

    ember_core_services s = services();
    s.abi_version = EMBER_BACKEND_ABI + 1;
    refused(init, s, "another ABI", "backend ABI");

    s = services();
    s.op_count = EMBER_OP_COUNT - 1;
    refused(init, s, "one op fewer", "rebuild them together");

    const char *swapped[EMBER_OP_COUNT];
    memcpy(swapped, OP_NAMES, sizeof swapped);
    swapped[EMBER_OP_SUB] = OP_NAMES[EMBER_OP_MUL];
    swapped[EMBER_OP_MUL] = OP_NAMES[EMBER_OP_SUB];
    s = services();
    s.op_names = swapped;
    refused(init, s, "two ops swapped", "op 2 is sub here, mul in libember");

    s = services();
    char err[512] = "";
    const ember_backend *be = init(&s, err, sizeof err);
    if (be) {
        /* cuda:0 only, for now */
        bool filled = be->device_count == 1 && be->fwd[EMBER_OP_ADD] && be->fwd[EMBER_OP_EXP] && be->alloc &&
                      be->copy;
        if (!filled) fprintf(stderr, "a loaded backend with an unexpected table\n"), failures++;
        printf("test_backend_load: the backend drives %d CUDA device(s)\n", be->device_count);
    } else if (strncmp(err, "no CUDA driver", 14) != 0 && strncmp(err, "no CUDA device", 14) != 0) {
        fprintf(stderr, "matching services: '%s' names neither a missing driver nor a missing device\n", err);
        failures++;
    } else {
        printf("test_backend_load: no device here (%s)\n", err);
    }
    covered(h);
    if (failures) return 1;
    printf("test_backend_load: ok\n");
    return 0;
}

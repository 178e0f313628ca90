/* check.h: what the host tests of the kernels share: CHECK counts a check
   and reports a failing one (the first 60) without stopping, OK stops the
   test when a call into libember fails; operands for the nn kernels' tests; report gives main's exit status. */
#ifndef EMBER_CUDA_TESTS_CHECK_H
#define EMBER_CUDA_TESTS_CHECK_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

#include "ember.h"

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

[[maybe_unused]] static const int FLOATS[] = {EMBER_FLOAT32, EMBER_FLOAT64, EMBER_FLOAT16, EMBER_BFLOAT16};

/* n values of dtype dt: small integers (so windows tie) with a NaN, or normals */
[[maybe_unused]] static ember_tensor *operand(int ndim, const int64_t *shape, int dt, bool ties, unsigned seed)
{
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    std::vector<double> v((size_t)n);
    srand(seed);
    for (int64_t i = 0; i < n; i++)
        v[(size_t)i] = ties ? (double)(rand() % 3) : (rand() / (double)RAND_MAX - 0.5) * 8 + 1.0 / 3;
    if (ties && n > 5) v[5] = NAN;
    ember_tensor *t;
    OK(ember_from_data(v.data(), EMBER_FLOAT64, ndim, shape, dt, EMBER_CPU, &t));
    return t;
}

/* the bytes of two tensors of one dtype and size agree (NaNs by bits too) */
[[maybe_unused]] static bool same_bytes(const ember_tensor *a, const void *b, size_t nbytes)
{
    return memcmp(ember_tensor_data(a), b, nbytes) == 0;
}

[[maybe_unused]] static int report(const char *name)
{
    if (failures) {
        fprintf(stderr, "%s: %d of %d checks failed\n", name, failures, checks);
        return 1;
    }
    printf("%s: %d checks ok\n", name, checks);
    return 0;
}

#endif

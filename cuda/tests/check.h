/* check.h: what the host tests of the kernels share: CHECK counts a check
   and reports a failing one (the first 60) without stopping, OK stops the
   test when a call into libember fails. */
#ifndef EMBER_CUDA_TESTS_CHECK_H
#define EMBER_CUDA_TESTS_CHECK_H

#include <stdio.h>
#include <stdlib.h>

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

#endif

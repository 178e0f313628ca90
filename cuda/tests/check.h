/* check.h: what the host tests of the kernels share: CHECK counts a check
   and prints the first failures, OK stops on a failed libember call, report
   gives main's exit status. */
#ifndef EMBER_CUDA_TEST_CHECK_H
#define EMBER_CUDA_TEST_CHECK_H

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

static int report(const char *name)
{
    if (failures) {
        fprintf(stderr, "%s: %d of %d checks failed\n", name, failures, checks);
        return 1;
    }
    printf("%s: %d checks ok\n", name, checks);
    return 0;
}

#endif

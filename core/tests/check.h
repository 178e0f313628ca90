/* check.h: what the C tests share: CHECK, which counts a failed condition and
   prints it with ember's last error, and UNDER_ASAN, set in sanitizer builds
   (where a released tensor's header is really freed). */
#ifndef EMBER_TEST_CHECK_H
#define EMBER_TEST_CHECK_H

#include "ember.h"

#include <stdio.h>

static int failures;
#define CHECK(cond)                                                                            \
    do {                                                                                       \
        if (!(cond)) {                                                                         \
            fprintf(stderr, "%s:%d: check failed: %s (%s)\n", __FILE__, __LINE__, #cond,        \
                    ember_last_error());                                                       \
            failures++;                                                                        \
        }                                                                                      \
    } while (0)

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif

#endif

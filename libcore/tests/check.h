/* check.h - the C tests' one harness: CHECK counts each check and reports a failed one with
   libcore's last error message; CPU is the device the tests compute on. */
#ifndef HL_TESTS_CHECK_H
#define HL_TESTS_CHECK_H

#include <stdio.h>

#include "hl_core.h"

static int checks, failures;

#define CHECK(cond)                                                                       \
    do {                                                                                  \
        checks++;                                                                         \
        if (!(cond)) {                                                                    \
            failures++;                                                                   \
            fprintf(stderr, "%s:%d: check failed: %s (last error: %s)\n", __FILE__,       \
                    __LINE__, #cond, hl_last_error());                                    \
        }                                                                                 \
    } while (0)

static const hl_device CPU = {HL_DEVICE_CPU, 0};

#endif

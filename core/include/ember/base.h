/* ember/base.h: the handle, status codes, dtypes, devices and the last error: what every other part uses.
   A part of ember.h, which includes the parts in order (its conventions hold
   here): include <ember.h>, not this file. */
#ifndef EMBER_H
#error "ember/base.h is a part of ember.h: include <ember.h>"
#endif

/* ffi:begin */
typedef struct ember_tensor ember_tensor;   /* opaque, refcounted */

/* Status codes: < 0 an error, > 0 a control signal of the backward pull loop. */
enum {
    EMBER_OK = 0,
    EMBER_ERR_ARG = -1,          /* a bad argument: a NULL, a dim out of range, ... */
    EMBER_ERR_SHAPE = -2,        /* shapes that do not fit together */
    EMBER_ERR_DTYPE = -3,        /* a dtype the op does not take */
    EMBER_ERR_DEVICE = -4,       /* devices that differ, or a device that lacks the op */
    EMBER_ERR_OOM = -5,          /* an allocation failed */
    EMBER_ERR_UNSUPPORTED = -6,  /* a valid request that is not implemented */
    EMBER_ERR_VERSION = -7,      /* a saved tensor was modified in place */
    EMBER_ERR_STATE = -8,        /* a call out of order (e.g. backward twice) */
    EMBER_ERR_IO = -9,           /* a file that cannot be read or written */
    EMBER_NEED_LUA = 1,
    EMBER_DONE = 2,
    EMBER_PAUSED = 3             /* ember_backward_step_until: the deadline passed */
};

/* dtypes; the order is part of the ABI. */
typedef enum {
    EMBER_FLOAT32 = 0,
    EMBER_FLOAT64 = 1,
    EMBER_FLOAT16 = 2,
    EMBER_BFLOAT16 = 3,
    EMBER_INT32 = 4,
    EMBER_INT64 = 5,
    EMBER_UINT8 = 6,
    EMBER_BOOL = 7,
    EMBER_DTYPE_COUNT = 8
} ember_dtype;

/* Devices: 0 is the CPU, k + 1 is cuda:k. */
enum { EMBER_CPU = 0, EMBER_CUDA0 = 1 };

enum { EMBER_MAX_DIMS = 8 };

/* ---------------------------------------------------------------- errors */
/* The message of the last failure on this thread ("add: shapes {2,3} and {4} ..."). */
EMBER_API const char *ember_last_error(void);
/* Sets the message (used by bindings that report their own errors through the core). */
EMBER_API void ember_set_error(const char *msg);
/* ffi:end */

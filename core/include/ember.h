/*
 * ember.h: the public C API of ember's tensor and autograd core.
 *
 * This header is the manual. Conventions for every function below:
 *   - Tensor arguments are borrowed. A tensor returned through `ember_tensor **out`
 *     carries one new reference the caller owns (release it with
 *     ember_tensor_release); on failure *out is left NULL.
 *   - Every function that can fail returns a status: EMBER_OK (0) or a negative
 *     EMBER_ERR_* code, and leaves a message for ember_last_error() that names
 *     the op and the shapes, dtypes or values involved. Nothing here aborts,
 *     exits or longjmps; an allocation failure is reported as EMBER_ERR_OOM.
 *   - Dimensions are 0-based (the Lua layer converts from its 1-based dims).
 *     Negative dims are NOT accepted here; callers normalise them. Error
 *     messages name dims and indices 1-based, as the Lua API takes them
 *     ("narrow: start 5 ... for dim 2").
 *   - Bad arguments are an error status, never a crash: NULL tensors and NULL
 *     output pointers, shapes whose sizes multiply past 2^50 elements (a zero
 *     size counting as one), ranges that overflow, and a tensor already
 *     released (as long as its header was not reused for a new tensor;
 *     releasing one twice is ignored). core/tests/test_bad_args.c makes such
 *     calls at every entry point. Passing a shape array shorter than ndim
 *     cannot be detected.
 *   - Threads. Several host threads may call ember at the same time, each on
 *     its own tensors, and each may own an ember_lua state. What is shared,
 *     and safe to share: the allocator's counters (ember_memory_stats), the
 *     memory limit, the random generator (threads draw disjoint blocks of
 *     one Philox stream, so which thread draws first decides who gets which
 *     numbers), the kernel thread pool (a second thread's op runs on its own
 *     while the pool is busy), deterministic mode and the thread count.
 *     What is per thread: ember_last_error(), grad mode, the recordings
 *     (GradManager keys, nodes, hooks' interception, saved-tensor modes) and
 *     the caches of freed blocks and tensor headers (ember_empty_cache
 *     returns the calling thread's). What may NOT be shared without your own
 *     lock: a tensor that one thread writes (in-place ops, fills, .grad)
 *     while another reads it, and any tensor a recording of one thread
 *     tracks, which another thread must not use as an op's input while that
 *     recording is live. Reading the same untracked tensor from several
 *     threads is fine. core/tests/test_threads.c runs 8 threads under
 *     ThreadSanitizer.
 *
 * The declarations live in the parts under ember/, included below in order,
 * one concern each (a new declaration goes in its concern's part; a new part
 * gets its #include line here). Everything between a part's ffi markers is
 * plain C that the LuaJIT FFI parses: the build (cmake/make_cdef.cmake)
 * follows the #include lines below and copies each part's region into
 * lua/ember/cdef/<part>.lua, which lua/ember/cdef.lua joins in this order.
 * No #define, #if or #include may appear inside the markers.
 */
#ifndef EMBER_H
#define EMBER_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define EMBER_API __declspec(dllexport)
#else
#define EMBER_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#include "ember/base.h"
#include "ember/runtime.h"
#include "ember/tensor.h"
#include "ember/dtr.h"
#include "ember/ops.h"
#include "ember/nn.h"
#include "ember/autograd.h"
#include "ember/io.h"
#include "ember/plan.h"

#ifdef __cplusplus
}
#endif
#endif /* EMBER_H */

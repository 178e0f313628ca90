/* op_ids.h: the op numbers of the kernels, from ops.def as the core makes
   its enum (core/src/ops/ops.h, which is C and not for nvcc); the backend
   checks the core's op names against the same list when it loads. */
#ifndef EMBER_CUDA_OP_IDS_H
#define EMBER_CUDA_OP_IDS_H

namespace ember_cuda {

enum op_id {
#define OP(E, ...) OP_##E,
#include "ops/ops.def"
    OP_COUNT
};

}   // namespace ember_cuda

#endif

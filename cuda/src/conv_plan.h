/* conv_plan.h: conv2d's cuDNN calls planned from the core's geometry: the
   descriptors' dims and types, and the algorithm taken from cuDNN's ranked
   list. Plain host code over cudnn.h's types, tested without a GPU
   (cuda/tests/test_kernel_conv.cpp).

   Types (cuDNN's "configurations"): float32 in float32 (FMA math, so no
   TF32 unless ember.cuda.allow_tf32(true): CUDNN_DEFAULT_MATH would let
   cuDNN pick TF32 tensor-core kernels on Ampere and newer), float64 in
   float64, float16 and bfloat16 stored in their own dtype and computed in
   float32 (PSEUDO_HALF and PSEUDO_BFLOAT16, tensor-core math allowed). */
#ifndef EMBER_CUDA_CONV_PLAN_H
#define EMBER_CUDA_CONV_PLAN_H

#include <cudnn.h>
#include <stdint.h>

#include "kernels/hd.h"   /* before the core's headers */
#include "ops/ops.h"

struct ecu_conv_desc {
    int x[4], w[4], y[4];             /* NCHW: input, weight (O, C / G, kH, kW), output */
    int pad[2], stride[2], dilation[2], groups;
    cudnnDataType_t data, compute;
    cudnnMathType_t math;
};

/* cuDNN's types for dtype dt; false for a dtype cuDNN does not convolve */
inline bool ecu_conv_types(int dt, bool allow_tf32, ecu_conv_desc *d)
{
    d->compute = CUDNN_DATA_FLOAT;
    d->math = CUDNN_TENSOR_OP_MATH;
    switch (dt) {
    case EMBER_FLOAT32:
        d->data = CUDNN_DATA_FLOAT;
        d->math = allow_tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;
        return true;
    case EMBER_FLOAT64: d->data = d->compute = CUDNN_DATA_DOUBLE; d->math = CUDNN_DEFAULT_MATH; return true;
    case EMBER_FLOAT16: d->data = CUDNN_DATA_HALF; return true;
    case EMBER_BFLOAT16: d->data = CUDNN_DATA_BFLOAT16; return true;
    default: return false;
    }
}

/* the 4 dims as ints, false when one, or their product, passes INT32_MAX
   (cuDNN's 4-D descriptors take int dims and strides) */
inline bool ecu_conv_dims(const int64_t *dims, int *out)
{
    int64_t n = 1;
    for (int k = 0; k < 4; k++) {
        if (dims[k] > INT32_MAX) return false;
        out[k] = (int)dims[k];
        n *= dims[k];
        if (n > INT32_MAX) return false;
    }
    return true;
}

/* the descriptors of g's convolution in dtype dt; false when a tensor passes
   cuDNN's int range or dt is not a floating dtype */
inline bool ecu_conv_describe(const ember__conv_geom &g, int dt, bool allow_tf32, ecu_conv_desc *d)
{
    const int64_t x[4] = {g.N, g.C, g.H, g.W}, w[4] = {g.O, g.Cg, g.kH, g.kW}, y[4] = {g.N, g.O, g.Ho, g.Wo};
    const int64_t rest[7] = {g.ph, g.pw, g.sh, g.sw, g.dh, g.dw, g.G};
    for (int64_t v : rest)
        if (v > INT32_MAX) return false;
    d->pad[0] = (int)g.ph, d->pad[1] = (int)g.pw;
    d->stride[0] = (int)g.sh, d->stride[1] = (int)g.sw;
    d->dilation[0] = (int)g.dh, d->dilation[1] = (int)g.dw;
    d->groups = (int)g.G;
    return ecu_conv_dims(x, d->x) && ecu_conv_dims(w, d->w) && ecu_conv_dims(y, d->y) &&
           ecu_conv_types(dt, allow_tf32, d);
}

/* Whether a result of cuDNN's may run under the math the descriptor allows:
   under FMA math (float32 without TF32) only an FMA algorithm, since the
   result's math type is set on the descriptor to run it, and DEFAULT_MATH
   would let cuDNN use TF32 again. */
inline bool ecu_conv_math_ok(cudnnMathType_t allowed, cudnnMathType_t algo)
{
    return allowed != CUDNN_FMA_MATH || algo == CUDNN_FMA_MATH;
}

/* The first of cuDNN's n ranked results (cudnnGetConvolution*Algorithm_v7)
   that succeeded, runs under the allowed math, is deterministic when that
   is asked for (ember.set_deterministic), and whose workspace take(bytes)
   gets (the caller allocates it there); -1 when none does. */
template <class Perf, class Take>
int ecu_conv_pick(const Perf *perf, int n, cudnnMathType_t allowed, bool deterministic, Take take)
{
    for (int k = 0; k < n; k++)
        if (perf[k].status == CUDNN_STATUS_SUCCESS && ecu_conv_math_ok(allowed, perf[k].mathType) &&
            (!deterministic || perf[k].determinism == CUDNN_DETERMINISTIC) && take(perf[k].memory))
            return k;
    return -1;
}

#endif

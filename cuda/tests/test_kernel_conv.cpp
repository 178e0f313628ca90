/* test_kernel_conv.cpp: conv2d's cuDNN plan (src/conv_plan.h) on the host:
   the descriptors' dims against the shapes the CPU's conv2d and its adjoints
   give, each dtype's cuDNN types and math (no TF32 unless allowed), cuDNN's
   int range, and the choice among ranked algorithms. Built when cuDNN is.
   What it cannot check is cuDNN itself. */
#include "check.h"
#include "ember.h"
#include "src/conv_plan.h"
#include "ops/nn.h"

/* ------------------------------------------------------------------ conv2d's plan */
struct conv_case {
    int64_t xs[4], ws[4], st[2], pd[2], dl[2], groups;
};

static ember__conv_geom conv_geom_of(const conv_case &c)
{
    ember__conv_geom g = {};
    g.N = c.xs[0], g.C = c.xs[1], g.H = c.xs[2], g.W = c.xs[3];
    g.O = c.ws[0], g.kH = c.ws[2], g.kW = c.ws[3], g.G = c.groups;
    g.sh = c.st[0], g.sw = c.st[1], g.ph = c.pd[0], g.pw = c.pd[1], g.dh = c.dl[0], g.dw = c.dl[1];
    g.Ho = nn_out_size(g.H, g.kH, g.sh, g.ph, g.dh);
    g.Wo = nn_out_size(g.W, g.kW, g.sw, g.pw, g.dw);
    g.Cg = g.C / g.G, g.Og = g.O / g.G, g.K = g.Cg * g.kH * g.kW;
    return g;
}

static bool dims_are(const int *d, const int64_t *shape)
{
    for (int k = 0; k < 4; k++)
        if (d[k] != shape[k]) return false;
    return true;
}

/* the descriptors' dims are the shapes of the CPU's conv2d and both adjoints */
static void check_conv_descriptors(void)
{
    const conv_case cases[] = {{{2, 3, 9, 8}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
                               {{1, 4, 10, 7}, {6, 2, 3, 2}, {2, 1}, {0, 1}, {1, 2}, 2},
                               {{3, 6, 5, 5}, {6, 1, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 6},
                               {{2, 2, 12, 1}, {3, 2, 5, 1}, {3, 1}, {2, 0}, {2, 1}, 1}};
    for (const conv_case &c : cases) {
        ember__conv_geom g = conv_geom_of(c);
        ecu_conv_desc d = {};
        CHECK(ecu_conv_describe(g, EMBER_FLOAT32, false, &d), "describe");
        ember_tensor *x = operand(4, c.xs, EMBER_FLOAT32, false, 3), *w = operand(4, c.ws, EMBER_FLOAT32, false, 4);
        ember_tensor *y, *gx, *gw;
        OK(ember_conv2d(x, w, c.st, c.pd, c.dl, c.groups, &y));
        OK(ember_conv2d_backward_input(y, w, c.xs, c.st, c.pd, c.dl, c.groups, &gx));
        OK(ember_conv2d_backward_weight(x, y, c.ws, c.st, c.pd, c.dl, c.groups, &gw));
        CHECK(dims_are(d.y, ember_tensor_shape(y)), "output dims %d %d %d %d", d.y[0], d.y[1], d.y[2], d.y[3]);
        CHECK(dims_are(d.x, ember_tensor_shape(gx)), "input dims %d %d %d %d", d.x[0], d.x[1], d.x[2], d.x[3]);
        CHECK(dims_are(d.w, ember_tensor_shape(gw)), "weight dims %d %d %d %d", d.w[0], d.w[1], d.w[2], d.w[3]);
        CHECK(d.pad[0] == c.pd[0] && d.pad[1] == c.pd[1] && d.stride[0] == c.st[0] && d.stride[1] == c.st[1] &&
              d.dilation[0] == c.dl[0] && d.dilation[1] == c.dl[1] && d.groups == c.groups, "window attrs");
        for (ember_tensor *t : {x, w, y, gx, gw}) ember_tensor_release(t);
    }
    /* 2^31 elements in one tensor pass cuDNN's int strides */
    ember__conv_geom big = conv_geom_of({{1 << 16, 64, 32, 16}, {8, 64, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1});
    ecu_conv_desc d;
    CHECK(!ecu_conv_describe(big, EMBER_FLOAT32, false, &d), "a 2^31-element input is refused");
    big.N = (1 << 16) - 1;
    CHECK(ecu_conv_describe(big, EMBER_FLOAT32, false, &d), "a 2^31 - 2^15 element input fits");
}

static void check_conv_types(void)
{
    ecu_conv_desc d;
    CHECK(ecu_conv_types(EMBER_FLOAT32, false, &d) && d.data == CUDNN_DATA_FLOAT && d.compute == CUDNN_DATA_FLOAT &&
          d.math == CUDNN_FMA_MATH, "float32 without TF32: FMA math");
    CHECK(ecu_conv_types(EMBER_FLOAT32, true, &d) && d.math == CUDNN_TENSOR_OP_MATH, "float32 with TF32");
    CHECK(ecu_conv_types(EMBER_FLOAT64, true, &d) && d.data == CUDNN_DATA_DOUBLE && d.compute == CUDNN_DATA_DOUBLE,
          "float64");
    CHECK(ecu_conv_types(EMBER_FLOAT16, false, &d) && d.data == CUDNN_DATA_HALF && d.compute == CUDNN_DATA_FLOAT,
          "float16 computes in float32");
    CHECK(ecu_conv_types(EMBER_BFLOAT16, false, &d) && d.data == CUDNN_DATA_BFLOAT16 &&
          d.compute == CUDNN_DATA_FLOAT, "bfloat16 computes in float32");
    for (int dt : {EMBER_INT32, EMBER_INT64, EMBER_UINT8, EMBER_BOOL})
        CHECK(!ecu_conv_types(dt, false, &d), "%s is refused", ember_dtype_name(dt));
}

/* the first successful result under the allowed math whose workspace is given */
static void check_conv_pick(void)
{
    cudnnConvolutionFwdAlgoPerf_t perf[5] = {};
    const cudnnStatus_t status[5] = {CUDNN_STATUS_NOT_SUPPORTED, CUDNN_STATUS_SUCCESS, CUDNN_STATUS_SUCCESS,
                                     CUDNN_STATUS_SUCCESS, CUDNN_STATUS_SUCCESS};
    const cudnnMathType_t math[5] = {CUDNN_FMA_MATH, CUDNN_TENSOR_OP_MATH, CUDNN_DEFAULT_MATH, CUDNN_FMA_MATH,
                                     CUDNN_FMA_MATH};
    const size_t memory[5] = {0, 0, 0, 1 << 30, 4096};
    for (int k = 0; k < 5; k++) {
        perf[k].algo = (cudnnConvolutionFwdAlgo_t)k;
        perf[k].status = status[k];
        perf[k].mathType = math[k];
        perf[k].memory = memory[k];
        perf[k].determinism = k == 3 ? CUDNN_NON_DETERMINISTIC : CUDNN_DETERMINISTIC;
    }
    std::vector<size_t> asked;
    auto upto = [&asked](size_t limit) {
        return [&asked, limit](size_t bytes) {
            asked.push_back(bytes);
            return bytes <= limit;
        };
    };
    const cudnnMathType_t FMA = CUDNN_FMA_MATH;
    CHECK(ecu_conv_pick(perf, 5, CUDNN_TENSOR_OP_MATH, false, upto(1 << 30)) == 1, "tensor-core math allowed");
    asked.clear();
    CHECK(ecu_conv_pick(perf, 5, FMA, false, upto(1 << 30)) == 3, "FMA math: neither tensor-core nor default math");
    CHECK(asked.size() == 1 && asked[0] == (size_t)1 << 30, "one workspace asked for");
    asked.clear();
    CHECK(ecu_conv_pick(perf, 5, FMA, false, upto(1 << 20)) == 4, "a workspace that cannot be had is passed over");
    CHECK(asked.size() == 2, "two workspaces asked for");
    asked.clear();
    CHECK(ecu_conv_pick(perf, 5, FMA, true, upto(1 << 30)) == 4, "deterministic: the nondeterministic one passed over");
    CHECK(asked.size() == 1 && asked[0] == 4096, "only the deterministic one's workspace asked for");
    CHECK(ecu_conv_pick(perf, 5, FMA, false, upto(100)) == -1, "none fits");
    CHECK(ecu_conv_pick(perf, 0, FMA, false, upto(100)) == -1, "no results");
}

int main(void)
{
    check_conv_descriptors();
    check_conv_types();
    check_conv_pick();
    printf("test_kernel_conv: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}

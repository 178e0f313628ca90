/* test_kernel_conv.cpp: the pooling kernels' arithmetic (cuda/kernels/pool.h)
   compiled for the host and checked bit for bit against libember's CPU pool
   ops, over every floating dtype, windows that overlap, pad or tile the
   plane, ties and NaNs; and conv2d's cuDNN plan (src/conv_plan.h): the
   descriptors' dims against the shapes the CPU's conv2d and its adjoints
   give, the dtypes' cuDNN types and math (no TF32 unless allowed), cuDNN's
   int range, and the choice among ranked algorithms. What it cannot check is
   cuDNN itself, or launches, atomics and synchronisation. */
#include "check.h"
#include "ember.h"
#include "kernels/pool.h"
#include "ops/nn.h"
#include "src/conv_plan.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <vector>

using namespace ember_cuda;

static const int FLOATS[] = {EMBER_FLOAT32, EMBER_FLOAT64, EMBER_FLOAT16, EMBER_BFLOAT16};

/* n values of dtype dt: small integers (so windows tie) with a NaN, or normals */
static ember_tensor *operand(int ndim, const int64_t *shape, int dt, bool ties, unsigned seed)
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
static bool same_bytes(const ember_tensor *a, const void *b, size_t nbytes)
{
    return memcmp(ember_tensor_data(a), b, nbytes) == 0;
}

/* ------------------------------------------------------------------ pooling */
struct window {
    int64_t k[2], s[2], p[2];
};

static ember__pool_geom geom_of(const int64_t *xs, const window &w)
{
    ember__pool_geom p = {xs[0], xs[1], xs[2], xs[3], w.k[0], w.k[1], w.s[0], w.s[1], w.p[0], w.p[1], 0, 0};
    p.Ho = nn_out_size(p.H, p.kh, p.sh, p.ph, 1);
    p.Wo = nn_out_size(p.W, p.kw, p.sw, p.pw, 1);
    return p;
}

template <class T> static void check_pool_forward(const window &w, int dt, const int64_t *xs, ember_tensor *x)
{
    const pool_args a = {geom_of(xs, w), dt, ember_dtype_size(dt)};
    ember_tensor *vals, *idx, *avg;
    OK(ember_max_pool2d(x, w.k, w.s, w.p, &vals, &idx));
    OK(ember_avg_pool2d(x, w.k, w.s, w.p, &avg));
    const int64_t n = ember_tensor_numel(vals);
    CHECK(n == a.p.N * a.p.C * a.p.Ho * a.p.Wo, "pooled size %lld", (long long)n);
    std::vector<char> y((size_t)(n * a.es)), ya((size_t)(n * a.es));
    std::vector<int64_t> ix((size_t)n);
    const char *xd = (const char *)ember_tensor_data(x);
    for (int64_t o = 0; o < n; o++) {
        max_pool_at<T>(a, xd, y.data(), ix.data(), o);
        avg_pool_at<T>(a, xd, ya.data(), o);
    }
    CHECK(same_bytes(vals, y.data(), y.size()), "max_pool2d %s k {%lld, %lld} values", ember_dtype_name(dt),
          (long long)w.k[0], (long long)w.k[1]);
    CHECK(same_bytes(idx, ix.data(), ix.size() * 8), "max_pool2d %s k {%lld, %lld} indices", ember_dtype_name(dt),
          (long long)w.k[0], (long long)w.k[1]);
    CHECK(same_bytes(avg, ya.data(), ya.size()), "avg_pool2d %s k {%lld, %lld}", ember_dtype_name(dt),
          (long long)w.k[0], (long long)w.k[1]);
    ember_tensor_release(vals);
    ember_tensor_release(idx);
    ember_tensor_release(avg);
}

/* the adjoints: avg's gather against the CPU's scatter, max's scatter in
   sequence (what the atomic adds give when no two gradients meet) */
template <class T> static void check_pool_backward(const window &w, int dt, const int64_t *xs, ember_tensor *x)
{
    const pool_args a = {geom_of(xs, w), dt, ember_dtype_size(dt)};
    const int64_t ys[4] = {a.p.N, a.p.C, a.p.Ho, a.p.Wo}, nx = xs[0] * xs[1] * xs[2] * xs[3];
    const int64_t ny = ys[0] * ys[1] * ys[2] * ys[3];
    ember_tensor *g = operand(4, ys, dt, false, 7), *vals, *idx, *gx_avg, *gx_max;
    OK(ember_max_pool2d(x, w.k, w.s, w.p, &vals, &idx));
    OK(ember_avg_pool2d_backward(g, xs, w.k, w.s, w.p, &gx_avg));
    OK(ember_max_pool2d_backward(g, idx, xs, &gx_max));
    std::vector<char> mine((size_t)(nx * a.es));
    for (int64_t i = 0; i < nx; i++) avg_pool_backward_at<T>(a, (const char *)ember_tensor_data(g), mine.data(), i);
    CHECK(same_bytes(gx_avg, mine.data(), mine.size()), "avg_pool2d_backward %s k {%lld, %lld} s {%lld, %lld}",
          ember_dtype_name(dt), (long long)w.k[0], (long long)w.k[1], (long long)w.s[0], (long long)w.s[1]);
    std::vector<T> acc((size_t)nx, (T)0);
    const int64_t *ix = (const int64_t *)ember_tensor_data(idx);
    for (int64_t k = 0; k < ny; k++) {
        int64_t at;
        CHECK(max_pool_backward_target(a.p, ix, k, &at), "index %lld of output %lld", (long long)ix[k], (long long)k);
        acc[(size_t)at] += load<T>((const char *)ember_tensor_data(g) + k * a.es, dt);
    }
    for (int64_t i = 0; i < nx; i++) store<T>(mine.data() + i * a.es, dt, acc[(size_t)i]);
    CHECK(same_bytes(gx_max, mine.data(), mine.size()), "max_pool2d_backward %s k {%lld, %lld}",
          ember_dtype_name(dt), (long long)w.k[0], (long long)w.k[1]);
    for (ember_tensor *t : {g, vals, idx, gx_avg, gx_max}) ember_tensor_release(t);
}

static void check_pooling(void)
{
    const window windows[] = {{{2, 2}, {2, 2}, {0, 0}}, {{3, 3}, {2, 2}, {1, 1}}, {{3, 2}, {1, 1}, {1, 0}},
                              {{2, 3}, {3, 1}, {0, 1}}, {{1, 1}, {2, 2}, {0, 0}}, {{4, 4}, {1, 2}, {2, 2}}};
    const int64_t xs[4] = {2, 3, 7, 6};
    for (const window &w : windows)
        for (int dt : FLOATS)
            for (bool ties : {true, false}) {
                ember_tensor *x = operand(4, xs, dt, ties, 11);
                if (dt == EMBER_FLOAT64) {
                    check_pool_forward<double>(w, dt, xs, x);
                    check_pool_backward<double>(w, dt, xs, x);
                } else {
                    check_pool_forward<float>(w, dt, xs, x);
                    check_pool_backward<float>(w, dt, xs, x);
                }
                ember_tensor_release(x);
            }
    /* an index outside its plane is found, not followed */
    ember__pool_geom p = {1, 2, 3, 3, 0, 0, 0, 0, 0, 0, 2, 2};
    const int64_t idx[8] = {0, 4, 8, 3, 3, -1, 2, 9};
    int64_t at;
    CHECK(max_pool_backward_target(p, idx, 2, &at) && at == 8, "index 8 of a 3 x 3 plane goes to %lld", (long long)at);
    CHECK(max_pool_backward_target(p, idx, 4, &at) && at == 9 + 3, "output 4 (plane 1) goes to %lld", (long long)at);
    CHECK(!max_pool_backward_target(p, idx, 5, &at), "index -1 is refused");
    CHECK(!max_pool_backward_target(p, idx, 7, &at), "index 9 of a 3 x 3 plane is refused");
}

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
    }
    std::vector<size_t> asked;
    auto upto = [&asked](size_t limit) {
        return [&asked, limit](size_t bytes) {
            asked.push_back(bytes);
            return bytes <= limit;
        };
    };
    CHECK(ecu_conv_pick(perf, 5, CUDNN_TENSOR_OP_MATH, upto(1 << 30)) == 1, "tensor-core math allowed: the first");
    asked.clear();
    CHECK(ecu_conv_pick(perf, 5, CUDNN_FMA_MATH, upto(1 << 30)) == 3, "FMA math: neither tensor-core nor default math");
    CHECK(asked.size() == 1 && asked[0] == (size_t)1 << 30, "one workspace asked for");
    asked.clear();
    CHECK(ecu_conv_pick(perf, 5, CUDNN_FMA_MATH, upto(1 << 20)) == 4, "a workspace that cannot be had is passed over");
    CHECK(asked.size() == 2, "two workspaces asked for");
    CHECK(ecu_conv_pick(perf, 5, CUDNN_FMA_MATH, upto(100)) == -1, "none fits");
    CHECK(ecu_conv_pick(perf, 0, CUDNN_FMA_MATH, upto(100)) == -1, "no results");
}

int main(void)
{
    check_pooling();
    check_conv_descriptors();
    check_conv_types();
    check_conv_pick();
    printf("test_kernel_conv: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}

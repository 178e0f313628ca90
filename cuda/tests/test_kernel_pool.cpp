/* test_kernel_pool.cpp: the pooling kernels' arithmetic (cuda/kernels/pool.h)
   compiled for the host and checked bit for bit against libember's CPU pool
   ops, over every floating dtype, windows that overlap, pad or tile the
   plane, ties and NaNs, and an index outside its plane refused. What it
   cannot check is launches, atomics and synchronisation. */
#include "check.h"
#include "ember.h"
#include "kernels/pool.h"
#include "ops/nn.h"

using namespace ember_cuda;

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

int main(void)
{
    check_pooling();
    printf("test_kernel_pool: %d checks, %d failures\n", checks, failures);
    return failures ? 1 : 0;
}

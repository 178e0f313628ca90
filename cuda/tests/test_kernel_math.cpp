/* test_kernel_math.cpp: the arithmetic of the CUDA kernels, compiled for the
   host from the same headers (cuda/kernels/) and checked against libember's
   CPU results, so it is tested on machines without a GPU. Checked: the
   dtype conversions bit for bit (every float16 and bfloat16, a million float
   bit patterns, saturating integer stores); each unary op (gelu and clamp
   with their attrs too) in float32 within its stated ulp of the CPU and in
   float64 bit for bit; every binary and
   comparison op and relu_backward over every dtype through the iterator
   (iter.cpp's description of broadcast and transposed operands) against the
   CPU's result; where, converting and copying; the allocator's size
   classes (the random draws and optimizer steps: test_kernel_runtime.cpp). What it cannot check is CUDA's own math library
   (expf, tanhf, ... on the device), whose error bounds NVIDIA documents. */
#include "check.h"
#include "ember.h"
#include "kernels/elementwise.h"
#include "kernels/matmul_int.h"
#include "kernels/reduce.h"
#include "src/cuda_backend.h"
#include "src/gemm_layout.h"
#include "src/size_class.h"
#include "tests/kernel_test.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <vector>

using namespace ember_cuda;

/* ------------------------------------------------------------------ dtypes */
static void check_half_and_bf16(void)
{
    std::vector<uint16_t> all(65536);
    for (int i = 0; i < 65536; i++) all[i] = (uint16_t)i;
    for (int dt : {EMBER_FLOAT16, EMBER_BFLOAT16}) {
        ember_tensor *h = from(all.data(), dt, 65536), *f = converted(h, EMBER_FLOAT32);
        const float *cpu = (const float *)ember_tensor_data(f);
        for (int i = 0; i < 65536; i++) {
            float v = dt == EMBER_FLOAT16 ? ember__half_to_float((uint16_t)i) : ember__bf16_to_float((uint16_t)i);
            bool both_nan = v != v && cpu[i] != cpu[i];   /* the CPU's path through double quiets NaNs */
            CHECK(both_nan || ember__bits_of_float(v) == ember__bits_of_float(cpu[i]), "%s bits %04x: %08x, cpu %08x",
                  ember_dtype_name(dt), i, ember__bits_of_float(v), ember__bits_of_float(cpu[i]));
        }
        ember_tensor_release(h);
        ember_tensor_release(f);
    }
    /* float32 to float16/bfloat16: random bit patterns and the rounding edges */
    std::vector<float> fs;
    uint64_t s = 88172645463325252ull;
    for (int i = 0; i < 1000000; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        fs.push_back(ember__float_of_bits((uint32_t)s));
    }
    for (float v : {0.0f, -0.0f, 65504.0f, 65520.0f, 65519.99f, 5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f,
                    INFINITY, -INFINITY, NAN, 1.00048828125f, 1.00146484375f})
        fs.push_back(v);
    ember_tensor *f = from(fs.data(), EMBER_FLOAT32, (int64_t)fs.size());
    for (int dt : {EMBER_FLOAT16, EMBER_BFLOAT16}) {
        ember_tensor *h = converted(f, dt);
        const uint16_t *cpu = (const uint16_t *)ember_tensor_data(h);
        for (size_t i = 0; i < fs.size(); i++) {
            uint16_t v = dt == EMBER_FLOAT16 ? ember__float_to_half(fs[i]) : ember__float_to_bf16(fs[i]);
            CHECK(v == cpu[i], "%s of %08x: %04x, cpu %04x", ember_dtype_name(dt), ember__bits_of_float(fs[i]), v,
                  cpu[i]);
        }
        ember_tensor_release(h);
    }
    ember_tensor_release(f);
}

static void check_integer_stores(void)
{
    const double vs[] = {0, -0.0, 2.5, -2.5, 255.9, 256, -1, 300, 2147483647.5, 2147483648.0, -2147483649.0,
                         1e19, -1e19, 9.2233720368547758e18, INFINITY, -INFINITY, NAN, 1e-300};
    const int n = sizeof vs / sizeof *vs;
    ember_tensor *d = from(vs, EMBER_FLOAT64, n);
    for (int dt : {EMBER_INT32, EMBER_INT64, EMBER_UINT8, EMBER_BOOL, EMBER_FLOAT32, EMBER_FLOAT16}) {
        ember_tensor *c = converted(d, dt);
        const char *cpu = (const char *)ember_tensor_data(c);
        int size = ember_dtype_size(dt);
        for (int i = 0; i < n; i++) {
            char mine[8] = {0};
            ember__store(mine, dt, vs[i]);
            CHECK(memcmp(mine, cpu + i * size, (size_t)size) == 0, "%g to %s", vs[i], ember_dtype_name(dt));
        }
        ember_tensor_release(c);
    }
    ember_tensor_release(d);
}

/* ------------------------------------------------------------------ unary */
/* the distance of two floats in units in the last place; below FLT_MIN the
   CPU's polynomial exp flushes to 0, so results both under it are equal */
static int64_t ulps(float a, float b)
{
    if (a != a || b != b) return (a != a) == (b != b) ? 0 : INT32_MAX;
    if (a == b || (fabsf(a) < FLT_MIN && fabsf(b) < FLT_MIN)) return 0;
    int32_t ia = (int32_t)ember__bits_of_float(a), ib = (int32_t)ember__bits_of_float(b);
    if (ia < 0) ia = INT32_MIN - ia;
    if (ib < 0) ib = INT32_MIN - ib;
    return llabs((int64_t)ia - ib);
}

typedef int (*unary_fn)(ember_tensor *, ember_tensor **);

struct unary_case {
    int op;
    const char *name;
    unary_fn cpu;
    ecu_unary_attrs attrs;
};

/* gelu and clamp with fixed attrs */
static int gelu_erf(ember_tensor *a, ember_tensor **out) { return ember_gelu(a, 0, out); }
static int gelu_tanh(ember_tensor *a, ember_tensor **out) { return ember_gelu(a, 1, out); }
static int clamp_both(ember_tensor *a, ember_tensor **out) { return ember_clamp(a, 1, -0.7, 1, 2.5, out); }
static int clamp_hi(ember_tensor *a, ember_tensor **out) { return ember_clamp(a, 0, 0, 1, 200.3, out); }
static int clamp_crossed(ember_tensor *a, ember_tensor **out) { return ember_clamp(a, 1, 3, 1, -1, out); }
static int clamp_whole(ember_tensor *a, ember_tensor **out) { return ember_clamp(a, 1, 2, 1, 200, out); }
static int clamp_whole_crossed(ember_tensor *a, ember_tensor **out) { return ember_clamp(a, 1, 3, 1, 1, out); }

static const unary_case UNARY_CASES[] = {
#define OP(...)
#define BINARY(...)
#define UNARY(E, n, ...) {EMBER_OP_##E, #n, ember_##n, {}},
#include "ops/ops.def"
    {EMBER_OP_GELU, "gelu", gelu_erf, {0, 0, 0, 0, 0}},
    {EMBER_OP_GELU, "gelu(tanh)", gelu_tanh, {1, 0, 0, 0, 0}},
    {EMBER_OP_CLAMP, "clamp(-0.7, 2.5)", clamp_both, {0, 1, 1, -0.7, 2.5}},
    {EMBER_OP_CLAMP, "clamp(nil, 200.3)", clamp_hi, {0, 0, 1, 0, 200.3}},
    {EMBER_OP_CLAMP, "clamp(3, -1)", clamp_crossed, {0, 1, 1, 3, -1}},
    {EMBER_OP_CLAMP, "clamp(2, 200)", clamp_whole, {0, 1, 1, 2, 200}},
    {EMBER_OP_CLAMP, "clamp(3, 1)", clamp_whole_crossed, {0, 1, 1, 3, 1}},
};

/* clamp refuses bounds an integer tensor cannot hold (fractions, values
   past its range: ember__clamp_bounds): those cases run on floats and bool */
static bool clamp_refused(const unary_case &c, int dt)
{
    if (c.op != EMBER_OP_CLAMP || dt == EMBER_BOOL) return false;
    for (double v : {c.attrs.lo, c.attrs.hi})
        if (v != floor(v) || (dt == EMBER_UINT8 && (v < 0 || v > 255))) return true;
    return false;
}

/* float32 ulps between the kernels (libm's expf, tanhf and erff here) and
   the CPU, whose exp, tanh and erf are branch-free polynomials
   (core/src/internal.h): as measured over unary_inputs(); 0 where both call
   the same libm function or do exact arithmetic */
static int float32_bound(int op)
{
    switch (op) {
    case EMBER_OP_EXP: case EMBER_OP_SIGMOID: case EMBER_OP_SILU: return 6;
    case EMBER_OP_TANH: case EMBER_OP_ERF: return 2;
    case EMBER_OP_GELU: return 8;
    case EMBER_OP_MISH: return 4;
    default: return 0;
    }
}

/* gelu of a negative x is 0.5 x (1 + erf or tanh) with 1 + erf cancelling:
   the few ulps of 1 between the CPU's polynomial and libm become 0.5 |x|
   times them, beyond the ulp bound in the result; measured within 2 ulps of 1 */
static bool gelu_cancels(int op, double x, double cpu, double mine)
{
    return op == EMBER_OP_GELU && fabs(cpu - mine) <= fabs(x) * FLT_EPSILON;
}

static std::vector<double> unary_inputs(void)
{
    std::vector<double> xs = {0.0, -0.0, 1.0, -1.0, 0.5, 1e-8, -1e-8, 88.0, -88.0, 100.0, -100.0, INFINITY,
                              -INFINITY, NAN, 0.625, -0.625, 4.0, -4.0, 3.9999, 1e30, -1e30};
    for (int i = -20000; i <= 20000; i++) xs.push_back(i * 0.0013);
    for (int i = 0; i < 200; i++) xs.push_back(ldexp(1.37, i - 100));
    return xs;
}

/* every value of the host kernel body against the CPU op, for one dtype */
static void unary_one(const unary_case &c, const std::vector<double> &xs, int dt)
{
    ember_tensor *d = from(xs.data(), EMBER_FLOAT64, (int64_t)xs.size()), *x = converted(d, dt), *cpu, *mine;
    OK(c.cpu(x, &cpu));
    OK(ember_empty(1, ember_tensor_shape(cpu), ember_tensor_dtype(cpu), EMBER_CPU, &mine));
    ember_tensor *ts[2] = {mine, x};
    ecu_iter it;
    ecu_iter_init(&it, 2, ts);
    ecu_compute ct = unary_compute(c.op, ember_tensor_dtype(cpu));
    for (int64_t i = 0; i < it.numel; i++) {
        if (ct == ECU_FLOAT) unary_at<float>(it, c.op, c.attrs, i);
        else if (ct == ECU_DOUBLE) unary_at<double>(it, c.op, c.attrs, i);
        else unary_at<int64_t>(it, c.op, c.attrs, i);
    }
    ember_tensor *a = converted(cpu, EMBER_FLOAT64), *b = converted(mine, EMBER_FLOAT64);
    const double *pa = (const double *)ember_tensor_data(a), *pb = (const double *)ember_tensor_data(b);
    bool f32 = ember_tensor_dtype(cpu) == EMBER_FLOAT32;   /* also integer inputs of float ops */
    int64_t bound = f32 ? float32_bound(c.op) : 0;
    for (size_t i = 0; i < xs.size(); i++) {
        bool same = (pa[i] != pa[i] && pb[i] != pb[i]) || memcmp(&pa[i], &pb[i], 8) == 0;
        if (f32) same = ulps((float)pa[i], (float)pb[i]) <= bound || gelu_cancels(c.op, xs[i], pa[i], pb[i]);
        CHECK(same, "%s %s(%.17g): cpu %.9g, kernel %.9g", ember_dtype_name(dt), c.name, xs[i], pa[i], pb[i]);
    }
    for (ember_tensor *t : {d, x, cpu, mine, a, b}) ember_tensor_release(t);
}

static void check_unary(void)
{
    std::vector<double> xs = unary_inputs(), ints;
    for (int i = -300; i <= 300; i++) ints.push_back(i);
    for (double v : {2147483647.0, -2147483648.0}) ints.push_back(v);
    for (const unary_case &c : UNARY_CASES) {
        unary_one(c, xs, EMBER_FLOAT32);
        unary_one(c, xs, EMBER_FLOAT64);
        for (int dt : {EMBER_INT32, EMBER_INT64, EMBER_UINT8, EMBER_BOOL})
            if (!clamp_refused(c, dt)) unary_one(c, ints, dt);
    }
}

/* ------------------------------------------------------------------ binary */
typedef int (*binary_fn)(ember_tensor *, ember_tensor *, ember_tensor **);

struct binary_case {
    int op;
    const char *name;
    binary_fn cpu;
};

static const binary_case BINARY_CASES[] = {
#define OP(...)
#define UNARY(...)
#define BINARY(E, n, ...) {EMBER_OP_##E, #n, ember_##n},
#include "ops/ops.def"
    {EMBER_OP_RELU_BACKWARD, "relu_backward", ember_relu_backward},
};

/* a {4, 3, 5} operand as the transpose of a {5, 3, 4} one, and a {3, 1}
   operand broadcast against it: strides of every kind */
static void binary_one(const binary_case &c, int dt)
{
    std::vector<double> va(60), vb(3);
    for (int i = 0; i < 60; i++) va[i] = (i * 37 % 23) * 0.5 - 5.0;
    for (int i = 0; i < 3; i++) vb[i] = i + (dt == EMBER_FLOAT32 || dt == EMBER_FLOAT64 ? 0.25 : 0.0);
    int64_t sa[3] = {5, 3, 4}, sb[2] = {3, 1};
    ember_tensor *a0, *b, *a, *cpu, *mine;
    OK(ember_from_data(va.data(), EMBER_FLOAT64, 3, sa, dt, EMBER_CPU, &a0));
    OK(ember_from_data(vb.data(), EMBER_FLOAT64, 2, sb, dt, EMBER_CPU, &b));
    OK(ember_transpose(a0, 0, 2, &a));
    OK(c.cpu(a, b, &cpu));
    OK(ember_empty(3, ember_tensor_shape(cpu), ember_tensor_dtype(cpu), EMBER_CPU, &mine));
    ember_tensor *ts[3] = {mine, a, b};
    ecu_iter it;
    ecu_iter_init(&it, 3, ts);
    int ct = c.op == EMBER_OP_DIV && !is_float_dtype(dt) ? EMBER_FLOAT32 : dt;
    for (int64_t i = 0; i < it.numel; i++) {
        switch (binary_compute(ct)) {
        case ECU_FLOAT: binary_at<float>(it, c.op, (int32_t)i); break;
        case ECU_DOUBLE: binary_at<double>(it, c.op, (int32_t)i); break;
        default: binary_at<int64_t>(it, c.op, (int32_t)i); break;
        }
    }
    /* the CPU lays its result out as its operands are (iter.c); the values
       are compared in row-major order */
    ember_tensor *cpu_rows;
    OK(ember_contiguous(cpu, &cpu_rows));
    size_t nbytes = (size_t)(60 * ember_dtype_size(ember_tensor_dtype(cpu)));
    CHECK(it.index32 && memcmp(ember_tensor_data(cpu_rows), ember_tensor_data(mine), nbytes) == 0,
          "%s over %s differs from the CPU", c.name, ember_dtype_name(dt));
    for (ember_tensor *t : {a0, b, a, cpu, cpu_rows, mine}) ember_tensor_release(t);
}

static void check_binary(void)
{
    for (const binary_case &c : BINARY_CASES) {
        CHECK(has_binary(c.op), "%s has no device kernel (elementwise.h makes them of ops.def's lines)",
              c.name);
        for (int dt = 0; dt < EMBER_DTYPE_COUNT; dt++) binary_one(c, dt);
    }
}

/* where over a float32 condition with a NaN (true) and zeros, an int32 and
   a float64 operand (the result float64) and same-dtype int64 operands
   beyond 2^53 (copied, not converted) */
static void check_where(void)
{
    const float cond[6] = {1, 0, NAN, -0.0f, 2, 0};
    const int32_t a32[3] = {7, -8, 9};
    const double b64[2] = {0.5, -1.5};
    const int64_t big[2] = {(1ll << 53) + 1, -((1ll << 60) + 3)};
    int64_t s6 = 6, s1 = 1, s3[2] = {1, 3}, s2[2] = {2, 1}, s23[2] = {2, 3};
    ember_tensor *c0, *c, *a, *b, *ia, *ib, *cpu, *mine;
    OK(ember_from_data(cond, EMBER_FLOAT32, 1, &s6, EMBER_FLOAT32, EMBER_CPU, &c0));
    OK(ember_view(c0, 2, s23, &c));
    OK(ember_from_data(a32, EMBER_INT32, 2, s3, EMBER_INT32, EMBER_CPU, &a));
    OK(ember_from_data(b64, EMBER_FLOAT64, 2, s2, EMBER_FLOAT64, EMBER_CPU, &b));
    OK(ember_from_data(big, EMBER_INT64, 2, s2, EMBER_INT64, EMBER_CPU, &ia));
    OK(ember_from_data(big + 1, EMBER_INT64, 1, &s1, EMBER_INT64, EMBER_CPU, &ib));
    ember_tensor *pairs[2][2] = {{a, b}, {ia, ib}};
    for (auto &p : pairs) {
        OK(ember_where(c, p[0], p[1], &cpu));
        OK(ember_empty(2, ember_tensor_shape(cpu), ember_tensor_dtype(cpu), EMBER_CPU, &mine));
        ember_tensor *ts[4] = {mine, c, p[0], p[1]};
        ecu_iter it;
        ecu_iter_init(&it, 4, ts);
        for (int64_t i = 0; i < it.numel; i++) where_at(it, i);
        CHECK(memcmp(ember_tensor_data(cpu), ember_tensor_data(mine),
                     (size_t)(6 * ember_dtype_size(ember_tensor_dtype(cpu)))) == 0,
              "where into %s differs from the CPU", ember_dtype_name(ember_tensor_dtype(cpu)));
        ember_tensor_release(cpu);
        ember_tensor_release(mine);
    }
    for (ember_tensor *t : {c0, c, a, b, ia, ib}) ember_tensor_release(t);
}

/* ------------------------------------------------------------------ iterator */
static void check_iterator_merges(void)
{
    int64_t shape[3] = {2, 3, 4}, one = 1;
    ember_tensor *x, *y, *s;
    OK(ember_empty(3, shape, EMBER_FLOAT32, EMBER_CPU, &x));
    OK(ember_empty(3, shape, EMBER_FLOAT64, EMBER_CPU, &y));
    OK(ember_empty(1, &one, EMBER_FLOAT32, EMBER_CPU, &s));
    ember_tensor *ts[3] = {x, y, s};
    ecu_iter it;
    ecu_iter_init(&it, 3, ts);
    CHECK(it.ndim == 1 && it.shape[0] == 24 && it.strides[0][0] == 4 && it.strides[1][0] == 8 &&
              it.strides[2][0] == 0, "contiguous operands and a scalar are one flat dim (ndim %d)", it.ndim);
    for (ember_tensor *t : {x, y, s}) ember_tensor_release(t);
}

/* ------------------------------------------------------------------ reductions
   Each result of the kernel body, its slice combined in order, against the
   CPU's sum, mean, max and min of a transposed {4, 3, 5} tensor (one NaN in
   the float case) over all dims, one dim and two, with and without keepdim. */
static void reduce_one(int op, int dt, int ndims, const int *dims, int keepdim)
{
    std::vector<double> v(60);
    for (int i = 0; i < 60; i++) v[i] = ((i * 29) % 31) * 0.75 - 9;
    if (is_float_dtype(dt) && (op == EMBER_OP_AMAX_ALL || op == EMBER_OP_AMIN_ALL)) v[17] = NAN;
    if (dt == EMBER_UINT8 || dt == EMBER_BOOL) for (double &x : v) x = fabs(x);
    int64_t shape[3] = {5, 3, 4};
    ember_tensor *a0, *a, *cpu, *mine;
    OK(ember_from_data(v.data(), EMBER_FLOAT64, 3, shape, dt, EMBER_CPU, &a0));
    OK(ember_transpose(a0, 0, 2, &a));
    unsigned mask = 0;
    for (int k = 0; k < ndims; k++) mask |= 1u << dims[k];
    if (ndims == 0) mask = 7;
    switch (op) {
    case EMBER_OP_SUM: OK(ember_sum(a, ndims, dims, keepdim, &cpu)); break;
    case EMBER_OP_MEAN: OK(ember_mean(a, ndims, dims, keepdim, &cpu)); break;
    case EMBER_OP_AMAX_ALL: OK(ember_amax_all(a, &cpu)); break;
    default: OK(ember_amin_all(a, &cpu)); break;
    }
    int odt = ember_tensor_dtype(cpu);
    OK(ember_empty(ember_tensor_ndim(cpu), ember_tensor_shape(cpu), odt, EMBER_CPU, &mine));
    ecu_reduce r;
    ecu_reduce_init(&r, a, mask, mine, false);
    for (int64_t o = 0; o < r.outer.numel; o++) {
        if (reduce_compute(op, dt) == ECU_INT64) reduce_store(r, op, o, reduce_slice<int64_t>(r, op, o, (int64_t)0, (int64_t)1));
        else reduce_store(r, op, o, reduce_slice<double>(r, op, o, (int64_t)0, (int64_t)1));
    }
    ember_tensor *c = converted(cpu, EMBER_FLOAT64), *m = converted(mine, EMBER_FLOAT64);
    const double *pc = (const double *)ember_tensor_data(c), *pm = (const double *)ember_tensor_data(m);
    double rtol = odt == EMBER_FLOAT32 ? 1e-6 : odt == EMBER_FLOAT64 ? 1e-15 : is_float_dtype(odt) ? 1e-2 : 0;
    for (int64_t i = 0; i < ember_tensor_numel(cpu); i++)
        CHECK((pc[i] != pc[i] && pm[i] != pm[i]) || fabs(pc[i] - pm[i]) <= rtol * fabs(pc[i]),
              "%s over %s (mask %u, keepdim %d) [%lld]: cpu %.17g, kernel %.17g", ember_dtype_name(odt),
              ember_dtype_name(dt), mask, keepdim, (long long)i, pc[i], pm[i]);
    for (ember_tensor *t : {a0, a, cpu, mine, c, m}) ember_tensor_release(t);
}

static void check_reductions(void)
{
    const int one[1] = {1}, two[2] = {0, 2};
    for (int dt = 0; dt < EMBER_DTYPE_COUNT; dt++) {
        for (int op : {EMBER_OP_SUM, EMBER_OP_MEAN}) {
            for (int keepdim = 0; keepdim < 2; keepdim++) {
                reduce_one(op, dt, 0, NULL, keepdim);
                reduce_one(op, dt, 1, one, keepdim);
                reduce_one(op, dt, 2, two, keepdim);
            }
        }
        reduce_one(EMBER_OP_AMAX_ALL, dt, 0, NULL, 0);
        reduce_one(EMBER_OP_AMIN_ALL, dt, 0, NULL, 0);
    }
}

/* softmax and log_softmax of a transposed {4, 3, 5} tensor along each dim
   (a row of -inf, a NaN and an integer input included), each row as the
   kernel computes it, in order, against the CPU */
static void softmax_one(int op, int dt, int dim)
{
    std::vector<double> v(60);
    for (int i = 0; i < 60; i++) v[i] = ((i * 23) % 29) * 0.4 - 5;
    if (is_float_dtype(dt)) {
        v[0] = v[20] = v[40] = -INFINITY;   /* one dim-0 row of a[:, 0, 0] */
        v[7] = NAN;
    }
    int64_t shape[3] = {5, 3, 4};
    ember_tensor *a0, *a, *cpu, *mine;
    OK(ember_from_data(v.data(), EMBER_FLOAT64, 3, shape, dt, EMBER_CPU, &a0));
    OK(ember_transpose(a0, 0, 2, &a));
    OK((op == EMBER_OP_SOFTMAX ? ember_softmax : ember_log_softmax)(a, dim, &cpu));
    OK(ember_empty(3, ember_tensor_shape(cpu), ember_tensor_dtype(cpu), EMBER_CPU, &mine));
    ecu_reduce r;
    ecu_reduce_init(&r, a, 1u << dim, mine, true);
    for (int64_t row = 0; row < r.outer.numel; row++) {
        double m = softmax_max(reduce_slice<double>(r, EMBER_OP_AMAX_ALL, row, (int64_t)0, (int64_t)1));
        softmax_write(r, op, row, (int64_t)0, (int64_t)1, m, softmax_sum(r, row, (int64_t)0, (int64_t)1, m));
    }
    ember_tensor *c = converted(cpu, EMBER_FLOAT64), *k = converted(mine, EMBER_FLOAT64);
    const double *pc = (const double *)ember_tensor_data(c), *pk = (const double *)ember_tensor_data(k);
    int odt = ember_tensor_dtype(cpu);
    double tol = odt == EMBER_FLOAT32 ? 2e-6 : odt == EMBER_FLOAT64 ? 1e-14 : 1e-2;
    for (int i = 0; i < 60; i++)
        CHECK((pc[i] != pc[i] && pk[i] != pk[i]) || pc[i] == pk[i] || fabs(pc[i] - pk[i]) <= tol * (1 + fabs(pc[i])),
              "%s over %s dim %d [%d]: cpu %.17g, kernel %.17g", op == EMBER_OP_SOFTMAX ? "softmax" : "log_softmax",
              ember_dtype_name(dt), dim, i, pc[i], pk[i]);
    for (ember_tensor *t : {a0, a, cpu, mine, c, k}) ember_tensor_release(t);
}

static void check_softmax(void)
{
    for (int op : {EMBER_OP_SOFTMAX, EMBER_OP_LOG_SOFTMAX})
        for (int dt : {EMBER_FLOAT32, EMBER_FLOAT64, EMBER_FLOAT16, EMBER_BFLOAT16, EMBER_INT32})
            for (int dim = 0; dim < 3; dim++) softmax_one(op, dt, dim);
}

/* ------------------------------------------------------------------ cuBLAS layouts
   cublasGemmEx's definition, column-major: C (m x n, ldc) = op(A) op(B),
   op(X)[i][j] = X[j + i ld] when transposed, X[i + j ld] when not. */
static double cm_at(const double *x, const ecu_gemm_operand &o, int64_t i, int64_t j)
{
    return o.transpose ? x[o.offset + j + i * o.ld] : x[o.offset + i + j * o.ld];
}

/* matmul.cpp's call, C^T (N x M) = B^T A^T, evaluated on the host for a
   transposed, a strided and a contiguous operand, against ember_matmul */
static void check_gemm_layouts(void)
{
    const int64_t M = 5, K = 3, N = 4;
    int64_t sa[2] = {K, M}, sb[2] = {K, 2 * N};
    std::vector<double> va(15), vb(24);
    for (int i = 0; i < 15; i++) va[i] = i * 0.5 - 3;
    for (int i = 0; i < 24; i++) vb[i] = (i % 7) - 2.5;
    ember_tensor *a0, *b0, *a, *b, *cpu;
    OK(ember_from_data(va.data(), EMBER_FLOAT64, 2, sa, EMBER_FLOAT64, EMBER_CPU, &a0));
    OK(ember_from_data(vb.data(), EMBER_FLOAT64, 2, sb, EMBER_FLOAT64, EMBER_CPU, &b0));
    OK(ember_transpose(a0, 0, 1, &a));                 /* (M, K), strides (1, M): read transposed */
    OK(ember_narrow(b0, 1, 1, N, &b));                 /* (K, N), strides (2N, 1), offset 1 */
    OK(ember_matmul(a, b, &cpu));
    ecu_gemm_operand la = {}, lb = {};
    const int64_t *st_a = ember_tensor_strides(a), *st_b = ember_tensor_strides(b);
    CHECK(ecu_gemm_layout(ember_tensor_offset(a), M, K, st_a[0], st_a[1], &la), "a layout for the transposed a");
    CHECK(ecu_gemm_layout(ember_tensor_offset(b), K, N, st_b[0], st_b[1], &lb), "a layout for the narrowed b");
    CHECK(la.transpose && !lb.transpose, "a is read transposed, b as stored");
    const double *pa = va.data(), *pb = vb.data(), *want = (const double *)ember_tensor_data(cpu);
    for (int64_t i = 0; i < N; i++)        /* C^T[i][j] = sum_k op(B^T)[i][k] op(A^T)[k][j] */
        for (int64_t j = 0; j < M; j++) {
            double c = 0;
            for (int64_t k = 0; k < K; k++) c += cm_at(pb, lb, i, k) * cm_at(pa, la, k, j);
            CHECK(c == want[j * N + i], "C[%lld][%lld] %g, cpu %g", (long long)j, (long long)i, c, want[j * N + i]);
        }
    ecu_gemm_operand o = {};
    CHECK(!ecu_gemm_layout(0, 3, 4, 8, 2, &o), "no unit stride: copied first");
    CHECK(ecu_gemm_layout(0, 1, 4, 0, 1, &o) && !o.transpose && o.ld == 4, "a row vector");
    CHECK(ecu_gemm_layout(0, 4, 1, 1, 0, &o) && o.ld >= 1, "a column vector");
    for (ember_tensor *t : {a0, b0, a, b, cpu}) ember_tensor_release(t);
}

/* ------------------------------------------------------------------ allocator */
static void check_size_classes(void)
{
    int last = 0;
    for (size_t n = 0; n < (1u << 22); n += n < 4096 ? 1 : 97) {
        int c = ecu_size_class(n);
        size_t b = ecu_class_bytes(c);
        CHECK(c >= last && c < ECU_NCLASSES, "class of %zu", n);
        CHECK(b >= n && (n <= ECU_MIN_CLASS_BYTES || b * 4 <= n * 5), "%zu bytes in a class of %zu", n, b);
        CHECK(c == 0 || ecu_class_bytes(c - 1) < n, "%zu fits a smaller class", n);
        last = c;
    }
    CHECK(ecu_size_class((size_t)1 << 62) < ECU_NCLASSES, "the largest class");
}

/* matmul_int.cu's element over a transposed and a narrowed operand, every
   integer dtype and bool, values whose products wrap int64, bit for bit
   against ember_matmul */
static void check_int_gemm(void)
{
    const int64_t M = 3, K = 4, N = 5;
    int64_t sa[2] = {K, M}, sb[2] = {K, N + 2};
    std::vector<double> va(12), vb(28);
    for (int i = 0; i < 12; i++) va[i] = (i * 37 % 11) - 5 + (i == 7 ? 3e9 : 0);
    for (int i = 0; i < 28; i++) vb[i] = (i * 13 % 9) - 4 + (i == 9 ? 4e9 : 0);
    for (int dt : {EMBER_INT64, EMBER_INT32, EMBER_UINT8, EMBER_BOOL}) {
        ember_tensor *a0, *b0, *a, *b, *cpu;
        OK(ember_from_data(va.data(), EMBER_FLOAT64, 2, sa, dt, EMBER_CPU, &a0));
        OK(ember_from_data(vb.data(), EMBER_FLOAT64, 2, sb, dt, EMBER_CPU, &b0));
        OK(ember_transpose(a0, 0, 1, &a));   /* (M, K), strides (1, M) */
        OK(ember_narrow(b0, 1, 2, N, &b));   /* (K, N), strides (N + 2, 1), offset 2 */
        OK(ember_matmul(a, b, &cpu));
        int es = ember_dtype_size(dt);
        std::vector<char> got((size_t)(M * N * es));
        const int64_t *st_a = ember_tensor_strides(a), *st_b = ember_tensor_strides(b);
        ecu_int_gemm g = {(const char *)ember_tensor_data(a0) + ember_tensor_offset(a) * es,
                          (const char *)ember_tensor_data(b0) + ember_tensor_offset(b) * es, got.data(), M, N, K,
                          st_a[0], st_a[1], st_b[0], st_b[1], dt, es};
        for (int64_t e = 0; e < M * N; e++) int_gemm_at(g, e);
        CHECK(memcmp(got.data(), ember_tensor_data(cpu), got.size()) == 0, "an integer product in %s",
              ember_dtype_name(dt));
        for (ember_tensor *t : {a0, b0, a, b, cpu}) ember_tensor_release(t);
    }
}

int main(void)
{
    check_half_and_bf16();
    check_integer_stores();
    check_unary();
    check_binary();
    check_where();
    check_iterator_merges();
    check_gemm_layouts();
    check_int_gemm();
    check_reductions();
    check_softmax();
    check_size_classes();
    return report("test_kernel_math");
}

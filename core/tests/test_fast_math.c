/* test_fast_math.c: the float32 exp, tanh, sigmoid and erf approximations of
   internal.h, which the elementwise, softmax and RNN cell kernels use (and
   gelu's rational erf, formulas.h: its widths only):
   - their error against libm in double, in units in the last place of the
     float32 result, over a dense sweep of all 2^32 float32 bit patterns
     (every one of them with the argument "all": a few minutes);
   - the same bits at every vector width: the approximations compiled here
     for baseline x86-64 (SSE2) and for AVX2, and the library's own ops,
     whose kernels run at the widest width the CPU has (AVX-512 where it
     has it: internal.h's EMBER_SIMD).
   Prints the largest errors found, the figures of docs/dtypes.md. */
#include "check.h"
#include "internal.h"
#include "ops/ops.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "formulas.h"   /* after <math.h>: it has no includes of its own */

#define CHUNK (1 << 16)

typedef void (*sweep_fn)(const float *restrict x, float *restrict y, int64_t n);

/* one loop per function and width, from one source */
#define SWEEP(NAME, FN, WIDTH, ATTR)                                                           \
    ATTR static void NAME##_##WIDTH(const float *restrict x, float *restrict y, int64_t n)     \
    {                                                                                          \
        for (int64_t i = 0; i < n; i++) y[i] = FN(x[i]);                                       \
    }
#define SWEEPS(WIDTH, ATTR)                                                                    \
    SWEEP(exp, ember__expf, WIDTH, ATTR)                                                       \
    SWEEP(tanh, ember__tanhf, WIDTH, ATTR)                                                     \
    SWEEP(sigmoid, sigmoidf_, WIDTH, ATTR)                                                     \
    SWEEP(erf, ember__erff, WIDTH, ATTR)                                                       \
    SWEEP(gelu, ember__gelu_erf_f32, WIDTH, ATTR)
SWEEPS(base, )
#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_AVX2 1
SWEEPS(avx2, __attribute__((target("avx2,fma"))))
#define AVX2(NAME) NAME##_avx2
#else
#define AVX2(NAME) NULL
#endif

static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }

typedef struct {
    const char *name;
    sweep_fn base, avx2;
    double (*ref)(double);
    int (*op)(ember_tensor *, ember_tensor **);
    double bound_ulp;   /* what docs/dtypes.md states */
    double max_ulp, max_rel;
    float worst;
    int64_t bad_special, width_diffs;
} fn_case;

/* The error of y in units in the last place of the float32 nearest to ref;
   ref a normal float32 value or 0. */
static double ulp_error(float y, double ref)
{
    if (ref == 0) return y == 0 ? 0 : INFINITY;
    int e;
    frexp(ref, &e);
    return fabs((double)y - ref) / ldexp(1.0, e - 24);
}

/* Whether a and b hold the same n values bit for bit, NaNs of either sign
   counting as one (the compiler may turn 1 + -x into 1 - x, which flips the
   sign of a NaN x passed through) */
static bool same_bits(const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        if (ember__bits_of_float(a[i]) != ember__bits_of_float(b[i]) && !(a[i] != a[i] && b[i] != b[i])) return false;
    return true;
}

/* Checks one chunk of inputs of case c: the widths against each other and
   against the library's op, and each result against libm. */
static void check_chunk(fn_case *c, const float *x, int64_t n, float *y, float *y2)
{
    c->base(x, y, n);
#ifdef HAVE_AVX2
    if (__builtin_cpu_supports("avx2")) {
        c->avx2(x, y2, n);
        if (!same_bits(y, y2, n)) c->width_diffs++;
    }
#else
    EMBER_UNUSED(y2);   /* one width only off x86-64 */
#endif
    int64_t shape[1] = {n};
    ember_tensor *t = NULL, *r = NULL;
    CHECK(ember_from_data(x, EMBER_FLOAT32, 1, shape, EMBER_FLOAT32, EMBER_CPU, &t) == EMBER_OK);
    CHECK(c->op(t, &r) == EMBER_OK);
    if (r && !same_bits(y, ember_tensor_data(r), n)) c->width_diffs++;
    ember_tensor_release(t);
    ember_tensor_release(r);
    for (int64_t i = 0; i < n; i++) {
        double ref = c->ref((double)x[i]);
        if (x[i] != x[i] || isinf((float)ref)) {   /* NaN stays NaN; overflow gives inf */
            if (!(x[i] != x[i] ? y[i] != y[i] : y[i] == (float)ref)) c->bad_special++;
            continue;
        }
        if (ref != 0 && fabs(ref) < FLT_MIN) {   /* subnormal results: 0 or below FLT_MIN */
            if (!(fabsf(y[i]) < FLT_MIN)) c->bad_special++;
            continue;
        }
        double u = ulp_error(y[i], ref);
        if (u > c->max_ulp) {
            c->max_ulp = u;
            c->worst = x[i];
        }
        if (ref != 0 && fabs((double)y[i] - ref) / fabs(ref) > c->max_rel) c->max_rel = fabs((double)y[i] - ref) / fabs(ref);
    }
}

/* float32 gelu (the exact form, formulas.h) at each width and through the
   library's op: 1 where they differ in a bit */
static int gelu_widths(const float *x, int64_t n, float *y, float *y2)
{
    int diff = 0;
    gelu_base(x, y, n);
#ifdef HAVE_AVX2
    if (__builtin_cpu_supports("avx2")) {
        gelu_avx2(x, y2, n);
        diff |= !same_bits(y, y2, n);
    }
#else
    (void)y2;   /* one width only (ARM64, or no target clones) */
#endif
    int64_t shape[1] = {n};
    ember_tensor *t = NULL, *r = NULL;
    CHECK(ember_from_data(x, EMBER_FLOAT32, 1, shape, EMBER_FLOAT32, EMBER_CPU, &t) == EMBER_OK);
    CHECK(ember_gelu(t, 0, &r) == EMBER_OK);
    if (r) diff |= !same_bits(y, ember_tensor_data(r), n);
    ember_tensor_release(t);
    ember_tensor_release(r);
    return diff;
}

int main(int argc, char **argv)
{
    /* the dense sweep steps by a prime, so it meets every exponent and
       mantissa pattern (a sparser one under the sanitizers, which make each
       element ten times slower); "all" takes every bit pattern */
#ifdef UNDER_ASAN
    uint64_t dense = 1021;
#else
    uint64_t dense = 61;
#endif
    uint64_t step = argc > 1 && strcmp(argv[1], "all") == 0 ? 1 : dense;
    int64_t gelu_diffs = 0;
    fn_case cases[] = {
#define CASE(NAME, REF, OP, BOUND) {#NAME, NAME##_base, AVX2(NAME), REF, OP, BOUND, 0, 0, 0, 0, 0}
        CASE(exp, exp, ember_exp, 1.5),
        CASE(tanh, tanh, ember_tanh, 2),
        CASE(sigmoid, ref_sigmoid, ember_sigmoid, 3),
        CASE(erf, erf, ember_erf, 3),
    };
    float *x = malloc(sizeof(float) * CHUNK), *y = malloc(sizeof(float) * CHUNK), *y2 = malloc(sizeof(float) * CHUNK);
    CHECK(x && y && y2);
    if (!x || !y || !y2) return 1;
    for (uint64_t b = 0; b < (1ull << 32); b += step * CHUNK) {
        int64_t n = 0;
        for (uint64_t v = b; v < b + step * CHUNK && v < (1ull << 32); v += step) x[n++] = ember__float_of_bits((uint32_t)v);
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) check_chunk(&cases[k], x, n, y, y2);
        gelu_diffs += gelu_widths(x, n, y, y2);
    }
    /* gelu's error against float64 is spec/gelu_spec.lua's (1 + erf cancels
       below -1, so no ulp bound holds there); here its widths agree */
    printf("gelu     %lld chunks differing between widths\n", (long long)gelu_diffs);
    CHECK(gelu_diffs == 0);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        fn_case *c = &cases[k];
        printf("%-8s max error %.3f ulp (relative %.3g) at x = %.9g; %lld wrong special values, %lld chunks "
               "differing between widths\n", c->name, c->max_ulp, c->max_rel, (double)c->worst,
               (long long)c->bad_special, (long long)c->width_diffs);
        CHECK(c->max_ulp <= c->bound_ulp);
        CHECK(c->bad_special == 0);
        CHECK(c->width_diffs == 0);
    }
    free(x);
    free(y);
    free(y2);
    if (failures) fprintf(stderr, "%d checks failed\n", failures);
    return failures != 0;
}

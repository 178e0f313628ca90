/* formulas.h: the element formulas of the elementwise ops that are more than
   an expression on an ops.def line (integer and float powers, gelu, clamp,
   relu's adjoint), written once for the CPU kernels (ops/elementwise.c) and
   the CUDA kernels (cuda/kernels/elementwise.h).

   The float32 forms call ember__tanhf and ember__erff, which each device
   defines for itself: the core's branch-free polynomial forms (internal.h)
   on the host, CUDA's math library on the device (the same few-ulp bounds,
   cuda/tests/test_kernel_math.cpp). So this header has no includes of its
   own: the CPU includes it after internal.h, cuda/kernels/elementwise.h inside
   namespace ember_cuda after its own ember__tanhf and ember__erff, after
   <math.h> and <stdint.h>. EMBER_FORMULA is always_inline on the host (the
   vectorised loops of every width inline it, internal.h's EMBER_SIMD) and
   EMBER_HD under CUDA (cuda/kernels/hd.h). Plain C that is also C++. */
#ifndef EMBER_FORMULAS_H
#define EMBER_FORMULAS_H

#ifndef EMBER_FORMULA
#define EMBER_FORMULA static inline __attribute__((always_inline))
#endif

/* x to an integer power, wrapping as integer arithmetic does; a negative
   power is 0 but for x = 1 and -1 (fwd_binary refuses negative powers before
   a kernel runs, as PyTorch) */
EMBER_FORMULA int64_t ember__ipow(int64_t x, int64_t y)
{
    if (y < 0) return x == 1 ? 1 : x == -1 ? (y & 1 ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)x;
    while (y) {
        if (y & 1) r *= b;
        b *= b;
        y >>= 1;
    }
    return (int64_t)r;
}

/* x^y, the square as one multiply: what libm's pow rounds it to, and exact
   where CUDA's pow (within 2 ulp) might not be */
EMBER_FORMULA float ember__powf(float x, float y) { return y == 2.0f ? x * x : powf(x, y); }
EMBER_FORMULA double ember__pow(double x, double y) { return y == 2.0 ? x * x : pow(x, y); }

/* gelu x Phi(x): the tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
   or the exact form 0.5 x (1 + erf(x / sqrt 2)); float32 in float over the
   device's ember__tanhf and ember__erff, every other dtype in double */
#define EMBER_SQRT_2_OVER_PI 0.79788456080286535588
#define EMBER_SQRT_HALF 0.70710678118654752440

EMBER_FORMULA float ember__gelu_tanh_f32(float x)
{
    return 0.5f * x * (1.0f + ember__tanhf((float)EMBER_SQRT_2_OVER_PI * (x + 0.044715f * x * x * x)));
}

/* erf for gelu in float32: x P(x^2) / Q(x^2) on x clamped to [-4, 4]
   (Eigen's and XLA's rational form; erf(4) is 1 in float32), Horner's rule
   in plain multiplies and adds (the same bits at every width and on CUDA),
   no exp and one division. gelu over it is within 6 ulp of the float64
   gelu for x >= -1 and within 2.7e-7 |x| everywhere (below -1, 1 + erf
   cancels: spec/gelu_spec.lua). NaN stays NaN. */
EMBER_FORMULA float ember__erf_rational_f32(float x)
{
    float c = x < -4.0f ? -4.0f : x > 4.0f ? 4.0f : x;
    float z = c * c;
    float p = (((((-2.72614225801306e-10f * z + 2.77068142495902e-08f) * z - 2.10102402082508e-06f) * z -
                 5.69250639462346e-05f) * z - 7.34990630326855e-04f) * z - 2.95459980854025e-03f) * z -
              1.60960333262415e-02f;
    float q = (((-1.45660718464996e-05f * z - 2.13374055278905e-04f) * z - 1.68282697438203e-03f) * z -
               7.37332916720468e-03f) * z - 1.42647390514189e-02f;
    float r = c * p / q;
    return x != x ? x : r;
}

EMBER_FORMULA float ember__gelu_erf_f32(float x)
{
    return 0.5f * x * (1.0f + ember__erf_rational_f32(x * (float)EMBER_SQRT_HALF));
}

EMBER_FORMULA float ember__gelu_f32(float x, int tanh_form)
{
    return tanh_form ? ember__gelu_tanh_f32(x) : ember__gelu_erf_f32(x);
}

EMBER_FORMULA double ember__gelu_f64(double x, int tanh_form)
{
    if (tanh_form) return 0.5 * x * (1 + tanh(EMBER_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
    return 0.5 * x * (1 + erf(x * EMBER_SQRT_HALF));
}

/* gelu's slope, gelu_backward's factor: Phi(x) + x phi(x) for the exact form;
   0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2) with t = tanh(k (x + c x^3)),
   k = sqrt(2/pi), c = 0.044715, for the tanh form */
#define EMBER_INV_SQRT_2PI 0.39894228040143267794

EMBER_FORMULA float ember__gelu_slope_tanh_f32(float x)
{
    const float k = (float)EMBER_SQRT_2_OVER_PI, c = 0.044715f;
    float x2 = x * x, t = ember__tanhf(k * (x + c * x2 * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * k * (1.0f + 3.0f * c * x2);
}

EMBER_FORMULA float ember__gelu_slope_erf_f32(float x)
{
    return 0.5f * (1.0f + ember__erff(x * (float)EMBER_SQRT_HALF)) +
           x * (float)EMBER_INV_SQRT_2PI * ember__expf(-0.5f * x * x);
}

EMBER_FORMULA double ember__gelu_slope_f64(double x, int tanh_form)
{
    if (tanh_form) {
        const double k = EMBER_SQRT_2_OVER_PI, c = 0.044715;
        double x2 = x * x, t = tanh(k * (x + c * x2 * x));
        return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x2);
    }
    return 0.5 * (1 + erf(x * EMBER_SQRT_HALF)) + x * EMBER_INV_SQRT_2PI * exp(-0.5 * x * x);
}

/* clamp to [lo, hi] (an absent bound is an infinity), in the tensor's float
   dtype: NaN stays NaN, and lo > hi gives hi, as PyTorch. Bounds rounded to
   the dtype compare as the exact ones (no value of the dtype lies between a
   bound and its rounding). */
EMBER_FORMULA float ember__clamp_f32(float x, float lo, float hi)
{
    float y = x < lo ? lo : x;
    y = y > hi ? hi : y;
    return x != x ? x : y;
}

EMBER_FORMULA double ember__clamp_f64(double x, double lo, double hi)
{
    double y = x < lo ? lo : x;
    y = y > hi ? hi : y;
    return x != x ? x : y;
}

/* The integer forms of the OPF_KEEPS_INT unary ops that have one (the
   others compute in double on both devices): X(ENUM, expression of x), x of
   the integer type T, U its unsigned twin, wrapping as integer arithmetic
   does (-INT_MIN is INT_MIN) */
#define EMBER_UNARY_INT_FORMS(X)                                                           \
    X(NEG, (T)(0u - (U)x))                                                                 \
    X(ABS, x < 0 ? (T)(0u - (U)x) : x)                                                     \
    X(SIGN, (T)((x > 0) - (x < 0)))                                                        \
    X(RELU, x > 0 ? x : (T)0)

/* relu's adjoint (relu_backward(g, y), y relu's output): 0 where y <= 0,
   whatever g is, and g where y is NaN (relu passed the NaN on), as PyTorch's
   threshold_backward. A select of loaded operands, so it vectorises. */
#define EMBER_RELU_BACKWARD(T, g, y) ((y) <= (T)0 ? (T)0 : (g))

#endif

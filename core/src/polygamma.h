/* polygamma.h: digamma and trigamma (the first two polygamma functions), one
   definition for the CPU kernels (ops.def's UNARY lines, expanded in
   ops/elementwise.c) and the CUDA ones (cuda/kernels/elementwise.h, which
   includes hd.h first so EMBER_HD marks them host and device); lgamma is the
   math library's on either side. In double; float32 rounds the double result.
   Below 10 the recurrences psi(x) = psi(x + 1) - 1/x and
   psi1(x) = psi1(x + 1) + 1/x^2 move x up, then the asymptotic series (to
   x^-13, whose next term is below 2e-15 at 10) finish; x < 0 reflects:
   psi(x) = psi(1 - x) - pi / tan(pi x), psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x).
   At the poles, as PyTorch's: digamma is -inf at 0 and NaN at the negative
   integers (and -inf), trigamma +inf. */
#ifndef EMBER_POLYGAMMA_H
#define EMBER_POLYGAMMA_H

#include <math.h>

#ifndef EMBER_HD
#define EMBER_HD static inline
#endif

#define EMBER__PI 3.14159265358979323846

EMBER_HD double ember__digamma_pos(double x)   /* x > 0 */
{
    double r = 0;
    while (x < 10) {
        r -= 1 / x;
        x += 1;
    }
    double z = 1 / (x * x);
    double s = z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240 - z * (1.0 / 132 - z * (691.0 / 32760))))));
    return r + log(x) - 0.5 / x - s;
}

EMBER_HD double ember__digamma(double x)
{
    if (x != x || x == INFINITY) return x;
    if (x == 0) return -INFINITY;
    if (x < 0) {
        if (x == floor(x)) return NAN;   /* a pole; -inf too */
        return ember__digamma_pos(1 - x) - EMBER__PI / tan(EMBER__PI * x);
    }
    return ember__digamma_pos(x);
}

EMBER_HD double ember__trigamma_pos(double x)   /* x > 0 */
{
    double r = 0;
    while (x < 10) {
        r += 1 / (x * x);
        x += 1;
    }
    double q = 1 / x, z = q * q;
    /* 1/x + 1/(2x^2) + sum B_2k / x^(2k+1) */
    double s = q * z * (1.0 / 6 - z * (1.0 / 30 - z * (1.0 / 42 - z * (1.0 / 30 - z * (5.0 / 66 - z * (691.0 / 2730))))));
    return r + q + 0.5 * z + s;
}

EMBER_HD double ember__trigamma(double x)
{
    if (x != x) return x;
    if (x == INFINITY) return 0;
    if (x <= 0) {
        if (x == floor(x)) return INFINITY;   /* a pole; -inf too */
        double sn = sin(EMBER__PI * x);
        return EMBER__PI * EMBER__PI / (sn * sn) - ember__trigamma_pos(1 - x);
    }
    return ember__trigamma_pos(x);
}

EMBER_HD float ember__digammaf(float x) { return (float)ember__digamma((double)x); }
EMBER_HD float ember__trigammaf(float x) { return (float)ember__trigamma((double)x); }

#endif

/* polygamma.h: digamma and trigamma (the first two polygamma functions), the
   Hurwitz zeta function and the polygamma functions of higher order built on
   it (ops/special.c), one
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

/* The Hurwitz zeta function zeta(x, q) = sum_k (q + k)^-x for x > 1 (Cephes'
   zeta, as PyTorch's): the terms to q + k > 9 (and at least nine), then the
   Euler-Maclaurin tail. q at a pole (0, a negative integer, -inf) gives
   inf; q < 0 needs an integer x (else NaN); q = inf gives 0. */
EMBER_HD double ember__zeta(double x, double q)
{
    const double A[12] = {12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
                          7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
                          -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18};
    const double eps = 1.11022302462515654042e-16;
    if (x != x || q != q) return x + q;
    if (x == 1) return INFINITY;
    if (x < 1) return NAN;
    if (q == INFINITY) return 0;
    if (q <= 0) {
        if (q == floor(q)) return INFINITY;
        if (x != floor(x)) return NAN;
    }
    double s = pow(q, -x), a = q, b = 0;
    int i = 0;
    while (i < 9 || a <= 9) {
        i++;
        a += 1;
        b = pow(a, -x);
        s += b;
        if (fabs(b / s) < eps) return s;
    }
    double w = a, k = 0;
    s += b * w / (x - 1) - 0.5 * b;
    a = 1;
    for (i = 0; i < 12; i++) {
        a *= x + k;
        b /= w;
        double t = a * b / A[i];
        s += t;
        if (fabs(t / s) < eps) return s;
        k += 1;
        a *= x + k;
        b /= w;
        k += 1;
    }
    return s;
}

/* The n-th derivative of digamma: digamma, trigamma, and for n >= 2
   (-1)^(n+1) n! zeta(n + 1, x), as PyTorch's (its poles give +-inf by that
   sign; +inf gives 0 where PyTorch's gives NaN) */
EMBER_HD double ember__polygamma(int n, double x)
{
    if (n == 0) return ember__digamma(x);
    if (n == 1) return ember__trigamma(x);
    return (n % 2 ? 1.0 : -1.0) * exp(lgamma(n + 1.0)) * ember__zeta(n + 1.0, x);
}

EMBER_HD float ember__digammaf(float x) { return (float)ember__digamma((double)x); }
EMBER_HD float ember__trigammaf(float x) { return (float)ember__trigamma((double)x); }

#endif

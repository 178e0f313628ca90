/* philox.h: Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy
   as 1, 2, 3", SC'11), block `block` of the stream of `seed`, and the
   uniforms made from its lanes: one definition for the CPU (random.c) and the
   CUDA kernels (cuda/kernels/random.h, which defines EMBER_HD as host and
   device functions), so one seed gives one stream on either device; and one
   element of a draw, written once for both devices too. */
#ifndef EMBER_PHILOX_H
#define EMBER_PHILOX_H

#include <math.h>
#include <stdint.h>

#include "element.h"

#ifndef EMBER_HD
#define EMBER_HD static inline
#endif

typedef struct {
    uint32_t v[4];
} ember__philox4;

/* One round on the counter c0..c3 with the round's key k0, k1 (a macro, so
   random.c's loop over many counters at once inlines it at every width). */
#define EMBER__PHILOX_W0 0x9E3779B9u
#define EMBER__PHILOX_W1 0xBB67AE85u
#define EMBER__PHILOX_ROUND(c0, c1, c2, c3, k0, k1)                                              \
    do {                                                                                         \
        uint64_t p0_ = (uint64_t)0xD2511F53u * (c0), p1_ = (uint64_t)0xCD9E8D57u * (c2);         \
        uint32_t n0_ = (uint32_t)(p1_ >> 32) ^ (c1) ^ (k0), n2_ = (uint32_t)(p0_ >> 32) ^ (c3) ^ (k1); \
        (c1) = (uint32_t)p1_;                                                                    \
        (c3) = (uint32_t)p0_;                                                                    \
        (c0) = n0_;                                                                              \
        (c2) = n2_;                                                                              \
    } while (0)

EMBER_HD ember__philox4 ember__philox(uint64_t seed, uint64_t block)
{
    uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        EMBER__PHILOX_ROUND(c0, c1, c2, c3, k0, k1);
        k0 += EMBER__PHILOX_W0;
        k1 += EMBER__PHILOX_W1;
    }
    ember__philox4 out = {{c0, c1, c2, c3}};
    return out;
}

/* 24 and 53 random bits as a double in [0, 1) */
EMBER_HD double ember__u24(uint32_t x) { return (x >> 8) * (1.0 / 16777216.0); }
EMBER_HD double ember__u53(uint32_t a, uint32_t b)
{
    return ((((uint64_t)a) << 21) ^ (b >> 11)) * (1.0 / 9007199254740992.0);
}

/* A draw: its distribution and dtype, the stream (seed) and its first block
   (offset); a, b: uniform low, high; normal mean, std; int low, range;
   exponential rate; geometric and bernoulli probability. */
enum {
    EMBER__DRAW_UNIFORM,
    EMBER__DRAW_NORMAL,
    EMBER__DRAW_INT,
    EMBER__DRAW_EXPONENTIAL, /* a: rate lambda */
    EMBER__DRAW_GEOMETRIC,   /* a: success probability p, values 1, 2, ... */
    EMBER__DRAW_BERNOULLI,   /* a: probability of a 1 */
    EMBER__DRAW_KEEP         /* dropout's keep mask (CPU only): a bool, true where element i of the uniform
                                draw of dtype `dtype` is >= a (random.c); the uniform's blocks */
};

typedef struct ember__draw {
    int dist, dtype;
    uint64_t seed, offset;
    double a, b;
} ember__draw;

/* Uniform, int, exponential, geometric and bernoulli draws use 2 lanes of a block, normal 4 (two 53-bit
   uniforms for Box-Muller), so element i reads block offset + i/2 or + i and
   a draw of n elements uses this many blocks. */
EMBER_HD uint64_t ember__draw_blocks(int dist, int64_t n)
{
    return dist == EMBER__DRAW_NORMAL ? (uint64_t)n : (uint64_t)(n + 1) / 2;
}

/* the 64 random bits of element i of a uniform or int draw */
EMBER_HD uint64_t ember__draw_bits(const ember__draw *d, int64_t i)
{
    ember__philox4 r = ember__philox(d->seed, d->offset + (uint64_t)(i >> 1));
    return ((uint64_t)r.v[(i & 1) * 2] << 32) | r.v[(i & 1) * 2 + 1];
}

/* A normal draw's element from its block r (Box-Muller from two 53-bit
   uniforms), mean + std sqrt(-2 log u1) cos(2 pi u2), is ember__normal of
   log(u1) and cos(2 pi u2) (random.c calls libm for a batch of elements,
   then the rest in a vector loop). */
EMBER_HD double ember__normal_u1(ember__philox4 r)
{
    double u1 = ember__u53(r.v[0], r.v[1]);
    return u1 < 1e-300 ? 1e-300 : u1;
}
EMBER_HD double ember__normal_angle(ember__philox4 r) { return 6.283185307179586 * ember__u53(r.v[2], r.v[3]); }
#define ember__normal(d, log_u1, cos_angle) ((d)->a + (d)->b * sqrt(-2.0 * (log_u1)) * (cos_angle))

/* Element i of a normal draw from its block r, stored at p in its dtype. */
EMBER_HD void ember__draw_store_normal(const ember__draw *d, ember__philox4 r, char *p)
{
    ember__store(p, d->dtype, ember__normal(d, log(ember__normal_u1(r)), cos(ember__normal_angle(r))));
}

/* An element of any other draw from its 64 random bits (ember__draw_bits),
   stored at p in its dtype. A float32 uniform that rounds up to high is
   moved just below it; int64 integers are exact. */
EMBER_HD void ember__draw_store_bits(const ember__draw *d, uint64_t bits, char *p)
{
    if (d->dist == EMBER__DRAW_EXPONENTIAL || d->dist == EMBER__DRAW_GEOMETRIC) {
        /* inversion from a 53-bit uniform u in [0, 1): -log(1-u) > 0 is finite */
        double e = -log1p(-ember__u53((uint32_t)(bits >> 32), (uint32_t)bits));
        if (d->dist == EMBER__DRAW_EXPONENTIAL) {
            ember__store(p, d->dtype, e / d->a);
            return;
        }
        /* the number of trials up to the first success: ceil(e / -log(1-p)), at least 1 */
        double k = d->a >= 1 ? 1 : ceil(e / -log1p(-d->a));
        if (k < 1) k = 1;
        ember__store(p, d->dtype, k);
        return;
    }
    if (d->dist == EMBER__DRAW_BERNOULLI) {
        double u = ember__u53((uint32_t)(bits >> 32), (uint32_t)bits);
        ember__store(p, d->dtype, u < d->a ? 1 : 0);
        return;
    }
    if (d->dist == EMBER__DRAW_INT) {
        uint64_t k = bits % (uint64_t)d->b;
        if (d->dtype == EMBER_INT64) *(int64_t *)p = (int64_t)d->a + (int64_t)k;
        else ember__store(p, d->dtype, d->a + (double)k);
        return;
    }
    uint32_t x = (uint32_t)(bits >> 32), y = (uint32_t)bits;
    double v = d->a + (d->b - d->a) * (d->dtype == EMBER_FLOAT64 ? ember__u53(x, y) : ember__u24(x));
    if (d->dtype != EMBER_FLOAT32) {
        ember__store(p, d->dtype, v);
        return;
    }
    float f = (float)v;
    if (f >= (float)d->b && d->b > d->a) f = nextafterf((float)d->b, -INFINITY);
    *(float *)p = f;
}

/* Element i of the draw, stored at p in its dtype (the CUDA kernels' one
   element; random.c computes the blocks of a range at once and calls the two
   above, with the same bits). */
EMBER_HD void ember__draw_store(const ember__draw *d, int64_t i, char *p)
{
    if (d->dist == EMBER__DRAW_NORMAL) ember__draw_store_normal(d, ember__philox(d->seed, d->offset + (uint64_t)i), p);
    else ember__draw_store_bits(d, ember__draw_bits(d, i), p);
}

#endif

/* random.h: the draws of core/src/random.c for the device's random kernels,
   from the core's Philox-4x32-10 (core/src/philox.h): element i of a draw is
   a pure function of (seed, the draw's first block, i), so one seed gives one
   stream on either device. Uniform and integer draws use 2 lanes of a block (element i reads
   block first + i/2), normal draws 4 (two 53-bit uniforms for Box-Muller). */
#ifndef EMBER_CUDA_RANDOM_H
#define EMBER_CUDA_RANDOM_H

#include <math.h>

#include "hd.h"
#include "ember.h"
#include "philox.h"

namespace ember_cuda {

/* element i of a uniform draw in [lo, hi): 53 bits for float64, 24 for the
   others; a float32 result that rounds up to hi is moved just below it */
EMBER_HD double draw_uniform(uint64_t seed, uint64_t first, int64_t i, int dt, double lo, double hi)
{
    ember__philox4 r = ember__philox(seed, first + (uint64_t)(i >> 1));
    uint32_t x = r.v[(i & 1) * 2], y = r.v[(i & 1) * 2 + 1];
    double v = lo + (hi - lo) * (dt == EMBER_FLOAT64 ? ember__u53(x, y) : ember__u24(x));
    if (dt == EMBER_FLOAT32 && (float)v >= (float)hi && hi > lo) v = nextafterf((float)hi, -INFINITY);
    return v;
}

/* element i of a normal draw of the given mean and standard deviation */
EMBER_HD double draw_normal(uint64_t seed, uint64_t first, int64_t i, double mean, double std)
{
    ember__philox4 r = ember__philox(seed, first + (uint64_t)i);
    double u1 = ember__u53(r.v[0], r.v[1]), u2 = ember__u53(r.v[2], r.v[3]);
    if (u1 < 1e-300) u1 = 1e-300;
    return mean + std * sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

}   // namespace ember_cuda

#endif

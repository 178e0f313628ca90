/* random.h: one element of a device draw. The arithmetic is the core's own
   (core/src/philox.h's ember__draw_store, which random.c runs on the CPU):
   element i is a pure function of (seed, the draw's first block, i), so one
   seed gives one stream on either device, and the core advances one offset
   for draws on both. */
#ifndef EMBER_CUDA_RANDOM_H
#define EMBER_CUDA_RANDOM_H

#include "hd.h"
#include "ember.h"
#include "philox.h"

namespace ember_cuda {

/* element i of draw d into a contiguous buffer of esize-byte elements */
EMBER_HD void draw_at(const ember__draw &d, char *data, int esize, int64_t i)
{
    ember__draw_store(&d, i, data + i * esize);
}

}   // namespace ember_cuda

#endif

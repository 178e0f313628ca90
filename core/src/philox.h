/* philox.h: Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy
   as 1, 2, 3", SC'11), block `block` of the stream of `seed`, and the
   uniforms made from its lanes: one definition for the CPU (random.c) and the
   CUDA kernels (cuda/kernels/random.h, which defines EMBER_HD as host and
   device functions), so one seed gives one stream on either device. */
#ifndef EMBER_PHILOX_H
#define EMBER_PHILOX_H

#include <stdint.h>

#ifndef EMBER_HD
#define EMBER_HD static inline
#endif

typedef struct {
    uint32_t v[4];
} ember__philox4;

EMBER_HD ember__philox4 ember__philox(uint64_t seed, uint64_t block)
{
    uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
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

#endif

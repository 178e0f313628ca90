/* size_class.h: the caching allocator's size classes (alloc.cpp), here so
   that cuda/tests/ checks them on any machine. Class 0 holds 512 bytes; above
   it, class 4(k - 9) + j holds 2^k (4 + j) / 4 bytes (j = 1..4): four classes
   per power of two, so a request is rounded up by at most 25%. */
#ifndef EMBER_CUDA_SIZE_CLASS_H
#define EMBER_CUDA_SIZE_CLASS_H

#include <stddef.h>

enum { ECU_MIN_CLASS_BYTES = 512, ECU_NCLASSES = 4 * 64 };

static inline int ecu_size_class(size_t n)
{
    if (n <= ECU_MIN_CLASS_BYTES) return 0;
    int k = 63 - __builtin_clzll((unsigned long long)(n - 1));   /* 2^k < n <= 2^(k+1) */
    size_t base = (size_t)1 << k;
    int j = (int)(((n - base) * 4 + base - 1) >> k);             /* ceil(4 (n - base) / base) */
    return (k - 9) * 4 + j;
}

static inline size_t ecu_class_bytes(int c)
{
    if (c == 0) return ECU_MIN_CLASS_BYTES;
    int k = 9 + (c - 1) / 4, j = (c - 1) % 4 + 1;
    return ((size_t)1 << k) / 4 * (size_t)(4 + j);
}

#endif

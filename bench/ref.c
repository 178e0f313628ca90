/* ref.c: the plain C loops bench/ops.lua compares ember against, compiled with
   the same flags as the library (-O3, no -march=native). Not part of libember. */
#include <stdint.h>

void ref_add_f32(const float *a, const float *b, float *out, int64_t n)
{
    for (int64_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

float ref_sum_f32(const float *a, int64_t n)
{
    float s = 0;
    for (int64_t i = 0; i < n; i++) s += a[i];
    return s;
}

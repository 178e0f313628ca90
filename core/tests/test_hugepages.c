/* test_hugepages.c: large host blocks on huge pages (alloc.c, docs/performance.md,
   "Huge pages"): where they serve (Linux with transparent huge pages "always"
   or "madvise", not in sanitizer builds, EMBER_HUGEPAGES not 0) a tensor in
   a block of 8 MiB or more starts 2 MiB-aligned and memory_stats' huge_bytes counts its
   block (rounded up to 2 MiB), a freed block stays counted in the cache and
   is reused, ember_empty_cache gives it back; a tensor past the cache's
   largest class (64 MiB) is a block of its own, counted while it lives. Everywhere:
   the values written are read back, blocks under 8 MiB are never counted,
   and with EMBER_HUGEPAGES=0 (spec/hugepages_spec.lua runs ember so) huge_bytes
   stays 0. */
#include "check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIB ((int64_t)1 << 20)

static int64_t huge_bytes(void)
{
    ember_memory_stats_t s;
    ember_memory_stats(&s);
    return s.huge_bytes;
}

/* whether large blocks should be on huge pages in this process (sanitizer
   builds, whose cache_limit is 0, keep ASan's allocator for every block) */
static int expect_huge(void)
{
#ifndef __linux__
    return 0;
#else
    ember_memory_stats_t s;
    ember_memory_stats(&s);
    if (s.cache_limit == 0) return 0;
    const char *env = getenv("EMBER_HUGEPAGES");
    if (env && strcmp(env, "0") == 0) return 0;
    char buf[128] = {0};
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, "[always]") || strstr(buf, "[madvise]");
#endif
}

/* a float32 tensor of n elements holding i % 1000 - 500, read back and checked */
static ember_tensor *filled(int64_t n)
{
    ember_tensor *t = NULL;
    CHECK(ember_empty(1, &n, EMBER_FLOAT32, EMBER_CPU, &t) == EMBER_OK);
    if (!t) return NULL;
    float *d = ember_tensor_data(t);
    for (int64_t i = 0; i < n; i++) d[i] = (float)(i % 1000 - 500);
    return t;
}

static int values_ok(const ember_tensor *t)
{
    const float *d = ember_tensor_data(t);
    int64_t n = ember_tensor_numel(t);
    for (int64_t i = 0; i < n; i++)
        if (d[i] != (float)(i % 1000 - 500)) return 0;
    return 1;
}

int main(void)
{
    int huge = expect_huge();
    ember_empty_cache();
    int64_t base = huge_bytes();
    CHECK(base == 0);

    /* 5 MiB (its class: 6 MiB) is under the threshold, 8 MiB */
    ember_tensor *small = filled(5 * MIB / 4);
    CHECK(small && values_ok(small));
    CHECK(huge_bytes() == 0);

    /* 10 MiB: the 12 MiB class */
    int64_t n = 10 * MIB / 4;
    ember_tensor *a = filled(n);
    CHECK(a && values_ok(a));
    void *pa = a ? ember_tensor_data(a) : NULL;
    CHECK(huge_bytes() == (huge ? 12 * MIB : 0));
    if (huge) CHECK(((uintptr_t)pa & (uintptr_t)(2 * MIB - 1)) == 0);

    /* an op's result of that size is a second block; its values are a's doubled */
    ember_tensor *b = NULL;
    CHECK(a && ember_add(a, a, &b) == EMBER_OK);
    CHECK(huge_bytes() == (huge ? 24 * MIB : 0));
    if (b) {
        const float *d = ember_tensor_data(b);
        int ok = 1;
        for (int64_t i = 0; i < n; i++) ok &= d[i] == 2.0f * (float)(i % 1000 - 500);
        CHECK(ok);
    }

    /* freed: kept by the cache (still counted), then handed to the next tensor of the class */
    ember_tensor_release(a);
    ember_memory_stats_t s0, s1;
    ember_memory_stats(&s0);
    CHECK(s0.huge_bytes == (huge ? 24 * MIB : 0));
    ember_tensor *c = filled(n - 1000);
    ember_memory_stats(&s1);
    CHECK(c && values_ok(c));
    if (s0.cache_limit > 0) {   /* sanitizer builds keep no cache: a new block */
        CHECK(s1.cache_hits == s0.cache_hits + 1);
        CHECK(c && ember_tensor_data(c) == pa);
    }
    CHECK(s1.huge_bytes == s0.huge_bytes);

    /* past the largest class: 64 MiB + 4 KiB is a block of its own, 66 MiB of huge pages */
    int64_t m = (64 * MIB + 4096) / 4;
    ember_tensor *big = filled(m);
    CHECK(big && values_ok(big));
    CHECK(huge_bytes() == (huge ? 90 * MIB : 0));
    if (huge && big) CHECK(((uintptr_t)ember_tensor_data(big) & (uintptr_t)(2 * MIB - 1)) == 0);
    ember_tensor *sum = NULL;
    CHECK(big && ember_sum(big, 0, NULL, 0, &sum) == EMBER_OK);
    if (sum) {
        /* whole cycles of 0..999 - 500 sum to -500 each; the rest counted one by one */
        double want = 0, got = 0;
        for (int64_t i = m - m % 1000; i < m; i++) want += (double)(i % 1000 - 500);
        want += -500.0 * (double)(m / 1000);
        CHECK(ember_item(sum, &got) == EMBER_OK);
        CHECK(got == want);
    }
    ember_tensor_release(sum);
    ember_tensor_release(big);
    CHECK(huge_bytes() == (huge ? 24 * MIB : 0));   /* given back at once: no class holds it */

    ember_tensor_release(b);
    ember_tensor_release(c);
    ember_tensor_release(small);
    ember_empty_cache();
    CHECK(huge_bytes() == 0);

    /* after the cache is empty a new large block comes fresh and holds its values */
    ember_tensor *d = filled(n);
    CHECK(d && values_ok(d));
    CHECK(huge_bytes() == (huge ? 12 * MIB : 0));
    ember_tensor_release(d);
    ember_empty_cache();
    CHECK(huge_bytes() == 0);

    printf("huge pages %s\n", huge ? "used" : "not used here");
    if (failures) fprintf(stderr, "%d checks failed\n", failures);
    return failures ? 1 : 0;
}

/* test_blas.c: the BLAS libember loads itself (core/src/blas.c), seen from a
   C host that links libember and sets nothing:
   - ember_blas_info() names the core and why it runs: with OPENBLAS_CORETYPE
     unset, either OpenBLAS's own choice or a core ember chose from the CPU's
     flags (one of blas.c's cores, and the one OpenBLAS runs), and the
     variable is unset again afterwards (the host's environment is left as it
     was); with it set, the core it names;
   - float32 and float64 products through it agree with sums in long double
     (float32 to 1e-5 relative: K = 96 products of numbers in [-1, 1]), also
     with BLAS threads changed and in deterministic mode. */
#include "check.h"
#include "ember.h"

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the cores blas.c picks from the CPU's flags */
static bool known_core(const char *core, size_t len)
{
    static const char *const cores[] = {"SkylakeX", "Haswell", "Sandybridge"};
    for (size_t i = 0; i < sizeof cores / sizeof *cores; i++)
        if (strlen(cores[i]) == len && strncmp(core, cores[i], len) == 0) return true;
    return false;
}

static void test_info(void)
{
    const char *info = ember_blas_info();
    const char *env = getenv("OPENBLAS_CORETYPE");
    printf("BLAS: %s\n", info);
    CHECK(info && *info);
    if (strncmp(info, "none (", 6) == 0 || strncmp(info, "CBLAS", 5) == 0) return;   /* no OpenBLAS here */
    CHECK(strstr(info, "OpenBLAS") == info);
    char want[96];
    if (env && *env) {
        snprintf(want, sizeof want, "(core %s); OPENBLAS_CORETYPE=%s", env, env);
        CHECK(strstr(info, want) != NULL);
    } else {
        const char *chose = strstr(info, "; ember chose ");
        if (chose) {   /* the core ember chose is one of its own, and the one OpenBLAS runs */
            const char *core = chose + strlen("; ember chose ");
            size_t len = strcspn(core, " ");
            CHECK(known_core(core, len));
            CHECK(strncmp(core + len, " from the CPU's flags;", 22) == 0);
            snprintf(want, sizeof want, "(core %.*s); ember chose", (int)len, core);
            CHECK(strstr(info, want) != NULL);
        } else {
            CHECK(strstr(info, "OpenBLAS's own choice") != NULL);
        }
        CHECK(getenv("OPENBLAS_CORETYPE") == NULL);   /* set only while OpenBLAS loaded */
    }
}

/* C = A B for A (M, K), B (K, N) filled with a fixed pattern in [-1, 1] */
static void check_product(int dtype, double tol)
{
    enum { M = 70, K = 96, N = 33 };
    static double a[M * K], b[K * N], c[M * N];
    for (int i = 0; i < M * K; i++) a[i] = sin(0.37 * i + 0.1);
    for (int i = 0; i < K * N; i++) b[i] = cos(0.53 * i + 0.2);
    const int64_t sa[2] = {M, K}, sb[2] = {K, N};
    ember_tensor *ta = NULL, *tb = NULL, *tc = NULL;
    CHECK(ember_from_data(a, EMBER_FLOAT64, 2, sa, dtype, EMBER_CPU, &ta) == EMBER_OK);
    CHECK(ember_from_data(b, EMBER_FLOAT64, 2, sb, dtype, EMBER_CPU, &tb) == EMBER_OK);
    CHECK(ember_matmul(ta, tb, &tc) == EMBER_OK);
    CHECK(tc && ember_copy_to_buffer(tc, c, EMBER_FLOAT64) == EMBER_OK);
    /* the reference from the operands as they were rounded to dtype */
    static double ra[M * K], rb[K * N];
    CHECK(ember_copy_to_buffer(ta, ra, EMBER_FLOAT64) == EMBER_OK);
    CHECK(ember_copy_to_buffer(tb, rb, EMBER_FLOAT64) == EMBER_OK);
    double worst = 0;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            long double s = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                s += (long double)ra[i * K + k] * rb[k * N + j];
                mag += fabsl((long double)ra[i * K + k] * rb[k * N + j]);
            }
            double err = (double)(fabsl((long double)c[i * N + j] - s) / (mag > 0 ? mag : 1));
            if (err > worst) worst = err;
        }
    CHECK(worst <= tol);
    ember_tensor_release(ta);
    ember_tensor_release(tb);
    ember_tensor_release(tc);
}

int main(void)
{
    test_info();
    check_product(EMBER_FLOAT32, 1e-5);
    check_product(EMBER_FLOAT64, 1e-13);
    ember_set_num_threads(1);
    check_product(EMBER_FLOAT32, 1e-5);
    ember_set_num_threads(2);
    ember_set_deterministic(1);
    check_product(EMBER_FLOAT32, 1e-5);
    check_product(EMBER_FLOAT64, 1e-13);
    ember_set_deterministic(0);
    ember_memory_stats_t st;
    ember_memory_stats(&st);
    CHECK(st.live_tensors == 0);
    printf("test_blas: %s\n", failures ? "FAILED" : "ok");
    return failures != 0;
}

/* A C program that uses ember the way another project would: built by
   spec/install_spec.lua with pkg-config's flags and with CMake's
   find_package(ember), against the build tree and an install. It sums
   arange(0, 10) * 3 through the C API and prints the result (135). */
#include <stdio.h>
#include "ember.h"

int main(void)
{
    ember_tensor *a = NULL, *three = NULL, *prod = NULL, *sum = NULL;
    double v = 0;
    int rc = ember_arange(0, 10, 1, EMBER_FLOAT32, 0, &a);
    if (rc == EMBER_OK) rc = ember_scalar(3, EMBER_FLOAT32, 1, &three);
    if (rc == EMBER_OK) rc = ember_mul(a, three, &prod);
    if (rc == EMBER_OK) rc = ember_sum(prod, 0, NULL, 0, &sum);
    if (rc == EMBER_OK) rc = ember_item(sum, &v);
    if (rc != EMBER_OK) fprintf(stderr, "consumer: %s\n", ember_last_error());
    else printf("%g\n", v);
    ember_tensor_release(sum);
    ember_tensor_release(prod);
    ember_tensor_release(three);
    ember_tensor_release(a);
    return rc == EMBER_OK ? 0 : 1;
}

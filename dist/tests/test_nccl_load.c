/* libember_nccl without a GPU (and with one, what needs none): it loads with
   NCCL, carries exactly the six dtypes NCCL reduces and refuses the others by
   name, refuses collectives before a communicator exists, and without a
   device fails to start with CUDA's reason, leaving it usable. */
#include <string.h>

#include "../../core/tests/check.h"
#include "../ember_nccl.h"

/* the error's text, printed when it lacks what is looked for */
static int has(const char *text)
{
    if (strstr(enccl_last_error(), text)) return 1;
    fprintf(stderr, "expected \"%s\" in: %s\n", text, enccl_last_error());
    return 0;
}
#define HAS(text) has(text)

static void dtypes(void)
{
    static const int CARRIED[] = {EMBER_FLOAT32, EMBER_FLOAT64, EMBER_FLOAT16, EMBER_BFLOAT16, EMBER_INT32,
                                  EMBER_INT64};
    for (size_t i = 0; i < sizeof CARRIED / sizeof CARRIED[0]; i++) CHECK(enccl_check_dtype(CARRIED[i], "all_reduce") == 0);
    CHECK(enccl_check_dtype(EMBER_UINT8, "all_reduce") < 0);
    CHECK(HAS("distributed.all_reduce: NCCL does not carry uint8 tensors"));
    CHECK(enccl_check_dtype(EMBER_BOOL, "broadcast") < 0);
    CHECK(HAS("distributed.broadcast: NCCL does not carry bool tensors"));
}

static void before_init(void)
{
    int h = -1;
    char buf[8];
    CHECK(!enccl_initialized());
    CHECK(enccl_all_reduce(buf, 2, EMBER_FLOAT32, ENCCL_SUM, &h) < 0);
    CHECK(HAS("distributed.all_reduce: NCCL is not initialised"));
    CHECK(enccl_broadcast(buf, 2, EMBER_FLOAT32, 0, &h) < 0);
    CHECK(HAS("distributed.broadcast:"));
    CHECK(enccl_test(0, &h) < 0);
    CHECK(HAS("distributed.wait: no request 0"));
}

/* Without a device: enccl_device says why, and enccl_init fails the same
   way, leaving nothing half made. */
static void without_device(void)
{
    int dev = -1;
    if (enccl_device(0, &dev) == 0) {
        printf("a CUDA device is visible: device %d (the no-device checks do not apply)\n", dev);
        CHECK(dev == 0);
        return;
    }
    CHECK(HAS("distributed.nccl: "));
    printf("without a device: %s\n", enccl_last_error());
    unsigned char id[ENCCL_ID_BYTES] = {0};
    CHECK(enccl_init(id, 0, 1, 0) < 0);
    CHECK(HAS("distributed.nccl: "));
    CHECK(!enccl_initialized());
    CHECK(enccl_pending() == 0);
}

int main(void)
{
    int v = enccl_version();
    CHECK(v >= 21000);   /* ncclAvg and bfloat16 came with NCCL 2.10 */
    printf("NCCL %d\n", v);
    dtypes();
    before_init();
    without_device();
    if (failures) fprintf(stderr, "%d check(s) failed\n", failures);
    return failures != 0;
}

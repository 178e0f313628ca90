/* random.cu: the random draws on the device (rand, randn, randint, uniform_,
   normal_, and so dropout's mask): a grid-stride kernel over the element of
   kernels/random.h. The core picks the draw's stream and first block and
   advances its offset (core/src/random.c), so CPU and device draws stay in
   step. Compiled without fma contraction, so a + (b - a) u and mean + std z
   round as on the CPU. */
#include "launch.h"
#include "kernels/random.h"

using namespace ember_cuda;

namespace {

__global__ void cuda_draw(ember__draw d, char *data, int esize, int64_t n)
{
    GRID_STRIDE(i, n) draw_at(d, data, esize, i);
}

const char *draw_name(int dist)
{
    return dist == EMBER__DRAW_NORMAL ? "randn" : dist == EMBER__DRAW_INT ? "randint" : "rand";
}

}   // namespace

int ecu_random(ember_tensor *t, const ember__draw *d)
{
    if (t->numel == 0) return EMBER_OK;
    int esize = ecu_core->dtype_size(t->dtype);
    cuda_draw<<<grid_for(t->numel), THREADS>>>(*d, (char *)t->storage->data + t->offset * esize, esize, t->numel);
    return ecu_check(cudaGetLastError(), draw_name(d->dist));
}

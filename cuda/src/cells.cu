/* cells.cu: the lstm_cell and gru_cell kernels (kernels/cells.h): a thread
   per element of the (N, H) result, the grid striding past its cap. */
#include "kernels/cells.h"
#include "launch.h"

using namespace ember_cuda;

namespace {

template <class T> __global__ void cuda_cell(ecu_cell c, bool lstm)
{
    GRID_STRIDE(j, c.numel)
    {
        if (lstm) lstm_at<T>(c, j);
        else gru_at<T>(c, j);
    }
}

}   // namespace

extern "C" cudaError_t ecu_launch_cell(const ecu_cell *c, bool lstm, bool f64)
{
    if (c->numel == 0) return cudaSuccess;
    if (f64) cuda_cell<double><<<grid_for(c->numel), THREADS>>>(*c, lstm);
    else cuda_cell<float><<<grid_for(c->numel), THREADS>>>(*c, lstm);
    return cudaGetLastError();
}

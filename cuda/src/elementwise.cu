/* elementwise.cu: the elementwise kernels: one grid-stride kernel per compute
   type and index width, whose body is kernels/elementwise.h's (the op is a
   uniform switch inside it, so every op shares a handful of kernels). */
#include "launch.h"

using namespace ember_cuda;

namespace {

template <class T, class Index> __global__ void cuda_unary(ecu_iter it, int op)
{
    GRID_STRIDE(i, it.numel) unary_at<T>(it, op, (Index)i);
}

template <class T, class Index> __global__ void cuda_binary(ecu_iter it, int op)
{
    GRID_STRIDE(i, it.numel) binary_at<T>(it, op, (Index)i);
}

template <class Index> __global__ void cuda_convert(ecu_iter it)
{
    GRID_STRIDE(i, it.numel) convert_at(it, (Index)i);
}

template <class Index> __global__ void cuda_where(ecu_iter it)
{
    GRID_STRIDE(i, it.numel) where_at(it, (Index)i);
}

template <class Index> __global__ void cuda_fill(ecu_iter it, double value)
{
    GRID_STRIDE(i, it.numel) fill_at(it, value, (Index)i);
}

template <class T> cudaError_t unary_as(const ecu_iter *it, int op)
{
    return by_index_width(*it, it->numel, [&](auto index) {
        cuda_unary<T, decltype(index)><<<grid_for(it->numel), THREADS>>>(*it, op);
    });
}

template <class T> cudaError_t binary_as(const ecu_iter *it, int op)
{
    return by_index_width(*it, it->numel, [&](auto index) {
        cuda_binary<T, decltype(index)><<<grid_for(it->numel), THREADS>>>(*it, op);
    });
}

}   // namespace

extern "C" cudaError_t ecu_launch_unary(const ecu_iter *it, int op, int compute)
{
    switch (compute) {
    case ECU_FLOAT: return unary_as<float>(it, op);
    case ECU_DOUBLE: return unary_as<double>(it, op);
    default: return unary_as<int64_t>(it, op);
    }
}

extern "C" cudaError_t ecu_launch_binary(const ecu_iter *it, int op, int compute)
{
    switch (compute) {
    case ECU_FLOAT: return binary_as<float>(it, op);
    case ECU_DOUBLE: return binary_as<double>(it, op);
    default: return binary_as<int64_t>(it, op);
    }
}

extern "C" cudaError_t ecu_launch_convert(const ecu_iter *it)
{
    return by_index_width(*it, it->numel, [&](auto index) {
        cuda_convert<decltype(index)><<<grid_for(it->numel), THREADS>>>(*it);
    });
}

extern "C" cudaError_t ecu_launch_where(const ecu_iter *it)
{
    return by_index_width(*it, it->numel, [&](auto index) {
        cuda_where<decltype(index)><<<grid_for(it->numel), THREADS>>>(*it);
    });
}

extern "C" cudaError_t ecu_launch_fill(const ecu_iter *it, double value)
{
    return by_index_width(*it, it->numel, [&](auto index) {
        cuda_fill<decltype(index)><<<grid_for(it->numel), THREADS>>>(*it, value);
    });
}

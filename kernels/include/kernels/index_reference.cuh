// kernels/index_reference.cuh: the device reference (an example's .device_reference,
// docs/validity.md row 2) of an output whose every element is a function of its index alone,
// as in ch02's and ch03's uploads: one thread per element writes value(i) where it lands, with
// no host buffer and no copy. `value` is the __host__ __device__ function the example's CPU
// reference calls too, so both references compute the same thing.
#pragma once

#include <bench/bench.hpp>

#include <cstdint>

namespace kernels {

namespace detail {
template <class T, auto value>
__global__ void write_index_values(T* dst, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) dst[i] = value(i);
}
}  // namespace detail

template <auto value, class T>
void write_index_values(T* dst, int64_t n, cudaStream_t stream) {
  detail::write_index_values<T, value><<<static_cast<unsigned>((n + 255) / 256), 256, 0, stream>>>(dst, n);
  BENCH_CHECK_LAUNCH();
}

}  // namespace kernels

// kernels/occupancy.cuh: sizing a persistent grid to the machine (host side).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include <bench/check.hpp>

namespace kernels {

// The current device's multiprocessor count.
inline int sm_count() {
  int device = 0, count = 0;
  BENCH_CUDA_CHECK(cudaGetDevice(&device));
  BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device));
  return count;
}

// As many blocks of `kernel` as are resident on all SMs at once (the occupancy calculator's
// count per SM, times the SMs): the grid of a persistent kernel.
template <class Kernel>
unsigned resident_grid(Kernel kernel, int block, size_t dynamic_smem = 0) {
  int per_sm = 0;
  BENCH_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, dynamic_smem));
  return static_cast<unsigned>(sm_count() * std::max(per_sm, 1));
}

}  // namespace kernels

namespace kernels {

// Theoretical occupancy of `kernel` launched with `block` threads: the warps the occupancy
// calculator lets reside on one SM (blocks per SM x warps per block) over the SM's maximum
// warps, in [0, 1]. Limited by registers, shared memory, the block count per SM, and threads.
template <class Kernel>
double theoretical_occupancy(Kernel kernel, int block, size_t dynamic_smem = 0) {
  int device = 0, per_sm = 0, max_threads = 0;
  BENCH_CUDA_CHECK(cudaGetDevice(&device));
  BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&max_threads, cudaDevAttrMaxThreadsPerMultiProcessor, device));
  BENCH_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, dynamic_smem));
  const int warps_per_block = (block + 31) / 32;
  return static_cast<double>(per_sm * warps_per_block) / (max_threads / 32);
}

}  // namespace kernels

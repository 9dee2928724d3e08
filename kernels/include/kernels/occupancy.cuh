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

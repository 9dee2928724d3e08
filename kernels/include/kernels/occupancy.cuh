// kernels/occupancy.cuh: what the occupancy calculator says about a kernel at a block size (host
// side): the blocks and warps that fit on one SM, the theoretical occupancy, and the grid of a
// persistent kernel sized to the machine.
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

// The most warps one SM of the current device can hold (64 on Hopper).
inline int max_warps_per_sm() {
  int device = 0, threads = 0;
  BENCH_CUDA_CHECK(cudaGetDevice(&device));
  BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&threads, cudaDevAttrMaxThreadsPerMultiProcessor, device));
  return threads / 32;
}

// Blocks of `kernel` with `block` threads that reside on one SM at once, as the occupancy
// calculator counts them: limited by registers, shared memory, the block count per SM, threads.
template <class Kernel>
int blocks_per_sm(Kernel kernel, int block, size_t dynamic_smem = 0) {
  int per_sm = 0;
  BENCH_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, block, dynamic_smem));
  return per_sm;
}

// The warps those blocks bring: blocks per SM x warps per block.
template <class Kernel>
int resident_warps_per_sm(Kernel kernel, int block, size_t dynamic_smem = 0) {
  return blocks_per_sm(kernel, block, dynamic_smem) * ((block + 31) / 32);
}

// Theoretical occupancy: resident warps over the SM's maximum, in [0, 1].
template <class Kernel>
double theoretical_occupancy(Kernel kernel, int block, size_t dynamic_smem = 0) {
  return static_cast<double>(resident_warps_per_sm(kernel, block, dynamic_smem)) / max_warps_per_sm();
}

// As many blocks of `kernel` as are resident on all SMs at once (the calculator's count per SM,
// times the SMs): the grid of a persistent kernel.
template <class Kernel>
unsigned resident_grid(Kernel kernel, int block, size_t dynamic_smem = 0) {
  return static_cast<unsigned>(sm_count() * std::max(blocks_per_sm(kernel, block, dynamic_smem), 1));
}

}  // namespace kernels

// kernels/occupancy.cuh: what the occupancy calculator says about a kernel at a block size (host
// side): the blocks and warps that fit on one SM, the theoretical occupancy, the grid of a
// persistent kernel sized to the machine, and the clusters of a cluster kernel resident at once;
// the device figures those rest on (SM count, warps an SM, L2 size); and the cooperative launch
// of a grid sized so.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <bench/check.hpp>
#include <utility>

namespace kernels {

// One attribute of the current device.
inline int device_attribute(cudaDeviceAttr attribute) {
  int device = 0, value = 0;
  BENCH_CUDA_CHECK(cudaGetDevice(&device));
  BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&value, attribute, device));
  return value;
}

// The current device's multiprocessor count.
inline int sm_count() { return device_attribute(cudaDevAttrMultiProcessorCount); }

// The most warps one SM of the current device can hold (64 on Hopper).
inline int max_warps_per_sm() {
  return device_attribute(cudaDevAttrMaxThreadsPerMultiProcessor) / 32;
}

// The current device's L2 cache in bytes.
inline int l2_cache_bytes() { return device_attribute(cudaDevAttrL2CacheSize); }

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

// A cooperative launch: every block of the grid resident at once, or the launch fails (rather
// than hangs), for kernels whose blocks meet at a grid barrier (kernels/grid_barrier.cuh). Size the
// grid with resident_grid.
template <class... Params, class... Args>
cudaError_t launch_cooperative(void (*kernel)(Params...), unsigned grid, unsigned block,
                               size_t dynamic_smem, cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute cooperative = {};
  cooperative.id = cudaLaunchAttributeCooperative;
  cooperative.val.cooperative = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(block);
  config.dynamicSmemBytes = dynamic_smem;
  config.stream = stream;
  config.attrs = &cooperative;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...);
}

// The launch attribute that groups a grid's blocks into clusters of `size` along x (for
// cudaLaunchKernelEx, where the cluster size is chosen at run time, not by __cluster_dims__).
inline cudaLaunchAttribute cluster_dims_x(unsigned size) {
  cudaLaunchAttribute cluster = {};
  cluster.id = cudaLaunchAttributeClusterDimension;
  cluster.val.clusterDim.x = size;
  cluster.val.clusterDim.y = cluster.val.clusterDim.z = 1;
  return cluster;
}

// Clusters of `kernel` resident on the whole device at once (cudaOccupancyMaxActiveClusters): a
// cluster's blocks must share one GPC, so this can be fewer than the SMs / the cluster size; a
// persistent cluster kernel sizes its grid by it. The cluster is the kernel's own
// __cluster_dims__ when `cluster_size` is 0, else `cluster_size` blocks along x given as a launch
// attribute. `grid` is the launch asked about: any multiple of the cluster size (the count does
// not depend on it). The error is returned unchecked, for a caller that can go on without the
// count; that caller clears it (cudaGetLastError).
template <class Kernel>
cudaError_t query_resident_clusters(int& clusters, Kernel kernel, unsigned grid, int block,
                                    size_t dynamic_smem = 0, int cluster_size = 0) {
  cudaLaunchAttribute cluster = cluster_dims_x(static_cast<unsigned>(cluster_size));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(block);
  config.dynamicSmemBytes = dynamic_smem;
  config.attrs = cluster_size > 0 ? &cluster : nullptr;
  config.numAttrs = cluster_size > 0 ? 1 : 0;
  return cudaOccupancyMaxActiveClusters(&clusters, kernel, &config);
}

// The same count, checked: for a caller that cannot go on without it.
template <class Kernel>
int resident_clusters(Kernel kernel, unsigned grid, int block, size_t dynamic_smem = 0,
                      int cluster_size = 0) {
  int clusters = 0;
  BENCH_CUDA_CHECK(
      query_resident_clusters(clusters, kernel, grid, block, dynamic_smem, cluster_size));
  return clusters;
}

}  // namespace kernels

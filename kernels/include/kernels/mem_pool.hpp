// kernels/mem_pool.hpp: a device memory pool for stream-ordered allocation
// (cudaMallocFromPoolAsync / cudaFreeAsync) that keeps its memory. Its release threshold is
// UINT64_MAX, so a synchronisation never hands memory back to the driver: after the first
// allocations, an allocation from it is bookkeeping. Used by ch06/stream_ordered_alloc (its
// optimized side) and ch13/caching_allocator (its vendor rung).
//   kernels::KeepAllPool pool;   // untimed setup, on the current device
//   cudaMallocFromPoolAsync(&p, bytes, pool.get(), stream); ... cudaFreeAsync(p, stream);
#pragma once

#include <bench/bench.hpp>

#include <cstdint>

namespace kernels {

class KeepAllPool {
 public:
  KeepAllPool() {
    int device = 0;
    BENCH_CUDA_CHECK(cudaGetDevice(&device));
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location = {cudaMemLocationTypeDevice, device};
    BENCH_CUDA_CHECK(cudaMemPoolCreate(&pool_, &props));
    uint64_t keep_everything = UINT64_MAX;
    BENCH_CUDA_CHECK(cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep_everything));
  }
  KeepAllPool(const KeepAllPool&) = delete;
  KeepAllPool& operator=(const KeepAllPool&) = delete;
  // Every block must have been freed, and the frees reached in stream order, before this runs.
  ~KeepAllPool() { cudaMemPoolDestroy(pool_); }  // no check: destructors must not throw
  cudaMemPool_t get() const { return pool_; }

 private:
  cudaMemPool_t pool_ = nullptr;
};

}  // namespace kernels

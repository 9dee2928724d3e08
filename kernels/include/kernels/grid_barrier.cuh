// kernels/grid_barrier.cuh: a barrier across every block of a grid, for kernels whose blocks are
// all resident at once (a cooperative launch: the launch fails, rather than hangs, if the grid
// cannot be co-resident). ch20's megakernel (between its phases) and ch15's fused permutation
// (between its counting, placing and GEMM) use it.
//
// The barrier is one 64-bit arrival counter in global memory that only grows: a block's thread 0
// arrives with a release atomic add, and every thread 0 spins on an acquire load until the counter
// reaches its barrier's target (one grid's worth of arrivals more than the last). The last arrival
// is itself the release: no reset, no separate generation store, one trip to L2 fewer on the path
// every block waits on. Zero the counter once (it then holds a multiple of the grid between
// launches: every block arrives at every barrier). A barrier that waits longer than
// kGridBarrierTimeoutNs traps: a bug fails the run instead of hanging it.
#pragma once

#include <cstdint>

namespace kernels {

// A barrier waits for the slowest block's phase: well under a millisecond, and still far under
// this when compute-sanitizer instruments every access.
constexpr uint64_t kGridBarrierTimeoutNs = 20'000'000'000;

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// In two halves, arrive() and wait(), so that work that does not depend on the other blocks
// (loads of inputs nothing in the launch writes) can go out between them.
// A launch's barrier b completes at the counter's value at the launch's start plus (b + 1) grids.
// Thread 0 reads the counter at the launch's start and, at its first wait, rounds it down to the
// grid: other blocks may already have arrived at the first barrier, but it cannot complete before
// this block arrives. (The rounding waits for the load, so it is left to the first wait.) 64 bits:
// it never wraps (32 bits would, at a count not a multiple of the grid).
class GridBarrier {
 public:
  __device__ explicit GridBarrier(unsigned long long* counter) : counter_(counter), target_(0) {
    if (threadIdx.x == 0) target_ = load_relaxed(counter);
  }

  // The block has finished the phase: its thread 0 counts it in.
  __device__ __forceinline__ void arrive() {
    __syncthreads();  // every thread's writes of the phase, before thread 0's release
    if (threadIdx.x != 0) return;
    asm volatile("red.release.gpu.global.add.u64 [%0], 1;" ::"l"(counter_) : "memory");
  }

  // Returns once every block has arrived; what they wrote before arriving is then visible.
  __device__ __forceinline__ void wait() {
    if (threadIdx.x == 0) {
      if (!rounded_) target_ = target_ - target_ % gridDim.x + gridDim.x, rounded_ = true;
      const uint64_t start = global_ns();
      for (uint32_t spins = 1; load_acquire(counter_) < target_; ++spins)
        if (spins % 1024 == 0 && global_ns() - start > kGridBarrierTimeoutNs) __trap();
      target_ += gridDim.x;
    }
    __syncthreads();
  }

  __device__ __forceinline__ void sync() {
    arrive();
    wait();
  }

 private:
  __device__ __forceinline__ static unsigned long long load_acquire(unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ __forceinline__ static unsigned long long load_relaxed(unsigned long long* p) {
    unsigned long long v;
    asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  unsigned long long* counter_;
  unsigned long long target_;  // thread 0's: the count at which the next barrier completes
  bool rounded_ = false;       // target_ is still the count read at the launch's start
};

}  // namespace kernels

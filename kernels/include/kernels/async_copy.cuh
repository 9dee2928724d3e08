// kernels/async_copy.cuh: cp.async (sm_80+) wrappers, global -> shared without registers.
//
// Each thread queues 16-byte copies (LDGSTS in SASS), groups them with commit(), and later
// waits until at most N groups are still in flight with wait<N>(); a __syncthreads() after the
// wait makes every thread's copies visible to the block. The multi-stage pattern is:
//   prologue: issue stages 0..S-2, commit each;
//   loop:     wait<S-2>(); __syncthreads(); issue stage k+S-1; commit; compute on stage k.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kernels::cp_async {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Copies `valid` (0..16) bytes from `src` and zero-fills the rest of the 16 bytes at `dst`.
// `src` must be a valid, 16-byte aligned address even when `valid` is 0. Bypasses L1 (.cg).
__device__ __forceinline__ void copy16(void* dst, const void* src, int valid = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid)
               : "memory");
}

__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Waits until at most N committed groups of this thread are still in flight.
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace kernels::cp_async

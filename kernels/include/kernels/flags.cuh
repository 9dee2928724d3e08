// kernels/flags.cuh: release stores and acquire loads of 32-bit flags in global memory, the
// handshake between CTAs that must not wait on a kernel boundary.
//
// A writer finishes its data, then store_release()s a flag; a reader spins on load_acquire()
// until it sees the value, then reads the data: the release orders the data before the flag, the
// acquire orders the flag before the reads, with no __threadfence() on either side. The scope
// is how far the ordering reaches: Scope::gpu between CTAs of one GPU (ch10's stream-K fix-up),
// Scope::sys between GPUs that read each other's memory through peer pointers (ch04's one-shot
// all-reduce).
#pragma once

#include <cstdint>

namespace kernels {

enum class Scope { gpu, sys };

template <Scope scope>
__device__ __forceinline__ void store_release(uint32_t* flag, uint32_t value) {
  if constexpr (scope == Scope::sys)
    asm volatile("st.release.sys.global.u32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
  else
    asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(flag), "r"(value) : "memory");
}

template <Scope scope>
__device__ __forceinline__ uint32_t load_acquire(const uint32_t* flag) {
  uint32_t value;
  if constexpr (scope == Scope::sys)
    asm volatile("ld.acquire.sys.global.u32 %0, [%1];" : "=r"(value) : "l"(flag) : "memory");
  else
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(flag) : "memory");
  return value;
}

}  // namespace kernels

// kernels/flags.cuh: release stores and acquire loads of 32-bit flags in global memory, the
// handshake between CTAs that must not wait on a kernel boundary.
//
// A writer finishes its data, then store_release()s a flag; a reader spins on load_acquire()
// until it sees the value, then reads the data: the release orders the data before the flag, the
// acquire orders the flag before the reads, with no __threadfence() on either side. The scope
// is how far the ordering reaches: Scope::gpu between CTAs of one GPU (ch10's stream-K fix-up),
// Scope::sys between GPUs that read each other's memory through peer pointers (ch04's one-shot
// all-reduce).
//
// Where several writers each finish a part and the last one to finish consumes them all, the flag
// is a count: each writer fetch_add_acq_rel()s it once its part is written. The release half
// orders the writer's part before its increment; the acquire half lets the writer that sees the
// count one short of complete read every part (the increments form one chain of atomics on the
// flag, so its acquire synchronizes with every earlier writer's release). ch20's megakernel merges
// a head's attention chunks so.
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

// Adds `value` to the flag and returns what it held before: a release of the caller's writes and an
// acquire of those released by the increments before it.
template <Scope scope>
__device__ __forceinline__ uint32_t fetch_add_acq_rel(uint32_t* flag, uint32_t value) {
  uint32_t before;
  if constexpr (scope == Scope::sys)
    asm volatile("atom.acq_rel.sys.global.add.u32 %0, [%1], %2;"
                 : "=r"(before)
                 : "l"(flag), "r"(value)
                 : "memory");
  else
    asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;"
                 : "=r"(before)
                 : "l"(flag), "r"(value)
                 : "memory");
  return before;
}

}  // namespace kernels

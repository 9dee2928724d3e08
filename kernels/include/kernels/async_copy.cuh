// kernels/async_copy.cuh: cp.async (sm_80+) wrappers, global -> shared without registers.
//
// Each thread queues 16-byte copies (LDGSTS in SASS), groups them with commit(), and later
// waits until at most N groups are still in flight with wait<N>(); a __syncthreads() after the
// wait makes every thread's copies visible to the block. The multi-stage pattern is:
//   prologue: issue stages 0..S-2, commit each;
//   loop:     wait<S-2>(); __syncthreads(); issue stage k+S-1; commit; compute on stage k.
// Or, between warps of different roles, arrive_on() a stage's mbarrier after its copies.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kernels::cp_async {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Copies `valid` (0..16) bytes from `src` and zero-fills the rest of the 16 bytes at `dst`.
// `src` must be a valid, 16-byte aligned address even when `valid` is 0. Bypasses L1 (.cg).
// All 16 bytes from `src` must lie inside its allocation, whatever `valid` says: the hardware
// reads only `valid` bytes, but compute-sanitizer's memcheck checks the whole 16-byte access and
// reports the tail of a partial last chunk as out of bounds (ch07/async_prefetch did that). Copy
// a partial chunk with copy4 per element instead, and give a zero fill an in-bounds source.
__device__ __forceinline__ void copy16(void* dst, const void* src, int valid = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid)
               : "memory");
}

// The 4-byte form (cp.async.ca: .cg takes 16-byte copies only): copies `valid` (0 or 4) bytes and
// zero-fills the rest; `src` must be a valid, 4-byte aligned address in bounds even when `valid`
// is 0. For the ragged end of a buffer whose length is not a multiple of 16 bytes.
__device__ __forceinline__ void copy4(void* dst, const void* src, int valid = 4) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid)
               : "memory");
}

__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// The mbarrier form of completion (sm_80+): one arrival on `bar` once every cp.async this thread
// has issued so far has landed, without the thread waiting. .noinc: the arrival counts against
// the count the barrier was initialised with (one per thread that calls this, per phase), so a
// warp-specialised producer's copies can fill a ring stage that consumers wait for on `bar`.
__device__ __forceinline__ void arrive_on(uint64_t* bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(smem_addr(bar))
               : "memory");
}

// Waits until at most N committed groups of this thread are still in flight.
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace kernels::cp_async

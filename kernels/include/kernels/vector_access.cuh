// kernels/vector_access.cuh: 16-byte global loads and stores with streaming cache hints.
//
// A streaming kernel touches each byte once, so its loads need not stay in L1
// (ld.global.nc.L1::no_allocate: the read-only path, no L1 allocation) and its stores are
// "evict first" in L2 (st.global.cs). Both are one 16-byte instruction per thread (LDG.E.128 /
// STG.E.128 in SASS). The pointers must be 16-byte aligned (8-byte for the uint2 form).
#pragma once

#include <cuda_runtime.h>

namespace kernels {

__device__ __forceinline__ float4 load_stream(const float4* p) {
  float4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ void store_stream(float4* p, float4 v) {
  asm volatile("st.global.cs.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(v.x), "f"(v.y),
               "f"(v.z), "f"(v.w)
               : "memory");
}

// The same 16 bytes as four raw 32-bit words: packed narrow types (8 BF16, 8 FP16, 16 FP8),
// unpacked by the caller (kernels/bf16_pack.cuh for BF16). The same instructions: the float
// view is only a register bit pattern, and the casts cost nothing.
__device__ __forceinline__ uint4 load_stream(const uint4* p) {
  const float4 v = load_stream(reinterpret_cast<const float4*>(p));
  return make_uint4(__float_as_uint(v.x), __float_as_uint(v.y), __float_as_uint(v.z), __float_as_uint(v.w));
}

// Half as wide: 8 bytes (8 FP8 values, 4 BF16), LDG.E.64.
__device__ __forceinline__ uint2 load_stream(const uint2* p) {
  uint2 v;
  asm volatile("ld.global.nc.L1::no_allocate.v2.u32 {%0, %1}, [%2];"
               : "=r"(v.x), "=r"(v.y)
               : "l"(p));
  return v;
}

// Brings the 128-byte line holding p into L2 ahead of its load; no register waits for it.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

__device__ __forceinline__ void store_stream(uint4* p, uint4 v) {
  store_stream(reinterpret_cast<float4*>(p),
               make_float4(__uint_as_float(v.x), __uint_as_float(v.y), __uint_as_float(v.z), __uint_as_float(v.w)));
}

}  // namespace kernels

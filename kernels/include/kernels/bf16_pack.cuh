// kernels/bf16_pack.cuh: eight BF16 values in one 16-byte word (uint4) <-> eight floats.
//
// BF16 is the top half of an FP32 bit pattern, so widening is a shift or a mask (exact, no
// conversion instruction); narrowing rounds to nearest even, two values per cvt.rn.bf16x2.f32
// (sm_80 and later). Lane order matches memory: element 2i is the low half of word i.
#pragma once

#include <cuda_runtime.h>

namespace kernels {

inline constexpr int kBf16PerVector = 8;  // BF16 values in one 16-byte load or store

__device__ __forceinline__ void unpack_bf16x8(uint4 v, float (&out)[kBf16PerVector]) {
  const unsigned words[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    out[2 * i] = __uint_as_float(words[i] << 16);
    out[2 * i + 1] = __uint_as_float(words[i] & 0xffff0000u);
  }
}

__device__ __forceinline__ unsigned pack_bf16x2(float lo, float hi) {
  unsigned packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));  // first source -> high half
  return packed;
}

__device__ __forceinline__ uint4 pack_bf16x8(const float (&in)[kBf16PerVector]) {
  return make_uint4(pack_bf16x2(in[0], in[1]), pack_bf16x2(in[2], in[3]), pack_bf16x2(in[4], in[5]),
                    pack_bf16x2(in[6], in[7]));
}

}  // namespace kernels

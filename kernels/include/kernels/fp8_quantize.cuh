// kernels/fp8_quantize.cuh: per-tensor FP8 E4M3 quantisation of a BF16 tensor with current
// scaling, in the plain two-pass form: the tensor's amax (pass 1), its scales, then the cast
// (pass 2). The same for consecutive groups of a tensor, each with its own scales (a KV cache per
// (sequence, head): ch19's kv_quantization), in one launch per pass.
//   q = saturate_e4m3(x * 448 / amax(x)),   x ≈ q * amax(x) / 448   (the rule:
//   kernels/fp8_e4m3.hpp)
// 448 is E4M3's largest finite value, so the largest |x| maps onto it and every other value
// keeps E4M3's 3 mantissa bits (relative rounding at most 2^-4) unless it falls under E4M3's
// smallest normal (2^-6 · amax / 448, where it loses bits as a subnormal).
//   kernels::Fp8Scales* scales = ...;                   // device memory, 16-byte aligned
//   kernels::quantize_e4m3_per_tensor(x, q, n, scales, blocks, stream);
//   // then cuBLASLt's A or B scale pointer = &scales->dequant
// BF16 is read 16 bytes (8 values) per load and FP8 written 8 bytes per store; a tail shorter
// than 8 values is handled element by element. Both passes are grid-stride loops: a grid of a
// few blocks per SM (kernels::sm_count()) streams any n.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <bench/bench.hpp>
#include <cstdint>
#include <kernels/bf16_pack.cuh>
#include <kernels/fp8_block_scaling.hpp>
#include <kernels/fp8_e4m3.hpp>
#include <kernels/group_reduce.cuh>
#include <kernels/vector_access.cuh>

namespace kernels {

inline constexpr int kQuantizeThreads = 256;

// One tensor's scales. cuBLASLt 13 on the H100 and H200 refuses (NOT_SUPPORTED, at launch) a
// scale pointer that is not 16-byte aligned, so `dequant` opens a 16-byte slot of its own.
struct alignas(16) Fp8Scales {
  float dequant;  // amax / 448: what the GEMM multiplies its FP32 sum by
  float pad0[3];
  float quant;  // 448 / amax: what the cast multiplies x by
  unsigned amax_bits;  // amax as float bits (non-negative floats order as unsigned integers)
  float pad1[2];
};

// Two E4M3 codes (lo in the low byte), round to nearest even, saturating to ±448 (x * quant can
// round a hair past it): cvt.rn.satfinite.e4m3x2.f32.
__device__ __forceinline__ unsigned short e4m3x2(float lo, float hi) {
  return __nv_cvt_float2_to_fp8x2(make_float2(lo, hi), __NV_SATFINITE, __NV_E4M3);
}

// Eight values times `quant`, as eight E4M3 codes (element 0 in the lowest byte): one 8-byte store.
__device__ __forceinline__ uint2 e4m3x8(const float (&v)[kBf16PerVector], float quant) {
  return make_uint2(
      e4m3x2(v[0] * quant, v[1] * quant) | unsigned{e4m3x2(v[2] * quant, v[3] * quant)} << 16,
      e4m3x2(v[4] * quant, v[5] * quant) | unsigned{e4m3x2(v[6] * quant, v[7] * quant)} << 16);
}

// max |x| of the 8 BF16 values of one 16-byte load, from their bits: a finite BF16's magnitude
// orders as its bits with the sign cleared (the same for FP32), so two 16-bit integer maxima a
// pair replace 8 conversions, 8 fabs and 8 fmax, and the values need not be unpacked.
__device__ __forceinline__ float abs_max_bf16x8(uint4 v) {
  constexpr unsigned kMagnitudes = 0x7fff7fffu;
  const unsigned m = __vmaxu2(__vmaxu2(v.x & kMagnitudes, v.y & kMagnitudes),
                              __vmaxu2(v.z & kMagnitudes, v.w & kMagnitudes));
  return __uint_as_float(max(m & 0xffffu, m >> 16) << 16);
}

namespace detail {

// Every kernel below works on group blockIdx.y (x and q from element blockIdx.y x n, scales
// element blockIdx.y); a per-tensor launch is one group.
template <class Bf16>  // a template only so that two files of one binary can include this header
__global__ void abs_max(const Bf16* __restrict__ x, int64_t n, Fp8Scales* __restrict__ scales) {
  x += blockIdx.y * n;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x, first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t vectors = n / kBf16PerVector;
  float m = 0.0f;
  for (int64_t i = first; i < vectors; i += stride) {
    float v[kBf16PerVector];
    unpack_bf16x8(load_stream(reinterpret_cast<const uint4*>(x) + i), v);
#pragma unroll
    for (int j = 0; j < kBf16PerVector; ++j) m = fmaxf(m, fabsf(v[j]));
  }
  for (int64_t i = vectors * kBf16PerVector + first; i < n; i += stride) m = fmaxf(m, fabsf(float(x[i])));
  m = warp_reduce(m, Max{});
  if (threadIdx.x % 32 == 0) atomicMax(&scales[blockIdx.y].amax_bits, __float_as_uint(m));
}

template <class Scales>
__global__ void __launch_bounds__(1) scales_from_amax(Scales* scales) {
  scales += blockIdx.x;
  const E4m3Scales s =
      e4m3_scales(__uint_as_float(scales->amax_bits));  // an all-zero tensor: finite
  scales->dequant = s.dequant;
  scales->quant = s.quant;
}

template <class Bf16>
__global__ void quantize(const Bf16* __restrict__ x, __nv_fp8_e4m3* __restrict__ q, int64_t n,
                         const Fp8Scales* __restrict__ scales) {
  x += blockIdx.y * n, q += blockIdx.y * n;
  const float s = scales[blockIdx.y].quant;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x, first = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t vectors = n / kBf16PerVector;
  for (int64_t i = first; i < vectors; i += stride) {
    float v[kBf16PerVector];
    unpack_bf16x8(load_stream(reinterpret_cast<const uint4*>(x) + i), v);
    reinterpret_cast<uint2*>(q)[i] = e4m3x8(v, s);  // 8 FP8 values: element 0 in the lowest byte
  }
  for (int64_t i = vectors * kBf16PerVector + first; i < n; i += stride)
    q[i] = __nv_fp8_e4m3(float(x[i]) * s);  // the same rounding and saturation
}

// Block (row block blockIdx.y, k-block blockIdx.x) of a rows x cols operand: block_rows rows x
// 128 columns, thread t owning column t of the block. A plain setup kernel (fused_quantize is
// the lesson on a fast one): amax over the block, its scales, the cast, the dequant scale stored
// at fp8_block::scale_index.
template <class Bf16>
__global__ void __launch_bounds__(fp8_block::kBlockK)
    quantize_block(const Bf16* __restrict__ x, __nv_fp8_e4m3* __restrict__ q, int64_t cols,
                   int block_rows, float* __restrict__ dequant) {
  const int64_t col = int64_t{blockIdx.x} * fp8_block::kBlockK + threadIdx.x;
  const int64_t row0 = int64_t{blockIdx.y} * block_rows;
  float m = 0.0f;
  for (int r = 0; r < block_rows; ++r) m = fmaxf(m, fabsf(float(x[(row0 + r) * cols + col])));
  const E4m3Scales s = e4m3_scales(group_reduce<fp8_block::kBlockK>(m, Max{}));
  for (int r = 0; r < block_rows; ++r)
    q[(row0 + r) * cols + col] = __nv_fp8_e4m3(float(x[(row0 + r) * cols + col]) * s.quant);
  if (threadIdx.x == 0)
    dequant[fp8_block::scale_index(blockIdx.y, blockIdx.x, gridDim.y)] = s.dequant;
}

}  // namespace detail

// Quantises a rows x cols operand (k = cols contiguous) in blocks of block_rows x 128 values,
// each with its own scales (kernels/fp8_block_scaling.hpp): codes into q, dequant scales into
// `dequant` [cols / 128][rows / block_rows]. rows % block_rows == 0, cols % 128 == 0,
// rows / block_rows <= 65535.
inline void quantize_e4m3_blocks(const __nv_bfloat16* x, __nv_fp8_e4m3* q, int64_t rows,
                                 int64_t cols, int block_rows, float* dequant,
                                 cudaStream_t stream) {
  const dim3 grid{unsigned(cols / fp8_block::kBlockK), unsigned(rows / block_rows)};
  detail::quantize_block<<<grid, fp8_block::kBlockK, 0, stream>>>(x, q, cols, block_rows, dequant);
  BENCH_CHECK_LAUNCH();
}

// Enqueues amax, scales and cast of `groups` consecutive groups of n values, x[g n, (g + 1) n)
// into q with scales[g], on `stream`; `blocks` CTAs a group. x must be 16-byte aligned and q
// 8-byte aligned (cudaMalloc gives 256), and with several groups n a multiple of 8 so that every
// group is too; `scales` is device memory; groups <= 65535 (the grid's y).
inline void quantize_e4m3_per_group(const __nv_bfloat16* x, __nv_fp8_e4m3* q, int64_t n, int groups,
                                    Fp8Scales* scales, int blocks, cudaStream_t stream) {
  BENCH_CUDA_CHECK(
      cudaMemsetAsync(scales, 0, sizeof(Fp8Scales) * groups, stream));  // amax_bits = 0
  const dim3 grid{unsigned(blocks), unsigned(groups)};
  detail::abs_max<<<grid, kQuantizeThreads, 0, stream>>>(x, n, scales);
  BENCH_CHECK_LAUNCH();
  detail::scales_from_amax<<<groups, 1, 0, stream>>>(scales);
  BENCH_CHECK_LAUNCH();
  detail::quantize<<<grid, kQuantizeThreads, 0, stream>>>(x, q, n, scales);
  BENCH_CHECK_LAUNCH();
}

// The whole tensor as one group: then cuBLASLt's A or B scale pointer = &scales->dequant.
inline void quantize_e4m3_per_tensor(const __nv_bfloat16* x, __nv_fp8_e4m3* q, int64_t n,
                                     Fp8Scales* scales, int blocks, cudaStream_t stream) {
  quantize_e4m3_per_group(x, q, n, 1, scales, blocks, stream);
}

}  // namespace kernels

// kernels/fp8_block_scaling.hpp: where fine-grained FP8 scales live, for the quantiser that
// writes them (kernels/fp8_quantize.cuh), the GEMM that reads them (ch19/fp8_gemm's block-scaled
// rung) and the host tests that model both. Host and device include it; it needs no CUDA header.
//
// An operand is rows x k, k-contiguous. It is cut into blocks of `block_rows` rows x 128 values
// of k, each with its own scales under the rule of kernels/fp8_e4m3.hpp: block_rows = 1 for
// activations (one scale per row per 128-wide k-block, "1 x 128"), 128 for weights ("128 x
// 128"). The dequant scales are stored k-block-major, [k_blocks][row_blocks]: the scales of one
// k-block for consecutive rows are contiguous, so a GEMM tile fetches its rows' scales for one
// k-block as one copy.
#pragma once

#include <cstdint>

#include "fp8_e4m3.hpp"  // by path: host tests include this header without kernels/include

namespace kernels::fp8_block {

inline constexpr int kBlockK = 128;  // values of k a scale covers

// The slot of block (row_block, k_block) in an operand's dequant scales.
KERNELS_HOST_DEVICE constexpr int64_t scale_index(int64_t row_block, int64_t k_block,
                                                  int64_t row_blocks) {
  return k_block * row_blocks + row_block;
}

// The relative L2 error an E4M3 GEMM is held to against the GEMM of the values it quantised
// (ch19/fp8_gemm's tolerance): rounding to 3 mantissa bits costs ~2.6e-2 rms a value, a product
// ~sqrt(2) of that, so ~3.7e-2 whether the scales are per tensor or per block.
inline constexpr double kE4m3GemmRelativeL2 = 6e-2;

// ---- Inputs whose scales matter.
// With every value uniform in (-1, 1) each block's abs-max is ~0.99 and all scales agree to ~1%:
// a GEMM that read the wrong block's scale would still pass. ch19/fp8_gemm therefore widens its
// operands' range block by block: block (row_block, k_block) of operand `operand` is multiplied
// by 2^spread_exponent(...), an exponent in [-4, 3] from an integer hash (exact in BF16: a power
// of two). Neighbouring blocks, a block and its transposed index, and a block and the next
// k-block then differ by up to 2^7 in scale, so a misread scale scales a product term by as much.
inline constexpr int kSpreadMin = -4, kSpreadLevels = 8;  // exponents -4 .. 3

KERNELS_HOST_DEVICE constexpr int spread_exponent(uint32_t operand, int64_t row_block,
                                                  int64_t k_block) {
  // lowbias32 (Chris Wellons' integer hash) of the block's coordinates: no short period along
  // either coordinate, unlike a linear formula such as (5 r + 3 kb) % 8.
  uint32_t h =
      uint32_t(row_block) * 0x9E3779B1u ^ uint32_t(k_block) * 0x85EBCA77u ^ operand * 0xC2B2AE3Du;
  h ^= h >> 16;
  h *= 0x7FEB352Du;
  h ^= h >> 15;
  h *= 0x846CA68Bu;
  h ^= h >> 16;
  return kSpreadMin + int(h % kSpreadLevels);
}

}  // namespace kernels::fp8_block

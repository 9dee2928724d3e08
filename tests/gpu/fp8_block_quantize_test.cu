// Tests kernels::quantize_e4m3_blocks (kernels/fp8_quantize.cuh), which ch19/fp8_gemm's
// block-scaled rung reads, against the host: for 1 x 128 blocks (activations) and 128 x 128
// blocks (weights) of operands widened as the example widens them, every dequant scale sits at
// kernels::fp8_block::scale_index and equals the rule's (kernels/fp8_e4m3.hpp) bit for bit, and
// every code is the rule's cast of its value. The widening puts neighbouring blocks up to 2^7
// apart, so a scale stored at another block's slot, or a block cast with another's scale, shows.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <kernels/fp8_block_scaling.hpp>
#include <kernels/fp8_quantize.cuh>
#include <random>
#include <vector>

#include "host_copy.hpp"

namespace {

using bf16 = __nv_bfloat16;
namespace fp8_block = kernels::fp8_block;

void check_blocks(int64_t rows, int64_t cols, int block_rows, uint32_t operand) {
  std::mt19937 rng(43 + operand);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<bf16> x(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      x[r * cols + c] = __float2bfloat16(
          std::ldexp(uniform(rng),
                     fp8_block::spread_exponent(operand, r / block_rows, c / fp8_block::kBlockK)));
  const int64_t row_blocks = rows / block_rows, k_blocks = cols / fp8_block::kBlockK;

  bf16* x_d = nullptr;
  __nv_fp8_e4m3* q_d = nullptr;
  float* dequant_d = nullptr;
  ASSERT_EQ(cudaMalloc(&x_d, x.size() * sizeof(bf16)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&q_d, x.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dequant_d, row_blocks * k_blocks * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(x_d, x.data(), x.size() * sizeof(bf16), cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemset(dequant_d, 0xff, row_blocks * k_blocks * sizeof(float)),
            cudaSuccess);  // NaN
  kernels::quantize_e4m3_blocks(x_d, q_d, rows, cols, block_rows, dequant_d, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint8_t> codes(x.size());
  std::vector<float> dequant(row_blocks * k_blocks);
  ASSERT_EQ(cudaMemcpy(codes.data(), q_d, codes.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(
      cudaMemcpy(dequant.data(), dequant_d, dequant.size() * sizeof(float), cudaMemcpyDeviceToHost),
      cudaSuccess);

  int64_t wrong_scales = 0, wrong_codes = 0;
  for (int64_t rb = 0; rb < row_blocks; ++rb)
    for (int64_t kb = 0; kb < k_blocks; ++kb) {
      float amax = 0.0f;
      for (int64_t r = rb * block_rows; r < (rb + 1) * block_rows; ++r)
        for (int64_t c = kb * fp8_block::kBlockK; c < (kb + 1) * fp8_block::kBlockK; ++c)
          amax = std::fmax(amax, std::fabs(__bfloat162float(x[r * cols + c])));
      const kernels::E4m3Scales want = kernels::e4m3_scales(amax);
      wrong_scales += dequant[fp8_block::scale_index(rb, kb, row_blocks)] != want.dequant;
      for (int64_t r = rb * block_rows; r < (rb + 1) * block_rows; ++r)
        for (int64_t c = kb * fp8_block::kBlockK; c < (kb + 1) * fp8_block::kBlockK; ++c)
          wrong_codes += bench::detail::e4m3_to_double(codes[r * cols + c]) !=
                         kernels::round_e4m3(__bfloat162float(x[r * cols + c]) * want.quant);
    }
  EXPECT_EQ(wrong_scales, 0) << rows << " x " << cols << " in blocks of " << block_rows << " x 128";
  EXPECT_EQ(wrong_codes, 0) << rows << " x " << cols << " in blocks of " << block_rows << " x 128";
  cudaFree(x_d), cudaFree(q_d), cudaFree(dequant_d);
}

TEST(Fp8BlockQuantize, ActivationRowsOf128Values) { check_blocks(37, 5 * 128, 1, 0); }
TEST(Fp8BlockQuantize, WeightBlocksOf128x128) { check_blocks(3 * 128, 5 * 128, 128, 1); }

}  // namespace

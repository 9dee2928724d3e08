// Tests kernels/include/kernels/fp8_block_scaling.hpp, where ch19/fp8_gemm's fine-grained scales
// live and how its operands are widened, on the host's exact model of the quantisation
// (kernels/fp8_e4m3.hpp): the block-scaled GEMM of the codes meets the example's tolerance
// against the GEMM of the values, and a GEMM that reads a wrong scale (a neighbouring row's, the
// next k-block's, a neighbouring weight block's, or the scales in transposed order) does not,
// so the example's verification catches a misindexed scale. Per-tensor scaling meets the same
// bound on these operands; on a block far below the tensor's abs-max it does not, which is what
// block scales are for.
#include "../../kernels/include/kernels/fp8_block_scaling.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <set>
#include <vector>

namespace {

using kernels::round_e4m3;
namespace fp8_block = kernels::fp8_block;
constexpr int64_t kBlock = fp8_block::kBlockK;
constexpr uint32_t kOperandA = 0, kOperandB = 1;  // the example's tags

// A rows x cols operand (k = cols contiguous) with its codes and block scales, as the example's
// inputs_filled makes it: uniform(-1, 1), widened block by block, quantised per block.
struct Operand {
  int64_t rows, cols, block_rows;
  std::vector<float> values;   // widened
  std::vector<double> codes;   // E4M3 values of values x quant
  std::vector<float> dequant;  // [cols / 128][rows / block_rows]
  int64_t row_blocks() const { return rows / block_rows; }
};

Operand make_operand(int64_t rows, int64_t cols, int64_t block_rows, uint32_t operand,
                     uint32_t seed) {
  Operand o{rows,
            cols,
            block_rows,
            std::vector<float>(rows * cols),
            std::vector<double>(rows * cols),
            std::vector<float>(cols / kBlock * (rows / block_rows))};
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      o.values[r * cols + c] =
          std::ldexp(uniform(gen), fp8_block::spread_exponent(operand, r / block_rows, c / kBlock));
  for (int64_t rb = 0; rb < o.row_blocks(); ++rb)
    for (int64_t kb = 0; kb < cols / kBlock; ++kb) {
      float amax = 0.0f;
      for (int64_t r = rb * block_rows; r < (rb + 1) * block_rows; ++r)
        for (int64_t c = kb * kBlock; c < (kb + 1) * kBlock; ++c)
          amax = std::max(amax, std::fabs(o.values[r * cols + c]));
      const kernels::E4m3Scales s = kernels::e4m3_scales(amax);
      for (int64_t r = rb * block_rows; r < (rb + 1) * block_rows; ++r)
        for (int64_t c = kb * kBlock; c < (kb + 1) * kBlock; ++c)
          o.codes[r * cols + c] = round_e4m3(double(o.values[r * cols + c] * s.quant));
      o.dequant[fp8_block::scale_index(rb, kb, o.row_blocks())] = s.dequant;
    }
  return o;
}

// Which scale a GEMM reads for (row, k-block) of an operand: a slot of its dequant array.
using ScaleSlot = std::function<int64_t(const Operand&, int64_t row, int64_t kb)>;
int64_t right_slot(const Operand& o, int64_t row, int64_t kb) {
  return fp8_block::scale_index(row / o.block_rows, kb, o.row_blocks());
}

double relative_l2(const std::vector<double>& out, const std::vector<double>& ref) {
  double err = 0, norm = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    err += (out[i] - ref[i]) * (out[i] - ref[i]);
    norm += ref[i] * ref[i];
  }
  return std::sqrt(err / norm);
}

// D (m x n) = A B^T as the block-scaled rung computes it: each k-block's sum of code products,
// times the two scales the rung reads, added into the total.
std::vector<double> block_scaled_gemm(const Operand& a, const Operand& b, const ScaleSlot& a_slot,
                                      const ScaleSlot& b_slot) {
  const int64_t k = a.cols;
  std::vector<double> d(a.rows * b.rows);
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j < b.rows; ++j) {
      double total = 0;
      for (int64_t kb = 0; kb < k / kBlock; ++kb) {
        double part = 0;
        for (int64_t p = kb * kBlock; p < (kb + 1) * kBlock; ++p)
          part += a.codes[i * k + p] * b.codes[j * k + p];
        total += part * a.dequant[a_slot(a, i, kb)] * b.dequant[b_slot(b, j, kb)];
      }
      d[i * b.rows + j] = total;
    }
  return d;
}

std::vector<double> values_gemm(const Operand& a, const Operand& b) {
  const int64_t k = a.cols;
  std::vector<double> d(a.rows * b.rows);
  for (int64_t i = 0; i < a.rows; ++i)
    for (int64_t j = 0; j < b.rows; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += double(a.values[i * k + p]) * b.values[j * k + p];
      d[i * b.rows + j] = sum;
    }
  return d;
}

// 256 activation rows, 256 weight rows (2 weight blocks), k 512 (4 k-blocks).
class Fp8BlockGemm : public ::testing::Test {
 protected:
  Operand a = make_operand(256, 512, 1, kOperandA, 1);
  Operand b = make_operand(256, 512, fp8_block::kBlockK, kOperandB, 2);
  std::vector<double> ref = values_gemm(a, b);
};

TEST(Fp8BlockScaling, ScalesAreKBlockMajor) {
  EXPECT_EQ(fp8_block::scale_index(0, 0, 64), 0);
  EXPECT_EQ(fp8_block::scale_index(5, 0, 64), 5);    // the next row block: the next slot
  EXPECT_EQ(fp8_block::scale_index(5, 2, 64), 133);  // the next k-block: row_blocks further
}

TEST(Fp8BlockScaling, SpreadCoversItsRangeWithoutAPattern) {
  std::set<int> seen;
  int same_as_next_row = 0, same_as_next_k_block = 0;
  for (int64_t r = 0; r < 64; ++r)
    for (int64_t kb = 0; kb < 64; ++kb) {
      const int e = fp8_block::spread_exponent(kOperandA, r, kb);
      EXPECT_GE(e, fp8_block::kSpreadMin);
      EXPECT_LT(e, fp8_block::kSpreadMin + fp8_block::kSpreadLevels);
      seen.insert(e);
      same_as_next_row += e == fp8_block::spread_exponent(kOperandA, r + 1, kb);
      same_as_next_k_block += e == fp8_block::spread_exponent(kOperandA, r, kb + 1);
    }
  EXPECT_EQ(seen.size(), size_t(fp8_block::kSpreadLevels));
  // 8 levels drawn independently agree 1 time in 8: 512 of 4096 pairs; a pattern would not.
  EXPECT_LT(same_as_next_row, 700);
  EXPECT_LT(same_as_next_k_block, 700);
  EXPECT_NE(fp8_block::spread_exponent(kOperandA, 3, 7),
            fp8_block::spread_exponent(kOperandB, 3, 7));
}

TEST_F(Fp8BlockGemm, RightScalesMeetTheTolerance) {
  const double err = relative_l2(block_scaled_gemm(a, b, right_slot, right_slot), ref);
  EXPECT_LT(err, fp8_block::kE4m3GemmRelativeL2);
  EXPECT_GT(err, 2e-2);  // it is the E4M3 rounding (~3.7e-2), not an exact product
}

TEST_F(Fp8BlockGemm, MisreadScalesFailTheTolerance) {
  const ScaleSlot neighbour_row = [](const Operand& o, int64_t row, int64_t kb) {
    return right_slot(o, row ^ 1, kb);
  };
  const ScaleSlot next_k_block = [](const Operand& o, int64_t row, int64_t kb) {
    return right_slot(o, row, (kb + 1) % (o.cols / kBlock));
  };
  const ScaleSlot neighbour_block = [](const Operand& o, int64_t row, int64_t kb) {
    return right_slot(o, row ^ o.block_rows, kb);
  };
  const ScaleSlot row_major = [](const Operand& o, int64_t row, int64_t kb) {  // [rows][k-blocks]
    return (row / o.block_rows) * (o.cols / kBlock) + kb;
  };
  const double tolerance = fp8_block::kE4m3GemmRelativeL2;
  // Each misreading scales the products it touches by up to 2^7: errors of order 1, far past
  // the tolerance, not near it.
  EXPECT_GT(relative_l2(block_scaled_gemm(a, b, neighbour_row, right_slot), ref), 5 * tolerance);
  EXPECT_GT(relative_l2(block_scaled_gemm(a, b, next_k_block, right_slot), ref), 5 * tolerance);
  EXPECT_GT(relative_l2(block_scaled_gemm(a, b, right_slot, next_k_block), ref), 5 * tolerance);
  EXPECT_GT(relative_l2(block_scaled_gemm(a, b, right_slot, neighbour_block), ref), 5 * tolerance);
  EXPECT_GT(relative_l2(block_scaled_gemm(a, b, row_major, right_slot), ref), 5 * tolerance);
}

TEST_F(Fp8BlockGemm, PerTensorScalesMeetTheToleranceToo) {
  // One scale per tensor over the same widened values: the dominant blocks keep their 3 bits.
  const auto per_tensor = [](const Operand& o) {
    float amax = 0.0f;
    for (float v : o.values) amax = std::max(amax, std::fabs(v));
    const kernels::E4m3Scales s = kernels::e4m3_scales(amax);
    Operand q = o;
    for (size_t i = 0; i < q.values.size(); ++i)
      q.codes[i] = round_e4m3(double(q.values[i] * s.quant));
    std::fill(q.dequant.begin(), q.dequant.end(), s.dequant);
    return q;
  };
  const double err =
      relative_l2(block_scaled_gemm(per_tensor(a), per_tensor(b), right_slot, right_slot), ref);
  EXPECT_LT(err, fp8_block::kE4m3GemmRelativeL2);
}

TEST(Fp8BlockScaling, BlockScalesKeepABlockFarBelowTheTensorsAbsMax) {
  // Two 128-value blocks, the second 2^-17 of the first: one scale for both leaves the second in
  // E4M3's subnormals (steps of 2^-9 = 0.002 against values below 448 x 2^-17 = 0.0034: a few
  // levels), its own scale gives it 3 mantissa bits like the first.
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(2 * kBlock);
  for (int64_t i = 0; i < 2 * kBlock; ++i) x[i] = std::ldexp(uniform(gen), i < kBlock ? 0 : -17);
  const auto block_error = [&](int64_t first, float amax) {
    const kernels::E4m3Scales s = kernels::e4m3_scales(amax);
    double err = 0, norm = 0;
    for (int64_t i = first; i < first + kBlock; ++i) {
      const double back = round_e4m3(double(x[i] * s.quant)) * s.dequant;
      err += (back - x[i]) * (back - x[i]);
      norm += double(x[i]) * x[i];
    }
    return std::sqrt(err / norm);
  };
  float tensor_amax = 0.0f, weak_amax = 0.0f;
  for (int64_t i = 0; i < 2 * kBlock; ++i) tensor_amax = std::max(tensor_amax, std::fabs(x[i]));
  for (int64_t i = kBlock; i < 2 * kBlock; ++i) weak_amax = std::max(weak_amax, std::fabs(x[i]));
  EXPECT_LT(block_error(kBlock, weak_amax), 4e-2);    // its own scale: E4M3's ~2.6e-2
  EXPECT_GT(block_error(kBlock, tensor_amax), 1e-1);  // the tensor's: mostly rounding noise
}

}  // namespace

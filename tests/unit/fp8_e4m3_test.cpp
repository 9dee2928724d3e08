// Tests kernels/include/kernels/fp8_e4m3.hpp, the FP8 E4M3 scale rule and the host's model of
// cvt.rn.satfinite.e4m3 that ch19's references use, against values worked out by hand from the
// format (1 sign, 4 exponent bits biased by 7, 3 mantissa bits; no infinities; 448 the largest
// finite value; subnormals m x 2^-9).
#include "../../kernels/include/kernels/fp8_e4m3.hpp"

#include <gtest/gtest.h>

#include <cmath>

namespace {

using kernels::round_e4m3;

TEST(Fp8E4m3, RepresentableValuesAreKept) {
  for (double v : {0.0, 1.0, 1.125, 1.875, 2.0, 3.5, 0.015625 /* 2^-6, smallest normal */, 240.0,
                   256.0, 288.0, 448.0})
    EXPECT_EQ(round_e4m3(v), v) << v;
  EXPECT_EQ(round_e4m3(-3.5), -3.5);
  EXPECT_EQ(round_e4m3(std::ldexp(1.0, -9)), std::ldexp(1.0, -9));          // smallest subnormal
  EXPECT_EQ(round_e4m3(7 * std::ldexp(1.0, -9)), 7 * std::ldexp(1.0, -9));  // largest subnormal
}

TEST(Fp8E4m3, RoundsToNearest) {
  EXPECT_EQ(round_e4m3(1.1), 1.125);  // steps of 1/8 in [1, 2)
  EXPECT_EQ(round_e4m3(1.05), 1.0);
  EXPECT_EQ(round_e4m3(100.0),
            96.0);  // steps of 8 in [64, 128): 96 and 104, 100 is a tie -> 96 (even code 0x5C)
  EXPECT_EQ(round_e4m3(101.0), 104.0);
  EXPECT_EQ(round_e4m3(300.0), 288.0);   // steps of 32 in [256, 448]
  EXPECT_EQ(round_e4m3(-0.3), -0.3125);  // steps of 1/32 in [0.25, 0.5)
}

TEST(Fp8E4m3, TiesGoToTheEvenCode) {
  EXPECT_EQ(round_e4m3(1.0625), 1.0);   // between 1.0 (mantissa 000) and 1.125 (001)
  EXPECT_EQ(round_e4m3(1.1875), 1.25);  // between 1.125 (001) and 1.25 (010)
  EXPECT_EQ(round_e4m3(1.9375), 2.0);   // between 1.875 (111) and 2.0 (the next binade's 000)
  EXPECT_EQ(round_e4m3(2.5 * std::ldexp(1.0, -9)), 2 * std::ldexp(1.0, -9));  // subnormal 010
  EXPECT_EQ(round_e4m3(3.5 * std::ldexp(1.0, -9)), 4 * std::ldexp(1.0, -9));  // subnormal 100
}

TEST(Fp8E4m3, UnderflowsToZeroBelowHalfTheSmallestSubnormal) {
  EXPECT_EQ(round_e4m3(std::ldexp(1.0, -10)), 0.0);  // a tie between 0 and 2^-9: the even one, 0
  EXPECT_EQ(round_e4m3(std::ldexp(1.1, -10)), std::ldexp(1.0, -9));
  EXPECT_EQ(round_e4m3(1e-6), 0.0);
}

TEST(Fp8E4m3, SaturatesToTheLargestFiniteValue) {
  EXPECT_EQ(round_e4m3(440.0), 448.0);  // rounds up onto 448
  EXPECT_EQ(round_e4m3(448.0001), 448.0);
  EXPECT_EQ(round_e4m3(470.0), 448.0);  // plain rounding would give 480, not a finite E4M3 value
  EXPECT_EQ(round_e4m3(1e6), 448.0);
  EXPECT_EQ(round_e4m3(-1e6), -448.0);
  EXPECT_EQ(round_e4m3(-INFINITY), -448.0);
}

TEST(Fp8E4m3, ScaleRuleMapsTheAmaxOnto448) {
  const kernels::E4m3Scales s = kernels::e4m3_scales(4.0f);
  EXPECT_EQ(s.dequant, 4.0f / 448.0f);
  EXPECT_EQ(s.quant, 112.0f);
  EXPECT_EQ(round_e4m3(4.0f * s.quant), 448.0);
  EXPECT_EQ(round_e4m3(-1.0f * s.quant), -112.0);
  // An amax whose 448 / amax rounds up: x * quant lands a hair above 448 and saturates back.
  const kernels::E4m3Scales odd =
      kernels::e4m3_scales(1.7f);  // 1.7f x (448 / 1.7f) = 448.00003 in FP32
  EXPECT_GT(1.7f * odd.quant, 448.0f);
  EXPECT_EQ(round_e4m3(1.7f * odd.quant), 448.0);
}

TEST(Fp8E4m3, AllZeroGroupGetsFiniteScalesAndZeroCodes) {
  const kernels::E4m3Scales s = kernels::e4m3_scales(0.0f);
  EXPECT_TRUE(std::isfinite(s.dequant) && std::isfinite(s.quant));
  EXPECT_GT(s.dequant, 0.0f);
  EXPECT_EQ(s.dequant, kernels::kMinAmax / 448.0f);
  EXPECT_EQ(round_e4m3(0.0f * s.quant), 0.0);
}

}  // namespace

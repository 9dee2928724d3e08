// Tests harness/src/verify.cpp: tolerances, NaN handling, the spread rule (VALIDITY rows 3, 5, 6)
// and the multi-threaded comparison of timing-size outputs.
#include "verify.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace {

using bench::detail::compare;
using bench::detail::constant_would_pass;

std::vector<double> uniform(std::size_t n, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<double> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(Compare, ExactNeedsEveryElementEqual) {
  auto ref = uniform(1000, 1), out = ref;
  EXPECT_TRUE(compare(out, ref, bench::exact()).pass);
  out[500] = std::nextafter(out[500], 2.0);
  const auto c = compare(out, ref, bench::exact());
  EXPECT_FALSE(c.pass);
  EXPECT_EQ(c.mismatches, 1);
  EXPECT_EQ(c.worst_index, 500);
}

TEST(Compare, NaNNeverPasses) {
  auto ref = uniform(1000, 2), out = ref;
  out[3] = NAN;
  for (auto t : {bench::exact(), bench::allclose(1e9, 1e9), bench::relative_l2(1e9)}) {
    const auto c = compare(out, ref, t);
    EXPECT_FALSE(c.pass);
    EXPECT_EQ(c.nan_count, 1);
  }
}

TEST(Compare, Fp32DefaultToleranceRejectsBf16Rounding) {
  auto ref = uniform(100000, 3), bf16 = ref, fp32 = ref;
  for (auto& x : bf16) x = std::ldexp(std::round(std::ldexp(x, 8)), -8);    // ~8 mantissa bits
  for (auto& x : fp32) x = static_cast<double>(static_cast<float>(x));
  const auto tol = bench::default_tolerance(bench::DType::f32);
  EXPECT_TRUE(compare(fp32, ref, tol).pass);
  EXPECT_FALSE(compare(bf16, ref, tol).pass);
  EXPECT_TRUE(compare(bf16, ref, bench::default_tolerance(bench::DType::bf16)).pass);
}

TEST(Compare, ManyThreadsAgreeWithTheSerialSums) {
  const std::size_t n = 3'000'001;  // large enough to be split over threads
  auto ref = uniform(n, 4), out = ref;
  double err2 = 0, ref2 = 0;
  for (std::size_t i = 0; i < n; i += 1000) out[i] += 1e-3;
  for (std::size_t i = 0; i < n; ++i) {
    err2 += (out[i] - ref[i]) * (out[i] - ref[i]);
    ref2 += ref[i] * ref[i];
  }
  const auto c = compare(out, ref, bench::allclose(1e-4, 0));
  EXPECT_EQ(c.mismatches, 3001);
  EXPECT_NEAR(c.rel_l2_err, std::sqrt(err2 / ref2), 1e-12);
  EXPECT_NEAR(c.max_abs_err, 1e-3, 1e-12);
}

TEST(SpreadRule, AConstantPassesALooseToleranceButNotATightOne) {
  const auto ref = uniform(10000, 5);
  double mean = 1;
  EXPECT_TRUE(constant_would_pass(ref, bench::allclose(2.0, 0), &mean));
  EXPECT_NEAR(mean, 0.0, 0.05);
  EXPECT_FALSE(constant_would_pass(ref, bench::relative_l2(1e-5), &mean));
  EXPECT_FALSE(constant_would_pass(ref, bench::exact(), &mean));
}

}  // namespace

// Tests tools/calibrate_command.cpp: which ceilings `--only` measures, which of two forms of a
// ceiling is stored (calibration::kFasterOf), and which expectations file each one goes to.
#include "calibrate_command.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

namespace {

using bench::tools::best_board;
using bench::tools::ceiling_files;
using bench::tools::keep_faster;
using bench::tools::select_ceilings;

std::vector<std::string> names(const std::vector<std::string>& only) {
  std::string error;
  std::vector<std::string> out;
  for (const auto& spec : select_ceilings(only, &error)) out.emplace_back(spec.name);
  EXPECT_EQ(error, "");
  return out;
}

// Each FP8 ceiling is the faster of cuBLASLt and the suite's persistent E4M3 kernel: whichever
// of the two is asked for, both are measured, or the stored figure would be cuBLASLt's alone
// (ch19's persistent kernel then read 102.6% of it on an H200).
TEST(SelectCeilings, AFigureStoredAsTheFasterOfTwoMeasuresBoth) {
  EXPECT_EQ(names({"fp8_burst"}),
            (std::vector<std::string>{"fp8_burst_tflops", "fp8_persistent_burst_tflops"}));
  EXPECT_EQ(names({"fp8_tflops"}),
            (std::vector<std::string>{"fp8_tflops", "fp8_persistent_tflops"}));
  EXPECT_EQ(names({"fp8"}),
            (std::vector<std::string>{"fp8_tflops", "fp8_persistent_tflops", "fp8_burst_tflops",
                                      "fp8_persistent_burst_tflops"}));
  EXPECT_EQ(names({"hbm_copy"}), (std::vector<std::string>{"hbm_copy_gbps", "memcpy_d2d_gbps"}));
  // The other form alone is only itself: it is stored under its own name.
  EXPECT_EQ(names({"fp8_persistent_burst"}),
            (std::vector<std::string>{"fp8_persistent_burst_tflops"}));
  EXPECT_EQ(names({"bf16"}), (std::vector<std::string>{"bf16_tflops", "bf16_burst_tflops"}));
}

TEST(SelectCeilings, APrefixOfNoCeilingIsAnError) {
  std::string error;
  select_ceilings({"fp8", "fp9"}, &error);
  EXPECT_EQ(error, "--only fp9: no ceiling starts with 'fp9'");
}

TEST(FasterOf, EveryPairNamesTwoCeilingsOfOneUnit) {
  using bench::calibration::kCeilings;
  for (const auto& pair : bench::calibration::kFasterOf) {
    const auto spec = [&](std::string_view name) {
      return std::find_if(kCeilings.begin(), kCeilings.end(),
                          [&](const auto& s) { return s.name == name; });
    };
    ASSERT_NE(spec(pair.name), kCeilings.end()) << pair.name;
    ASSERT_NE(spec(pair.other), kCeilings.end()) << pair.other;
    EXPECT_EQ(spec(pair.name)->unit, spec(pair.other)->unit) << pair.name;
    EXPECT_EQ(spec(pair.name)->gpus, spec(pair.other)->gpus) << pair.name;
  }
}

// The H200 of 2026-11-27: cuBLASLt's FP8 at 1436.7 TFLOP/s sustained, ch19's persistent kernel
// 1477.6 in a later run of the same shape.
std::map<std::string, bench::Ceiling> fp8_measured(double cublaslt, double persistent) {
  return {{"fp8_tflops", {cublaslt, "TFLOP/s", 0.0025, "cuBLASLt method"}},
          {"fp8_persistent_tflops", {persistent, "TFLOP/s", 0.002, "persistent method"}},
          {"bf16_tflops", {720.0, "TFLOP/s", 0.003, "bf16 method"}}};
}

TEST(KeepFaster, TheFasterFormIsStoredWithBothFiguresNamed) {
  auto measured = fp8_measured(1436.7, 1477.6);
  std::ostringstream out;
  keep_faster(measured, out);
  const bench::Ceiling& fp8 = measured.at("fp8_tflops");
  EXPECT_DOUBLE_EQ(fp8.value, 1477.6);
  EXPECT_DOUBLE_EQ(fp8.noise, 0.002);
  EXPECT_EQ(fp8.method,
            "the faster of cuBLASLt (1437 TFLOP/s) and the suite's persistent E4M3 kernel (1478); "
            "cuBLASLt: cuBLASLt method; the suite's persistent E4M3 kernel: persistent method");
  EXPECT_EQ(out.str(),
            "fp8_tflops: cuBLASLt 1437 TFLOP/s, the suite's persistent E4M3 kernel 1478: storing "
            "the suite's persistent E4M3 kernel's\n");
  // The other form keeps its own entry; a ceiling of no pair is untouched.
  EXPECT_DOUBLE_EQ(measured.at("fp8_persistent_tflops").value, 1477.6);
  EXPECT_EQ(measured.at("bf16_tflops").method, "bf16 method");
}

TEST(KeepFaster, TheFirstFormIsKeptWhenItIsFaster) {
  auto measured = fp8_measured(1500.0, 1477.6);
  std::ostringstream out;
  keep_faster(measured, out);
  EXPECT_DOUBLE_EQ(measured.at("fp8_tflops").value, 1500.0);
  EXPECT_DOUBLE_EQ(measured.at("fp8_tflops").noise, 0.0025);
  EXPECT_NE(measured.at("fp8_tflops").method.find("persistent method"), std::string::npos);
  EXPECT_NE(out.str().find("storing cuBLASLt's"), std::string::npos);
}

TEST(KeepFaster, OneFormMeasuredIsStoredAsItIs) {
  auto measured = fp8_measured(1436.7, 1477.6);
  measured.erase("fp8_persistent_tflops");  // SKIPPED (not sm_90a) or FAILED: not stored
  std::ostringstream out;
  keep_faster(measured, out);
  EXPECT_DOUBLE_EQ(measured.at("fp8_tflops").value, 1436.7);
  EXPECT_EQ(measured.at("fp8_tflops").method, "cuBLASLt method");
  EXPECT_EQ(out.str(), "");
}

const std::map<std::string, bench::Ceiling> kMeasured = {{"hbm_copy_gbps", {4300.0, "GB/s"}},
                                                         {"bf16_tflops", {800.0, "TFLOP/s"}},
                                                         {"p2p_gbps", {395.0, "GB/s"}}};

TEST(CeilingFiles, OneGpuStoresEveryCeilingInItsFile) {
  const auto files = ceiling_files("x", "h200", kMeasured);
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files.at("x/h200.json").size(), 3u);
}

// `bench calibrate` on a 2x H200 wrote its HBM and tensor-core ceilings into 2x_h200.json, where
// they shadowed h200.json's from then on (docs told users to pass --only p2p there instead).
TEST(CeilingFiles, SeveralGpusKeepOnlyTheLinksInTheMachinesFile) {
  const auto files = ceiling_files("x", "2x_h200", kMeasured);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files.at("x/2x_h200.json").size(), 1u);
  EXPECT_EQ(files.at("x/2x_h200.json").count("p2p_gbps"), 1u);
  EXPECT_EQ(files.at("x/h200.json").size(), 2u);
  EXPECT_DOUBLE_EQ(files.at("x/h200.json").at("hbm_copy_gbps").value, 4300.0);
  // Only links measured (--only p2p): the one-GPU file is not touched.
  EXPECT_EQ(ceiling_files("x", "8x_h100_80gb_hbm3", {{"p2p_gbps", {395.0, "GB/s"}}})
                .count("x/h100_80gb_hbm3.json"),
            0u);
}

}  // namespace

// --every-gpu keeps the best board: the boards of one model differ by a few percent (4x H100,
// 2026-11-27: ch02's TF32 GEMM on GPU 3 read 102.4% of GPU 0's calibrated ceiling).
TEST(BestBoard, TheFastestForAThroughputTheQuickestForATime) {
  using bench::calibration::kCeilings;
  const auto spec = [&](std::string_view name) {
    return *std::find_if(kCeilings.begin(), kCeilings.end(),
                         [&](const auto& s) { return s.name == name; });
  };
  EXPECT_EQ(best_board(spec("tf32_tflops"), {396.4, 401.2, 399.0, 405.9}), 3u);
  EXPECT_EQ(best_board(spec("hbm_read_gbps"), {3151, 3102}), 0u);
  EXPECT_EQ(best_board(spec("launch_us"), {4.59, 4.21, 4.80}), 1u);
}

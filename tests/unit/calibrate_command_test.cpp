// Tests tools/calibrate_command.cpp: which expectations file each measured ceiling goes to.
#include "calibrate_command.hpp"

#include <gtest/gtest.h>

namespace {

using bench::tools::ceiling_files;

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

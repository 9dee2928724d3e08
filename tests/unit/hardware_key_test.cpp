// Tests harness/src/hardware_key.cpp: the expectations file name of a GPU (DESIGN §6).
#include <gtest/gtest.h>

#include "bench/device_info.hpp"

TEST(HardwareKey, SlugsTheDeviceNameWithoutTheVendor) {
  EXPECT_EQ(bench::hardware_key("NVIDIA H100 80GB HBM3", 1), "h100_80gb_hbm3");
  EXPECT_EQ(bench::hardware_key("NVIDIA H200", 1), "h200");
  EXPECT_EQ(bench::hardware_key("NVIDIA GH200 480GB", 1), "gh200_480gb");
  EXPECT_EQ(bench::hardware_key("NVIDIA B200", 1), "b200");
}

TEST(HardwareKey, PrefixesTheGpuCountForSeveralGpus) {
  EXPECT_EQ(bench::hardware_key("NVIDIA H200", 2), "2x_h200");
  EXPECT_EQ(bench::hardware_key("NVIDIA H100 80GB HBM3", 8), "8x_h100_80gb_hbm3");
}

TEST(HardwareKey, CollapsesPunctuationAndTrims) {
  EXPECT_EQ(bench::hardware_key("  NVIDIA  A100-SXM4-40GB ", 1), "a100_sxm4_40gb");
  EXPECT_EQ(bench::hardware_key("Tesla V100-PCIE-16GB", 1), "tesla_v100_pcie_16gb");
}

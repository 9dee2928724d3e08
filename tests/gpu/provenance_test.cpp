// What a result records about the machine must name it: the driver release ("580.159.04"), not
// only the CUDA version it supports (13000). The lent GPU machines have no /proc/driver/nvidia,
// where the release was read from, so their results and expectations said "13000"; NVML answers
// there (harness/src/device_info.cpp).
#include <gtest/gtest.h>

#include <regex>

#include "bench/device_info.hpp"

namespace {

TEST(Provenance, TheDriverReleaseIsKnownOnAMachineWithAGpu) {
  const bench::DeviceInfo d = bench::query_device(0);
  EXPECT_TRUE(std::regex_match(d.driver_release, std::regex(R"(\d+\.\d+(\.\d+)?)")))
      << "driver_release '" << d.driver_release << "' (CUDA " << d.driver_version << ")";
}

}  // namespace

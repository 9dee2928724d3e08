// driver_release_from_nvml (harness/src/device_info.cpp), the driver release's source where
// /proc/driver/nvidia is missing, on a stand-in NVML library (fake_nvml.c): it reads the release,
// and a library that is missing or does not initialise gives "", never a crash.
#include <gtest/gtest.h>
#include <stdlib.h>

#include "bench/device_info.hpp"

namespace {

TEST(DriverRelease, ReadFromNvml) {
  EXPECT_EQ(bench::driver_release_from_nvml(FAKE_NVML_LIBRARY), "580.159.04");
}

TEST(DriverRelease, NoNvmlOrNoAnswerIsUnknown) {
  EXPECT_EQ(bench::driver_release_from_nvml("/nonexistent/libnvidia-ml.so.1"), "");
  ::setenv("FAKE_NVML_INIT_FAILS", "1", 1);
  EXPECT_EQ(bench::driver_release_from_nvml(FAKE_NVML_LIBRARY), "");
  ::unsetenv("FAKE_NVML_INIT_FAILS");
}

}  // namespace

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

// Without a driver the runtime says "CUDA driver version is insufficient" (issue 38), which sends
// a user to upgrade a driver that is not there: the reason names what is missing, the CUDA text
// kept. 35 is cudaErrorInsufficientDriver, 100 cudaErrorNoDevice.
TEST(NoDeviceReason, NoDriverOrNoGpuIsSaidPlainly) {
  EXPECT_EQ(bench::no_device_reason(35, "cudaErrorInsufficientDriver",
                                    "CUDA driver version is insufficient for CUDA runtime version"),
            "no NVIDIA driver or GPU found (cudaErrorInsufficientDriver: CUDA driver version is insufficient for "
            "CUDA runtime version)");
  EXPECT_EQ(bench::no_device_reason(100, "cudaErrorNoDevice", "no CUDA-capable device is detected"),
            "no NVIDIA driver or GPU found (cudaErrorNoDevice: no CUDA-capable device is detected)");
  EXPECT_EQ(bench::no_device_reason(3, "cudaErrorInitializationError", "initialization error"),
            "cudaErrorInitializationError: initialization error");
}

// This machine's own answer, when it has no GPU: the same words.
TEST(NoDeviceReason, ThisMachinesAnswerWithoutAGpu) {
  std::string why;
  if (bench::cuda_device_count(&why) > 0) GTEST_SKIP() << "this machine has a GPU";
  if (why.find("cudaErrorInsufficientDriver") != std::string::npos || why.find("cudaErrorNoDevice") != std::string::npos)
    EXPECT_EQ(why.rfind("no NVIDIA driver or GPU found (", 0), 0u) << why;
}

}  // namespace

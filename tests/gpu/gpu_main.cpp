// main() for the GPU tests: without a CUDA device, exit with the code ctest reads as "skipped",
// so a GPU-less machine never reports these tests as passed.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "bench/device_info.hpp"

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  std::string why;
  if (bench::cuda_device_count(&why) == 0) {
    std::fprintf(stderr, "SKIPPED: no CUDA device: %s\n", why.c_str());
    return 77;
  }
  return RUN_ALL_TESTS();
}

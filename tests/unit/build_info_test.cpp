// harness/src/build_info.cpp.in: the commit a result records. BENCH_GIT_SHA when the program runs
// wins over the one taken at configure time, which a tree changed under an existing build leaves
// stale; unset or empty, the configured one stands.
#include <gtest/gtest.h>

#include "bench/device_info.hpp"

namespace {

TEST(BuildInfo, TheEnvironmentsCommitWinsWhenGiven) {
  EXPECT_EQ(bench::recorded_git_sha("7abfde7", "4e5420fe5203"), "7abfde7");
}

TEST(BuildInfo, TheConfiguredCommitStandsWhenTheEnvironmentHasNone) {
  EXPECT_EQ(bench::recorded_git_sha(nullptr, "4e5420fe5203"), "4e5420fe5203");
  EXPECT_EQ(bench::recorded_git_sha("", "4e5420fe5203-dirty"), "4e5420fe5203-dirty");
}

}  // namespace

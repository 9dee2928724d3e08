// harness/src/arch_support.cpp: when a variant with architecture-specific instructions may run.
#include "arch_support.hpp"

#include <gtest/gtest.h>

namespace {

using bench::detail::arch_specific_reason;

TEST(ArchSupport, Sm90aRunsOnAHopperFromABuildThatHasIt) {
  EXPECT_EQ(arch_specific_reason(90, 90, "NVIDIA H100", "90a"), "");
  EXPECT_EQ(arch_specific_reason(90, 90, "NVIDIA H200", "80;90a;100a"), "");
  EXPECT_EQ(arch_specific_reason(0, 75, "any", "75"), "");  // nothing architecture-specific
}

TEST(ArchSupport, ABlackwellIsRefusedWithTheReason) {
  const std::string why = arch_specific_reason(90, 100, "NVIDIA B200", "100a");
  EXPECT_NE(why.find("sm_90a-only"), std::string::npos) << why;
  EXPECT_NE(why.find("NVIDIA B200) is 10.0"), std::string::npos) << why;
}

TEST(ArchSupport, AHopperFromABuildWithoutTheTargetIsRefused) {
  // A plain sm_90 build compiles the kernel empty: running it would only fail verification.
  for (const char* built : {"90", "90;100a", "890a"}) {
    const std::string why = arch_specific_reason(90, 90, "NVIDIA H100", built);
    EXPECT_NE(why.find("-DBENCH_ARCH=90a"), std::string::npos) << built << ": " << why;
  }
}

}  // namespace

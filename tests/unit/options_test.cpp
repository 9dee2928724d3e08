// harness/src/options.cpp: --bench_* flags are consumed, everything else is left for Google
// Benchmark, bad values are errors.
#include "options.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

using bench::detail::options;
using bench::detail::Options;

class HarnessOptions : public ::testing::Test {
 protected:
  void TearDown() override { options() = Options{}; }
  // Parses args (after a program name); returns the error and leaves the kept args in kept.
  std::string parse(std::vector<std::string> args) {
    args.insert(args.begin(), "chNN");
    storage = args;
    argv.clear();
    for (auto& a : storage) argv.push_back(a.data());
    argv.push_back(nullptr);
    int argc = static_cast<int>(storage.size());
    const std::string error = bench::detail::parse_options(&argc, argv.data());
    kept.assign(argv.begin() + 1, argv.begin() + argc);
    return error;
  }
  std::vector<std::string> storage, kept;
  std::vector<char*> argv;
};

TEST_F(HarnessOptions, ProfileIsOffUnlessAsked) {
  EXPECT_EQ(parse({"--benchmark_filter=x"}), "");
  EXPECT_FALSE(options().profile);
}

TEST_F(HarnessOptions, ProfileFlagIsConsumedAndOtherFlagsKept) {
  EXPECT_EQ(parse({"--benchmark_filter=^ch07/copy_coalescing/optimized(/|$)", "--bench_profile"}), "");
  EXPECT_TRUE(options().profile);
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_EQ(std::string(kept[0]), "--benchmark_filter=^ch07/copy_coalescing/optimized(/|$)");
}

TEST_F(HarnessOptions, ListVariantsIsAFlagOfItsOwn) {
  EXPECT_EQ(parse({"--bench_sweep"}), "");
  EXPECT_FALSE(options().list_variants);
  EXPECT_EQ(parse({"--bench_list_variants", "--bench_sweep"}), "");
  EXPECT_TRUE(options().list_variants);
  EXPECT_TRUE(kept.empty());
}

TEST_F(HarnessOptions, TimelineTakesAPathAndExcludesTheOtherUntimedRuns) {
  EXPECT_EQ(parse({"--bench_timeline=/tmp/t.json"}), "");
  EXPECT_EQ(options().timeline, "/tmp/t.json");
  EXPECT_NE(parse({"--bench_timeline"}).find("expected --bench_timeline=PATH"), std::string::npos);
  EXPECT_NE(parse({"--bench_timeline=t.json", "--bench_profile"}).find("exclude each other"),
            std::string::npos);
  EXPECT_NE(parse({"--bench_timeline=t.json", "--bench_verify_only"}).find("exclude each other"),
            std::string::npos);
}

TEST_F(HarnessOptions, BadValuesAndUnknownFlagsAreErrors) {
  EXPECT_NE(parse({"--bench_min_samples=0"}).find("expected a number >= 1"), std::string::npos);
  EXPECT_NE(parse({"--bench_mode=warm"}).find("expected cold, hot or sustained"), std::string::npos);
  EXPECT_EQ(parse({"--bench_mode=sustained"}), "");
  EXPECT_EQ(options().mode, bench::Mode::sustained);
  EXPECT_NE(parse({"--bench_profiel"}).find("unknown flag --bench_profiel"), std::string::npos);
  EXPECT_NE(parse({"--bench_help"}).find("--bench_profile"), std::string::npos);
}

// The case time limit (watchdog.hpp): the flag wins, 0 turns it off, a smoke run gets less.
// (Run outside any CUDA tool, as ctest runs it; under one the default is no limit.)
TEST_F(HarnessOptions, CaseTimeLimitDefaultsAndFlag) {
  const bool tool = bench::detail::under_cuda_tool();  // then the default is no limit
  EXPECT_EQ(parse({}), "");
  EXPECT_EQ(bench::detail::case_time_limit_s(), tool ? 0 : 300);
  EXPECT_EQ(parse({"--bench_smoke"}), "");
  EXPECT_EQ(bench::detail::case_time_limit_s(), tool ? 0 : 60);
  EXPECT_EQ(parse({"--bench_case_timeout=2.5"}), "");
  EXPECT_EQ(bench::detail::case_time_limit_s(), 2.5);
  EXPECT_EQ(parse({"--bench_case_timeout=0"}), "");
  EXPECT_EQ(bench::detail::case_time_limit_s(), 0);
  EXPECT_NE(parse({"--bench_case_timeout=-1"}).find("expected a number >= 0"), std::string::npos);
}

// The fixed sustained window: off unless asked, a positive number of seconds when asked.
TEST_F(HarnessOptions, SustainedWindowIsOffUnlessAskedAndPositive) {
  EXPECT_EQ(parse({}), "");
  EXPECT_FALSE(options().sustained_window_s.has_value());
  EXPECT_EQ(parse({"--bench_sustained_window=1.5"}), "");
  EXPECT_EQ(options().sustained_window_s, 1.5);
  EXPECT_NE(parse({"--bench_sustained_window=0"}).find("expected a number of seconds > 0"),
            std::string::npos);
  EXPECT_NE(parse({"--bench_sustained_window=-1"}).find("expected a number >= 0"),
            std::string::npos);
  EXPECT_NE(parse({"--bench_sustained_window=x"}).find("expected a number >= 0"),
            std::string::npos);
}

// The sustained soak: the default (kSustainedSoakSeconds) unless asked, a positive number of
// seconds when asked.
TEST_F(HarnessOptions, SustainedSoakIsTheDefaultUnlessAskedAndPositive) {
  EXPECT_EQ(parse({}), "");
  EXPECT_FALSE(options().sustained_soak_s.has_value());
  EXPECT_EQ(parse({"--bench_sustained_soak=2"}), "");
  EXPECT_EQ(options().sustained_soak_s, 2.0);
  EXPECT_NE(parse({"--bench_sustained_soak=0"}).find("expected a number of seconds > 0"),
            std::string::npos);
  EXPECT_NE(parse({"--bench_sustained_soak=x"}).find("expected a number >= 0"), std::string::npos);
}

}  // namespace

// Running a chapter binary under ncu or compute-sanitizer directly: the harness must notice (the
// tools serialise kernels, so the cold-mode blocking kernel would time out). The variables are
// the ones seen under ncu and compute-sanitizer 2025.3.1 on the H100.
TEST_F(HarnessOptions, SweepAndAxisSelectPoints) {
  EXPECT_EQ(parse({"--bench_sweep", "--bench_axis=batch=1,4", "--bench_axis=causal=1"}), "");
  EXPECT_TRUE(options().points.sweep);
  ASSERT_EQ(options().points.filters.size(), 2u);
  EXPECT_EQ(options().points.filters[0].first, "batch");
  EXPECT_EQ(options().points.filters[0].second, (std::vector<std::string>{"1", "4"}));
  for (const char* bad :
       {"--bench_axis=batch", "--bench_axis==1", "--bench_axis=batch=", "--bench_axis=b=1,"})
    EXPECT_NE(parse({bad}).find("expected --bench_axis=NAME=VALUE"), std::string::npos) << bad;
}

TEST(Options, ACudaToolInTheEnvironmentIsDetected) {
  for (const char* name : {"CUDA_INJECTION64_PATH", "NV_COMPUTE_PROFILER_PERFWORKS_DIR", "NSYS_PROFILING_SESSION_ID",
                           "LD_PRELOAD", "LD_LIBRARY_PATH"})
    unsetenv(name);
  EXPECT_FALSE(bench::detail::under_cuda_tool());
  setenv("LD_LIBRARY_PATH", "/usr/local/cuda-13.0/compute-sanitizer:/usr/local/nvidia/lib64", 1);
  std::string what;
  EXPECT_TRUE(bench::detail::under_cuda_tool(&what));
  EXPECT_NE(what.find("compute-sanitizer"), std::string::npos) << what;
  unsetenv("LD_LIBRARY_PATH");
  setenv("NV_COMPUTE_PROFILER_PERFWORKS_DIR", "/opt/nvidia/nsight-compute/2025.3.1/target/linux-desktop-glibc_2_11_3-x64/.", 1);
  EXPECT_TRUE(bench::detail::under_cuda_tool());
  unsetenv("NV_COMPUTE_PROFILER_PERFWORKS_DIR");
}

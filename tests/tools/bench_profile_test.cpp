// `bench profile` with a stand-in for ncu/nsys (a script that records its arguments), on the fake
// chapter ch99: the exact command line, the unknown-case and missing-tool errors, and the refusal
// of --bench_profile output as a measurement.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "chapter_process.hpp"
#include "run_bench.hpp"

namespace {

namespace fs = std::filesystem;
using bench::tools::ProcessResult;
using bench::tools::testing::bench;
using bench::tools::testing::scratch_dir;

// An executable that writes its arguments, one a line, to <itself>.argv and, unless told not
// to, an empty report where -o points (<path>.ncu-rep or .nsys-rep, after its name).
fs::path fake_tool(const fs::path& dir, const std::string& name, bool writes_report = true) {
  const fs::path tool = dir / name;
  std::ofstream script(tool);
  script << "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$0.argv\"\n";
  if (writes_report)
    script << "while [ $# -gt 0 ]; do [ \"$1\" = -o ] && : > \"$2." << name << "-rep\"; shift; done\n";
  script.close();
  fs::permissions(tool, fs::perms::owner_all);
  return tool;
}

std::vector<std::string> recorded_argv(const fs::path& tool) {
  std::ifstream in(tool.string() + ".argv");
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// True when `needle` appears in `haystack` as consecutive elements.
bool has_run(const std::vector<std::string>& haystack, const std::vector<std::string>& needle) {
  return std::search(haystack.begin(), haystack.end(), needle.begin(), needle.end()) != haystack.end();
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += s + " ";
  return out;
}

class BenchProfile : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("BENCH_ASSUME_GPU", "1", 1); }
  void TearDown() override {
    ::unsetenv("BENCH_ASSUME_GPU");
    ::unsetenv("BENCH_NCU");
    ::unsetenv("BENCH_NSYS");
  }
};

TEST_F(BenchProfile, NcuCapturesOnlyTheProfilerRangeWithClocksUntouched) {
  const fs::path dir = scratch_dir("ncu");
  const fs::path tool = fake_tool(dir, "ncu");
  ::setenv("BENCH_NCU", tool.c_str(), 1);
  const auto r = bench({"profile", "ch99/first/optimized", "--build-dir", FAKE_BUILD_DIR, "--set", "basic",
                        "-o", (dir / "report").string(), "--", "--section", "SpeedOfLight"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto argv = recorded_argv(tool);
  const std::string binary = std::string(FAKE_BUILD_DIR) + "/chapters/ch99/ch99";
  EXPECT_TRUE(has_run(argv, {"--profile-from-start", "off"})) << joined(argv);
  EXPECT_TRUE(has_run(argv, {"--clock-control", "none"})) << joined(argv);
  EXPECT_TRUE(has_run(argv, {"--cache-control", "all"})) << joined(argv);
  EXPECT_TRUE(has_run(argv, {"--set", "basic"})) << joined(argv);
  EXPECT_TRUE(has_run(argv, {"-o", (dir / "report").string()})) << joined(argv);
  // Extra tool flags go before the binary; the binary's own flags end the line.
  EXPECT_TRUE(has_run(argv, {"--section", "SpeedOfLight", binary,
                             "--benchmark_filter=^ch99/first/optimized(/|$)", "--bench_profile"}))
      << joined(argv);
  EXPECT_EQ(argv.back(), "--bench_profile");
  // The exact command line is printed, quoted for a shell.
  EXPECT_NE(r.out.find("bench profile: " + tool.string() + " --profile-from-start off --clock-control none"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("'--benchmark_filter=^ch99/first/optimized(/|$)' --bench_profile"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find((dir / "report.ncu-rep").string()), std::string::npos) << r.out;

  // The rung a role-named case runs names it too (the fake's optimized cases run "tuned").
  const auto by_own_name = bench(
      {"profile", "ch99/first/tuned", "--build-dir", FAKE_BUILD_DIR, "-o", (dir / "r1").string()});
  ASSERT_EQ(by_own_name.exit_code, 0) << by_own_name.out << by_own_name.err;
  EXPECT_NE(by_own_name.out.find("bench profile: ch99/first/tuned is ch99/first/optimized"),
            std::string::npos)
      << by_own_name.out;
  EXPECT_TRUE(has_run(recorded_argv(tool), {"--benchmark_filter=^ch99/first/optimized(/|$)"}))
      << joined(recorded_argv(tool));

  // Without --set the full section set is collected.
  ASSERT_EQ(bench({"profile", "ch99/last/baseline", "--build-dir", FAKE_BUILD_DIR, "-o", (dir / "r2").string()}).exit_code, 0);
  EXPECT_TRUE(has_run(recorded_argv(tool), {"--set", "full"})) << joined(recorded_argv(tool));
  fs::remove_all(dir);
}

TEST_F(BenchProfile, NsysCapturesTheCudaProfilerApiRange) {
  const fs::path dir = scratch_dir("nsys");
  const fs::path tool = fake_tool(dir, "nsys");
  ::setenv("BENCH_NSYS", tool.c_str(), 1);
  const auto r = bench({"profile", "ch99/first/baseline", "--tool", "nsys", "--build-dir", FAKE_BUILD_DIR,
                        "-o", (dir / "timeline").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto argv = recorded_argv(tool);
  ASSERT_FALSE(argv.empty());
  EXPECT_EQ(argv.front(), "profile");
  EXPECT_TRUE(has_run(argv, {"--capture-range=cudaProfilerApi", "--capture-range-end=stop"})) << joined(argv);
  EXPECT_TRUE(has_run(argv, {"--benchmark_filter=^ch99/first/baseline(/|$)", "--bench_profile"})) << joined(argv);
  // --set is ncu's: asking for it with nsys is bad usage.
  EXPECT_EQ(bench({"profile", "ch99/first/baseline", "--tool", "nsys", "--set", "full", "--build-dir",
                   FAKE_BUILD_DIR}).exit_code, 2);
  fs::remove_all(dir);
}

// nsys can capture the range yet leave only a .qdstrm it failed to import: that is no report.
TEST_F(BenchProfile, NoReportWrittenIsAFailure) {
  const fs::path dir = scratch_dir("noreport");
  ::setenv("BENCH_NSYS", fake_tool(dir, "nsys", /*writes_report=*/false).c_str(), 1);
  const auto r = bench({"profile", "ch99/first/baseline", "--tool", "nsys", "--build-dir", FAKE_BUILD_DIR,
                        "-o", (dir / "timeline").string()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("wrote no " + (dir / "timeline.nsys-rep").string()), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST_F(BenchProfile, UnknownCaseNamesTheNearestAndHowToList) {
  const auto r = bench({"profile", "ch99/first/optimised", "--build-dir", FAKE_BUILD_DIR});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no case ch99/first/optimised"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("  ch99/first/optimized"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("bench list --chapter ch99"), std::string::npos) << r.err;

  // A known example, its optimized side named by a README's label: the roles are spelled out.
  const auto by_label = bench({"profile", "ch99/first/wgmma_pingpong", "--build-dir", FAKE_BUILD_DIR});
  EXPECT_EQ(by_label.exit_code, 2);
  EXPECT_NE(by_label.err.find("named by their role (ch99/first/baseline, ch99/first/optimized)"), std::string::npos)
      << by_label.err;
  // An unknown example gets no such line: nothing says the role is what was wrong.
  const auto unknown = bench({"profile", "ch99/nonexistent_example/optimized", "--build-dir", FAKE_BUILD_DIR});
  EXPECT_EQ(unknown.err.find("named by their role"), std::string::npos) << unknown.err;

  const auto malformed = bench({"profile", "first/optimized", "--build-dir", FAKE_BUILD_DIR});
  EXPECT_EQ(malformed.exit_code, 2);
  EXPECT_NE(malformed.err.find("expected one case like ch07/copy_coalescing/optimized"), std::string::npos)
      << malformed.err;
  const auto unbuilt = bench({"profile", "ch98/first/optimized", "--build-dir", FAKE_BUILD_DIR});
  EXPECT_EQ(unbuilt.exit_code, 2);
  EXPECT_NE(unbuilt.err.find("ch98 is not built"), std::string::npos) << unbuilt.err;
}

TEST_F(BenchProfile, MissingToolIsOneClearLine) {
  ::setenv("BENCH_NCU", "/nonexistent/ncu", 1);
  const auto r = bench({"profile", "ch99/first/optimized", "--build-dir", FAKE_BUILD_DIR});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("BENCH_NCU=/nonexistent/ncu is not an executable"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("Nsight Compute"), std::string::npos) << r.err;
}

// --tool timeline: no tool; the binary writes the traced calls (--bench_timeline) and their table
// is printed. The fake chapter plants two calls: medians 10.5 and 9.5 us on two streams, then a
// copy 5.5 us after the later one ends.
TEST_F(BenchProfile, TimelineRunsTheBinaryAndPrintsTheTable) {
  const fs::path dir = scratch_dir("timeline");
  const auto r = bench({"profile", "ch99/first/optimized", "--tool", "timeline", "--build-dir",
                        FAKE_BUILD_DIR, "-o", (dir / "t").string()});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string written = (dir / "t.timeline.json").string();
  EXPECT_NE(
      r.out.find("'--benchmark_filter=^ch99/first/optimized(/|$)' --bench_timeline=" + written),
      std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::is_regular_file(written));
  EXPECT_NE(r.out.find("ch99/first/optimized on Test GPU: 2 traced calls"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("chain_step "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("span 22.00 us, busy 16.50 us, idle 5.50 us; 3 activities, 2 calls"),
            std::string::npos)
      << r.out;

  // The default path is the profile reports' folder, named after the case. Removed first: a file
  // an earlier run of this test left there must not pass for this run's.
  const fs::path by_default_file =
      fs::path(FAKE_BUILD_DIR) / "reports/profile/ch99.first.optimized.timeline.json";
  fs::remove(by_default_file);
  const auto by_default = bench(
      {"profile", "ch99/first/optimized", "--tool", "timeline", "--build-dir", FAKE_BUILD_DIR});
  ASSERT_EQ(by_default.exit_code, 0) << by_default.out << by_default.err;
  EXPECT_TRUE(fs::is_regular_file(by_default_file));
  EXPECT_NE(by_default.out.find("--bench_timeline=" + by_default_file.string()), std::string::npos)
      << by_default.out;

  // A case that wrote nothing (failed, or skipped for want of CUPTI) is a failure.
  ::setenv("FAKE_CHAPTER_NO_TIMELINE", "1", 1);
  const auto none = bench({"profile", "ch99/first/optimized", "--tool", "timeline", "--build-dir",
                           FAKE_BUILD_DIR, "-o", (dir / "t").string()});
  ::unsetenv("FAKE_CHAPTER_NO_TIMELINE");
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("wrote no " + written), std::string::npos) << none.err;

  // --set is ncu's and no tool takes flags after --: both bad usage.
  EXPECT_EQ(bench({"profile", "ch99/first/optimized", "--tool", "timeline", "--set", "basic",
                   "--build-dir", FAKE_BUILD_DIR})
                .exit_code,
            2);
  EXPECT_EQ(bench({"profile", "ch99/first/optimized", "--tool", "timeline", "--build-dir",
                   FAKE_BUILD_DIR, "--", "--trace=cuda"})
                .exit_code,
            2);
  fs::remove_all(dir);
}

// A --bench_profile row is one untimed launch: compare must never score it.
TEST_F(BenchProfile, ProfileOutputIsRefusedAsAMeasurement) {
  const fs::path dir = scratch_dir("refuse");
  std::ofstream(dir / "profiled.json") << R"({"context": {"hardware_key": "test_gpu", "bench_profile": "on"},
    "benchmarks": [{"name": "ch99/first/optimized/iterations:1/manual_time", "run_type": "iteration",
    "real_time": 0, "time_unit": "us", "verified": 1, "profiled": 1,
    "label": "role=optimized;impl=x;fp=00000000000000aa;mode=profile"}]})";
  const auto r = bench({"compare", "--from-results", (dir / "profiled.json").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("ch99/first/optimized comes from a --bench_profile run"), std::string::npos) << r.err;

  const auto live = bench({"compare", "--chapter", "ch99", "--build-dir", FAKE_BUILD_DIR, "--", "--bench_profile"});
  EXPECT_EQ(live.exit_code, 2);
  EXPECT_NE(live.err.find("use `bench profile <case>`"), std::string::npos) << live.err;

  // A --bench_timeline row (calls traced through CUPTI) is refused the same way.
  std::ofstream(dir / "timeline.json")
      << R"({"context": {"hardware_key": "test_gpu", "bench_timeline": "t.json"},
    "benchmarks": [{"name": "ch99/first/optimized/iterations:1/manual_time", "run_type": "iteration",
    "real_time": 0, "time_unit": "us", "verified": 1, "traced_calls": 5,
    "label": "role=optimized;impl=x;fp=00000000000000aa;mode=timeline"}]})";
  const auto traced = bench({"compare", "--from-results", (dir / "timeline.json").string()});
  EXPECT_EQ(traced.exit_code, 2);
  EXPECT_NE(traced.err.find("ch99/first/optimized comes from a --bench_timeline run"),
            std::string::npos)
      << traced.err;
  const auto live_timeline = bench({"compare", "--chapter", "ch99", "--build-dir", FAKE_BUILD_DIR,
                                    "--", "--bench_timeline=t.json"});
  EXPECT_EQ(live_timeline.exit_code, 2);
  EXPECT_NE(live_timeline.err.find("--tool timeline"), std::string::npos) << live_timeline.err;
  fs::remove_all(dir);
}

}  // namespace

// `bench sanitize` with a stand-in for compute-sanitizer (a script that records its arguments,
// runs the program and writes canned output to --log-file) on the fake chapter ch99: one process
// per example and tool, the verify-only command line, a finding, a refusal, a crash, the reports
// and the exit code. No GPU needed (BENCH_ASSUME_GPU=1).
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "chapter_process.hpp"
#include "run_bench.hpp"

namespace {

namespace fs = std::filesystem;
using bench::tools::testing::bench;
using bench::tools::testing::scratch_dir;

// memcheck finds an out-of-bounds read in ch99/first; racecheck is refused by the "device";
// the tool named by $FAKE_SANITIZER_HANG hangs (after starting a child of its own, as the real one
// runs the program); the tool named by $FAKE_SANITIZER_LIBRARY reports a race in a library's kernel
// (no line information, as cuBLASLt's); everything else runs the program and reports no errors.
fs::path fake_sanitizer(const fs::path& dir) {
  const fs::path tool = dir / "compute-sanitizer";
  std::ofstream script(tool);
  script << R"(#!/bin/sh
if [ "$1" = --version ]; then printf 'Fake Compute Sanitizer\nVersion 0.0.1\n'; exit 0; fi
printf '%s\n' "$@" >> "$0.argv"
while [ "${1#--}" != "$1" ]; do
  case "$1" in --tool) tool=$2 ;; --log-file) log=$(printf '%s' "$2" | sed 's/%%/\x01/g; s/%p/'$$'/g; s/\x01/%/g') ;; esac
  shift 2
done
if [ -n "$tool" ] && [ "$tool" = "$FAKE_SANITIZER_HANG" ]; then
  printf '========= COMPUTE-SANITIZER\n' > "$log"
  sleep 120 &
  echo $! > "$0.hung_child"
  wait
  exit 0
fi
if [ -n "$tool" ] && [ "$tool" = "$FAKE_SANITIZER_LIBRARY" ]; then
  "$@"
  printf '%s\n' '========= COMPUTE-SANITIZER' \
    '========= Error: Race reported between Read access at nvjet_sm90_tst_128x192_64x5_2x1_v_bz_coopB_TNN+0x980' \
    '=========     and Write access at nvjet_sm90_tst_128x192_64x5_2x1_v_bz_coopB_TNN+0x37c0 [704 hazards]' \
    '=========' '========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)' > "$log"
  exit 86
fi
if [ "$tool" = racecheck ]; then
  printf '========= COMPUTE-SANITIZER\n========= Error: Device not supported\n' > "$log"
  exit 1
fi
"$@"
code=$?
case "$tool $*" in
  "memcheck "*ch99/first/*)
    printf '%s\n' '========= COMPUTE-SANITIZER' '========= Invalid __global__ read of size 4 bytes' \
      '=========     at first_kernel(const float *, float *, long)+0x70 in /somewhere/chapters/ch99/first.cu:41' \
      '=========     by thread (255,0,0) in block (3,0,0)' '=========' '========= ERROR SUMMARY: 4 errors' > "$log"
    exit 86 ;;
esac
printf '========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n' > "$log"
exit $code
)";
  script.close();
  fs::permissions(tool, fs::perms::owner_all);
  return tool;
}

// Gone: no such process, or a zombie nobody has reaped yet (it runs nothing).
bool process_gone(pid_t pid) {
  if (::kill(pid, 0) != 0) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] == 'Z';
}

std::vector<std::vector<std::string>> recorded_runs(const fs::path& tool) {
  std::ifstream in(tool.string() + ".argv");
  std::vector<std::vector<std::string>> runs;
  for (std::string line; std::getline(in, line);) {
    if (line == "--tool") runs.emplace_back();
    if (!runs.empty()) runs.back().push_back(line);
  }
  return runs;
}

// `bench sanitize --chapter ch99 --tool memcheck` and `extra`, its reports under `dir`; the
// stand-in's record of earlier runs cleared first, so recorded_runs(tool) holds this one's.
auto sanitize_memcheck(const fs::path& dir, const fs::path& tool,
                       const std::vector<std::string>& extra) {
  fs::remove(tool.string() + ".argv");
  std::vector<std::string> args = {"sanitize",  "--build-dir",   FAKE_BUILD_DIR,
                                   "--chapter", "ch99",          "--tool",
                                   "memcheck",  "--reports-dir", (dir / "reports").string()};
  args.insert(args.end(), extra.begin(), extra.end());
  return bench(args);
}

class BenchSanitize : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("BENCH_ASSUME_GPU", "1", 1); }
  void TearDown() override {
    ::unsetenv("BENCH_ASSUME_GPU");
    ::unsetenv("BENCH_COMPUTE_SANITIZER");
  }
};

TEST_F(BenchSanitize, EveryExampleUnderEveryToolInItsOwnProcess) {
  const fs::path dir = scratch_dir("sanitize");
  const fs::path tool = fake_sanitizer(dir);
  ::setenv("BENCH_COMPUTE_SANITIZER", tool.c_str(), 1);
  const auto r = bench(
      {"sanitize", "--build-dir", FAKE_BUILD_DIR, "--chapter", "ch99", "--reports-dir", (dir / "reports").string()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // a finding and a crash

  // 3 examples x 3 tools that ran the program, plus 3 refused racecheck runs.
  const auto runs = recorded_runs(tool);
  ASSERT_EQ(runs.size(), 12u) << r.out;
  const std::string binary = std::string(FAKE_BUILD_DIR) + "/chapters/ch99/ch99";
  const std::vector<std::string>& first = runs.front();
  EXPECT_EQ(first[1], "memcheck");
  const std::vector<std::string> tail(first.end() - 5, first.end());
  EXPECT_EQ(tail[0], binary);
  EXPECT_EQ(tail[1], "--benchmark_filter=^ch99/first/");
  EXPECT_EQ(tail[4], "--bench_verify_only");
  for (const char* flag : {"--log-file", "--error-exitcode", "--check-exit-code", "--show-backtrace"})
    EXPECT_NE(std::find(first.begin(), first.end(), flag), first.end()) << flag;
  // No run filters kernels by name: under racecheck any filter crashed compute-sanitizer 2025.3.1
  // on real chapters (docs/sanitize.md), and every tool must check every kernel.
  for (const auto& run : runs)
    for (const auto& arg : run)
      EXPECT_TRUE(arg.rfind("--kernel-name", 0) != 0 && arg.rfind("--kernel-regex", 0) != 0 &&
                  arg.rfind("--exclude", 0) != 0)
          << arg;

  EXPECT_NE(r.out.find("bench sanitize: " + tool.string() +
                       " (Version 0.0.1) with memcheck, racecheck, synccheck, initcheck"),
            std::string::npos)
      << r.out;
  // One line per example and tool: the finding with its kernel and line, the refusal, the crash.
  EXPECT_NE(r.out.find("memcheck   FOUND Invalid __global__ read of size 4 bytes in first_kernel(const float *, "
                       "float *, long) at /somewhere/chapters/ch99/first.cu:41 (4 errors)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("racecheck  refused: Error: Device not supported"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("synccheck  FAILED: "), std::string::npos) << r.out;  // ch99/crasher aborts
  EXPECT_NE(r.out.find("initcheck  clean"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("racecheck refused by compute-sanitizer (the reason follows) for 3 example(s)"), std::string::npos)
      << r.out;

  std::ifstream in(dir / "reports" / "sanitize.json");
  const auto report = nlohmann::json::parse(in);
  std::map<std::string, std::string> verdict;
  for (const auto& run : report["runs"])
    verdict[run["example"].get<std::string>() + " " + run["tool"].get<std::string>()] = run["verdict"];
  EXPECT_EQ(verdict["ch99/first memcheck"], "found");
  EXPECT_EQ(verdict["ch99/first racecheck"], "refused");
  EXPECT_EQ(verdict["ch99/first synccheck"], "clean");
  EXPECT_EQ(verdict["ch99/crasher memcheck"], "failed");
  EXPECT_EQ(verdict["ch99/crasher initcheck"], "failed");
  EXPECT_EQ(verdict["ch99/last memcheck"], "clean");
  EXPECT_EQ(verdict["ch99/last initcheck"], "clean");
  EXPECT_EQ(report["runs"][0]["finding"]["line"], 41);
  EXPECT_EQ(report["exit_code"], 1);
  EXPECT_TRUE(fs::is_regular_file(dir / "reports" / "sanitize.md"));
  EXPECT_TRUE(fs::is_regular_file(dir / "reports" / "logs" / "ch99.first.memcheck.log"));
  fs::remove_all(dir);
}

TEST_F(BenchSanitize, OneExampleOneToolCleanExitsZero) {
  const fs::path dir = scratch_dir("sanitize_one");
  const fs::path tool = fake_sanitizer(dir);
  ::setenv("BENCH_COMPUTE_SANITIZER", tool.c_str(), 1);
  const auto r = bench({"sanitize", "--build-dir", FAKE_BUILD_DIR, "--chapter", "ch99", "--example", "last", "--tool",
                        "memcheck,synccheck", "--reports-dir", (dir / "reports").string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(recorded_runs(tool).size(), 2u);
  fs::remove_all(dir);
}

// An example with an axis is checked a point at a time, each point a process of its own with the
// flags that select exactly it, so a slow example's points each get the whole --timeout; --axis
// and --sweep pick points as they do for `bench compare`.
TEST_F(BenchSanitize, EachAxisPointIsAProcessOfItsOwn) {
  const fs::path dir = scratch_dir("sanitize_points");
  const fs::path tool = fake_sanitizer(dir);
  ::setenv("BENCH_COMPUTE_SANITIZER", tool.c_str(), 1);
  auto run = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), {"--example", "sized"});
    return sanitize_memcheck(dir, tool, extra);
  };
  const auto swept = run({"--sweep"});
  EXPECT_EQ(swept.exit_code, 0) << swept.out << swept.err;
  EXPECT_NE(swept.out.find("[1/2] ch99/sized/n:1 (2 cases)\n  memcheck   clean"), std::string::npos)
      << swept.out;
  EXPECT_NE(swept.out.find("[2/2] ch99/sized/n:2 (2 cases)\n  memcheck   clean"), std::string::npos)
      << swept.out;
  auto runs = recorded_runs(tool);
  ASSERT_EQ(runs.size(), 2u);
  for (const auto& [r, point] : {std::pair{0, "n=1"}, std::pair{1, "n=2"}}) {
    const auto& argv = runs[std::size_t(r)];
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--benchmark_filter=^ch99/sized/"), argv.end());
    EXPECT_NE(std::find(argv.begin(), argv.end(), "--bench_sweep"), argv.end());
    EXPECT_NE(std::find(argv.begin(), argv.end(), std::string("--bench_axis=") + point), argv.end())
        << point;
  }
  EXPECT_TRUE(fs::exists(dir / "reports" / "logs" / "ch99.sized.n-2.memcheck.log"));
  std::ifstream in(dir / "reports" / "sanitize.json");
  const auto report = nlohmann::json::parse(in);
  ASSERT_EQ(report["runs"].size(), 2u);
  EXPECT_EQ(report["runs"][1]["example"], "ch99/sized/n:2");

  const auto one = run({"--axis", "n=2", "--sweep"});  // n:2 is not a default point
  EXPECT_EQ(one.exit_code, 0) << one.out << one.err;
  runs = recorded_runs(tool);
  ASSERT_EQ(runs.size(), 1u) << one.out;
  EXPECT_NE(std::find(runs[0].begin(), runs[0].end(), "--bench_axis=n=2"), runs[0].end());
  EXPECT_NE(one.out.find("[1/1] ch99/sized/n:2 (2 cases)"), std::string::npos) << one.out;
  fs::remove_all(dir);
}

// --variant narrows each process to the cases of the variants named (the case name's: baseline,
// optimized, a step's name; or a role-named case's own rung), at every point; a variant no selected
// example has is refused before anything runs, naming the variants there are.
TEST_F(BenchSanitize, AVariantListChecksOnlyThoseCases) {
  const fs::path dir = scratch_dir("sanitize_variant");
  const fs::path tool = fake_sanitizer(dir);
  ::setenv("BENCH_COMPUTE_SANITIZER", tool.c_str(), 1);
  auto run = [&](const std::vector<std::string>& extra) {
    return sanitize_memcheck(dir, tool, extra);
  };
  const auto one = run({"--example", "last", "--variant", "optimized"});
  EXPECT_EQ(one.exit_code, 0) << one.out << one.err;
  EXPECT_NE(one.out.find("[1/1] ch99/last (1 case)\n  memcheck   clean"), std::string::npos)
      << one.out;
  auto runs = recorded_runs(tool);
  ASSERT_EQ(runs.size(), 1u) << one.out;
  EXPECT_NE(
      std::find(runs[0].begin(), runs[0].end(), "--benchmark_filter=^ch99/last/(optimized)(/|$)"),
      runs[0].end());

  // Both variants, every point of an example with an axis: a process per point, each filtered.
  const auto points = run({"--example", "sized", "--variant", "baseline,optimized", "--sweep"});
  EXPECT_EQ(points.exit_code, 0) << points.out << points.err;
  EXPECT_NE(points.out.find("[2/2] ch99/sized/n:2 (2 cases)\n  memcheck   clean"),
            std::string::npos)
      << points.out;
  runs = recorded_runs(tool);
  ASSERT_EQ(runs.size(), 2u) << points.out;
  for (const auto& argv : runs)
    EXPECT_NE(std::find(argv.begin(), argv.end(),
                        "--benchmark_filter=^ch99/sized/(baseline|optimized)(/|$)"),
              argv.end());

  // A role-named case answers to its rung's own name too (the fake's optimized cases run "tuned").
  const auto by_own_name = run({"--example", "last", "--variant", "tuned"});
  EXPECT_EQ(by_own_name.exit_code, 0) << by_own_name.out << by_own_name.err;
  runs = recorded_runs(tool);
  ASSERT_EQ(runs.size(), 1u) << by_own_name.out;
  EXPECT_NE(
      std::find(runs[0].begin(), runs[0].end(), "--benchmark_filter=^ch99/last/(optimized)(/|$)"),
      runs[0].end());

  const auto none = run({"--example", "last", "--variant", "optimized,nosuch"});
  EXPECT_EQ(none.exit_code, 2) << none.out << none.err;
  EXPECT_NE(
      none.err.find("no case of the examples selected has the variant nosuch (their variants: "
                    "baseline (naive), optimized (tuned))"),
      std::string::npos)
      << none.err;
  EXPECT_TRUE(recorded_runs(tool).empty());
  fs::remove_all(dir);
}

// `bench list` shows the rung each role-named case runs, from the binary's --bench_list_variants.
TEST(BenchList, ARoleNamedCaseShowsItsRung) {
  const auto r = bench({"list", "--build-dir", FAKE_BUILD_DIR, "--chapter", "ch99"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(
      r.out.find("ch99 (6 cases)\n  ch99/first/baseline (naive)\n  ch99/first/optimized (tuned)\n"),
      std::string::npos)
      << r.out;
}

// compute-sanitizer reads `%p`, `%q{VAR}` and `%%` in --log-file's path (the fake does too): a
// reports directory named with a `%` must still get its logs where bench sanitize reads them.
TEST_F(BenchSanitize, AReportsDirectoryWithAPercentSignStillGetsItsLogs) {
  const fs::path dir = scratch_dir("sanitize_percent");
  const fs::path tool = fake_sanitizer(dir);
  ::setenv("BENCH_COMPUTE_SANITIZER", tool.c_str(), 1);
  const fs::path reports = dir / "100%pure";
  const auto r = bench({"sanitize", "--build-dir", FAKE_BUILD_DIR, "--chapter", "ch99", "--example",
                        "last", "--tool", "memcheck", "--reports-dir", reports.string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(fs::exists(reports / "logs" / "ch99.last.memcheck.log")) << r.out;
  const std::vector<std::vector<std::string>> runs = recorded_runs(tool);
  ASSERT_EQ(runs.size(), 1u);
  const auto log_flag = std::find(runs[0].begin(), runs[0].end(), "--log-file");
  ASSERT_NE(log_flag, runs[0].end());
  EXPECT_NE(std::next(log_flag)->find("100%%pure"), std::string::npos) << *std::next(log_flag);
  fs::remove_all(dir);
}

TEST_F(BenchSanitize, AnExampleListChecksThoseAndAnUnknownNameIsRefusedBeforeAnyRun) {
  const fs::path dir = scratch_dir("sanitize_list");
  const fs::path tool = fake_sanitizer(dir);
  ::setenv("BENCH_COMPUTE_SANITIZER", tool.c_str(), 1);
  const auto r = bench({"sanitize", "--build-dir", FAKE_BUILD_DIR, "--chapter", "ch99", "--example",
                        "ch99/last,first", "--tool", "initcheck", "--reports-dir",
                        (dir / "reports").string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  const auto runs = recorded_runs(tool);
  ASSERT_EQ(runs.size(), 2u) << r.out;
  EXPECT_NE(std::find(runs[0].begin(), runs[0].end(), "--benchmark_filter=^ch99/first/"),
            runs[0].end());
  EXPECT_NE(std::find(runs[1].begin(), runs[1].end(), "--benchmark_filter=^ch99/last/"),
            runs[1].end());

  // Once "ch99: no example X" and a failed run that checked nothing; now a usage error, as
  // compare's.
  const auto typo = bench({"sanitize", "--build-dir", FAKE_BUILD_DIR, "--chapter", "ch99",
                           "--example", "last,lats", "--reports-dir", (dir / "reports").string()});
  EXPECT_EQ(typo.exit_code, 2) << typo.out << typo.err;
  EXPECT_NE(typo.err.find("--example lats matches no example of ch99"), std::string::npos)
      << typo.err;
  EXPECT_EQ(recorded_runs(tool).size(), 2u);  // nothing more ran
  fs::remove_all(dir);
}

// A tool that hangs is killed at --timeout, with the child it started (the program, for the real
// sanitizer), reported as FAILED with the limit, and the runs after it still happen.
TEST_F(BenchSanitize, AHungToolIsKilledAtTheTimeoutAndTheOthersStillRun) {
  const fs::path dir = scratch_dir("sanitize_hang");
  const fs::path tool = fake_sanitizer(dir);
  ::setenv("BENCH_COMPUTE_SANITIZER", tool.c_str(), 1);
  ::setenv("FAKE_SANITIZER_HANG", "synccheck", 1);
  const auto start = std::chrono::steady_clock::now();
  const auto r = bench({"sanitize", "--build-dir", FAKE_BUILD_DIR, "--chapter", "ch99", "--example", "last", "--tool",
                        "synccheck,memcheck", "--timeout", "1", "--reports-dir", (dir / "reports").string()});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::unsetenv("FAKE_SANITIZER_HANG");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_LT(seconds, 30) << "the hung tool was waited for, not killed";
  EXPECT_NE(r.out.find("synccheck  FAILED: did not finish in 1 s and was killed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("memcheck   clean"), std::string::npos) << r.out;
  EXPECT_EQ(recorded_runs(tool).size(), 2u);
  // The hung tool's own child went with it: its process group was killed, not just its leader.
  std::ifstream child_file(tool.string() + ".hung_child");
  pid_t child = 0;
  ASSERT_TRUE(child_file >> child) << "the fake never started its child";
  bool child_gone = false;
  for (int i = 0; i < 100 && !child_gone; ++i) {  // a killed orphan may take a moment to be reaped
    child_gone = process_gone(child);
    if (!child_gone) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(child_gone) << "pid " << child << " still runs";
  if (!child_gone) ::kill(child, SIGKILL);
  fs::remove_all(dir);
}

// Errors only in a library's kernels (every one displayed, none with line information) are
// reported, with the log, and do not fail the example: its own kernels ran under the tool clean.
TEST_F(BenchSanitize, ErrorsOnlyInLibraryCodeAreReportedButDoNotFail) {
  const fs::path dir = scratch_dir("sanitize_library");
  ::setenv("BENCH_COMPUTE_SANITIZER", fake_sanitizer(dir).c_str(), 1);
  ::setenv("FAKE_SANITIZER_LIBRARY", "synccheck", 1);
  const auto r = bench({"sanitize", "--build-dir", FAKE_BUILD_DIR, "--chapter", "ch99", "--example", "last", "--tool",
                        "synccheck", "--reports-dir", (dir / "reports").string()});
  ::unsetenv("FAKE_SANITIZER_LIBRARY");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("synccheck  in library code only: Error: Race reported between Read access and Write access "
                       "in nvjet_sm90_tst_128x192_64x5_2x1_v_bz_coopB_TNN (no line information)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("1 run(s) reported errors in library code only"), std::string::npos) << r.out;
  std::ifstream in(dir / "reports" / "sanitize.json");
  const auto report = nlohmann::json::parse(in);
  EXPECT_EQ(report["runs"][0]["verdict"], "library");
  EXPECT_EQ(report["runs"][0]["finding"]["function"], "nvjet_sm90_tst_128x192_64x5_2x1_v_bz_coopB_TNN");
  fs::remove_all(dir);
}

TEST_F(BenchSanitize, OnlyRefusalsCheckNothingAndFail) {
  const fs::path dir = scratch_dir("sanitize_refused");
  ::setenv("BENCH_COMPUTE_SANITIZER", fake_sanitizer(dir).c_str(), 1);
  const auto r = bench({"sanitize", "--build-dir", FAKE_BUILD_DIR, "--chapter", "ch99", "--example", "last", "--tool",
                        "racecheck", "--reports-dir", (dir / "reports").string()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("nothing was checked"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST_F(BenchSanitize, MissingSanitizerIsAClearError) {
  ::setenv("BENCH_COMPUTE_SANITIZER", "/nonexistent/compute-sanitizer", 1);
  const auto r = bench({"sanitize", "--build-dir", FAKE_BUILD_DIR, "--chapter", "ch99"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("BENCH_COMPUTE_SANITIZER=/nonexistent/compute-sanitizer is not an executable file"),
            std::string::npos)
      << r.err;
}

TEST_F(BenchSanitize, UsageErrors) {
  EXPECT_EQ(bench({"sanitize"}).exit_code, 2);
  EXPECT_EQ(bench({"sanitize", "--chapter", "ch99", "--tool", "leakcheck"}).exit_code, 2);
  const auto verify_only =
      bench({"compare", "--chapter", "ch99", "--build-dir", FAKE_BUILD_DIR, "--", "--bench_verify_only"});
  EXPECT_EQ(verify_only.exit_code, 2);
  EXPECT_NE(verify_only.err.find("bench sanitize"), std::string::npos) << verify_only.err;
}

}  // namespace

// `bench sanitize` on the planted bugs of sanitize_cases.cu, through the real bench program and
// the real compute-sanitizer: memcheck names the out-of-bounds read's kernel, file and line,
// racecheck reports the shared-memory race, and every other example and tool is clean. A tool this
// GPU's compute-sanitizer refuses is skipped with its reason (GTEST_SKIP), never passed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "run_bench.hpp"

namespace {

namespace fs = std::filesystem;
using bench::tools::ProcessResult;

const std::vector<std::string> kExamples = {"test/out_of_bounds_read", "test/shared_race", "test/clean"};
const std::vector<std::string> kTools = {"memcheck", "racecheck", "synccheck", "initcheck"};

// The line of sanitize_cases.cu that carries `marker`.
int marked_line(const std::string& marker) {
  std::ifstream in(SANITIZE_CASES_SOURCE);
  int number = 0;
  for (std::string line; std::getline(in, line);)
    if (++number, line.find("// SANITIZE: " + marker) != std::string::npos) return number;
  ADD_FAILURE() << "no line marked '" << marker << "' in " << SANITIZE_CASES_SOURCE;
  return -1;
}

struct Sanitized {
  ProcessResult process;
  nlohmann::json report;
};

// One `bench sanitize` of the test chapter, shared by every test below (12 sanitizer processes).
const Sanitized& sanitized() {
  static const Sanitized s = [] {
    const fs::path reports = bench::tools::testing::scratch_dir("sanitize_gpu") / "reports";
    Sanitized out{bench::tools::testing::bench({"sanitize", "--build-dir", SANITIZE_BUILD_DIR, "--chapter", "ch98",
                                                "--reports-dir", reports.string()}),
                  nlohmann::json()};
    std::cout << out.process.out << out.process.err << std::flush;
    std::ifstream in(reports / "sanitize.json");
    if (in) out.report = nlohmann::json::parse(in, nullptr, false);
    return out;
  }();
  return s;
}

nlohmann::json run_of(const std::string& example, const std::string& tool) {
  const auto& report = sanitized().report;
  if (report.is_object())
    for (const auto& run : report["runs"])
      if (run["example"] == example && run["tool"] == tool) return run;
  ADD_FAILURE() << "no run of " << example << " under " << tool << "; bench said:\n"
                << sanitized().process.out << sanitized().process.err;
  return nlohmann::json::object();
}

// compute-sanitizer names the file as the compiler recorded it: on the H100 (2025.3.1) the
// basename only ("sanitize_cases.cu"), elsewhere a path. Either names this file.
bool names_sanitize_cases(const std::string& file) { return fs::path(file).filename() == "sanitize_cases.cu"; }

TEST(SanitizeGpu, MemcheckNamesTheOutOfBoundsReadsKernelAndLine) {
  const auto run = run_of("test/out_of_bounds_read", "memcheck");
  if (run.value("verdict", "") == "refused") GTEST_SKIP() << "memcheck refused: " << run["reason"];
  ASSERT_EQ(run.value("verdict", ""), "found") << run.dump(2);
  const auto& f = run["finding"];
  EXPECT_NE(f.value("what", "").find("Invalid __global__ read"), std::string::npos) << f.dump(2);
  // "<unnamed>::peek_past_end(const float *, float *, long)"
  EXPECT_NE(f.value("function", "").find("peek_past_end("), std::string::npos) << f.dump(2);
  EXPECT_TRUE(names_sanitize_cases(f.value("file", ""))) << f.dump(2);
  EXPECT_EQ(f.value("line", 0), marked_line("out-of-bounds read")) << f.dump(2);
  // The console line says the same ("... at sanitize_cases.cu:37", or a path ending so).
  const std::string& out = sanitized().process.out;
  EXPECT_NE(out.find("memcheck   FOUND Invalid __global__ read"), std::string::npos) << out;
  EXPECT_NE(out.find("sanitize_cases.cu:" + std::to_string(marked_line("out-of-bounds read"))), std::string::npos)
      << out;
}

TEST(SanitizeGpu, RacecheckReportsTheSharedMemoryRace) {
  const auto run = run_of("test/shared_race", "racecheck");
  if (run.value("verdict", "") == "refused") GTEST_SKIP() << "racecheck refused: " << run["reason"];
  ASSERT_EQ(run.value("verdict", ""), "found") << run.dump(2);
  const auto& f = run["finding"];
  EXPECT_NE(f.value("what", "").find("Race reported"), std::string::npos) << f.dump(2);
  // "<unnamed>::neighbour_race(const float *, float *, long)"
  EXPECT_NE(f.value("function", "").find("neighbour_race("), std::string::npos) << f.dump(2);
  EXPECT_TRUE(names_sanitize_cases(f.value("file", ""))) << f.dump(2);
  // Either access may be named first.
  const int line = f.value("line", 0);
  EXPECT_TRUE(line == marked_line("racy write") || line == marked_line("racy read")) << f.dump(2);
}

TEST(SanitizeGpu, EverythingElseIsClean) {
  int refused = 0;
  for (const auto& example : kExamples)
    for (const auto& tool : kTools) {
      if ((example == "test/out_of_bounds_read" && tool == "memcheck") ||
          (example == "test/shared_race" && tool == "racecheck"))
        continue;
      const auto run = run_of(example, tool);
      const std::string verdict = run.value("verdict", "");
      if (verdict == "refused") {
        ++refused;
        std::cout << example << " " << tool << ": refused: " << run["reason"] << "\n";
        continue;
      }
      // initcheck tracks what was written inside allocations; a read past one may or may not be
      // reported as uninitialised. Reported, it must be the planted read.
      if (example == "test/out_of_bounds_read" && tool == "initcheck" && verdict == "found") {
        EXPECT_EQ(run["finding"].value("line", 0), marked_line("out-of-bounds read")) << run.dump(2);
        continue;
      }
      EXPECT_EQ(verdict, "clean") << example << " under " << tool << ":\n" << run.dump(2);
    }
  if (refused > 0) std::cout << refused << " run(s) refused by compute-sanitizer: not checked\n";
}

TEST(SanitizeGpu, FindingsMakeTheExitCodeOne) {
  EXPECT_EQ(sanitized().process.exit_code, 1) << sanitized().process.out << sanitized().process.err;
  ASSERT_TRUE(sanitized().report.is_object());
  EXPECT_EQ(sanitized().report["runs"].size(), kExamples.size() * kTools.size());
}

}  // namespace

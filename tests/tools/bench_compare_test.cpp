// The real `bench` executable on saved fixtures and on a fake chapter binary: the table, the
// JSON report and the exit code, as a user would see them.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "bench/device_info.hpp"
#include "chapter_process.hpp"
#include "run_bench.hpp"

namespace {

namespace fs = std::filesystem;
using bench::tools::ProcessResult;
using bench::tools::testing::bench;
using bench::tools::testing::scratch_dir;

const std::string kFixtures = FIXTURES_DIR;

nlohmann::json read_json(const fs::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

std::map<std::string, std::string> status_by_row(const nlohmann::json& report) {
  std::map<std::string, std::string> out;
  for (const auto& row : report["rows"])
    out[row["example"].get<std::string>() + "/" + row["variant"].get<std::string>()] = row["status"];
  return out;
}

TEST(BenchCompareFromResults, ScoresEveryStatusAndExitsOne) {
  const fs::path dir = scratch_dir("every");
  const auto r = bench({"compare", "--from-results", kFixtures + "/results_every_status.json",
                        "--expectations-dir", kFixtures + "/expectations", "--json",
                        (dir / "report.json").string(), "--markdown", (dir / "report.md").string()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  for (const char* status : {"PASS", "IMPROVED", "REGRESSED", "NO_SPEEDUP", "FAILED", "SKIPPED", "NEW"})
    EXPECT_NE(r.out.find(status), std::string::npos) << status << "\n" << r.out;
  EXPECT_NE(r.out.find("speedup [95% CI]"), std::string::npos);
  EXPECT_NE(r.out.find("fingerprint mismatch"), std::string::npos);
  EXPECT_NE(r.out.find("impossible"), std::string::npos);
  EXPECT_NE(r.out.find("killed by signal 6"), std::string::npos);

  const auto status = status_by_row(read_json(dir / "report.json"));
  EXPECT_EQ(status.at("ch90/pass_example/optimized"), "PASS");
  EXPECT_EQ(status.at("ch90/improved_example/optimized"), "IMPROVED");
  EXPECT_EQ(status.at("ch90/regressed_example/optimized"), "REGRESSED");
  EXPECT_EQ(status.at("ch90/aa_example/optimized"), "NO_SPEEDUP");
  EXPECT_EQ(status.at("ch90/failed_example/optimized"), "FAILED");
  EXPECT_EQ(status.at("ch90/skipped_example/optimized"), "SKIPPED");
  EXPECT_EQ(status.at("ch90/new_example/optimized"), "NEW");
  EXPECT_EQ(status.at("ch90/mismatch_example/optimized"), "FAILED");
  EXPECT_EQ(status.at("ch90/impossible_example/optimized"), "FAILED");
  EXPECT_EQ(status.at("ch90/crashed_example/optimized"), "FAILED");
  EXPECT_EQ(status.at("ch90/ladder_example/tiled"), "-");
  EXPECT_EQ(read_json(dir / "report.json")["exit_code"], 1);

  std::ifstream md(dir / "report.md");
  const std::string markdown((std::istreambuf_iterator<char>(md)), {});
  EXPECT_NE(markdown.find("| ch90/regressed_example | optimized |"), std::string::npos) << markdown;
  fs::remove_all(dir);
}

TEST(BenchCompareFromResults, NothingFailedOrRegressedExitsZero) {
  const auto r = bench({"compare", "--from-results", kFixtures + "/results_clean.json",
                        "--expectations-dir", kFixtures + "/expectations"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("1 PASS, 1 NO_SPEEDUP, 1 SKIPPED, 1 NEW (exit code 0)"), std::string::npos) << r.out;
}

TEST(BenchCompareFromResults, BadFilesExitTwoNamingThePosition) {
  const fs::path dir = scratch_dir("bad");
  std::ofstream(dir / "truncated.json") << "{\n  \"benchmarks\": [\n    {\"name\": ";
  auto r = bench({"compare", "--from-results", (dir / "truncated.json").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("truncated.json:3:"), std::string::npos) << r.err;

  fs::create_directories(dir / "expectations");
  std::ofstream(dir / "expectations" / "test_gpu.json") << "{\"format_version\": 1,\n \"hardware_key\": 7}";
  r = bench({"compare", "--from-results", kFixtures + "/results_clean.json", "--expectations-dir",
             (dir / "expectations").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("test_gpu.json:2:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("expected a string"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(BenchCompareFromResults, UpdateExpectationsKeepsUnrelatedEntriesAndPrintsDiff) {
  const fs::path dir = scratch_dir("update");
  fs::copy_file(kFixtures + "/expectations/test_gpu.json", dir / "test_gpu.json");
  const auto r = bench({"compare", "--from-results", kFixtures + "/results_clean.json",
                        "--expectations-dir", dir.string(), "--update-expectations"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("refused ch90/aa_example: NO_SPEEDUP"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("refused ch90/skipped_example: SKIPPED"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("+ examples.ch90/new_example.speedup"), std::string::npos) << r.out;
  const auto updated = read_json(dir / "test_gpu.json");
  EXPECT_TRUE(updated["examples"].contains("ch90/new_example"));
  EXPECT_EQ(updated["examples"]["ch90/untouched_example"]["tolerance"], 0.15);
  EXPECT_EQ(updated["ceilings"]["hbm_copy_gbps"]["value"], 3000.0);
  EXPECT_FALSE(updated["examples"].contains("ch90/aa_example"));
  fs::remove_all(dir);
}

// VALIDITY row 13: one example's crash must not take the others with it.
TEST(BenchCompareLive, CrashingExampleFailsAndTheNextIsStillScored) {
  const fs::path dir = scratch_dir("crash");
  ::setenv("BENCH_ASSUME_GPU", "1", 1);
  const auto r = bench({"compare", "--chapter", "ch99", "--build-dir", FAKE_BUILD_DIR, "--expectations-dir",
                        kFixtures + "/expectations", "--json", (dir / "report.json").string(),
                        "--markdown", (dir / "report.md").string(), "--save-results",
                        (dir / "results.json").string()});
  ::unsetenv("BENCH_ASSUME_GPU");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("[2/3] ch99/crasher: 0 of 2 cases"), std::string::npos) << r.out;
  const auto status = status_by_row(read_json(dir / "report.json"));
  EXPECT_EQ(status.at("ch99/first/optimized"), "PASS");
  EXPECT_EQ(status.at("ch99/crasher/optimized"), "FAILED");
  EXPECT_EQ(status.at("ch99/last/optimized"), "NEW");
  EXPECT_NE(r.out.find("illegal memory access"), std::string::npos) << r.out;
  // The saved results rescore offline to the same verdicts.
  const auto again = bench({"compare", "--from-results", (dir / "results.json").string(),
                            "--expectations-dir", kFixtures + "/expectations", "--json",
                            (dir / "again.json").string()});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_EQ(status_by_row(read_json(dir / "again.json")), status);
  fs::remove_all(dir);
}

// A live compare of ch99's two examples, with an update asked for, stopped by SIGTERM once the fake
// chapter hangs in `hang_in`: its exit status and what it printed.
struct StoppedRun {
  int status = 0;
  std::string out, err;
};
StoppedRun compare_stopped_in(const fs::path& dir, const std::string& hang_in) {
  const fs::path hanging = dir / "hanging";
  const fs::path out_file = dir / "out.txt", err_file = dir / "err.txt";
  // A copy of the fixtures: were the run not stopped, the update would write to it.
  fs::copy(kFixtures + "/expectations", dir / "expectations");
  std::vector<std::string> args = {BENCH_EXE, "compare",   "--chapter",
                                   "ch99",    "--example", "first,last"};
  for (const std::string& arg : std::initializer_list<std::string>{
           "--build-dir", FAKE_BUILD_DIR, "--expectations-dir", (dir / "expectations").string(),
           "--json", (dir / "report.json").string(), "--save-results",
           (dir / "results.json").string()})
    args.push_back(arg);
  args.push_back("--update-expectations");
  StoppedRun run;
  const pid_t pid = ::fork();
  if (pid < 0) {
    ADD_FAILURE() << "fork failed";
    return run;
  }
  if (pid == 0) {
    ::setenv("BENCH_ASSUME_GPU", "1", 1);
    ::setenv("FAKE_CHAPTER_HANG_IN", hang_in.c_str(), 1);
    ::setenv("FAKE_CHAPTER_HANGING", hanging.c_str(), 1);
    std::FILE* out = std::freopen(out_file.c_str(), "w", stdout);
    std::FILE* err = std::freopen(err_file.c_str(), "w", stderr);
    if (!out || !err) ::_exit(126);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  for (int i = 0; i < 300 && !fs::exists(hanging); ++i) ::usleep(20'000);  // up to 6 s
  EXPECT_TRUE(fs::exists(hanging)) << "the fake chapter never reached its hanging case";
  ::kill(pid, SIGTERM);
  EXPECT_EQ(::waitpid(pid, &run.status, 0), pid);
  std::ifstream out_in(out_file), err_in(err_file);
  run.out.assign(std::istreambuf_iterator<char>(out_in), {});
  run.err.assign(std::istreambuf_iterator<char>(err_in), {});
  return run;
}

// An interrupted compare (Ctrl-C, or `timeout`'s SIGTERM) loses nothing that had finished: the
// example that was running names the case it was in, the examples before it are saved and scored,
// the expectations are not updated from a partial run, and the exit says which signal ended it.
TEST(BenchCompareLive, AnInterruptedRunKeepsWhatFinishedAndNamesTheCaseItWasIn) {
  const fs::path dir = scratch_dir("interrupted");
  const auto [status, out, err] = compare_stopped_in(dir, "ch99/last");
  ASSERT_TRUE(WIFEXITED(status)) << out << err;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << out << err;
  EXPECT_NE(out.find("[1/2] ch99/first: 2 of 2 cases"), std::string::npos) << out;
  EXPECT_NE(out.find("[2/2] ch99/last: interrupted by signal 15 (Terminated)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("in ch99/last/optimized, 1 of 2 cases finished"), std::string::npos) << out;
  EXPECT_NE(out.find("expectations: not updated: the run was interrupted"), std::string::npos)
      << out;
  EXPECT_NE(out.find("interrupted by signal 15 (Terminated): exit code 143"), std::string::npos)
      << out;
  const auto status_rows = status_by_row(read_json(dir / "report.json"));
  EXPECT_EQ(status_rows.at("ch99/first/optimized"), "PASS");
  EXPECT_EQ(status_rows.count("ch99/last/optimized"),
            0u);  // stopped from outside: neither run nor FAILED
  const auto saved = read_json(dir / "results.json");
  EXPECT_EQ(saved["context"]["interrupted_by_signal"], SIGTERM);
  fs::remove_all(dir);
}

// Stopped before any example finished, the run names no GPU: it says so, rather than looking for
// an "unknown" GPU's expectations and calling every example NEW (seen when a lease's time limit
// stopped a rerun in its first example).
TEST(BenchCompareLive, AnInterruptBeforeAnyExampleFinishedNamesNoGpu) {
  const fs::path dir = scratch_dir("interrupted_first");
  const auto [status, out, err] = compare_stopped_in(dir, "ch99/first");
  ASSERT_TRUE(WIFEXITED(status)) << out << err;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << out << err;
  EXPECT_NE(out.find("expectations: not read: no chapter finished"), std::string::npos) << out;
  EXPECT_EQ(out.find("unknown"), std::string::npos) << out;
  EXPECT_EQ(out.find("NEW"), std::string::npos) << out;
  fs::remove_all(dir);
}

// --repetitions: every example runs again in a fresh process, round the examples (so the runs of
// one example are spread in time), and the saved results hold one row per case per run.
TEST(BenchCompareLive, RepetitionsGoRoundTheExamplesAndKeepEveryRun) {
  const fs::path dir = scratch_dir("repetitions");
  ::setenv("BENCH_ASSUME_GPU", "1", 1);
  const auto r = bench({"compare", "--chapter", "ch99", "--repetitions", "2", "--build-dir", FAKE_BUILD_DIR,
                        "--expectations-dir", kFixtures + "/expectations", "--json", (dir / "report.json").string(),
                        "--save-results", (dir / "results.json").string()});
  ::unsetenv("BENCH_ASSUME_GPU");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;  // the crasher still fails
  const auto first_run_last = r.out.find("[3/3] ch99/last (run 1/2)");
  const auto second_run_first = r.out.find("[1/3] ch99/first (run 2/2)");
  ASSERT_NE(first_run_last, std::string::npos) << r.out;
  ASSERT_NE(second_run_first, std::string::npos) << r.out;
  EXPECT_LT(first_run_last, second_run_first) << r.out;
  const auto results = read_json(dir / "results.json");
  int first_baseline_rows = 0;
  for (const auto& row : results["benchmarks"])
    if (row["name"].get<std::string>().rfind("ch99/first/baseline/", 0) == 0) ++first_baseline_rows;
  EXPECT_EQ(first_baseline_rows, 2);
  const auto status = status_by_row(read_json(dir / "report.json"));
  EXPECT_EQ(status.at("ch99/first/optimized"), "PASS");
  EXPECT_EQ(status.at("ch99/crasher/optimized"), "FAILED");
  fs::remove_all(dir);
}

// Issue 47: `compare --chapter ch18` then `--chapter ch09` left only ch09's results. Each live run
// keeps a file of its own under <build>/reports/, named by chapters, GPU and UTC time, and
// results.json is a copy of the latest.
TEST(BenchCompareLive, TwoRunsInARowEachKeepTheirResults) {
  const fs::path dir = scratch_dir("two_runs");
  // A build tree of our own (its reports/ is what is checked), with the fake chapter twice.
  for (const std::string chapter : {"ch98", "ch99"}) {
    fs::create_directories(dir / "chapters" / chapter);
    fs::copy_file(fs::path(FAKE_BUILD_DIR) / "chapters/ch99/ch99",
                  dir / "chapters" / chapter / chapter);
  }
  ::setenv("BENCH_ASSUME_GPU", "1", 1);
  const auto first = bench({"compare", "--chapter", "ch98", "--example", "first", "--build-dir",
                            dir.string(), "--expectations-dir", kFixtures + "/expectations"});
  const auto second = bench({"compare", "--chapter", "ch99", "--example", "last", "--build-dir",
                             dir.string(), "--expectations-dir", kFixtures + "/expectations"});
  ::unsetenv("BENCH_ASSUME_GPU");
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  std::map<std::string, fs::path> runs;  // chapter -> its file
  for (const auto& entry : fs::directory_iterator(dir / "reports")) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("results_", 0) == 0) runs[name.substr(8, 4)] = entry.path();
  }
  ASSERT_EQ(runs.size(), 2u);
  ASSERT_TRUE(runs.count("ch98") && runs.count("ch99"));
  // results_ch98_test_gpu_20261127T015300Z.json
  EXPECT_EQ(runs["ch98"].filename().string().substr(0, 23), "results_ch98_test_gpu_2");
  EXPECT_EQ(runs["ch98"].filename().string().size(),
            std::string("results_ch98_test_gpu_20261127T015300Z.json").size());
  auto examples_in = [](const fs::path& file) {
    std::set<std::string> out;
    const auto results = read_json(file);
    for (const auto& row : results["benchmarks"])
      out.insert(row["name"].get<std::string>().substr(0, 10));
    return out;
  };
  EXPECT_EQ(examples_in(runs["ch98"]), std::set<std::string>{"ch99/first"});
  EXPECT_EQ(examples_in(runs["ch99"]), std::set<std::string>{"ch99/last/"});
  EXPECT_EQ(read_json(dir / "reports/results.json"), read_json(runs["ch99"]));  // the latest
  EXPECT_NE(second.out.find(runs["ch99"].string()), std::string::npos) << second.out;
  fs::remove_all(dir);
}

// The chapters' percent of ceiling comes from the ceilings of the files `compare` scores against:
// given --expectations-dir, the chapter process is told it (upd_ch19.json of 2026-11-27 carried
// 110.4% from the tree's old ceilings beside a table that read 100.6% from the directory's).
TEST(BenchCompareLive, TheChaptersReadCeilingsFromTheExpectationsDirGiven) {
  const fs::path dir = scratch_dir("ceilings_dir");
  fs::create_directories(dir / "chapters" / "ch99");
  fs::copy_file(fs::path(FAKE_BUILD_DIR) / "chapters/ch99/ch99", dir / "chapters/ch99/ch99");
  ::setenv("BENCH_ASSUME_GPU", "1", 1);
  const auto given = bench({"compare", "--chapter", "ch99", "--example", "first", "--build-dir",
                            dir.string(), "--expectations-dir", kFixtures + "/expectations"});
  ::unsetenv("BENCH_ASSUME_GPU");
  ASSERT_EQ(given.exit_code, 0) << given.out << given.err;
  const auto results = read_json(dir / "reports" / "results.json");
  EXPECT_EQ(results["context"].value("fake_expectations_dir", std::string("?")),
            kFixtures + "/expectations");
}

TEST(BenchCompareLive, WithoutAGpuSaysSoInOneLine) {
  if (bench::cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  const auto r = bench({"compare", "--chapter", "ch99", "--build-dir", FAKE_BUILD_DIR});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find("no CUDA device"), std::string::npos) << r.err;
}

// --example a,b: a list of examples, each bare or chNN/name; only they run, only they are scored,
// and only their entries an update may change.
TEST(BenchCompareLive, ExampleListRunsOnlyThoseExamples) {
  const fs::path dir = scratch_dir("example_list");
  ::setenv("BENCH_ASSUME_GPU", "1", 1);
  const auto r =
      bench({"compare", "--chapter", "ch99", "--example", "first,ch99/last", "--build-dir",
             FAKE_BUILD_DIR, "--expectations-dir", kFixtures + "/expectations", "--json",
             (dir / "report.json").string(), "--save-results", (dir / "results.json").string()});
  ::unsetenv("BENCH_ASSUME_GPU");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;  // the crasher did not run
  EXPECT_NE(r.out.find("[1/2] ch99/first: 2 of 2 cases"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[2/2] ch99/last: 2 of 2 cases"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("crasher"), std::string::npos) << r.out;
  const auto status = status_by_row(read_json(dir / "report.json"));
  EXPECT_EQ(status.size(), 2u);
  EXPECT_EQ(status.at("ch99/first/optimized"), "PASS");
  EXPECT_EQ(status.at("ch99/last/optimized"), "NEW");
  fs::remove_all(dir);
}

// --sweep and --axis reach the chapter binary when it lists and when it runs; each point is a row
// of its own, and the curve along the axis names where the optimization stops paying.
TEST(BenchCompareLive, SweepAndAxisSelectPointsAndTheCurveNamesTheCrossover) {
  const fs::path dir = scratch_dir("axes");
  ::setenv("BENCH_ASSUME_GPU", "1", 1);
  const auto swept = bench({"compare", "--chapter", "ch99", "--example", "sized", "--sweep", "--build-dir",
                            FAKE_BUILD_DIR, "--expectations-dir", kFixtures + "/expectations", "--json",
                            (dir / "report.json").string(), "--markdown", (dir / "report.md").string()});
  const auto one = bench({"compare", "--chapter", "ch99", "--axis", "n=2", "--sweep", "--build-dir", FAKE_BUILD_DIR,
                          "--expectations-dir", kFixtures + "/expectations"});
  const auto none = bench({"compare", "--chapter", "ch99", "--axis", "n=3", "--build-dir", FAKE_BUILD_DIR});
  ::unsetenv("BENCH_ASSUME_GPU");
  EXPECT_NE(swept.out.find("[1/1] ch99/sized: 4 of 4 cases"), std::string::npos) << swept.out << swept.err;
  const auto status = status_by_row(read_json(dir / "report.json"));
  EXPECT_EQ(status.size(), 2u);
  EXPECT_EQ(status.at("ch99/sized/n:1/optimized"), "NEW");
  EXPECT_EQ(status.at("ch99/sized/n:2/optimized"), "NO_SPEEDUP");
  EXPECT_NE(swept.out.find("ch99/sized against n: stops paying between n:1 (2.00x) and n:2 (1.00x)"),
            std::string::npos)
      << swept.out;
  std::ifstream md(dir / "report.md");
  const std::string markdown((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  EXPECT_NE(markdown.find("### ch99/sized against n"), std::string::npos) << markdown;
  // Only the point asked for, and no example without the axis.
  EXPECT_NE(one.out.find("[1/1] ch99/sized: 2 of 2 cases"), std::string::npos) << one.out << one.err;
  EXPECT_EQ(one.out.find("ch99/first"), std::string::npos) << one.out;
  EXPECT_EQ(none.exit_code, 2) << none.out << none.err;
  EXPECT_NE(none.err.find("--axis selects no case of ch99"), std::string::npos) << none.err;
  fs::remove_all(dir);
}

// A name that matches no example is an error naming it, before anything runs: alone (which used
// to be a silent empty run that exited 0) or in a list.
TEST(BenchCompareLive, AnExampleNameThatMatchesNothingIsRefusedBeforeAnythingRuns) {
  ::setenv("BENCH_ASSUME_GPU", "1", 1);
  const auto one =
      bench({"compare", "--chapter", "ch99", "--example", "frist", "--build-dir", FAKE_BUILD_DIR});
  const auto listed = bench({"compare", "--chapter", "ch99", "--example", "first,ch98/last,lats",
                             "--build-dir", FAKE_BUILD_DIR});
  ::unsetenv("BENCH_ASSUME_GPU");
  EXPECT_EQ(one.exit_code, 2) << one.out << one.err;
  EXPECT_NE(one.err.find("--example frist matches no example of ch99"), std::string::npos)
      << one.err;
  EXPECT_EQ(listed.exit_code, 2) << listed.out << listed.err;
  EXPECT_NE(listed.err.find("--example ch98/last, lats match no example of ch99"),
            std::string::npos)
      << listed.err;
  EXPECT_EQ(listed.out.find("[1/"), std::string::npos)
      << listed.out;  // ch99/first did not run either
}

TEST(BenchCompareFromResults, UpdateWithAnExampleListTouchesOnlyThoseEntries) {
  const fs::path dir = scratch_dir("update_some");
  fs::copy_file(kFixtures + "/expectations/test_gpu.json", dir / "test_gpu.json");
  const auto before = read_json(dir / "test_gpu.json");
  // Unfiltered, this run rewrites ch90/pass_example (see the test above); filtered, it may not.
  const auto r =
      bench({"compare", "--from-results", kFixtures + "/results_clean.json", "--expectations-dir",
             dir.string(), "--update-expectations", "--example", "new_example,ch90/aa_example"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("refused ch90/aa_example: NO_SPEEDUP"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 example(s) accepted"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("pass_example"), std::string::npos) << r.out;  // not scored, not updated
  auto updated = read_json(dir / "test_gpu.json");
  EXPECT_TRUE(updated["examples"].contains("ch90/new_example"));
  updated["examples"].erase("ch90/new_example");
  // The writer spells out an absent provenance as empty strings; nothing else may differ.
  for (auto& [name, entry] : updated["examples"].items())
    if (entry["provenance"]["date"] == "" && entry["provenance"]["git_sha"] == "")
      entry.erase("provenance");
  EXPECT_EQ(updated, before);  // every other entry, the device and the ceilings as they were

  const auto typo =
      bench({"compare", "--from-results", kFixtures + "/results_clean.json", "--expectations-dir",
             dir.string(), "--update-expectations", "--example", "new_exmaple"});
  EXPECT_EQ(typo.exit_code, 2) << typo.out << typo.err;
  EXPECT_NE(typo.err.find("--example new_exmaple matches no example of " + kFixtures +
                          "/results_clean.json"),
            std::string::npos)
      << typo.err;
  fs::remove_all(dir);
}

// `bench run --example a,b` runs the binary once with a filter for both; an unknown name is
// refused as compare refuses it. --variant takes the case's name or its rung's own name.
TEST(BenchRun, AnExampleListBecomesOneFilterAndAnUnknownNameIsRefused) {
  const auto r = bench({"run", "--chapter", "ch99", "--example", "first,ch99/last", "--variant",
                        "optimized", "--build-dir", FAKE_BUILD_DIR});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("filter ^(ch99/first/optimized|ch99/last/optimized)(/|$)"),
            std::string::npos)
      << r.out;
  // The rung's own name selects the role-named cases that run it; a name no case has is refused.
  const auto own = bench({"run", "--chapter", "ch99", "--example", "last", "--variant", "naive",
                          "--build-dir", FAKE_BUILD_DIR});
  EXPECT_EQ(own.exit_code, 0) << own.out << own.err;
  EXPECT_NE(own.out.find("filter ^(ch99/last/baseline)(/|$)"), std::string::npos) << own.out;
  const auto nosuch = bench({"run", "--chapter", "ch99", "--example", "last", "--variant", "nosuch",
                             "--build-dir", FAKE_BUILD_DIR});
  EXPECT_EQ(nosuch.exit_code, 2) << nosuch.out << nosuch.err;
  EXPECT_NE(nosuch.err.find("no case of the examples selected has the variant nosuch"),
            std::string::npos)
      << nosuch.err;
  const auto typo =
      bench({"run", "--chapter", "ch99", "--example", "first,lats", "--build-dir", FAKE_BUILD_DIR});
  EXPECT_EQ(typo.exit_code, 2) << typo.out << typo.err;
  EXPECT_NE(typo.err.find("--example lats matches no example of ch99"), std::string::npos)
      << typo.err;
  EXPECT_EQ(typo.out.find("filter"), std::string::npos) << typo.out;
}

// docs/expectations.md, host-bound examples: real results of one H100 run (ch12/cuda_graphs,
// whose eager baseline is host-bound, and ch07/transpose, device-bound on both sides) against
// the H100 entries, then the same results with the optimized side planted 15% slower.
nlohmann::json slowed_down(nlohmann::json results, double factor) {
  for (auto& row : results["benchmarks"]) {
    if (row["name"].get<std::string>().find("/optimized/") == std::string::npos) continue;
    for (const char* key : {"real_time", "cpu_time", "p10_us", "p90_us"}) row[key] = row[key].get<double>() * factor;
    for (auto& sample : row["bench_samples"]["samples"]) sample = sample.get<double>() * factor;
  }
  return results;
}

nlohmann::json replay(const nlohmann::json& results, const std::string& name) {
  const fs::path dir = scratch_dir(name);
  std::ofstream(dir / "results.json") << results.dump();
  const auto r = bench({"compare", "--from-results", (dir / "results.json").string(), "--expectations-dir",
                        kFixtures + "/host_bound", "--json", (dir / "report.json").string()});
  EXPECT_FALSE(r.out.empty()) << r.err;
  const nlohmann::json report = read_json(dir / "report.json");
  fs::remove_all(dir);
  return report;
}

TEST(BenchCompareFromResults, HostBoundAndDeviceBoundRealRunsRegressWhenPlantedFifteenPercentSlower) {
  const auto results = read_json(kFixtures + "/host_bound/results_h100.json");
  const auto as_run = status_by_row(replay(results, "host_bound_as_run"));
  EXPECT_EQ(as_run.at("ch12/cuda_graphs/optimized"), "PASS");
  EXPECT_EQ(as_run.at("ch07/transpose/optimized"), "PASS");
  const auto report = replay(slowed_down(results, 1.15), "host_bound_slower");
  const auto slower = status_by_row(report);
  EXPECT_EQ(slower.at("ch12/cuda_graphs/optimized"), "REGRESSED");
  EXPECT_EQ(slower.at("ch07/transpose/optimized"), "REGRESSED");
  for (const auto& row : report["rows"])
    if (row["example"] == "ch12/cuda_graphs") EXPECT_EQ(row["scored_by"], "optimized_time");
}


// docs/expectations.md, "Host-bound examples": a figure the host sets holds on a machine other
// than the one that wrote it only through `--add-machine`, run there. The same real H100 run,
// with its graph side declared host-bound too (so the pair is scored by the machines' spread),
// replayed as a second lease: its figures join the list, the device-bound pair is refused and
// left as it was, and the same lease adding itself again is refused.
TEST(BenchCompareFromResults, AddMachineAppendsAnotherMachineOnceAndOnlyToHostDependentEntries) {
  const fs::path dir = scratch_dir("add_machine");
  fs::copy(kFixtures + "/host_bound", dir / "expectations");
  const fs::path file = dir / "expectations" / "h100_80gb_hbm3.json";
  nlohmann::json x = read_json(file);
  x["examples"]["ch12/cuda_graphs"]["machines"] = {{{"speedup", x["examples"]["ch12/cuda_graphs"]["speedup"]},
                                                    {"optimized_us", 285.0},
                                                    {"host", "vm/aaaaaaaa"},
                                                    {"date", "2026-11-21T23:23:32Z"}}};
  std::ofstream(file) << x.dump(2);
  nlohmann::json results = read_json(kFixtures + "/host_bound/results_h100.json");
  for (auto& row : results["benchmarks"])
    if (row["name"].get<std::string>().rfind("ch12/cuda_graphs/optimized/", 0) == 0)
      row["label"] = row["label"].get<std::string>() + ";host_bound=1";
  results["context"]["machine_id"] = "vm/bbbbbbbb";
  std::ofstream(dir / "results.json") << results.dump();
  const std::vector<std::string> add = {"compare", "--from-results", (dir / "results.json").string(),
                                        "--expectations-dir", (dir / "expectations").string(), "--add-machine"};

  const auto first = bench(add);
  EXPECT_NE(first.out.find("expectations: 1 example(s) accepted"), std::string::npos) << first.out << first.err;
  EXPECT_NE(first.out.find("refused ch07/transpose: its scored figure (speedup) is the GPU's"), std::string::npos)
      << first.out;
  const nlohmann::json after = read_json(file);
  const auto& machines = after["examples"]["ch12/cuda_graphs"]["machines"];
  ASSERT_EQ(machines.size(), 2u) << machines.dump();
  EXPECT_EQ(machines[1]["host"], "vm/bbbbbbbb");
  EXPECT_EQ(after["examples"]["ch12/cuda_graphs"]["speedup"], x["examples"]["ch12/cuda_graphs"]["speedup"]);
  EXPECT_EQ(after["examples"]["ch07/transpose"], x["examples"]["ch07/transpose"]);

  const auto again = bench(add);
  EXPECT_NE(again.out.find("this machine (vm/bbbbbbbb) is already in its machines list"), std::string::npos)
      << again.out;
  EXPECT_NE(again.out.find("nothing accepted"), std::string::npos) << again.out;
  EXPECT_EQ(read_json(file)["examples"]["ch12/cuda_graphs"]["machines"].size(), 2u);
  fs::remove_all(dir);
}

// docs/validity.md row 18: compare never lets a chapter run with a known input seed.
TEST(BenchCompareLive, AFixedInputSeedIsRefused) {
  const auto r = bench({"compare", "--chapter", "ch07", "--", "--bench_seed=5"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("fresh secret input seed"), std::string::npos) << r.err;
}


// bench report: saved results in, one self-contained HTML page out; a bad file is exit 2, named.
TEST(BenchReport, SavedResultsBecomeOneHtmlPageAndABadFileIsNamed) {
  const fs::path dir = scratch_dir("report");
  const auto r = bench({"report", kFixtures + "/host_bound/results_h100.json", "--expectations-dir",
                        kFixtures + "/host_bound", "--html", (dir / "report.html").string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::ifstream in(dir / "report.html");
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("class=\"speedup-row\" data-example=\"ch12/cuda_graphs\" data-status=\"PASS\""), std::string::npos);
  // Neither example's cost model has both flops and bytes: the page says so instead of plotting.
  EXPECT_NE(html.find("Not on the roofline"), std::string::npos);
  EXPECT_NE(html.find("ch07/transpose/optimized"), std::string::npos);
  // --svg with nothing to place: exit 2 with the reason, and nothing written.
  const auto svg = bench({"report", kFixtures + "/host_bound/results_h100.json",
                          "--expectations-dir", kFixtures + "/host_bound", "--html",
                          (dir / "again.html").string(), "--svg", (dir / "roofline.svg").string()});
  EXPECT_EQ(svg.exit_code, 2) << svg.out << svg.err;
  EXPECT_NE(svg.err.find("has both flops and bytes in its cost model, so there is no roofline"),
            std::string::npos)
      << svg.err;
  EXPECT_FALSE(fs::exists(dir / "roofline.svg"));
  EXPECT_FALSE(fs::exists(dir / "again.html"));
  // A run with cases to place writes it.
  const auto placed = bench({"report", kFixtures + "/report/h100_run_a.json", "--expectations-dir",
                             kFixtures + "/report", "--html", (dir / "a.html").string(), "--svg",
                             (dir / "a.svg").string()});
  EXPECT_EQ(placed.exit_code, 0) << placed.out << placed.err;
  EXPECT_TRUE(fs::exists(dir / "a.svg"));
  const auto bad = bench({"report", (dir / "missing.json").string(), "--html", (dir / "x.html").string()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("missing.json"), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

std::string read_text(const fs::path& file) {
  std::ifstream in(file);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

int count_of(const std::string& text, const std::string& mark) {
  int n = 0;
  for (auto at = text.find(mark); at != std::string::npos; at = text.find(mark, at + 1)) ++n;
  return n;
}

// Issue 47: `bench report ch16.json ch09.json` drew only ch09 (the newest file) and a history
// chart per example from one point each. The files of one GPU are merged, each example point's
// newest result shown, and only an example measured in two or more runs has a history.
TEST(BenchReport, FilesOfOneGpuAreMergedAndHistoryNeedsTwoRuns) {
  const fs::path dir = scratch_dir("report_merge");
  const std::string a = kFixtures + "/report/h100_run_a.json",
                    c = kFixtures + "/report/h100_run_c.json";
  auto report = [&](std::vector<std::string> files, const std::string& html) {
    files.insert(files.begin(), "report");
    files.insert(files.end(),
                 {"--expectations-dir", kFixtures + "/report", "--html", (dir / html).string()});
    const auto r = bench(files);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    return read_text(dir / html);
  };
  const std::string alone = report({a}, "a.html");
  // run_c (ch07, newer) given first: the order of the files does not matter.
  const std::string merged = report({c, a}, "merged.html");
  for (const std::string example :
       {"ch12/cuda_graphs", "ch09/fused_l2norm", "ch07/hbm_copy/mib:1024", "ch07/matmul_tiled"})
    EXPECT_NE(merged.find("class=\"speedup-row\" data-example=\"" + example + "\""),
              std::string::npos)
        << example;
  // run_a's roofline points stay (run_c's cases have flops or bytes, not both).
  EXPECT_GT(count_of(alone, "class=\"point\""), 0);
  EXPECT_EQ(count_of(merged, "class=\"point\""), count_of(alone, "class=\"point\""));
  // ch07/transpose is in both: one row set (run_c's, the newer), one history chart.
  EXPECT_EQ(count_of(merged, "data-example=\"ch07/transpose\""), 1);
  EXPECT_EQ(count_of(merged, "aria-label=\"history of "), 1);
  EXPECT_NE(merged.find("aria-label=\"history of ch07/transpose\""), std::string::npos);
  EXPECT_NE(merged.find("This page merges 2 runs"), std::string::npos);
  // With run_b too, run_a's examples have two runs each; run_c's own still none.
  const std::string three = report({a, kFixtures + "/report/h100_run_b.json", c}, "three.html");
  EXPECT_NE(three.find("aria-label=\"history of ch12/cuda_graphs\""), std::string::npos);
  EXPECT_EQ(three.find("aria-label=\"history of ch07/hbm_copy"), std::string::npos);
  fs::remove_all(dir);
}

TEST(BenchCompareFromResults, SvgWithNothingToPlaceExitsTwoAfterTheOtherReports) {
  const fs::path dir = scratch_dir("compare_svg");
  const auto r = bench({"compare", "--from-results", kFixtures + "/host_bound/results_h100.json",
                        "--expectations-dir", kFixtures + "/host_bound", "--json",
                        (dir / "report.json").string(), "--svg", (dir / "roofline.svg").string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("not written: no case of"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir / "report.json"));
  EXPECT_FALSE(fs::exists(dir / "roofline.svg"));
  fs::remove_all(dir);
}

TEST(BenchReport, TheSameFileTwiceIsRefusedWithItsName) {
  const fs::path dir = scratch_dir("report_twice");
  const std::string a = kFixtures + "/report/h100_run_a.json";
  const auto r =
      bench({"report", a, kFixtures + "/report/../report/h100_run_a.json", "--expectations-dir",
             kFixtures + "/report", "--html", (dir / "x.html").string()});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("h100_run_a.json"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("given twice"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "x.html"));
  fs::remove_all(dir);
}

// Issue 38: expectations files `validate` said ok to, each of which compare then scored into
// nonsense. validate, compare and the update read them through one parser and refuse each with
// FILE:LINE:COLUMN and the reason, exit 2.
TEST(BenchExpectations, ValidateCompareAndUpdateRefuseTheSameBadFiles) {
  const fs::path dir = scratch_dir("bad_expectations");
  const std::string entry = R"({"variants": {"baseline": {"median_us": 300.0}, "optimized": {"median_us": 100.0}},
      "speedup": 3.0, "tolerance": 0.1})";
  auto file = [&](const std::string& key, const std::string& examples) {
    return R"({"format_version": 1, "hardware_key": ")" + key + "\",\n  \"examples\": {" + examples + "}}\n";
  };
  struct Bad {
    std::string name, text, expected;
  };
  const Bad bad[] = {
      {"duplicate", file("test_gpu", "\"ch99/first\": " + entry + ",\n \"ch99/first\": " + entry),
       "test_gpu.json:4:2: at /examples: duplicate key \"ch99/first\""},
      {"negative_speedup", file("test_gpu", "\"ch99/first\": {\"variants\": {}, \"speedup\": -1, \"tolerance\": 0.1}"),
       "test_gpu.json:2:58: at /examples/ch99~1first/speedup: expected a positive number, found number -1"},
      {"negative_tolerance", file("test_gpu", "\"ch99/first\": {\"variants\": {}, \"speedup\": 2, \"tolerance\": -0.5}"),
       "test_gpu.json:2:74: at /examples/ch99~1first/tolerance: expected a relative tolerance in (0, 1) (0.10 = "
       "+-10%), found number -0.5"},
      {"zero_median", file("test_gpu", "\"ch99/first\": {\"variants\": {\"b\": {\"median_us\": 0}}, \"speedup\": 2, "
                                       "\"tolerance\": 0.1}"),
       "test_gpu.json:2:63: at /examples/ch99~1first/variants/b/median_us: expected a positive number, found number 0"},
      {"wrong_key", file("h100_80gb_hbm3", ""),
       "test_gpu.json:1:39: at /hardware_key: hardware_key \"h100_80gb_hbm3\" does not match the file's name"},
      {"unknown_example", file("test_gpu", "\"ch99/nosuch\": " + entry),
       "test_gpu.json:2:31: at /examples/ch99~1nosuch: \"ch99/nosuch\" names no example of the suite: ch99"},
  };
  for (const auto& [name, text, expected] : bad) {
    const fs::path case_dir = dir / name;
    fs::create_directories(case_dir);
    std::ofstream(case_dir / "test_gpu.json") << text;
    const std::string path = (case_dir / "test_gpu.json").string();
    const auto validate = bench({"--build-dir", FAKE_BUILD_DIR, "expectations", "validate", path});
    const auto compare = bench({"--build-dir", FAKE_BUILD_DIR, "compare", "--from-results",
                                kFixtures + "/results_clean.json", "--expectations-dir", case_dir.string()});
    const auto update = bench({"--build-dir", FAKE_BUILD_DIR, "compare", "--from-results",
                               kFixtures + "/results_clean.json", "--expectations-dir", case_dir.string(),
                               "--update-expectations"});
    for (const auto* r : {&validate, &compare, &update}) {
      EXPECT_EQ(r->exit_code, 2) << name << ": " << r->out << r->err;
      EXPECT_NE(r->err.find((case_dir / expected).string()), std::string::npos)
          << name << ": " << r->err;
    }
    EXPECT_EQ(validate.out.find("ok "), std::string::npos) << name << ": " << validate.out;
  }
  // A chapter that is not built cannot be checked: validate says so instead of passing it over.
  std::ofstream(dir / "test_gpu.json") << file("test_gpu", "\"ch99/first\": " + entry + ",\n\"ch98/other\": " + entry);
  const auto unchecked = bench({"--build-dir", FAKE_BUILD_DIR, "expectations", "validate", (dir / "test_gpu.json").string()});
  EXPECT_EQ(unchecked.exit_code, 0) << unchecked.out << unchecked.err;
  EXPECT_NE(unchecked.out.find("ok " + (dir / "test_gpu.json").string() + ": 0 ceilings, 2 examples; example keys not "
                               "checked against the suite for ch98 (ch98: not built: no "),
            std::string::npos)
      << unchecked.out;
  fs::remove_all(dir);
}

// Bad names come before the missing GPU: a machine without one is told about the typo (exit 2).
TEST(BenchCompareLive, BadNamesAreReportedBeforeTheMissingGpu) {
  if (bench::cuda_device_count() > 0) GTEST_SKIP() << "this machine has a GPU";
  const auto typo = bench({"compare", "--chapter", "ch99", "--example", "nosuch", "--build-dir", FAKE_BUILD_DIR});
  EXPECT_EQ(typo.exit_code, 2) << typo.out << typo.err;
  EXPECT_NE(typo.err.find("--example nosuch matches no example of ch99"), std::string::npos) << typo.err;
  EXPECT_EQ(typo.err.find("no CUDA device"), std::string::npos) << typo.err;
  const auto chapter = bench({"compare", "--chapter", "ch77", "--build-dir", FAKE_BUILD_DIR});
  EXPECT_EQ(chapter.exit_code, 2) << chapter.out << chapter.err;
  EXPECT_NE(chapter.err.find("ch77 is not a chapter of the suite"), std::string::npos) << chapter.err;
  const auto run = bench({"run", "--chapter", "ch77", "--build-dir", FAKE_BUILD_DIR});
  EXPECT_EQ(run.exit_code, 2) << run.out << run.err;
  EXPECT_NE(run.err.find("ch77 is not a chapter of the suite"), std::string::npos) << run.err;
}

// A results file with no results is bad input, not a clean run: compare and report exit 2.
TEST(BenchCompareFromResults, AnEmptyResultsFileIsRefused) {
  const fs::path dir = scratch_dir("empty_results");
  std::ofstream(dir / "empty.json") << R"({"benchmarks": []})";
  const auto compare = bench({"compare", "--from-results", (dir / "empty.json").string()});
  EXPECT_EQ(compare.exit_code, 2) << compare.out << compare.err;
  EXPECT_NE(compare.err.find("empty.json: holds no results"), std::string::npos) << compare.err;
  const auto report = bench({"report", (dir / "empty.json").string(), "--html", (dir / "x.html").string()});
  EXPECT_EQ(report.exit_code, 2) << report.out << report.err;
  EXPECT_NE(report.err.find("empty.json: holds no results"), std::string::npos) << report.err;
  EXPECT_FALSE(fs::exists(dir / "x.html"));
  fs::remove_all(dir);
}

// docs/expectations.md, "Recorded outcomes": an honest NO_SPEEDUP and an optimized side skipped
// by design are recordable, and a run that repeats them scores them as recorded.
TEST(BenchCompareFromResults, RecordedOutcomesAreWrittenByTheUpdateAndHonouredByScoring) {
  const fs::path dir = scratch_dir("recorded");
  // ch90/aa_example is an A/A pair (NO_SPEEDUP); ch90/ragged_example's optimized side is
  // skipped by a requirement while its baseline ran clean.
  nlohmann::json results = read_json(kFixtures + "/results_every_status.json");
  nlohmann::json kept = nlohmann::json::array();
  const std::string skip = "needs m % 256 == 0 (the wgmma tile)";
  for (const auto& row : results["benchmarks"]) {
    const std::string name = row["name"];
    if (name.rfind("ch90/aa_example/", 0) != 0) continue;
    kept.push_back(row);
    nlohmann::json ragged = row;
    const std::string renamed = "ch90/ragged_example/" + name.substr(16);
    ragged["name"] = ragged["run_name"] = renamed;
    if (ragged.contains("bench_samples")) ragged["bench_samples"]["name"] = "ch90/ragged_example/" +
                                                                              name.substr(16, name.find('/', 16) - 16);
    if (name.find("/optimized/") != std::string::npos)
      ragged = {{"name", renamed},         {"run_name", renamed},          {"run_type", "iteration"},
                {"repetitions", 1},        {"repetition_index", 0},        {"threads", 1},
                {"iterations", 1},         {"time_unit", "us"},            {"error_occurred", true},
                {"error_message", "SKIPPED: " + skip}, {"real_time", 0},   {"cpu_time", 0}};
    kept.push_back(ragged);
  }
  results["benchmarks"] = kept;
  results.erase("crashes");
  std::ofstream(dir / "results.json") << results.dump(1);

  // Without --record-outcome both are refused, and the refusal says how to record them.
  const auto refused = bench({"compare", "--from-results", (dir / "results.json").string(), "--expectations-dir",
                              dir.string(), "--update-expectations"});
  EXPECT_EQ(refused.exit_code, 0) << refused.out << refused.err;
  EXPECT_NE(refused.out.find("refused ch90/aa_example: NO_SPEEDUP: optimized is not clearly faster (--record-outcome"),
            std::string::npos)
      << refused.out;
  EXPECT_NE(refused.out.find("refused ch90/ragged_example: SKIPPED"), std::string::npos) << refused.out;
  EXPECT_FALSE(fs::exists(dir / "test_gpu.json"));

  const auto recorded = bench({"compare", "--from-results", (dir / "results.json").string(), "--expectations-dir",
                               dir.string(), "--update-expectations", "--record-outcome", "aa_example,ragged_example"});
  EXPECT_EQ(recorded.exit_code, 0) << recorded.out << recorded.err;
  EXPECT_NE(recorded.out.find("2 example(s) accepted"), std::string::npos) << recorded.out;
  const auto written = read_json(dir / "test_gpu.json")["examples"];
  EXPECT_EQ(written["ch90/aa_example"]["expected_status"], "no_speedup") << written.dump(1);
  EXPECT_TRUE(written["ch90/aa_example"].contains("speedup"));
  EXPECT_EQ(written["ch90/ragged_example"]["expected_status"], "skipped") << written.dump(1);
  EXPECT_EQ(written["ch90/ragged_example"]["reason"], skip);
  EXPECT_FALSE(written["ch90/ragged_example"].contains("speedup"));
  EXPECT_TRUE(written["ch90/ragged_example"]["variants"].contains("baseline"));

  // The next run: both as recorded (the table and the report say so), still exit 0; the file validates.
  const auto rerun = bench({"compare", "--from-results", (dir / "results.json").string(), "--expectations-dir",
                            dir.string(), "--json", (dir / "report.json").string()});
  EXPECT_EQ(rerun.exit_code, 0) << rerun.out << rerun.err;
  EXPECT_NE(rerun.out.find("NO_SPEEDUP (recorded)"), std::string::npos) << rerun.out;
  EXPECT_NE(rerun.out.find("SKIPPED (recorded)"), std::string::npos) << rerun.out;
  for (const auto& row : read_json(dir / "report.json")["rows"])
    EXPECT_TRUE(row.value("as_recorded", false)) << row.dump();
  const auto validate = bench({"expectations", "validate", (dir / "test_gpu.json").string()});
  EXPECT_EQ(validate.exit_code, 0) << validate.out << validate.err;

  // A skip for another reason is not the recorded one.
  std::string text = results.dump(1);
  text.replace(text.find(skip), skip.size(), "requires 2 GPUs");
  std::ofstream(dir / "other.json") << text;
  const auto other = bench({"compare", "--from-results", (dir / "other.json").string(), "--expectations-dir",
                            dir.string()});
  EXPECT_NE(other.out.find("recorded skip reason was: " + skip), std::string::npos) << other.out;
  EXPECT_EQ(other.out.find("SKIPPED (recorded)"), std::string::npos) << other.out;

  // A whole example skipped (its baseline too: ch03/numa_affinity on a one-node machine) is not
  // recordable, and its refusal does not suggest --record-outcome.
  nlohmann::json whole = results;
  for (auto& row : whole["benchmarks"]) {
    const std::string name = row["name"];
    if (name.rfind("ch90/ragged_example/baseline/", 0) != 0) continue;
    row = {{"name", name},
           {"run_name", name},
           {"run_type", "iteration"},
           {"repetitions", 1},
           {"repetition_index", 0},
           {"threads", 1},
           {"iterations", 1},
           {"time_unit", "us"},
           {"error_occurred", true},
           {"error_message", "SKIPPED: one NUMA node"},
           {"real_time", 0},
           {"cpu_time", 0}};
  }
  const fs::path whole_dir = scratch_dir("recorded_whole");
  std::ofstream(whole_dir / "results.json") << whole.dump(1);
  const auto whole_run = bench({"compare", "--from-results", (whole_dir / "results.json").string(),
                                "--expectations-dir", whole_dir.string(), "--update-expectations",
                                "--record-outcome", "ragged_example"});
  EXPECT_EQ(whole_run.exit_code, 0) << whole_run.out << whole_run.err;
  EXPECT_NE(whole_run.out.find("refused ch90/ragged_example: SKIPPED"), std::string::npos)
      << whole_run.out;
  EXPECT_NE(whole_run.out.find("the baseline did not run either"), std::string::npos)
      << whole_run.out;
  EXPECT_EQ(whole_run.out.find("--record-outcome ch90/ragged_example records it"),
            std::string::npos)
      << whole_run.out;
  EXPECT_FALSE(fs::exists(whole_dir / "test_gpu.json"));
  fs::remove_all(whole_dir);
  fs::remove_all(dir);
}

// docs/expectations.md, "Scored by a metric": saved results of an example scored by a metric are
// scored by its per-sample values (the row names it), recorded with it by the update, and a file
// whose entry records another metric is refused by the next update, naming where.
TEST(BenchCompareFromResults, AnExampleScoredByAMetricIsScoredRecordedAndCheckedByIt) {
  const fs::path dir = scratch_dir("scored_metric");
  auto row = [](const std::string& variant, double latency_us) {
    nlohmann::json samples = nlohmann::json::array(), values = nlohmann::json::array();
    for (int i = 0; i < 40; ++i) {
      samples.push_back(900.0 * (1 + 0.001 * (i % 5)));  // the same time on both sides
      values.push_back(latency_us * (1 + 0.002 * (i % 5)));
    }
    const std::string name = "ch90/interference/" + variant;
    return nlohmann::json{
        {"name", name + "/iterations:1/manual_time"},
        {"run_type", "iteration"},
        {"iterations", 1},
        {"real_time", 900},
        {"time_unit", "us"},
        {"noise", 0.002},
        {"samples", 40},
        {"verified", 1},
        {"p99_decode_latency_us", latency_us},
        {"label", "role=" + variant +
                      ";fp=00000000000000aa;mode=cold;stop=converged;"
                      "scored_by=p99_decode_latency_us:lower;metrics=p99_decode_latency_us"},
        {"bench_samples",
         {{"name", name},
          {"samples", samples},
          {"input_seed", variant == "baseline" ? 1 : 2},
          {"scored_metric",
           {{"name", "p99_decode_latency_us"}, {"better", "lower"}, {"samples", values}}}}}};
  };
  const nlohmann::json results = {
      {"context", {{"hardware_key", "test_gpu"}, {"gpu_name", "Test GPU"}}},
      {"benchmarks", {row("baseline", 462), row("optimized", 200)}}};
  std::ofstream(dir / "results.json") << results.dump(1);
  const auto update = bench({"compare", "--from-results", (dir / "results.json").string(),
                             "--expectations-dir", dir.string(), "--update-expectations"});
  EXPECT_EQ(update.exit_code, 0) << update.out << update.err;
  EXPECT_NE(update.out.find("p99_decode_latency_us 2.31x ["), std::string::npos) << update.out;
  const auto written = read_json(dir / "test_gpu.json")["examples"]["ch90/interference"];
  EXPECT_EQ(written["metric"]["name"], "p99_decode_latency_us") << written.dump(1);
  EXPECT_EQ(written["metric"]["better"], "lower");
  EXPECT_NEAR(written["speedup"].get<double>(), 2.31, 0.01);

  const auto rerun = bench({"compare", "--from-results", (dir / "results.json").string(),
                            "--expectations-dir", dir.string()});
  EXPECT_EQ(rerun.exit_code, 0) << rerun.out << rerun.err;
  EXPECT_NE(rerun.out.find("PASS"), std::string::npos) << rerun.out;

  // The entry edited to another metric: compare fails the pair, the update refuses the file.
  std::string text;
  {
    std::ifstream in(dir / "test_gpu.json");
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  text.replace(text.find("\"p99_decode_latency_us\""), 23, "\"p50_decode_latency_us\"");
  std::ofstream(dir / "test_gpu.json") << text;
  const auto other = bench({"compare", "--from-results", (dir / "results.json").string(),
                            "--expectations-dir", dir.string(), "--update-expectations"});
  EXPECT_EQ(other.exit_code, 1) << other.out << other.err;
  EXPECT_NE(
      other.out.find(
          "records a speedup of p50_decode_latency_us (lower is better), but the example is scored "
          "by p99_decode_latency_us"),
      std::string::npos)
      << other.out;
  EXPECT_NE(other.err.find((dir / "test_gpu.json").string() + ":"), std::string::npos) << other.err;
  EXPECT_NE(other.err.find("at /examples/ch90~1interference/metric: the entry records a speedup of "
                           "p50_decode_latency_us"),
            std::string::npos)
      << other.err;
  fs::remove_all(dir);
}

}  // namespace

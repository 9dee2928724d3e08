// The real `bench` executable on saved fixtures and on a fake chapter binary: the table, the
// JSON report and the exit code, as a user would see them.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

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
// refused as compare refuses it.
TEST(BenchRun, AnExampleListBecomesOneFilterAndAnUnknownNameIsRefused) {
  const auto r = bench({"run", "--chapter", "ch99", "--example", "first,ch99/last", "--variant",
                        "optimized", "--build-dir", FAKE_BUILD_DIR});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("filter ^(ch99/first|ch99/last)/optimized(/|$)"), std::string::npos)
      << r.out;
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
                        kFixtures + "/host_bound", "--html", (dir / "report.html").string(), "--svg",
                        (dir / "roofline.svg").string()});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  std::ifstream in(dir / "report.html");
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("class=\"speedup-row\" data-example=\"ch12/cuda_graphs\" data-status=\"PASS\""), std::string::npos);
  // Neither example's cost model has both flops and bytes: the page says so instead of plotting.
  EXPECT_NE(html.find("Not on the roofline"), std::string::npos);
  EXPECT_NE(html.find("ch07/transpose/optimized"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "roofline.svg"));
  const auto bad = bench({"report", (dir / "missing.json").string(), "--html", (dir / "x.html").string()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("missing.json"), std::string::npos) << bad.err;
  fs::remove_all(dir);
}

}  // namespace

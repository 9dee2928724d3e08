// --bench_timeline on a real chapter: ch12/cuda_graphs/optimized replays a CUDA graph of a chain
// of small kernels, so each traced call must list every graph-launched kernel with its own
// record, start-sorted, from the call's first start. And without CUPTI the case fails, saying so.
// (tools/timeline.cpp's table is tested without a GPU: tests/unit/timeline_test.cpp.)
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

namespace {

namespace fs = std::filesystem;

const std::string kCase = "ch12/cuda_graphs/optimized";

struct TimelineRun {
  int status = -1;
  nlohmann::json row;       // the case's Google Benchmark row
  nlohmann::json timeline;  // what --bench_timeline wrote; null if nothing
  std::string log;
};

TimelineRun run_ch12(const std::string& environment) {
  const fs::path dir =
      fs::temp_directory_path() / ("bench_timeline_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path timeline = dir / "t.json", results = dir / "r.json", log = dir / "log";
  fs::remove(timeline);
  const std::string command = environment + " '" + BENCH_CH12 + "' '--benchmark_filter=^" + kCase +
                              "(/|$)' --bench_timeline=" + timeline.string() +
                              " --benchmark_out=" + results.string() + " > " + log.string() +
                              " 2>&1";
  TimelineRun r;
  r.status = std::system(command.c_str());
  std::ifstream log_in(log);
  r.log.assign(std::istreambuf_iterator<char>(log_in), {});
  if (std::ifstream in(results); in) {
    const auto out = nlohmann::json::parse(in, nullptr, false);
    if (out.is_object() && out.contains("benchmarks") && !out["benchmarks"].empty())
      r.row = out["benchmarks"][0];
  }
  if (std::ifstream in(timeline); in) r.timeline = nlohmann::json::parse(in, nullptr, false);
  fs::remove_all(dir);
  return r;
}

TEST(TimelineGpu, GraphKernelsOfEachTracedCallAreListedStartSorted) {
  const TimelineRun r = run_ch12("");
  ASSERT_EQ(r.status, 0) << r.log;
  ASSERT_TRUE(r.row.is_object()) << r.log;
  ASSERT_FALSE(r.row.value("error_occurred", false)) << r.row.dump(1) << r.log;
  EXPECT_NE(r.row.value("label", "").find("mode=timeline"), std::string::npos) << r.row.dump(1);
  EXPECT_EQ(r.row.value("real_time", -1.0), 0) << "a timeline run is not a measurement";
  ASSERT_TRUE(r.timeline.is_object()) << r.log;
  EXPECT_EQ(r.timeline.value("case", ""), kCase);
  EXPECT_FALSE(r.timeline.value("gpu_name", "").empty());
  const int calls = r.timeline.value("calls", 0);
  EXPECT_EQ(calls, 5);
  const auto& traced = r.timeline["traced_calls"];
  ASSERT_EQ(static_cast<int>(traced.size()), calls) << r.timeline.dump(1);
  std::size_t first_kernels = 0;
  for (std::size_t c = 0; c < traced.size(); ++c) {
    std::size_t kernels = 0;
    long long previous = 0;
    for (const auto& a : traced[c]) {
      const long long start = a.at("start_ns"), duration = a.at("duration_ns");
      EXPECT_GE(start, previous) << "call " << c << ": not start-sorted: " << a.dump();
      EXPECT_GE(duration, 0) << a.dump();
      EXPECT_EQ(a.value("what", "").find("trace_marker"), std::string::npos)
          << "a marker was listed";
      previous = start;
      kernels += a.value("kind", "") == "kernel";
    }
    ASSERT_FALSE(traced[c].empty());
    EXPECT_EQ(traced[c][0].value("start_ns", -1), 0) << "offsets are from the call's first start";
    // One graph launch, yet every node's kernel has its own record, the same in every call.
    EXPECT_GE(kernels, 2u) << "call " << c;
    if (c == 0) first_kernels = kernels;
    EXPECT_EQ(kernels, first_kernels) << "call " << c;
  }
}

TEST(TimelineGpu, WithoutCuptiTheCaseFailsSayingWhy) {
  const TimelineRun r = run_ch12("BENCH_NO_CUPTI=1");
  ASSERT_TRUE(r.row.is_object()) << r.log;
  EXPECT_TRUE(r.row.value("error_occurred", false)) << r.row.dump(1);
  const std::string message = r.row.value("error_message", "");
  EXPECT_NE(message.find("CUPTI"), std::string::npos) << message;
  EXPECT_NE(message.find("BENCH_NO_CUPTI is set"), std::string::npos) << message;
  EXPECT_TRUE(r.timeline.is_null()) << "a failed case wrote a timeline";
}

}  // namespace

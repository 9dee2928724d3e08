// The chapter binaries' display reporter: Google Benchmark's default one (console, JSON or CSV as
// --benchmark_format says, colours as --benchmark_color says), except for one line of the context
// it prints first. Debian and Ubuntu build the library without NDEBUG, so its context ends with
// "***WARNING*** Library was built as DEBUG. Timings may be affected." on every run. Here Google
// Benchmark only runs the cases: the Runner times every sample with CUDA events and hands
// Google Benchmark the median (UseManualTime), so that line is replaced by one saying so.
//
// Only the display reporter is wrapped: the --benchmark_out file (JSON) is written by the
// library's own file reporter, unchanged (its "library_build_type" field included).
#pragma once

#include <benchmark/benchmark.h>

#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bench::detail {

// Printed by BenchmarkReporter::PrintBasicContext (src/reporter.cc) when the library was built
// without NDEBUG; the same sentence in Google Benchmark 1.7 to 1.9.
inline constexpr std::string_view kGbenchDebugWarning =
    "***WARNING*** Library was built as DEBUG. Timings may be affected.";
inline constexpr std::string_view kGbenchDebugNote =
    "note: Google Benchmark is only the case runner here; cudabench times with CUDA events, so its "
    "DEBUG build does not affect the figures";

// `text` with each line that is Google Benchmark's debug warning replaced by the note.
inline std::string replace_gbench_debug_warning(std::string_view text) {
  std::string out;
  while (!text.empty()) {
    const std::size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    out += line == kGbenchDebugWarning ? kGbenchDebugNote : line;
    if (end == std::string_view::npos) break;
    out += '\n';
    text.remove_prefix(end + 1);
  }
  return out;
}

// Forwards everything to `inner`; the context, which every built-in reporter prints to its error
// stream, goes through replace_gbench_debug_warning on the way.
class DisplayReporter final : public benchmark::BenchmarkReporter {
 public:
  explicit DisplayReporter(std::unique_ptr<benchmark::BenchmarkReporter> inner)
      : inner_(std::move(inner)) {}

  bool ReportContext(const Context& context) override {
    std::ostream& err = inner_->GetErrorStream();
    std::ostringstream captured;
    inner_->SetErrorStream(&captured);
    const bool go_on = inner_->ReportContext(context);
    inner_->SetErrorStream(&err);
    err << replace_gbench_debug_warning(captured.str()) << std::flush;
    return go_on;
  }
  // ReportRunsConfig (Google Benchmark 1.8+) is not forwarded: no built-in reporter uses it.
  void ReportRuns(const std::vector<Run>& runs) override { inner_->ReportRuns(runs); }
  void Finalize() override { inner_->Finalize(); }

 private:
  std::unique_ptr<benchmark::BenchmarkReporter> inner_;
};

// The reporter RunSpecifiedBenchmarks() would have made, wrapped. CreateDefaultDisplayReporter
// hands over ownership, as RunSpecifiedBenchmarks(nullptr) itself assumes: call this once, and
// never with RunSpecifiedBenchmarks() in the same process.
inline std::unique_ptr<benchmark::BenchmarkReporter> make_display_reporter() {
  return std::make_unique<DisplayReporter>(
      std::unique_ptr<benchmark::BenchmarkReporter>(benchmark::CreateDefaultDisplayReporter()));
}

}  // namespace bench::detail

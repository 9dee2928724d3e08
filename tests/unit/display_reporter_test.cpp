// harness/src/display_reporter.hpp: the chapter binaries' display reporter replaces Google
// Benchmark's "built as DEBUG" warning by one note, and changes nothing else.
#include "display_reporter.hpp"

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace {

using bench::detail::DisplayReporter;
using bench::detail::kGbenchDebugNote;
using bench::detail::kGbenchDebugWarning;
using bench::detail::replace_gbench_debug_warning;

TEST(DisplayReporter, ReplacesOnlyTheDebugWarningLine) {
  const std::string warning(kGbenchDebugWarning);
  const std::string text = "Run on (2 X 3000 MHz CPU s)\ngpu_name: NVIDIA H100\n" + warning + "\n";
  EXPECT_EQ(replace_gbench_debug_warning(text),
            "Run on (2 X 3000 MHz CPU s)\ngpu_name: NVIDIA H100\n" + std::string(kGbenchDebugNote) + "\n");
  EXPECT_EQ(replace_gbench_debug_warning("a\nb"), "a\nb");
  EXPECT_EQ(replace_gbench_debug_warning(""), "");
  // A line that merely mentions it is someone else's text: kept.
  EXPECT_EQ(replace_gbench_debug_warning("x " + warning + "\n"), "x " + warning + "\n");
}

// The console reporter prints its context to the error stream: the wrapped one prints the same
// lines, the note in place of the warning when this library has it, and restores the stream.
TEST(DisplayReporter, ConsoleContextHasTheNoteNotTheWarning) {
  benchmark::BenchmarkReporter::Context context;

  std::ostringstream plain_out, plain_err;
  benchmark::ConsoleReporter plain(benchmark::ConsoleReporter::OO_None);
  plain.SetOutputStream(&plain_out);
  plain.SetErrorStream(&plain_err);
  ASSERT_TRUE(plain.ReportContext(context));
  const bool debug_library = plain_err.str().find(kGbenchDebugWarning) != std::string::npos;

  std::ostringstream out, err;
  auto inner = std::make_unique<benchmark::ConsoleReporter>(benchmark::ConsoleReporter::OO_None);
  inner->SetOutputStream(&out);
  inner->SetErrorStream(&err);
  auto* inner_ptr = inner.get();
  DisplayReporter display(std::move(inner));
  ASSERT_TRUE(display.ReportContext(context));

  EXPECT_EQ(&inner_ptr->GetErrorStream(), &err);
  EXPECT_NE(err.str().find("Run on ("), std::string::npos) << err.str();
  EXPECT_EQ(err.str().find("***WARNING*** Library was built as DEBUG"), std::string::npos) << err.str();
  EXPECT_EQ(err.str().find(kGbenchDebugNote) != std::string::npos, debug_library) << err.str();
  // Everything but the first line (the date, which may have ticked over) is as the plain one's.
  auto after_date = [](const std::string& s) { return s.substr(s.find('\n') + 1); };
  EXPECT_EQ(after_date(err.str()), after_date(replace_gbench_debug_warning(plain_err.str())));
}

// --benchmark_format=json as the display: the JSON still parses and keeps library_build_type.
TEST(DisplayReporter, JsonDisplayUnchanged) {
  benchmark::BenchmarkReporter::Context context;
  std::ostringstream out, err;
  auto inner = std::make_unique<benchmark::JSONReporter>();
  inner->SetOutputStream(&out);
  inner->SetErrorStream(&err);
  DisplayReporter display(std::move(inner));
  ASSERT_TRUE(display.ReportContext(context));
  display.Finalize();
  const auto json = nlohmann::json::parse(out.str());
  EXPECT_TRUE(json["context"].contains("library_build_type")) << out.str();
  EXPECT_TRUE(json["benchmarks"].is_array());
}

}  // namespace

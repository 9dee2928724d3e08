// harness/src/expectations.cpp: strict parsing with positions, atomic saves, ceilings updates,
// diffs (VALIDITY row 17).
#include "bench/expectations.hpp"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "expectations_write.hpp"

namespace {

namespace fs = std::filesystem;

const char* kValid = R"({
  "format_version": 1,
  "hardware_key": "test_gpu",
  "ceilings": {"hbm_copy_gbps": {"value": 3000.0, "unit": "GB/s", "noise": 0.005}},
  "examples": {
    "ch07/copy": {"variants": {"baseline": {"median_us": 300.0, "noise": 0.01},
                               "optimized": {"median_us": 100.0, "noise": 0.01}},
                  "speedup": 3.0, "tolerance": 0.1}
  }
})";

std::string error_of(const std::string& text) {
  try {
    bench::parse_expectations(text, "dir/test_gpu.json");
  } catch (const bench::ExpectationsError& e) {
    return e.what();
  }
  return "no error";
}

struct ScratchDir {
  fs::path path = fs::temp_directory_path() / ("expectations_test_" + std::to_string(::getpid()));
  ScratchDir() { fs::create_directories(path); }
  ~ScratchDir() { fs::remove_all(path); }
};

TEST(Expectations, ParsesAValidFile) {
  const auto x = bench::parse_expectations(kValid, "x.json");
  EXPECT_EQ(x.hardware_key, "test_gpu");
  EXPECT_DOUBLE_EQ(x.ceilings.at("hbm_copy_gbps").value, 3000.0);
  EXPECT_DOUBLE_EQ(x.examples.at("ch07/copy").speedup, 3.0);
  EXPECT_DOUBLE_EQ(x.examples.at("ch07/copy").variants.at("optimized").median_us, 100.0);
}

TEST(Expectations, TruncatedFileNamesFileAndLine) {
  const std::string text = std::string(kValid).substr(0, 200);
  const std::string message = error_of(text);
  EXPECT_NE(message.find("dir/test_gpu.json:"), std::string::npos) << message;
  EXPECT_NE(message.find("not valid JSON"), std::string::npos) << message;
}

TEST(Expectations, WrongTypeNamesLineColumnAndExpectation) {
  std::string text = kValid;
  text.replace(text.find("\"speedup\": 3.0"), 14, "\"speedup\": \"3\"");
  const std::string message = error_of(text);
  EXPECT_NE(message.find("dir/test_gpu.json:8:"), std::string::npos) << message;
  EXPECT_NE(message.find("expected a number, found string"), std::string::npos) << message;
}

TEST(Expectations, UnknownKeyNamesItsLine) {
  std::string text = kValid;
  text.replace(text.find("\"tolerance\""), 11, "\"tolerence\"");
  const std::string message = error_of(text);
  EXPECT_NE(message.find("dir/test_gpu.json:8:"), std::string::npos) << message;
  EXPECT_NE(message.find("unknown key \"tolerence\""), std::string::npos) << message;
}

TEST(Expectations, MissingRequiredKeyAndWrongVersionAreRejected) {
  std::string text = kValid;
  text.replace(text.find("\"speedup\": 3.0, "), 16, "");
  EXPECT_NE(error_of(text).find("missing required key \"speedup\""), std::string::npos);
  text = kValid;
  text.replace(text.find("\"format_version\": 1"), 19, "\"format_version\": 2");
  EXPECT_NE(error_of(text).find("unsupported format_version"), std::string::npos);
}

TEST(Expectations, SaveIsAtomicAndRoundTrips) {
  ScratchDir dir;
  const fs::path file = dir.path / "test_gpu.json";
  const auto x = bench::parse_expectations(kValid, "x.json");
  bench::save_expectations(file, x);
  bench::save_expectations(file, x);
  EXPECT_EQ(bench::serialize_expectations(*bench::load_expectations(file)), bench::serialize_expectations(x));
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path)) ++entries;
  EXPECT_EQ(entries, 1) << "no temporary file may be left behind";
}

TEST(Expectations, TwoCeilingUpdatesInARowKeepEverythingElse) {
  ScratchDir dir;
  const fs::path file = dir.path / "test_gpu.json";
  bench::save_expectations(file, bench::parse_expectations(kValid, "x.json"));
  bench::update_ceilings(file, {{"l2_gbps", {9000.0, "GB/s", 0.01, "l2 read", "2025-01-02"}}});
  bench::update_ceilings(file, {{"bf16_tflops", {801.0, "TFLOP/s", 0.01, "cublasLt", "2025-01-03"}}});
  const auto x = *bench::load_expectations(file);
  EXPECT_EQ(x.ceilings.size(), 3u);
  EXPECT_DOUBLE_EQ(x.ceilings.at("hbm_copy_gbps").value, 3000.0);
  EXPECT_DOUBLE_EQ(x.examples.at("ch07/copy").speedup, 3.0);
  EXPECT_DOUBLE_EQ(bench::load_ceilings(dir.path, "test_gpu").at("bf16_tflops"), 801.0);
}

TEST(Expectations, MissingFileIsNoExpectationsNotAnError) {
  EXPECT_FALSE(bench::load_expectations("/nonexistent/x.json").has_value());
  EXPECT_TRUE(bench::load_ceilings("/nonexistent", "x").empty());
}

TEST(Expectations, DiffListsAddedChangedAndRemovedEntries) {
  const auto before = bench::parse_expectations(kValid, "x.json");
  auto after = before;
  after.examples["ch07/copy"].speedup = 3.2;
  after.ceilings.erase("hbm_copy_gbps");
  after.ceilings["l2_gbps"] = {9000.0, "GB/s"};
  const auto lines = bench::diff_expectations(before, after);
  auto has = [&](const std::string& prefix) {
    return std::any_of(lines.begin(), lines.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
  };
  EXPECT_TRUE(has("~ examples.ch07/copy.speedup: 3.0 -> 3.2"));
  EXPECT_TRUE(has("+ ceilings.l2_gbps.value"));
  EXPECT_TRUE(has("- ceilings.hbm_copy_gbps.value"));
}

// Issue 38: files `validate` said ok to, each of which `compare` scored into nonsense.
TEST(Expectations, ADuplicateKeyIsRefusedAtItsSecondPosition) {
  std::string text = kValid;
  text.replace(text.find("\"speedup\": 3.0"), 14, "\"speedup\": 3.0, \"speedup\": 6.9");
  const std::string message = error_of(text);
  EXPECT_NE(message.find("dir/test_gpu.json:8:35: at /examples/ch07~1copy: duplicate key \"speedup\" "
                         "(first at line 8, column 19)"),
            std::string::npos)
      << message;
  // Two example entries of one name: the first would be silently dropped.
  text = kValid;
  text.replace(text.find("\"ch07/copy\""), 11, "\"ch07/copy\": {}, \"ch07/copy\"");
  EXPECT_NE(error_of(text).find("dir/test_gpu.json:6:22: at /examples: duplicate key \"ch07/copy\" (first at line 6, column 5)"), std::string::npos)
      << error_of(text);
}

TEST(Expectations, ANumberOutsideItsRangeIsRefused) {
  const std::pair<std::string, std::string> cases[] = {
      {"\"speedup\": 3.0", "\"speedup\": -1"},
      {"\"tolerance\": 0.1", "\"tolerance\": -0.5"},
      {"\"tolerance\": 0.1", "\"tolerance\": 1.5"},
      {"\"median_us\": 300.0", "\"median_us\": 0"},
      {"\"noise\": 0.01", "\"noise\": -0.01"},
      {"\"value\": 3000.0", "\"value\": 0"},
  };
  for (const auto& [from, to] : cases) {
    std::string text = kValid;
    text.replace(text.find(from), from.size(), to);
    const std::string message = error_of(text);
    EXPECT_NE(message.find("dir/test_gpu.json:"), std::string::npos) << to << ": " << message;
    EXPECT_NE(message.find(", found number " + to.substr(to.find(": ") + 2)), std::string::npos) << to << ": " << message;
    EXPECT_TRUE(message.find("expected a positive number") != std::string::npos ||
                message.find("expected a relative") != std::string::npos)
        << to << ": " << message;
  }
  std::string text = kValid;
  text.replace(text.find("\"speedup\": 3.0"), 14, "\"speedup\": -1");
  EXPECT_NE(error_of(text).find(":8:30: at /examples/ch07~1copy/speedup: expected a positive number, found number -1"),
            std::string::npos)
      << error_of(text);
}

TEST(Expectations, AFileWhoseNameIsNotItsHardwareKeyIsRefused) {
  ScratchDir dir;
  std::ofstream(dir.path / "h200.json") << std::string(kValid);  // holds "test_gpu"
  try {
    bench::load_expectations(dir.path / "h200.json");
    ADD_FAILURE() << "h200.json holding hardware_key test_gpu was read";
  } catch (const bench::ExpectationsError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("h200.json:3:19: at /hardware_key: hardware_key \"test_gpu\" does not match the file's "
                           "name (h200.json)"),
              std::string::npos)
        << message;
  }
  std::ofstream(dir.path / "test_gpu.json") << std::string(kValid);
  EXPECT_TRUE(bench::load_expectations(dir.path / "test_gpu.json").has_value());
}

TEST(Expectations, KeysOfAnExampleWithAxesNameTheirPoint) {
  std::string text = kValid;
  text.replace(text.find("\"ch07/copy\""), 11, "\"ch07/copy/mib:1024/causal:1\"");
  EXPECT_TRUE(bench::parse_expectations(text, "test_gpu.json").examples.count("ch07/copy/mib:1024/causal:1"));
  text.replace(text.find("\"ch07/copy/mib:1024/causal:1\""), 29, "\"ch07/copy/mib=1024\"");
  EXPECT_NE(error_of(text).find("is not of the form chNN/name[/axis:value...]"), std::string::npos) << error_of(text);
}

// Every file the suite ships parses under the rules above (the example keys are checked against
// the built chapters by the tools, not here).
TEST(Expectations, TheRepositorysFilesAreValid) {
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(BENCH_EXPECTATIONS_DIR)) {
    if (entry.path().extension() != ".json") continue;
    ++files;
    EXPECT_NO_THROW(bench::load_expectations(entry.path())) << entry.path();
  }
  EXPECT_GE(files, 3);
}

TEST(Expectations, AnExampleKeyMustNameAnExample) {
  std::string text = kValid;
  text.replace(text.find("\"ch07/copy\""), 11, "\"copy\"");
  EXPECT_NE(error_of(text).find("dir/test_gpu.json:6:13: at /examples/copy: example key \"copy\" is not of the form chNN/name"),
            std::string::npos)
      << error_of(text);
  // What the suite knows is the tools' to say (ExampleCatalog); the error is placed at the key.
  const bench::ExampleCheck check = [](const std::string& example) {
    return example == "ch07/copy" ? std::string("no such example") : std::string();
  };
  try {
    bench::parse_expectations(kValid, "dir/test_gpu.json", {"", check});
    ADD_FAILURE() << "an unknown example was read";
  } catch (const bench::ExpectationsError& e) {
    EXPECT_NE(std::string(e.what()).find("dir/test_gpu.json:6:18: at /examples/ch07~1copy: no such example"),
              std::string::npos)
        << e.what();
  }
}

// docs/expectations.md, "Recorded outcomes".
TEST(Expectations, ARecordedOutcomeIsReadStrictlyAndRoundTrips) {
  std::string text = kValid;
  text.replace(text.find("\"speedup\": 3.0"), 14,
               "\"expected_status\": \"no_speedup\", \"reason\": \"loads already hidden\", \"speedup\": 1.0");
  auto x = bench::parse_expectations(text, "x.json");
  EXPECT_EQ(x.examples.at("ch07/copy").expected_status, "no_speedup");
  EXPECT_EQ(x.examples.at("ch07/copy").reason, "loads already hidden");
  EXPECT_EQ(bench::serialize_expectations(bench::parse_expectations(bench::serialize_expectations(x), "y.json")),
            bench::serialize_expectations(x));

  const char* skipped = R"({"format_version": 1, "hardware_key": "test_gpu", "examples": {
    "ch09/ragged": {"expected_status": "skipped", "reason": "needs m % 256 == 0",
                    "variants": {"baseline": {"median_us": 300.0, "noise": 0.01}}}}})";
  x = bench::parse_expectations(skipped, "x.json");
  EXPECT_EQ(x.examples.at("ch09/ragged").expected_status, "skipped");
  const std::string written = bench::serialize_expectations(x);
  EXPECT_EQ(written.find("\"speedup\""), std::string::npos) << written;
  EXPECT_EQ(bench::serialize_expectations(bench::parse_expectations(written, "y.json")), written);

  // Strict: an unknown status, a missing reason, a speedup for a side that never runs.
  text = kValid;
  text.replace(text.find("\"speedup\": 3.0"), 14, "\"expected_status\": \"slow\", \"reason\": \"r\", \"speedup\": 1.0");
  EXPECT_NE(error_of(text).find("expected \"no_speedup\" or \"skipped\", found \"slow\""), std::string::npos)
      << error_of(text);
  text = kValid;
  text.replace(text.find("\"speedup\": 3.0"), 14, "\"expected_status\": \"no_speedup\", \"speedup\": 1.0");
  EXPECT_NE(error_of(text).find("missing required key \"reason\""), std::string::npos) << error_of(text);
  text = kValid;
  text.replace(text.find("\"speedup\": 3.0"), 14, "\"expected_status\": \"skipped\", \"reason\": \"r\", \"speedup\": 1.0");
  EXPECT_NE(error_of(text).find("unknown key \"speedup\""), std::string::npos) << error_of(text);
}

// docs/expectations.md, "Scored by a metric": the entry names the metric its speedup is a ratio
// of, read strictly, and a check that knows the example's declaration refuses another, at its
// position.
TEST(Expectations, AScoredMetricIsReadStrictlyAndCheckedAgainstTheDeclaration) {
  std::string text = kValid;
  text.replace(text.find("\"speedup\": 3.0"), 14,
               "\"metric\": {\"name\": \"p99_us\", \"better\": \"lower\"}, \"speedup\": 2.5");
  auto x = bench::parse_expectations(text, "x.json");
  ASSERT_TRUE(x.examples.at("ch07/copy").metric);
  EXPECT_EQ(*x.examples.at("ch07/copy").metric, (bench::ScoredMetric{"p99_us", "lower"}));
  EXPECT_EQ(bench::serialize_expectations(
                bench::parse_expectations(bench::serialize_expectations(x), "y.json")),
            bench::serialize_expectations(x));
  EXPECT_FALSE(
      bench::parse_expectations(kValid, "x.json").examples.at("ch07/copy").metric);  // older files:
                                                                                     // time

  std::string bad = text;
  bad.replace(bad.find("\"lower\""), 7, "\"less\"");
  EXPECT_NE(
      error_of(bad).find(
          "dir/test_gpu.json:8:58: at /examples/ch07~1copy/metric/better: expected \"lower\" or "
          "\"higher\", found \"less\""),
      std::string::npos)
      << error_of(bad);
  bad = text;
  bad.replace(bad.find("\"better\""), 8, "\"worse\"");
  EXPECT_NE(error_of(bad).find("unknown key \"worse\""), std::string::npos) << error_of(bad);

  // The declaration says higher is better: the recorded metric is refused where it is written;
  // an entry of time for an example now scored by a metric is refused at the entry.
  const bench::MetricCheck declared = [](const std::string&,
                                         const std::optional<bench::ScoredMetric>& recorded) {
    return recorded == bench::ScoredMetric{"p99_us", "higher"}
               ? std::string()
               : "declared: p99_us (higher is better)";
  };
  auto error_with_check = [&](const std::string& file) -> std::string {
    try {
      bench::parse_expectations(file, "dir/test_gpu.json", {"", {}, declared});
    } catch (const bench::ExpectationsError& e) {
      return e.what();
    }
    return "no error";
  };
  EXPECT_NE(error_with_check(text).find(
                "dir/test_gpu.json:8:29: at /examples/ch07~1copy/metric: declared"),
            std::string::npos)
      << error_with_check(text);
  EXPECT_NE(
      error_with_check(kValid).find("dir/test_gpu.json:6:18: at /examples/ch07~1copy: declared"),
      std::string::npos)
      << error_with_check(kValid);
}

// A write that fails (a full disk) says why and where: ENOSPC's text, or here EFBIG's, under
// a file-size limit that stands in for the full disk.
TEST(Expectations, AFailedSaveNamesThePathAndTheSystemsReason) {
  ScratchDir dir;
  const fs::path file = dir.path / "test_gpu.json";
  const auto x = bench::parse_expectations(kValid, "x.json");
  rlimit before{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &before), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit tiny = before;
  tiny.rlim_cur = 16;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &tiny), 0);
  std::string message = "no error";
  try {
    bench::save_expectations(file, x);
  } catch (const bench::ExpectationsError& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &before);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(message.find(file.string() + ".tmp."), std::string::npos) << message;
  EXPECT_NE(message.find(std::string("write failed: ") + std::strerror(EFBIG)), std::string::npos) << message;
  EXPECT_FALSE(fs::exists(file));
  int entries = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir.path)) ++entries;
  EXPECT_EQ(entries, 0) << "the temporary file is removed";
}

TEST(Expectations, TextPositionCountsLinesAndColumns) {
  const auto at = bench::text_position("ab\ncd", 4);
  EXPECT_EQ(at.line, 2u);
  EXPECT_EQ(at.column, 2u);
}

}  // namespace

// A two-GPU machine scores its one-GPU examples against the same GPU's one-GPU file: ch07 on a
// 2x H200 read NEW for every example while h200.json held them all (2026-11-23).
namespace {
void write(const fs::path& file, const std::string& text) { std::ofstream(file) << text; }
std::string file_with(const std::string& key, const std::string& example, double speedup, const std::string& ceiling,
                      double value) {
  return R"({"format_version": 1, "hardware_key": ")" + key + R"(", "ceilings": {")" + ceiling +
         R"(": {"value": )" + std::to_string(value) + R"(, "unit": "GB/s", "noise": 0.005}}, "examples": {")" +
         example + R"(": {"variants": {"baseline": {"median_us": 300.0, "noise": 0.01},
         "optimized": {"median_us": 100.0, "noise": 0.01}}, "speedup": )" + std::to_string(speedup) +
         R"(, "tolerance": 0.1}}})";
}
}  // namespace

TEST(Expectations, SingleGpuKeyDropsTheGpuCount) {
  EXPECT_EQ(bench::single_gpu_key("2x_h200"), "h200");
  EXPECT_EQ(bench::single_gpu_key("8x_h100_80gb_hbm3"), "h100_80gb_hbm3");
  EXPECT_EQ(bench::single_gpu_key("h200"), "h200");
  EXPECT_EQ(bench::single_gpu_key("rtx_4x_ada"), "rtx_4x_ada");  // "4x_" not at the start
  EXPECT_EQ(bench::gpu_count_of_key("2x_h200"), 2);
  EXPECT_EQ(bench::gpu_count_of_key("8x_h100_80gb_hbm3"), 8);
  EXPECT_EQ(bench::gpu_count_of_key("h200"), 1);
  EXPECT_EQ(bench::gpu_count_of_key("rtx_4x_ada"), 1);
}

TEST(Expectations, AMultiGpuMachineFallsBackToItsGpusOneGpuFile) {
  ScratchDir dir;
  write(dir.path / "2x_h200.json", file_with("2x_h200", "ch04/allreduce", 1.95, "p2p_gbps", 395));
  write(dir.path / "h200.json", file_with("h200", "ch07/copy", 3.0, "hbm_copy_gbps", 4300));
  std::vector<fs::path> sources;
  const auto x = bench::load_expectations_for(dir.path, "2x_h200", &sources);
  ASSERT_TRUE(x.has_value());
  EXPECT_EQ(x->hardware_key, "2x_h200");
  EXPECT_EQ(x->examples.count("ch04/allreduce"), 1u);
  EXPECT_EQ(x->examples.count("ch07/copy"), 1u);
  EXPECT_EQ(x->ceilings.count("p2p_gbps"), 1u);
  EXPECT_EQ(x->ceilings.count("hbm_copy_gbps"), 1u);
  ASSERT_EQ(sources.size(), 2u);
  EXPECT_EQ(sources[0].filename(), "2x_h200.json");

  // The machine's own entry wins a clash; a one-GPU machine reads only its own file.
  write(dir.path / "2x_h200.json", file_with("2x_h200", "ch07/copy", 2.5, "hbm_copy_gbps", 4200));
  EXPECT_DOUBLE_EQ(bench::load_expectations_for(dir.path, "2x_h200")->examples.at("ch07/copy").speedup, 2.5);
  EXPECT_DOUBLE_EQ(bench::load_expectations_for(dir.path, "2x_h200")->ceilings.at("hbm_copy_gbps").value, 4200);
  EXPECT_EQ(bench::load_expectations_for(dir.path, "h200")->examples.count("ch04/allreduce"), 0u);

  // Only the one-GPU file: it is used, under the machine's key; neither: nothing.
  fs::remove(dir.path / "2x_h200.json");
  EXPECT_EQ(bench::load_expectations_for(dir.path, "2x_h200")->hardware_key, "2x_h200");
  EXPECT_FALSE(bench::load_expectations_for(dir.path, "4x_h100_80gb_hbm3").has_value());
}

// A chapter binary's pct_ceiling reads the ceilings so too: on a 2x H200 its HBM ceiling is
// h200.json's (2x_h200.json holds only p2p_gbps), as `bench compare` has it. It read only
// 2x_h200.json, so the binary reported no percent of ceiling for any one-GPU example there.
TEST(Expectations, AChapterBinarysCeilingsFallBackAsCompareDoes) {
  ScratchDir dir;
  write(dir.path / "2x_h200.json", file_with("2x_h200", "ch04/allreduce", 1.95, "p2p_gbps", 395));
  write(dir.path / "h200.json", file_with("h200", "ch07/copy", 3.0, "hbm_copy_gbps", 4300));
  const auto ceilings = bench::load_ceilings(dir.path, "2x_h200");
  EXPECT_EQ(ceilings, (std::map<std::string, double>{{"hbm_copy_gbps", 4300}, {"p2p_gbps", 395}}));
  EXPECT_EQ(bench::load_ceilings(dir.path, "h200"),
            (std::map<std::string, double>{{"hbm_copy_gbps", 4300}}));
}

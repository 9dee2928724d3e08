// tools/results.hpp: Google Benchmark JSON from chapter binaries, and the merged results file
// that `bench compare` saves and `--from-results` rescores (format: docs/results-format.md).
#pragma once

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "bench/expectations.hpp"

namespace bench::tools {

using nlohmann::json;

// A results file that cannot be read or is not results (exit code 2 territory).
class ResultsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class Outcome { measured, failed, skipped };

// One case `chNN/<example>/<variant>` as the driver sees it, repetitions pooled.
struct CaseResult {
  std::string name, example, variant;
  std::string role;  // baseline | optimized | step | vendor
  std::string impl;  // the variant's own name (label "impl"): the rung a role-named case runs
  Outcome outcome = Outcome::measured;
  std::string message;  // without the SKIPPED:/FAILED: tag
  double median_us = 0, p10_us = 0, p90_us = 0, noise = 0;
  double bytes = 0, flops = 0, gbps = 0, tflops = 0;
  // Of `bytes`, the writes that may still sit in L2 when the stop event fires (counter
  // l2_write_slack_bytes): a DRAM ceiling bounds only the rest (scoring.cpp).
  double l2_write_slack_bytes = 0;
  std::optional<double> pct_ceiling;  // as the harness computed it at run time
  bool verified = false;
  double max_abs_err = 0, rel_l2_err = 0;
  int64_t sample_count = 0;
  // VALIDITY row 11: samples dropped because the SM clock had fallen (counter dropped_throttled,
  // lowest clock seen min_sm_mhz), or every sample throttled so all were kept (label throttled=all).
  int64_t dropped_throttled = 0;
  double min_sm_mhz = 0;
  bool throttled_all = false;
  std::string fingerprint, mode, stop, bw_ceiling, compute_ceiling;
  bool host_bound = false;  // the variant's time is set by the host (label "host_bound=1")
  int min_gpus = 1;         // the GPUs its example needs (label "gpus=N", written when N > 1)
  // docs/validity.md rows 1 and 2: how escaped work was looked for ("cupti" or "ratio"), and,
  // when the samples fell in two clusters, what they were (label "suspect=...").
  std::string escape_method;
  std::string suspect;
  // docs/validity.md row 2: how many of its timed samples were checked against a reference
  // (counters verified_samples + compared_samples), how (label "checks=..."), and the worst-case
  // chance that a variant spoiling 5% of its samples escaped every check (counter escape_5pct);
  // with repetitions, the worst run's.
  std::optional<double> escape_5pct;
  int64_t checked_samples = 0, timed_samples = 0;  // the latter kept and throttled alike
  std::string sample_check;
  std::string input_seed;   // the case's secret input seed, from its samples file ("" if none)
  std::vector<double> samples;  // raw kept samples, microseconds; empty when not saved
  // One median per run, in run order, when the case ran more than once (bench compare
  // --repetitions); then `samples` pools every run's and `median_us`/`noise` describe the pool.
  std::vector<double> run_medians_us;
  std::vector<std::string> metric_names;  // the variant's own figures (label "metrics=a,b")
  std::map<std::string, double> metrics;  // their values, from the row's counters
  // An example scored by a metric (label "scored_by=<name>:<lower|higher>"): which, its value
  // after each kept sample (the samples file's "scored_metric", every run's pooled) and, with
  // repetitions, each run's median of it. Its entry in `metrics` is the median.
  std::optional<ScoredMetric> scored_by;
  std::vector<double> metric_samples;
  std::vector<double> run_metric_medians;
};

// A string entry of a run's context ("gpu_name", "git_sha", ...); empty when absent or not a string.
std::string context_string(const json& context, const char* key);

// An example whose process died: its cases that are missing from the output become FAILED.
struct Crash {
  std::string example;               // chNN/<example>
  std::string how;                   // "killed by signal 6 (Aborted)", "exit code 3"
  std::string stderr_tail;           // last lines of its standard error
  std::vector<std::string> cases;    // the cases it should have produced
  bool skipped = false;              // exit code 77: no CUDA device, so SKIPPED, not FAILED
};

// The merged, self-contained results of one compare run. `benchmarks` keeps Google
// Benchmark's row shape (so compare.py still reads the file) with the raw samples and
// fingerprint of each case attached under "bench_samples".
struct ResultsFile {
  json context = json::object();
  json benchmarks = json::array();
  std::vector<Crash> crashes;
};

// "ch07/copy/baseline/iterations:1/manual_time" -> "ch07/copy/baseline".
std::string strip_gb_suffixes(std::string_view gb_name);
// Case names are chNN/<example>/<variant>[/<axis>:<value>...] (docs/results-format.md). What a
// row of the table, an expectation and a speedup belong to is the example's point:
// "ch07/copy/baseline" -> "ch07/copy", "ch16/fa/optimized/b:4/s:4096" -> "ch16/fa/b:4/s:4096".
std::string example_of(std::string_view case_name);
// "ch16/fa/optimized/b:4" -> "optimized".
std::string variant_of(std::string_view case_name);
// A case name or a point key -> the example alone: "ch16/fa/b:4/s:4096" -> "ch16/fa".
std::string base_example_of(std::string_view name);
// A point key -> its point: "ch16/fa/b:4/s:4096" -> "b:4/s:4096" ("" without axes).
std::string point_of(std::string_view point_key);
// A point's axes and values, in order: "b:4/s:4096" -> {{"b","4"},{"s","4096"}}.
std::vector<std::pair<std::string, std::string>> axes_of(std::string_view point);

// Parses a merged results file or a plain Google Benchmark JSON output; errors name the source
// and the line and column.
// Google Benchmark writes non-finite numbers as bare nan, -nan, inf, -inf (its repetition
// summaries do, for a counter that is zero in every run), which is not JSON. Returns the text
// with each such token, outside strings, replaced by null (same positions for error messages
// are not kept: only the tokens change length).
std::string null_non_finite(std::string_view gb_json);
ResultsFile parse_results(std::string_view text, const std::string& source_name);
ResultsFile load_results(const std::filesystem::path& file);
// load_results for a file to be scored (`compare --from-results`, `report`): one with no
// benchmark row and no crash record ({"benchmarks": []}) is refused, since a score of nothing
// would read as a clean run.
ResultsFile load_results_to_score(const std::filesystem::path& file);
json to_json(const ResultsFile& results);
// The name of one live run's own results file under <build>/reports/, so that no run overwrites
// another: "results_<chapters>_<hardware key>_<UTC time>.json", e.g.
// results_ch09_ch10_h100_80gb_hbm3_20261127T015300Z.json (chapters "all" for --all; anything
// but [a-z0-9_] in the key becomes '_'). `utc` is the time as YYYYMMDDTHHMMSSZ.
// Now, in UTC, through strftime's `format`: kIsoUtc for dates stored in files
// ("2026-11-27T01:53:00Z"), kCompactUtc for file names ("20261127T015300Z").
inline constexpr const char* kIsoUtc = "%Y-%m-%dT%H:%M:%SZ";
inline constexpr const char* kCompactUtc = "%Y%m%dT%H%M%SZ";
std::string utc_now(const char* format);
std::string run_results_name(const std::vector<std::string>& chapters,
                             const std::string& hardware_key, const std::string& utc);
void save_results(const std::filesystem::path& file, const ResultsFile& results);

// Adds one process's Google Benchmark output to `into`, attaching each case's sample file
// from `samples_dir` (written by --bench_samples_out) when there is one.
void merge_run(ResultsFile& into, const json& gb_output, const std::filesystem::path& samples_dir);

// Which rows a reader takes as results. Scoring wants timed rows only: a `--bench_verify_only`
// row carries a zero time and is FAILED there. `bench sanitize` runs exactly that mode and reads
// its rows for the verification alone.
enum class RowsWanted { timed, verify_only };

// The cases in the file: iteration rows pooled per case, aggregates ignored, crashed cases
// FAILED with the crash's description.
std::vector<CaseResult> extract_cases(const ResultsFile& results, RowsWanted wanted = RowsWanted::timed);

}  // namespace bench::tools

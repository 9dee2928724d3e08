// tools/scoring.hpp: pairing baseline with optimized (and the ladder's other rungs), the
// speedup with its confidence interval, and the statuses of DESIGN §5.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/expectations.hpp"
#include "bench/stats.hpp"
#include "results.hpp"

namespace bench::tools {

enum class Status { pass, improved, regressed, no_speedup, failed, skipped, new_entry, info };
const char* to_string(Status status);  // "PASS", "IMPROVED", ..., "NEW", "-"

// What a row compares: the example's main pair, a ladder step or a vendor rung (both against
// the baseline), or an example with no scorable pair at all.
enum class RowKind { pair, step, vendor, example };

// A speedup must have its whole 95% interval above this to count. An A/A pair (the same kernel
// as baseline and optimized) gives intervals a little above 1 (docs/expectations.md): a
// systematic difference of a percent between two processes or two buffers is not a speedup.
inline constexpr double kMinimumClearSpeedup = 1.02;

// What a pair's status is judged on (docs/expectations.md): the speedup; the optimized side's
// time, when only the baseline is host-bound; the speedup against the spread recorded over
// machines, when the optimized side is host-bound.
// An example declared scored by a metric (`.scored_by`) is judged as a speedup, of that metric:
// the ratio of the sides' medians oriented so that above 1 is better.
enum class ScoreBasis { speedup, optimized_time, machine_spread, metric };
const char* to_string(ScoreBasis basis);  // "speedup", "optimized_time", "machine_spread", "metric"

struct ScoredRow {
  std::string example;
  std::string variant;  // the non-baseline side
  RowKind kind = RowKind::pair;
  Status status = Status::info;
  std::string reason;  // why, for every status other than PASS and info
  std::optional<CaseResult> baseline, subject;
  std::optional<stats::Interval> speedup;  // subject over baseline: of time, or of `metric`
  std::optional<ScoredMetric> metric;      // the metric the pair is scored by (basis metric)
  bool speedup_from_medians_only = false;  // no raw samples: the interval is degenerate
  std::optional<double> expected_speedup, tolerance;
  ScoreBasis basis = ScoreBasis::speedup;
  // The band the judged figure had to land in: a speedup, or microseconds for optimized_time.
  std::optional<double> band_low, band_high;
  std::optional<double> expected_us;       // optimized_time: the recorded median of the subject
  std::optional<double> pct_ceiling;       // of the subject, against the file's ceilings
  std::string ceiling_name;
  std::string ceiling_note;                // past 101% of its ceiling yet passing: why
  std::optional<double> versus_vendor;     // vendor rows: vendor median / optimized median
  // The status is the outcome the expectations record for this example on this GPU
  // (`expected_status`: an honest NO_SPEEDUP inside its recorded band, or an optimized side
  // SKIPPED with the recorded reason): expected, not news.
  bool as_recorded = false;
};

struct Scorecard {
  std::string hardware_key;
  std::vector<ScoredRow> rows;
  std::map<Status, int> counts() const;
  // 0 when nothing regressed or failed, else 1 (DESIGN §5).
  int exit_code() const;
};

// How far above a measured ceiling a result may land before it is called impossible: the
// ceiling's own recorded noise (doubled), at least 2% and at most 5%; 15% for the tensor-core
// ceilings (tf32/bf16/fp16/fp8_tflops), measured sustained, which short cold GEMMs exceed.
double ceiling_allowance(const std::string& name, const Ceiling& ceiling);

// The share of a case's counted bytes that must cross DRAM inside its timed window, for a DRAM
// ceiling (hbm_*, memcpy_d2d_gbps): 1 less its l2_write_slack_bytes / bytes; 1 for any other.
double dram_share_inside_window(const CaseResult& c, const std::string& ceiling);

// The oriented ratio of what a pair is scored by, above 1 when `subject` is better, with its
// bootstrap interval: baseline/subject for time and a lower-is-better metric, subject/baseline
// for a higher-is-better one. Without per-sample values, the ratio of medians (`medians_only`).
stats::Interval scored_ratio(const CaseResult& baseline, const CaseResult& subject,
                             bool* medians_only = nullptr);

// Scores every example found in `cases`. `expectations` may be empty (all NEW, no ceilings).
Scorecard score(const std::vector<CaseResult>& cases, const std::optional<Expectations>& expectations,
                const std::string& hardware_key);

}  // namespace bench::tools

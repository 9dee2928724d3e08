// Pairing and scoring: the speedup is a ratio of medians with a bootstrap 95% interval, and a
// status is only as strong as that interval allows (an A/A pair can never score a speedup).
#include "scoring.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "expectations_write.hpp"

namespace bench::tools {

// A launch's last writes can still sit in L2 as dirty lines when its stop event fires: the
// kernel is done (L2 is where writes become visible), DRAM gets them later. A DRAM ceiling is
// measured over 2 GiB, where that tail is a rounding error; a 16 MiB copy's would be half its
// writes (hbm_copy --sweep read far past hbm_copy_gbps at 16 and 64 MiB: ch07's README). So a
// DRAM ceiling bounds only the bytes that must cross it inside the window: all
// but the case's l2_write_slack_bytes (at most the L2's size and the outputs' bytes, set by
// the harness). Other ceilings (L2, shared memory, links, compute) are untouched.
double dram_share_inside_window(const CaseResult& c, const std::string& ceiling) {
  const bool dram = ceiling.rfind("hbm_", 0) == 0 || ceiling == "memcpy_d2d_gbps";
  if (!dram || c.bytes <= 0 || c.l2_write_slack_bytes <= 0) return 1.0;
  return std::clamp((c.bytes - c.l2_write_slack_bytes) / c.bytes, 0.0, 1.0);
}

namespace {

// Percent of the binding ceiling of one case, and whether it is beyond belief.
struct CeilingCheck {
  std::optional<double> pct;
  std::string name;
  std::string impossible;  // non-empty: the reason
  std::string above;       // non-empty: past 101% of a ceiling, within its allowance (a note)
};

CeilingCheck check_ceilings(const CaseResult& c, const std::optional<Expectations>& x) {
  CeilingCheck out;
  // `must_cross`: the share of the counted work that must have been done inside the timed window.
  auto consider = [&](const std::string& name, double achieved, const char* unit, double must_cross) {
    if (name.empty() || achieved <= 0 || !x) return;
    auto it = x->ceilings.find(name);
    if (it == x->ceilings.end() || it->second.value <= 0) return;
    const double pct = 100.0 * achieved / it->second.value;
    if (!out.pct || pct > *out.pct) out.pct = pct, out.name = name;
    const double floor_pct = pct * must_cross;
    const double allowance = ceiling_allowance(name, it->second);
    // Issue 38: no honest case shows more than 101% after a calibration on its own machine. Past
    // that but within the allowance, the ceiling is likely another board's (a sustained
    // tensor-core rate differs by a few percent between boards): say so and how to measure it here.
    if (floor_pct > 101.0 && floor_pct <= 100.0 * (1.0 + allowance) && out.above.empty())
      out.above = fmt::format(
          "{:.1f}% of {}: above the ceiling recorded for this GPU ({:.4g} {}, measured {}), within "
          "its allowance of {:.0f}%; it was likely measured on another board: `bench calibrate "
          "--only {}` on this machine",
          floor_pct, name, it->second.value, unit,
          it->second.date.empty() ? std::string("at an unrecorded date") : it->second.date,
          100.0 * allowance, name);
    // Past 101% only through writes that may still sit in L2 at the stop event (a short
    // kernel's tail): passes, and says why, so "108%" does not read as a broken tool.
    if (pct > 101.0 && floor_pct <= 101.0 && must_cross < 1.0 && out.above.empty())
      out.above = fmt::format(
          "{:.1f}% of {} counting every declared byte, {:.1f}% counting only those that must reach "
          "DRAM before the stop event: up to {:.3g} MB of its writes may still sit in L2 then, "
          "a short kernel's write tail, not a DRAM faster than its ceiling",
          pct, name, floor_pct, c.l2_write_slack_bytes / 1e6);
    if (floor_pct > 100.0 * (1.0 + allowance) && out.impossible.empty())
      out.impossible = fmt::format(
          "impossible: {} reaches {:.1f}% of {} ({:.4g} {} measured, {:.4g} {} achieved{}); "
          "the cost model over-counts or the work escaped the timer",
          c.variant, pct, name, it->second.value, unit, achieved, unit,
          must_cross < 1.0 ? fmt::format(", {:.1f}% counting only the bytes that must reach DRAM before the stop event", floor_pct)
                           : std::string());
  };
  consider(c.bw_ceiling, c.gbps, "GB/s", dram_share_inside_window(c, c.bw_ceiling));
  consider(c.compute_ceiling, c.tflops, "TFLOP/s", 1.0);
  if (!out.pct && c.pct_ceiling) {
    out.pct = c.pct_ceiling;  // the harness's own figure, from the ceilings it saw at run time
    out.name = !c.bw_ceiling.empty() ? c.bw_ceiling : c.compute_ceiling;
    if (*c.pct_ceiling * dram_share_inside_window(c, out.name) > 101.0)
      out.impossible = fmt::format("impossible: {} reaches {:.1f}% of {} (as measured at run time)",
                                   c.variant, *c.pct_ceiling, out.name);
  }
  return out;
}

// The first reason a case cannot be scored, with the status it implies.
std::optional<std::pair<Status, std::string>> case_problem(const CaseResult& c) {
  if (c.outcome == Outcome::failed) return std::pair{Status::failed, c.variant + ": " + c.message};
  if (c.outcome == Outcome::skipped) return std::pair{Status::skipped, c.variant + ": " + c.message};
  if (!c.verified) return std::pair{Status::failed, c.variant + ": not verified"};
  return std::nullopt;
}

// Fills in the speedup and the checks every row shares; returns false when the row is settled
// (FAILED or SKIPPED) before any speedup comparison.
bool compare_sides(ScoredRow& row, const std::optional<Expectations>& x) {
  for (const auto* side : {&*row.baseline, &*row.subject})
    if (auto problem = case_problem(*side)) {
      row.status = problem->first;
      row.reason = problem->second;
      return false;
    }
  const CaseResult& b = *row.baseline;
  const CaseResult& s = *row.subject;
  if (!b.fingerprint.empty() && !s.fingerprint.empty() && b.fingerprint != s.fingerprint) {
    row.status = Status::failed;
    row.reason = fmt::format("fingerprint mismatch: {} fp={}, {} fp={} (the two sides did different work)",
                             b.variant, b.fingerprint, s.variant, s.fingerprint);
    return false;
  }
  // docs/validity.md row 18: the two sides must have drawn different inputs, or an answer one
  // computed could have been served to the other.
  if (!b.input_seed.empty() && b.input_seed == s.input_seed) {
    row.status = Status::failed;
    row.reason = fmt::format("{} and {} drew the same inputs (seed {}): one could serve the other's "
                             "answers; run the chapter without --bench_seed", b.variant, s.variant, b.input_seed);
    return false;
  }
  if (!(b.scored_by == s.scored_by)) {
    row.status = Status::failed;
    row.reason =
        fmt::format("{} is scored by {}, {} by {}: one example declares one figure", b.variant,
                    scored_by_text(b.scored_by), s.variant, scored_by_text(s.scored_by));
    return false;
  }
  row.metric = s.scored_by;
  if (row.metric)
    for (const auto* side : {&b, &s})
      if (!side->metrics.count(row.metric->name)) {
        row.status = Status::failed;
        row.reason = fmt::format("{} reports no {}, the metric the example is scored by",
                                 side->variant, row.metric->name);
        return false;
      }
  const CeilingCheck subject_ceiling = check_ceilings(s, x);
  // A metric's ratio is not a share of any ceiling: the column would describe the time instead.
  if (!row.metric) row.pct_ceiling = subject_ceiling.pct;
  row.ceiling_name = subject_ceiling.name;
  row.ceiling_note = subject_ceiling.above;
  for (const auto& impossible : {check_ceilings(b, x).impossible, subject_ceiling.impossible})
    if (!impossible.empty()) {
      row.status = Status::failed;
      row.reason = impossible;
      return false;
    }
  row.speedup = scored_ratio(b, s, &row.speedup_from_medians_only);
  return true;
}

// What the figure of a row is called in its reasons: "speedup", or the metric's name.
std::string figure_name(const ScoredRow& row) { return row.metric ? row.metric->name : "speedup"; }

// How a pair is scored (docs/expectations.md, "Host-bound examples"):
//  - both sides run on the GPU: the speedup against the expected speedup's band;
//  - the baseline is host-bound, the optimized side is not: the optimized side's time against
//    its recorded median (the host sets the baseline, so the ratio moves from one machine of
//    the kind to the next while the GPU side does not), and the speedup need only be clear;
//  - the optimized side is host-bound: the speedup, against a band spanning the speedups
//    recorded on every machine the entry lists (`machines`), each widened by the tolerance.
ScoreBasis basis_of(const CaseResult& baseline, const CaseResult& subject) {
  if (subject.scored_by)
    return ScoreBasis::metric;  // the metric is the result, whoever sets the time
  if (subject.host_bound) return ScoreBasis::machine_spread;
  if (baseline.host_bound) return ScoreBasis::optimized_time;
  return ScoreBasis::speedup;
}

// The speedups a band is drawn from: the entry's own and every machine's it records.
std::pair<double, double> recorded_speedups(const ExampleExpectation& e) {
  double low = e.speedup, high = e.speedup;
  for (const auto& m : e.machines) {
    if (m.speedup <= 0) continue;
    low = std::min(low, m.speedup);
    high = std::max(high, m.speedup);
  }
  return {low, high};
}

// NO_SPEEDUP in the interval's own numbers: a speedup needs its whole 95% interval above
// kMinimumClearSpeedup, so the reason names the end that is not.
std::string no_speedup_reason(const ScoredRow& row) {
  const stats::Interval& s = *row.speedup;
  const std::string measured =
      fmt::format("{} {:.2f}x [{:.2f}, {:.2f}]", figure_name(row), s.estimate, s.low, s.high);
  const char* better = row.metric ? "better" : "faster";
  if (s.high <= kMinimumClearSpeedup)
    return fmt::format(
        "{}: its upper end {:.3f} does not reach the {:.2f} a speedup needs; optimized is not "
        "{}",
        measured, s.high, kMinimumClearSpeedup, better);
  return fmt::format(
      "{}: its lower end {:.3f} is not above the {:.2f} a speedup needs (the whole 95% interval "
      "must be); optimized is not clearly {}",
      measured, s.low, kMinimumClearSpeedup, better);
}

// The optimized side against its recorded median: REGRESSED when even the fast end of its
// interval is slower than the band, IMPROVED when even the slow end is faster.
void score_optimized_time(ScoredRow& row, const ExampleExpectation& expected) {
  const CaseResult& s = *row.subject;
  const auto it = expected.variants.find(s.variant);
  if (it == expected.variants.end() || it->second.median_us <= 0) {
    row.status = Status::new_entry;
    row.reason = "no recorded median for " + s.variant + " (accept it with --update-expectations)";
    return;
  }
  row.expected_us = it->second.median_us;
  row.band_low = it->second.median_us * (1 - expected.tolerance);
  row.band_high = it->second.median_us * (1 + expected.tolerance);
  // Interval of the median time: 1 / (interval of 1 / median), bootstrapped like a speedup.
  const std::vector<double> one{1.0};
  const stats::Interval inverse = s.samples.empty() ? stats::Interval{1 / s.median_us, 1 / s.median_us, 1 / s.median_us}
                                                    : stats::speedup_interval(one, s.samples);
  const double fast = 1 / inverse.high, slow = 1 / inverse.low;
  const std::string measured = fmt::format("{} took {:.4g} us [{:.4g}, {:.4g}]", s.variant, s.median_us, fast, slow);
  const std::string band = fmt::format("{:.4g}-{:.4g} us (recorded {:.4g} us +-{:.0f}%)", *row.band_low,
                                       *row.band_high, it->second.median_us, 100 * expected.tolerance);
  const std::string why = "; its baseline is host-bound, so the pair is scored by this side's time";
  if (fast > *row.band_high) {
    row.status = Status::regressed;
    row.reason = measured + ", slower than " + band + why;
  } else if (row.speedup->low <= kMinimumClearSpeedup) {
    row.status = Status::no_speedup;
    row.reason = no_speedup_reason(row);
  } else if (slow < *row.band_low) {
    row.status = Status::improved;
    row.reason = measured + ", faster than " + band + why + " (consider --update-expectations)";
  } else {
    row.status = Status::pass;
  }
}

// The speedup against its band: the expected speedup, or the spread over machines, +- tolerance.
void score_speedup(ScoredRow& row, const ExampleExpectation* expected) {
  const stats::Interval& s = *row.speedup;
  double band_low = 0, band_high = 0;
  std::string expectation;
  if (expected) {
    const auto [low, high] = recorded_speedups(*expected);
    band_low = low * (1 - expected->tolerance);
    band_high = high * (1 + expected->tolerance);
    row.band_low = band_low;
    row.band_high = band_high;
    expectation = low == high ? fmt::format("{:.2f}x -{:.0f}%", expected->speedup, 100 * expected->tolerance)
                              : fmt::format("{:.2f}x-{:.2f}x seen over {} machines, -{:.0f}%", low, high,
                                            expected->machines.size(), 100 * expected->tolerance);
  }
  const std::string measured = fmt::format("{:.2f}x [{:.2f}, {:.2f}]", s.estimate, s.low, s.high);
  if (expected && s.high < band_low) {
    row.status = Status::regressed;
    row.reason = fmt::format("{} {} is below the expected {}, beyond the noise", figure_name(row),
                             measured, expectation);
  } else if (s.low <= kMinimumClearSpeedup) {
    row.status = Status::no_speedup;
    row.reason = no_speedup_reason(row);
  } else if (!expected) {
    row.status = Status::new_entry;
    row.reason = "no expectation for this GPU yet (accept it with --update-expectations)";
  } else if (s.low > band_high) {
    row.status = Status::improved;
    row.reason = fmt::format(
        "{} {} is above the expected band's top {:.2f}x (consider "
        "--update-expectations)",
        figure_name(row), measured, band_high);
  } else {
    row.status = Status::pass;
  }
}

// A pair whose entry records an outcome (docs/expectations.md, "Recorded outcomes"): the
// outcome seen again is marked as recorded; anything else says how it departs from the record.
void apply_recorded_outcome(ScoredRow& row, const ExampleExpectation& expected) {
  if (expected.expected_status == kExpectedSkipped) {
    const CaseResult& s = *row.subject;
    if (row.status == Status::skipped && s.outcome == Outcome::skipped) {
      if (s.message == expected.reason) {
        row.as_recorded = true;
        row.reason += " (recorded as this GPU's outcome)";
      } else {
        row.reason += "; recorded skip reason was: " + expected.reason;
      }
    } else if (row.speedup) {  // it ran: the record no longer holds
      row.reason += (row.reason.empty() ? "" : "; ") + std::string("recorded as skipped here (") + expected.reason +
                    "), but it ran: record it with --update-expectations";
    }
    return;
  }
  if (expected.expected_status == kExpectedNoSpeedup && row.status == Status::no_speedup) {
    row.as_recorded = true;
    row.reason += "; recorded as this GPU's outcome: " + expected.reason;
  } else if (expected.expected_status == kExpectedNoSpeedup && row.status == Status::improved) {
    row.reason += "; recorded as no speedup (" + expected.reason + "), now clearly faster";
  }
}

void score_pair(ScoredRow& row, const std::optional<Expectations>& x) {
  const ExampleExpectation* expected = nullptr;
  if (x)
    if (auto it = x->examples.find(row.example); it != x->examples.end()) expected = &it->second;
  const bool recorded_skip = expected && expected->expected_status == kExpectedSkipped;
  if (!compare_sides(row, x)) {
    if (recorded_skip) apply_recorded_outcome(row, *expected);
    return;
  }
  row.basis = basis_of(*row.baseline, *row.subject);
  // An entry holds a ratio of one figure: a ratio of another is not comparable with it.
  if (expected && !recorded_skip && !(expected->metric == row.metric)) {
    row.status = Status::failed;
    row.reason = fmt::format(
        "the expectation records a speedup of {}, but the example is scored by {}: remove the "
        "entry and record it again with --update-expectations",
        scored_by_text(expected->metric), scored_by_text(row.metric));
    return;
  }
  if (recorded_skip) {  // no speedup was recorded: scored as if new
    score_speedup(row, nullptr);
    apply_recorded_outcome(row, *expected);
    return;
  }
  if (expected) {
    row.expected_speedup = expected->speedup;
    row.tolerance = expected->tolerance;
  }
  if (expected && row.basis == ScoreBasis::optimized_time)
    score_optimized_time(row, *expected);
  else
    score_speedup(row, expected);
  if (row.speedup_from_medians_only && row.status != Status::pass)
    row.reason += " (no raw samples: interval from medians only)";
  if (expected && !expected->expected_status.empty()) apply_recorded_outcome(row, *expected);
  // docs/validity.md row 2: a side whose samples fall in two clusters is named, whatever the status.
  for (const auto* side : {&*row.baseline, &*row.subject})
    if (!side->suspect.empty())
      row.reason = fmt::format("SUSPECT {}: {}{}{}", side->variant, side->suspect, row.reason.empty() ? "" : "; ", row.reason);
}

void score_rung(ScoredRow& row, const std::optional<Expectations>& x) {
  if (!compare_sides(row, x)) return;
  row.status = Status::info;
}

const CaseResult* find_role(const std::vector<const CaseResult*>& cases, const std::string& role) {
  for (const auto* c : cases)
    if (c->role == role) return c;
  return nullptr;
}

}  // namespace

const char* to_string(ScoreBasis basis) {
  switch (basis) {
    case ScoreBasis::speedup: return "speedup";
    case ScoreBasis::optimized_time: return "optimized_time";
    case ScoreBasis::machine_spread: return "machine_spread";
    case ScoreBasis::metric:
      return "metric";
  }
  return "?";
}

const char* to_string(Status status) {
  switch (status) {
    case Status::pass: return "PASS";
    case Status::improved: return "IMPROVED";
    case Status::regressed: return "REGRESSED";
    case Status::no_speedup: return "NO_SPEEDUP";
    case Status::failed: return "FAILED";
    case Status::skipped: return "SKIPPED";
    case Status::new_entry: return "NEW";
    case Status::info: return "-";
  }
  return "?";
}

// At least 2%: honest copy kernels and cudaMemcpyAsync, each with little noise, spread over more
// than a percent in one run (docs/expectations.md); a ceiling is one method's figure.
// Sustained tensor-core ceilings get 15%: they are measured sustained, at the board's power limit
// (Mode::sustained), but a short GEMM timed cold runs in the burst before the limiter acts, past
// the sustained ceiling (docs/architecture.md, sustained mode). An over-counted cost model is
// off by far more (2x for a multiply-add counted as two flops twice).
// The burst twins (`bf16_burst_tflops`, timed cold like the cases scored against them) get 5%:
// a GEMM smaller than the calibration's 8192^3 can run a little cooler than it. The 15% stays
// for a sustained name, which a non-sustained case still meets in a file calibrated before the
// burst ceilings existed.
double ceiling_allowance(const std::string& name, const Ceiling& ceiling) {
  for (const char* tensor : {"tf32_tflops", "bf16_tflops", "fp16_tflops", "fp8_tflops"})
    if (name == tensor) return 0.15;
  for (const char* tensor : {"tf32_burst_tflops", "bf16_burst_tflops", "fp16_burst_tflops", "fp8_burst_tflops"})
    if (name == tensor) return 0.05;
  return std::clamp(2.0 * ceiling.noise, 0.02, 0.05);
}

std::map<Status, int> Scorecard::counts() const {
  std::map<Status, int> out;
  for (const auto& row : rows) ++out[row.status];
  return out;
}

int Scorecard::exit_code() const {
  for (const auto& row : rows)
    if (row.status == Status::failed || row.status == Status::regressed) return 1;
  return 0;
}

stats::Interval scored_ratio(const CaseResult& baseline, const CaseResult& subject,
                             bool* medians_only) {
  const bool higher = subject.scored_by && subject.scored_by->better == "higher";
  const CaseResult& numerator = higher ? subject : baseline;
  const CaseResult& denominator = higher ? baseline : subject;
  auto samples = [](const CaseResult& c) -> const std::vector<double>& {
    return c.scored_by ? c.metric_samples : c.samples;
  };
  auto value = [](const CaseResult& c) {
    return c.scored_by ? c.metrics.at(c.scored_by->name) : c.median_us;
  };
  const bool per_sample = !samples(numerator).empty() && !samples(denominator).empty();
  if (medians_only) *medians_only = !per_sample;
  if (per_sample) return stats::speedup_interval(samples(numerator), samples(denominator));
  const double ratio = value(numerator) / value(denominator);
  return {ratio, ratio, ratio};
}

Scorecard score(const std::vector<CaseResult>& cases, const std::optional<Expectations>& x,
                const std::string& hardware_key) {
  Scorecard card;
  card.hardware_key = hardware_key;
  std::vector<std::string> order;  // examples in the order the results list them
  std::map<std::string, std::vector<const CaseResult*>> by_example;
  for (const auto& c : cases) {
    if (!by_example.count(c.example)) order.push_back(c.example);
    by_example[c.example].push_back(&c);
  }
  for (const auto& example : order) {
    const auto& members = by_example[example];
    const CaseResult* baseline = find_role(members, "baseline");
    const CaseResult* optimized = find_role(members, "optimized");
    if (!baseline || !optimized) {
      ScoredRow row{example, optimized ? optimized->variant : "?", RowKind::example};
      // Whatever went wrong with the cases that did appear says more than "no pair".
      row.status = Status::failed;
      row.reason = fmt::format("no {} case in the results", baseline ? "optimized" : "baseline");
      for (const auto* c : members)
        if (auto problem = case_problem(*c)) row.status = problem->first, row.reason = problem->second;
      card.rows.push_back(std::move(row));
      continue;
    }
    ScoredRow pair{example, optimized->variant, RowKind::pair};
    pair.baseline = *baseline;
    pair.subject = *optimized;
    score_pair(pair, x);
    card.rows.push_back(pair);
    for (const auto* c : members) {
      if (c == baseline || c == optimized) continue;
      ScoredRow rung{example, c->variant, c->role == "vendor" ? RowKind::vendor : RowKind::step};
      rung.baseline = *baseline;
      rung.subject = *c;
      score_rung(rung, x);
      if (rung.kind == RowKind::vendor && rung.status == Status::info && pair.speedup)
        rung.versus_vendor = scored_ratio(*c, *optimized).estimate;
      card.rows.push_back(std::move(rung));
    }
  }
  return card;
}

}  // namespace bench::tools

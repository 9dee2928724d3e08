// Accepting measured numbers into expectations/<hardware_key>.json. Only a clean pair (both
// sides verified, quiet, clearly faster, not a regression) may become the reference that later
// runs are judged against.
#include "expectations_update.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench/stats.hpp"
#include "expectations_write.hpp"
#include "lookup.hpp"

namespace bench::tools {
namespace {

int64_t context_integer(const json& context, const char* key) {
  try {
    return std::stoll(context_string(context, key));
  } catch (const std::exception&) {
    return 0;
  }
}

// The relative standard error of a median of n samples with robust noise `noise`.
double median_error(double noise, int64_t n) {
  return n > 0 ? 1.2533 * noise / std::sqrt(double(n)) : INFINITY;
}

bool repeated(const CaseResult& side, const UpdatePolicy& policy) {
  return static_cast<int>(side.run_medians_us.size()) >= policy.min_runs;
}

std::string noise_refusal(const CaseResult& side, const UpdatePolicy& policy) {
  if (side.noise <= policy.max_noise) return {};
  // Repeated: the run-to-run check (run_refusal) judges the median instead.
  if (side.noise <= policy.max_jittery_noise && repeated(side, policy)) return {};
  const double error = median_error(side.noise, side.sample_count);
  if (side.noise <= policy.max_jittery_noise && error <= policy.max_median_error) return {};
  return fmt::format("{} is too noisy: {:.1f}% > {:.1f}%, and {} samples pin its median only to "
                     "{:.2f}% (accepted: <= {:.1f}% noise with the median within {:.1f}%, or with runs that "
                     "agree over --repetitions {} or more)",
                     side.variant, 100 * side.noise, 100 * policy.max_noise, side.sample_count,
                     100 * error, 100 * policy.max_jittery_noise, 100 * policy.max_median_error,
                     policy.min_runs);
}

// Repetitions: each run's own figure must lie within `tolerance` of the pooled one, or the
// entry would fail its own runs: the speedup (its baseline median over its subject median), or
// for a pair scored by the optimized side's time, that time.
std::string run_refusal(const ScoredRow& row, double tolerance) {
  const bool by_metric = row.basis == ScoreBasis::metric;
  const auto& base = by_metric ? row.baseline->run_metric_medians : row.baseline->run_medians_us;
  const auto& subject = by_metric ? row.subject->run_metric_medians : row.subject->run_medians_us;
  if (row.basis == ScoreBasis::optimized_time) {
    for (std::size_t i = 0; i < subject.size(); ++i)
      if (std::abs(subject[i] / row.subject->median_us - 1) > tolerance)
        return fmt::format("run {} of {} gave {} {:.4g} us, outside {:.4g} us +-{:.0f}%: the runs do not "
                           "reproduce each other", i + 1, subject.size(), row.subject->variant, subject[i],
                           row.subject->median_us, 100 * tolerance);
    return {};
  }
  if (base.size() != subject.size()) return {};
  const bool higher = row.metric && row.metric->better == "higher";
  for (std::size_t i = 0; i < base.size(); ++i) {
    const double speedup = higher ? subject[i] / base[i] : base[i] / subject[i];
    if (std::abs(speedup / row.speedup->estimate - 1) > tolerance)
      return fmt::format("run {} of {} gave {:.2f}x, outside {:.2f}x +-{:.0f}%: the runs do not reproduce "
                         "each other", i + 1, base.size(), speedup, row.speedup->estimate, 100 * tolerance);
  }
  return {};
}

MachineRun machine_run(const ScoredRow& row, const json& context, const std::string& date) {
  // machine_id (host name and boot id) tells leases apart; older results have only host_name.
  // The run's own date when the results carry it (a saved run added later keeps its date).
  const std::string machine = context_string(context, "machine_id"), run_date = context_string(context, "date");
  return {row.speedup->estimate, row.subject->median_us, machine.empty() ? context_string(context, "host_name") : machine,
          run_date.empty() ? date : run_date};
}

// Whether `host` (a machine id, or a host name in older results) already measured the entry.
bool recorded_machine(const ExampleExpectation& entry, const std::string& host) {
  return !host.empty() && std::any_of(entry.machines.begin(), entry.machines.end(),
                                      [&](const MachineRun& m) { return m.host == host; });
}

// The outcome (NO_SPEEDUP or SKIPPED) a row may be recorded with, as its entry's
// expected_status: named by --record-outcome, or already the entry's record. Empty: none.
std::string recordable_outcome(const ScoredRow& row, const UpdatePolicy& policy) {
  if (policy.add_machine || row.kind != RowKind::pair) return {};
  if (!row.as_recorded && (policy.record_outcomes.empty() || !example_selected(row.example, policy.record_outcomes)))
    return {};
  if (row.status == Status::no_speedup) return kExpectedNoSpeedup;
  // Only the optimized side skipped, by the harness (a requirement unmet here), next to a clean baseline.
  if (row.status == Status::skipped && row.subject->outcome == Outcome::skipped &&
      row.baseline->outcome == Outcome::measured && row.baseline->verified)
    return kExpectedSkipped;
  return {};
}

// Why a row may not become an expectation; empty when it may. Adding a machine to a
// host-dependent entry is the one way a figure outside its band can be recorded: the band is
// the machines' spread, and a new machine is new evidence of it, printed in the diff.
std::string refusal(const ScoredRow& row, const UpdatePolicy& policy) {
  const std::string outcome = recordable_outcome(row, policy);
  if (outcome == kExpectedSkipped) return {};
  switch (row.status) {
    case Status::failed: return "FAILED: " + row.reason;
    case Status::skipped:
      // Only an optimized side skipped beside a measured baseline is recordable
      // (recordable_outcome): where the baseline is skipped too, the example cannot run here, and
      // the hint would fail.
      if (row.baseline->outcome != Outcome::measured)
        return "SKIPPED: " + row.reason +
               " (the baseline did not run either: the example cannot run on this "
               "machine, and --record-outcome records only an optimized side skipped beside a "
               "measured baseline)";
      return "SKIPPED: " + row.reason + " (--record-outcome " + row.example + " records it as this GPU's outcome)";
    case Status::regressed:
      if (policy.add_machine) break;
      return "REGRESSED: a regression is not accepted as the new reference";
    case Status::no_speedup:
      if (outcome == kExpectedNoSpeedup) break;
      return "NO_SPEEDUP: optimized is not clearly faster (--record-outcome " + row.example +
             " records an honest no-speedup as this GPU's outcome)";
    default: break;
  }
  for (const auto* side : {&*row.baseline, &*row.subject}) {
    if (!side->verified) return side->variant + " is not verified";
    // Scored by the optimized side's time, the host-bound baseline's median is only reported:
    // its jitter need only stay under the hard limit.
    if (side == &*row.baseline && row.basis == ScoreBasis::optimized_time) {
      if (side->noise > policy.max_jittery_noise)
        return fmt::format("{} is too noisy: {:.1f}% > {:.1f}%", side->variant, 100 * side->noise,
                           100 * policy.max_jittery_noise);
      continue;
    }
    if (const std::string why = noise_refusal(*side, policy); !why.empty()) return why;
  }
  if (row.speedup_from_medians_only) return "no raw samples, so no confidence interval";
  const double width = (row.speedup->high - row.speedup->low) / row.speedup->estimate;
  if (width > policy.max_interval_width)
    return fmt::format("speedup interval too wide: {:.1f}% of the estimate > {:.1f}%", 100 * width,
                       100 * policy.max_interval_width);
  return {};
}

}  // namespace

UpdateResult plan_update(const std::optional<Expectations>& before, const Scorecard& card,
                         const json& context, const UpdatePolicy& policy) {
  UpdateResult result;
  Expectations& x = result.updated;
  x = before.value_or(Expectations{});
  if (x.hardware_key.empty()) x.hardware_key = card.hardware_key;
  if (x.device.name.empty()) {
    x.device.name = context_string(context, "gpu_name");
    x.device.compute_capability = context_string(context, "compute_capability");
    x.device.sm_count = context_integer(context, "sm_count");
    x.device.l2_bytes = context_integer(context, "l2_bytes");
    x.device.memory_bus_bits = context_integer(context, "memory_bus_bits");
    x.device.memory_clock_khz = context_integer(context, "memory_clock_khz");
    x.device.device_count = gpu_count_of_key(card.hardware_key);
  }
  const std::string date = policy.date.empty() ? utc_now(kIsoUtc) : policy.date;
  const Provenance provenance{context_string(context, "git_sha"), date, policy.command,
                              context_string(context, "driver_release").empty()
                                  ? context_string(context, "driver_version")
                                  : context_string(context, "driver_release"),
                              context_string(context, "runtime_version"),
                              context_string(context, "gpu_name")};
  for (const auto& row : card.rows) {
    if (row.kind != RowKind::pair && row.kind != RowKind::example) continue;
    if (const std::string why = refusal(row, policy); !why.empty()) {
      result.refused.push_back(row.example + ": " + why);
      continue;
    }
    if (policy.add_machine) {
      auto it = x.examples.find(row.example);
      if (it == x.examples.end())
        result.refused.push_back(row.example + ": no entry to add a machine to (accept it with --update-expectations)");
      else if (row.basis != ScoreBasis::machine_spread)
        result.refused.push_back(row.example + ": its scored figure (" + to_string(row.basis) +
                                 ") is the GPU's, so a different one on another machine is a regression or an "
                                 "improvement, not the machine");
      else if (const MachineRun run = machine_run(row, context, date); recorded_machine(it->second, run.host))
        // The band is the spread over machines: the same machine twice would count as evidence
        // of a spread it cannot show (--update-expectations recorded the one that wrote it).
        result.refused.push_back(row.example + ": this machine (" + run.host +
                                 ") is already in its machines list: add a machine other than the ones that "
                                 "measured it");
      else {
        it->second.machines.push_back(run);
        result.accepted.push_back(row.example);
      }
      continue;
    }
    ExampleExpectation entry;
    const auto existing = x.examples.find(row.example);
    entry.expected_status = recordable_outcome(row, policy);
    if (!entry.expected_status.empty()) {
      // A reason already written (by hand, saying why) is kept while the outcome stays the same.
      if (existing != x.examples.end() && existing->second.expected_status == entry.expected_status &&
          entry.expected_status == kExpectedNoSpeedup)
        entry.reason = existing->second.reason;
      else if (entry.expected_status == kExpectedSkipped)
        entry.reason = row.subject->message;  // the harness's; a run must repeat it
      else
        entry.reason = fmt::format("measured {:.2f}x [{:.2f}, {:.2f}]: the optimized side is not clearly faster here",
                                   row.speedup->estimate, row.speedup->low, row.speedup->high);
    }
    if (entry.expected_status == kExpectedSkipped) {
      entry.provenance = provenance;
      if (noise_refusal(*row.baseline, policy).empty())
        entry.variants[row.baseline->variant] = {row.baseline->median_us, row.baseline->noise};
      x.examples[row.example] = std::move(entry);
      result.accepted.push_back(row.example);
      continue;
    }
    if (existing != x.examples.end() && existing->second.expected_status != kExpectedSkipped)
      entry.tolerance = existing->second.tolerance;
    else entry.tolerance = policy.default_tolerance;
    // A jittery side's figure moves with the host: the band is at least twice its noise. When
    // the pair is scored by the optimized side's time, the baseline's jitter does not enter it.
    // A pair scored by a metric: the noise of that metric's per-sample values.
    auto noise = [&](const CaseResult& side) {
      return row.metric && !side.metric_samples.empty() ? stats::relative_noise(side.metric_samples)
                                                        : side.noise;
    };
    entry.tolerance =
        std::max({entry.tolerance, 2 * noise(*row.subject),
                  row.basis == ScoreBasis::optimized_time ? 0.0 : 2 * noise(*row.baseline)});
    if (const std::string why = run_refusal(row, entry.tolerance); !why.empty()) {
      result.refused.push_back(row.example + ": " + why);
      continue;
    }
    entry.metric = row.metric;  // the figure `speedup` is a ratio of
    entry.speedup = row.speedup->estimate;
    entry.pct_ceiling = row.pct_ceiling;
    entry.provenance = provenance;
    // A host-dependent entry starts its list of machines with this one (docs/expectations.md).
    if (row.basis == ScoreBasis::machine_spread) entry.machines.push_back(machine_run(row, context, date));
    entry.variants[row.baseline->variant] = {row.baseline->median_us, row.baseline->noise};
    entry.variants[row.subject->variant] = {row.subject->median_us, row.subject->noise};
    // The ladder's other rungs are recorded too when they are clean.
    for (const auto& rung : card.rows)
      if (rung.example == row.example && rung.kind != RowKind::pair && rung.status == Status::info &&
          rung.subject->verified && noise_refusal(*rung.subject, policy).empty())
        entry.variants[rung.subject->variant] = {rung.subject->median_us, rung.subject->noise};
    x.examples[row.example] = std::move(entry);
    result.accepted.push_back(row.example);
  }
  result.diff = diff_expectations(before.value_or(Expectations{}), x);
  return result;
}

MetricCheck declared_metrics(const Scorecard& card) {
  std::map<std::string, std::optional<ScoredMetric>> declared;
  for (const auto& row : card.rows)
    if (row.kind == RowKind::pair && row.speedup) declared[row.example] = row.metric;
  return [declared](const std::string& example,
                    const std::optional<ScoredMetric>& recorded) -> std::string {
    const auto it = declared.find(example);
    if (it == declared.end() || it->second == recorded) return {};
    return "the entry records a speedup of " + scored_by_text(recorded) +
           ", but the example is scored by " + scored_by_text(it->second) +
           ": remove the entry, then record it again with --update-expectations";
  };
}

std::vector<std::pair<std::filesystem::path, Scorecard>> update_targets(
    const std::filesystem::path& dir, const Scorecard& card) {
  const std::string one_gpu = single_gpu_key(card.hardware_key);
  if (one_gpu == card.hardware_key) return {{dir / (card.hardware_key + ".json"), card}};
  const auto needs_several = [](const ScoredRow& row) {
    return (row.baseline && row.baseline->min_gpus > 1) || (row.subject && row.subject->min_gpus > 1);
  };
  Scorecard machine{card.hardware_key, {}}, single{one_gpu, {}};
  for (const auto& row : card.rows) (needs_several(row) ? machine : single).rows.push_back(row);
  std::vector<std::pair<std::filesystem::path, Scorecard>> targets;
  for (auto* part : {&machine, &single})
    if (!part->rows.empty()) targets.emplace_back(dir / (part->hardware_key + ".json"), std::move(*part));
  return targets;
}

UpdateResult update_expectations_file(const std::filesystem::path& file, const Scorecard& card,
                                      const json& context, const UpdatePolicy& policy,
                                      const ExampleCheck& example) {
  const std::optional<Expectations> before =
      load_expectations(file, example, declared_metrics(card));
  UpdateResult result = plan_update(before, card, context, policy);
  if (!result.accepted.empty()) save_expectations(file, result.updated);
  return result;
}

}  // namespace bench::tools

// tools/expectations_update.hpp: turning a scored run into expectations entries, refusing
// what should not become a reference (failed, unverified, noisy, regressed, no speedup).
#pragma once

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "bench/expectations.hpp"
#include "results.hpp"
#include "scoring.hpp"

namespace bench::tools {

// Per-variant noise is judged by how well it pins the median down. A device-timed variant at
// most max_noise noisy is accepted as is. A noisier one (host-bound lessons: launch storms,
// pageable copies, host loops carry the OS's scheduling jitter, 5-10% per sample on the GPU
// machines) is accepted only when it has enough samples that its median's standard error,
// 1.2533 * noise / sqrt(samples), is within max_median_error, and never above
// max_jittery_noise. Its entry's tolerance widens to twice its noise, so a rerun on another
// host does not score a false regression.
// That argument assumes independent samples; a host-bound median also drifts over seconds (on
// the GPU machines' VMs a pageable upload's median moved 17% between processes a few seconds
// apart). Runs in separate processes (bench compare --repetitions, at least min_runs) measure
// the drift directly: every run's own speedup must then land within the tolerance the entry is
// written with, and that check replaces the standard-error one for a jittery side.
struct UpdatePolicy {
  double max_noise = 0.05;            // per variant, relative (robust) noise, accepted as is
  double max_jittery_noise = 0.15;    // per variant, the most accepted with many samples
  double max_median_error = 0.005;    // the median's relative standard error, above max_noise
  int min_runs = 3;                   // repetitions that make the run-to-run check
  double max_interval_width = 0.10;   // (high - low) / estimate of the speedup
  double default_tolerance = 0.10;    // for a new entry; an existing entry keeps its own
  // --add-machine: instead of replacing entries, append this machine's figures to the
  // `machines` of each host-dependent example (docs/expectations.md); nothing else changes.
  bool add_machine = false;
  // --record-outcome a,b: for these examples (bare or chNN/ names) an honest NO_SPEEDUP, or an
  // optimized side SKIPPED with its reason while the baseline ran clean, is written as the
  // entry's `expected_status` instead of refused. An entry that already records the outcome
  // seen is refreshed without being named here.
  std::vector<std::string> record_outcomes;
  std::string command;                // the bench command line, for provenance
  std::string date;                   // ISO 8601 UTC; empty: now
};

struct UpdateResult {
  Expectations updated;
  std::vector<std::string> accepted;  // examples written
  std::vector<std::string> refused;   // "ch07/x: <why>"
  std::vector<std::string> diff;      // diff_expectations(before, updated)
};

// Pure: computes the new expectations from the old ones (std::nullopt: a new file).
UpdateResult plan_update(const std::optional<Expectations>& before, const Scorecard& card,
                         const json& context, const UpdatePolicy& policy);

// What the run behind `card` declares each scored example is scored by (a metric, or time), as
// the check that refuses a file whose entry records another (ExpectationsChecks::metric).
MetricCheck declared_metrics(const Scorecard& card);

// Which files an update of `card` writes, each with the rows it may accept. On a one-GPU key:
// <key>.json, every row. On a machine of several GPUs (an "Nx_" key): the examples that need
// several GPUs (CaseResult::min_gpus) go to the machine's file, and every other example to its
// GPU's one-GPU file (<gpu>.json, with that key), which is the file a one-GPU machine of the same
// GPU reads: GPU 0 of a 4x H100 is an H100, and a figure of one GPU does not belong to the four.
// A file with no row is left out.
std::vector<std::pair<std::filesystem::path, Scorecard>> update_targets(
    const std::filesystem::path& dir, const Scorecard& card);

// Loads `file`, plans, and saves atomically when anything was accepted; a file whose entry
// records another figure than its example declares is refused (ExpectationsError).
// The file is read as compare and validate read it (load_expectations, `example` checking its
// keys).
UpdateResult update_expectations_file(const std::filesystem::path& file, const Scorecard& card,
                                      const json& context, const UpdatePolicy& policy,
                                      const ExampleCheck& example = {});

}  // namespace bench::tools

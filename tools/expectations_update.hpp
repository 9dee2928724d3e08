// tools/expectations_update.hpp: turning a scored run into expectations entries, refusing
// what should not become a reference (failed, unverified, noisy, regressed, no speedup).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "bench/expectations.hpp"
#include "results.hpp"
#include "scoring.hpp"

namespace bench::tools {

struct UpdatePolicy {
  double max_noise = 0.05;            // per variant, relative (robust) noise
  double max_interval_width = 0.10;   // (high - low) / estimate of the speedup
  double default_tolerance = 0.10;    // for a new entry; an existing entry keeps its own
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

// Loads `file`, plans, and saves atomically when anything was accepted.
UpdateResult update_expectations_file(const std::filesystem::path& file, const Scorecard& card,
                                      const json& context, const UpdatePolicy& policy);

}  // namespace bench::tools

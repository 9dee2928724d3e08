// tools/expectations_write.hpp: what only `bench` does with expectations files: write them
// (canonically and atomically), update their ceilings, diff two of them, and name how an entry is
// scored. Reading them (bench/expectations.hpp) stays in the harness, since every chapter binary
// reads its GPU's ceilings for percent of ceiling.
#pragma once

#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/expectations.hpp"

namespace bench {

// Canonical text (sorted keys, two-space indent, trailing newline).
std::string serialize_expectations(const Expectations& expectations);
// Atomic: writes "<file>.tmp.<pid>" next to the file, flushes it, then renames it over `file`,
// so a crash leaves either the old or the new file, never half of one. A failure (a full disk)
// throws ExpectationsError naming the path and the system's reason (strerror).
void save_expectations(const std::filesystem::path& file, const Expectations& expectations);
// Read-modify-write of the ceilings block only (for `bench calibrate`): every other entry is
// kept. Creates the file when missing, with `hardware_key` set from the file name.
void update_ceilings(const std::filesystem::path& file,
                     const std::map<std::string, Ceiling>& ceilings);
// Human-readable differences, one line each ("+ ceilings.hbm_copy_gbps: 3010.5 GB/s", "~ ...").
std::vector<std::string> diff_expectations(const Expectations& before, const Expectations& after);
// "p99_decode_latency_us (lower is better)", or "time" for none.
std::string scored_by_text(const std::optional<ScoredMetric>& metric);

}  // namespace bench

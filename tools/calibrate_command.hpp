// tools/calibrate_command.hpp: `bench calibrate`: measures this GPU's ceilings with the
// `calibrate` binary (<build>/calibrate/calibrate, one harness case per ceiling) and stores them
// in the `ceilings` block of expectations/<hardware_key>.json, keeping every other entry.
// The list of ceilings, their units and methods: calibrate/ceilings.hpp.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "commands.hpp"

namespace bench::tools {

struct CalibrateOptions {
  Locations where;
  bool dry_run = false;                   // list what would be measured and where it would go
  std::vector<std::string> only;          // name prefixes ("hbm", "bf16"); empty: every ceiling
  int repetitions = 1;                    // > 1: run the binary that often, store the median, report the spread
  std::vector<std::string> harness_args;  // after "--": flags for the calibrate binary
};

// 0: every selected ceiling measured (or SKIPPED, e.g. p2p on one GPU) and stored;
// 1: a case FAILED or was not verified (the others are still stored); 2: bad usage.
int calibrate_command(const CalibrateOptions& options, std::ostream& out, std::ostream& err);

}  // namespace bench::tools

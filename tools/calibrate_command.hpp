// tools/calibrate_command.hpp: `bench calibrate`: measures this GPU's ceilings with the
// `calibrate` binary (<build>/calibrate/calibrate, one harness case per ceiling) and stores them
// in the `ceilings` block of expectations/<hardware_key>.json, keeping every other entry (on a
// machine of several GPUs, only the links there: see ceiling_files).
// The list of ceilings, their units and methods: calibrate/ceilings.hpp.
#pragma once

#include <cstddef>
#include <filesystem>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include "../calibrate/ceilings.hpp"
#include "bench/expectations.hpp"
#include "commands.hpp"

namespace bench::tools {

struct CalibrateOptions {
  Locations where;
  bool dry_run = false;                   // list what would be measured and where it would go
  std::vector<std::string> only;          // name prefixes ("hbm", "bf16"); empty: every ceiling
  int repetitions = 1;                    // > 1: run the binary that often, store the median, report the spread
  bool every_gpu = false;  // measure each one-GPU ceiling on every GPU, store the best board's
  std::vector<std::string> harness_args;  // after "--": flags for the calibrate binary
};

// 0: every selected ceiling measured (or SKIPPED, e.g. p2p on one GPU) and stored;
// 1: a case FAILED or was not verified (the others are still stored); 2: bad usage.
int calibrate_command(const CalibrateOptions& options, std::ostream& out, std::ostream& err);

// The ceilings whose names start with one of `prefixes` (all when empty), in kCeilings' order,
// and with each one stored as the faster of two forms (calibration::kFasterOf), its other form:
// `--only fp8_burst` measures cuBLASLt and the persistent kernel, since the figure stored is the
// faster of both; measured alone, it would fall back to one form's. A prefix that starts no
// ceiling's name sets `error`.
std::vector<calibration::CeilingSpec> select_ceilings(const std::vector<std::string>& prefixes,
                                                      std::string* error);

// For each pair of calibration::kFasterOf that was measured: stores the faster figure (and its
// noise) under the pair's name, with a method naming both forms and both figures, and says so on
// `out`. The other form's own entry is kept as measured.
void keep_faster(std::map<std::string, Ceiling>& measured, std::ostream& out);

// Of one ceiling measured on each GPU of a machine (--every-gpu), the index of the best board's
// figure: the highest, or for a time (launch_us, ...) the lowest.
std::size_t best_board(const calibration::CeilingSpec& spec, const std::vector<double>& figures);

// Which file in `dir` each measured ceiling is stored in. On one GPU ("h200"): its file. On a
// machine of N GPUs ("2x_h200"): a ceiling that needs several GPUs (p2p_gbps) in the machine's
// file, every other one, measured on one of its GPUs, in that GPU's one-GPU file ("h200.json"),
// which is where load_expectations_for reads one-GPU ceilings for both kinds of machine. Stored
// in the machine's file, they would shadow the one-GPU file's from then on (a later, better
// calibration of h200.json would never be seen on the 2x machine).
std::map<std::filesystem::path, std::map<std::string, Ceiling>> ceiling_files(
    const std::filesystem::path& dir, const std::string& hardware_key,
    const std::map<std::string, Ceiling>& measured);

}  // namespace bench::tools

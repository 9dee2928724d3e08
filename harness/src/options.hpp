// Internal: the harness's own command-line flags (--bench_*), parsed next to Google Benchmark's.
#pragma once

#include <optional>
#include <string>

#include "bench/bench.hpp"
#include "bench/stats.hpp"

namespace bench::detail {

struct Options {
  stats::StopRule stop;
  std::optional<Mode> mode;       // --bench_mode=cold|hot overrides every cold/hot example
  uint64_t seed = 20261121;       // --bench_seed
  std::string samples_out;        // --bench_samples_out=DIR: raw samples per case
  std::string expectations_dir;   // --bench_expectations_dir (default <source>/expectations)
  bool smoke = false;             // --bench_smoke: few samples, every check still made
  bool profile = false;           // --bench_profile: one untimed launch under cudaProfilerStart/Stop
  bool verify_only = false;       // --bench_verify_only: the verification runs only (bench sanitize)
  double throttle_tolerance = 0.10;
};

Options& options();
// Consumes the --bench_* flags from argv. Returns an error message for a malformed or unknown
// --bench_ flag, else an empty string.
std::string parse_options(int* argc, char** argv);
std::string options_help();

}  // namespace bench::detail

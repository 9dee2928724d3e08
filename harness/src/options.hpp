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
  // --bench_seed. Unset: a fresh secret seed per process (random_device), so no variant can meet
  // inputs it, another variant or an earlier process has seen (docs/validity.md, memoisation).
  std::optional<uint64_t> seed;
  std::string samples_out;        // --bench_samples_out=DIR: raw samples per case
  std::string expectations_dir;   // --bench_expectations_dir (default <source>/expectations)
  bool smoke = false;             // --bench_smoke: few samples, no sustained soak, every check made
  bool profile = false;           // --bench_profile: one untimed launch under cudaProfilerStart/Stop
  bool verify_only = false;       // --bench_verify_only: the verification runs only (bench sanitize)
  double throttle_tolerance = 0.10;
};

Options& options();
// The process's input seed: --bench_seed, else drawn once from std::random_device.
uint64_t process_seed();
// True when a CUDA tool (Nsight Compute or Systems, compute-sanitizer) is injected into this
// process: such tools serialise kernels, so a cold sample cannot hold its launch behind the
// blocking kernel. `what` receives the evidence (the variable that names the tool).
bool under_cuda_tool(std::string* what = nullptr);
// Consumes the --bench_* flags from argv. Returns an error message for a malformed or unknown
// --bench_ flag, else an empty string.
std::string parse_options(int* argc, char** argv);
std::string options_help();

}  // namespace bench::detail

// Internal: the harness's own command-line flags (--bench_*), parsed next to Google Benchmark's.
#pragma once

#include <optional>
#include <string>

#include "bench/bench.hpp"
#include "bench/stats.hpp"
#include "registry.hpp"

namespace bench::detail {

// How many calls --bench_timeline traces: enough to tell a steady sequence from a stray one.
inline constexpr int kTimelineCalls = 5;

struct Options {
  stats::StopRule stop;
  std::optional<Mode> mode;       // --bench_mode=cold|hot overrides every cold/hot example
  // --bench_seed. Unset: a fresh secret seed per process (random_device), so no variant can meet
  // inputs it, another variant or an earlier process has seen (docs/validity.md, memoisation).
  std::optional<uint64_t> seed;
  std::string samples_out;        // --bench_samples_out=DIR: raw samples per case
  std::string progress_file;      // --bench_progress=FILE: "start <case>" / "end <case>" lines
  std::string expectations_dir;   // --bench_expectations_dir (default <source>/expectations)
  bool smoke = false;             // --bench_smoke: few samples, no sustained soak, every check made
  bool profile = false;           // --bench_profile: one untimed launch under cudaProfilerStart/Stop
  bool verify_only = false;       // --bench_verify_only: the verification runs only (bench sanitize)
  // --bench_list_variants: one line per case, "<case> <role> <own name>", and nothing run (no GPU
  // needed): the rung a role-named case (".../optimized") runs, for `bench list` and --variant.
  bool list_variants = false;
  // --bench_timeline=PATH: after the warm-up, kTimelineCalls calls traced through CUPTI, each
  // prepared as the profiled launch is; their kernels, copies and memsets written to PATH as JSON
  // (bench profile --tool timeline, where Nsight Systems cannot make a report).
  std::string timeline;
  // --bench_interleaved_checks: sustained mode checks each sample drawn for a device check right
  // after it, as the other modes do, instead of holding its outputs until sampling ends (the A/B
  // of what the checks' gaps do to the clock: docs/architecture.md, step 6).
  bool interleaved_checks = false;
  // --bench_sustained_window=S: sustained mode samples exactly S seconds of the board's time, noise
  // or not, instead of stopping at 1% noise after 1 s or at the 3 s timeout (the A/B of a fixed
  // window: where the limiter's noise never reaches 1%, every case sampled to the timeout).
  std::optional<double> sustained_window_s;
  // --bench_sustained_soak=S: sustained mode soaks S seconds before sampling, not
  // kSustainedSoakSeconds (the A/B of where in the board's heating the samples sit: a fixed window
  // after a longer soak puts them where the default rule's middle sample is).
  std::optional<double> sustained_soak_s;
  std::optional<double> case_timeout_s;  // --bench_case_timeout=S: a case's wall-time limit, 0 none
  double throttle_tolerance = 0.10;
  PointSelection points;  // --bench_sweep, --bench_axis=NAME=V[,V]
};

Options& options();
// The process's input seed: --bench_seed, else drawn once from std::random_device.
uint64_t process_seed();
// True when a CUDA tool (Nsight Compute or Systems, compute-sanitizer) is injected into this
// process: such tools serialise kernels, so a cold sample cannot hold its launch behind the
// blocking kernel. `what` receives the evidence (the variable that names the tool).
bool under_cuda_tool(std::string* what = nullptr);
// The wall-time limit on one case (verification, sampling and checks), past which the process
// names the case and ends (watchdog.hpp): --bench_case_timeout if given, else none under a CUDA
// tool (a profiler replays kernels, a sanitizer slows them 10-100x; bench sanitize keeps its own
// limit), else 60 s in a smoke run and 300 s otherwise. The longest honest cases take ~10 s.
double case_time_limit_s();
// Consumes the --bench_* flags from argv. Returns an error message for a malformed or unknown
// --bench_ flag, else an empty string.
std::string parse_options(int* argc, char** argv);
std::string options_help();

}  // namespace bench::detail

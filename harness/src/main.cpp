// main() of every chapter binary: turns each registered variant, at each selected point of the
// example's axes, into a Google Benchmark case chNN/<example>/<variant>[/<axis>:<value>...], runs
// it through the Runner and reports counters, label and context.
#include <benchmark/benchmark.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "bench/device_info.hpp"
#include "bench/expectations.hpp"
#include "display_reporter.hpp"
#include "options.hpp"
#include "registry.hpp"
#include "runner.hpp"
#include "watchdog.hpp"

namespace {

using bench::detail::CaseRun;

constexpr int kNoDeviceExitCode = 77;  // ctest's SKIP_RETURN_CODE for gpu/chapter tests

// --bench_progress: one line per case boundary, appended and closed at once, so a process that is
// killed mid-case (an interrupted bench compare) still leaves the case it was in on disk.
void note_progress(const char* what, const std::string& name) {
  const std::string& file = bench::detail::options().progress_file;
  if (file.empty()) return;
  std::ofstream(file, std::ios::app) << what << ' ' << name << '\n';
}

void write_samples(const std::string& dir, const std::string& name,
                   const bench::detail::ExampleDef& e, const CaseRun& r) {
  std::string file = name;
  std::replace(file.begin(), file.end(), '/', '.');
  std::filesystem::create_directories(dir);
  auto to_us = [](const std::vector<double>& s) {
    std::vector<double> us;
    for (double x : s) us.push_back(x * 1e6);
    return us;
  };
  nlohmann::ordered_json j;
  j["name"] = name;
  j["unit"] = "us";
  j["samples"] = to_us(r.samples);
  if (!e.scored_metric.empty())  // its value after each kept sample, in the order of "samples"
    j["scored_metric"] = {{"name", e.scored_metric},
                          {"better", bench::to_string(e.scored_better)},
                          {"samples", r.scored_values}};
  j["dropped"] = to_us(r.dropped);
  j["sm_mhz"] = r.sm_mhz;
  j["mode"] = bench::to_string(r.mode);
  j["stop_reason"] = bench::stats::to_string(r.stop);
  j["batch"] = r.batch;
  j["input_seed"] = r.seed;  // every sample's inputs derive from it (--bench_seed reproduces a process)
  if (r.fresh_repeat_ratio > 0) j["fresh_repeat_ratio"] = r.fresh_repeat_ratio;
  j["fingerprint"] = nlohmann::json::parse(r.fingerprint);
  j["fingerprint"]["hash"] = r.fingerprint_hash;
  for (const auto& [phase, seconds] : r.phase_seconds) j["phase_seconds"][phase] = seconds;
  std::ofstream(std::filesystem::path(dir) / (file + ".json")) << j.dump(1) << "\n";
}

// Google Benchmark writes NaN and Inf as bare words, which is not JSON: never emit them.
void replace_non_finite(benchmark::UserCounters& counters) {
  for (auto& [name, counter] : counters)
    if (!std::isfinite(counter.value)) counter.value = -1;
}

void report(benchmark::State& state, const bench::detail::ExampleDef& e,
            const bench::detail::VariantDef& v, const CaseRun& r,
            const std::map<std::string, double>& ceilings) {
  using bench::stats::quantile;
  const double median = bench::stats::median(r.samples);
  auto& c = state.counters;
  // real_time holds the median too, but the console prints it to three significant figures
  // (124 us): an A/B read off the console needs the digits.
  c["median_us"] = median * 1e6;
  c["p10_us"] = quantile(r.samples, 0.1) * 1e6;
  c["p90_us"] = quantile(r.samples, 0.9) * 1e6;
  c["noise"] = bench::stats::relative_noise(r.samples);
  c["samples"] = static_cast<double>(r.samples.size());
  c["dropped_throttled"] = static_cast<double>(r.dropped.size());
  c["min_sm_mhz"] = r.sm_mhz.empty() ? 0 : *std::min_element(r.sm_mhz.begin(), r.sm_mhz.end());
  c["first_call_us"] = r.first_call_s * 1e6;
  c["bytes"] = r.bytes;
  c["flops"] = r.flops;
  c["l2_write_slack_bytes"] = r.l2_write_slack_bytes;
  c["gbps"] = r.bytes / median / 1e9;
  c["tflops"] = r.flops / median / 1e12;
  c["verified"] = 1;
  c["max_abs_err"] = r.max_abs_err;
  c["rel_l2_err"] = r.rel_l2_err;
  c["wall_event_ratio"] = r.wall_event_ratio;
  c["traced_calls"] = r.traced_calls;
  c["verified_samples"] = r.verified_samples;
  c["fast_samples_verified"] = r.fast_samples_verified;
  c["verify_s"] = r.verify_seconds;
  c["compared_samples"] = r.compared_samples;
  c["deferred_samples"] = r.deferred_samples;
  c["compare_s"] = r.compare_seconds;
  c["compare_host_passes"] = r.compare_host_passes;
  c["escape_5pct"] = r.escape_5pct;
  c["probed_repeats"] = r.probed_repeats;
  c["fast_repeats"] = r.fast_repeats;
  c["timer_floor_us"] = r.timer_floor_s * 1e6;
  // Percent of the binding ceiling: the larger of the bandwidth and compute fractions.
  double pct = -1;
  if (auto it = ceilings.find(r.bandwidth_ceiling); r.bytes > 0 && it != ceilings.end())
    pct = std::max(pct, 100.0 * c["gbps"].value / it->second);
  if (auto it = ceilings.find(r.compute_ceiling); r.flops > 0 && it != ceilings.end())
    pct = std::max(pct, 100.0 * c["tflops"].value / it->second);
  if (pct >= 0) c["pct_ceiling"] = pct;
  for (const auto& m : r.metrics) c[m.name] = m.value;
  replace_non_finite(c);
  std::string label = fmt::format("role={};impl={};fp={};mode={};stop={}", bench::to_string(v.role),
                                  v.description, r.fingerprint_hash, bench::to_string(r.mode),
                                  bench::stats::to_string(r.stop));
  if (r.bytes > 0) label += ";bw=" + r.bandwidth_ceiling;
  if (r.flops > 0) label += ";compute=" + r.compute_ceiling;
  if (r.throttle_kept_all) label += ";throttled=all";
  label += r.escape_method == "cupti" ? ";escape=cupti" : ";escape=ratio";
  if (!r.suspect.empty()) label += ";suspect=" + r.suspect;
  // How the timed samples were checked: "device", "device-deferred" (sustained mode: after
  // sampling), or "cpu (why not on the device)".
  if (!r.sample_check.empty()) label += ";checks=" + r.sample_check;
  if (v.options.host_bound) label += ";host_bound=1";
  // How many GPUs the example needs, when more than one: bench compare --update-expectations
  // records it in the machine's file (4x_...), every other example in its GPU's own file.
  if (e.min_gpus > 1) label += fmt::format(";gpus={}", e.min_gpus);
  if (!e.scored_metric.empty())
    label += fmt::format(";scored_by={}:{}", e.scored_metric, bench::to_string(e.scored_better));
  if (!r.metrics.empty()) {  // which counters are the variant's own figures (bench::Metric)
    label += ";metrics=";
    for (std::size_t i = 0; i < r.metrics.size(); ++i) label += (i ? "," : "") + r.metrics[i].name;
  }
  state.SetLabel(label);
}

// --bench_profile: the case ran once under the profiler, untimed. No time or rate is reported,
// and "mode=profile" in the label makes the bench tools refuse the row as a measurement.
// --bench_timeline: calls traced through CUPTI, untimed by the harness; "mode=timeline", refused
// the same way. --bench_verify_only (`bench sanitize`): only the verification runs ran;
// "mode=verify".
void report_untimed(benchmark::State& state, const bench::detail::VariantDef& v, const CaseRun& r) {
  const auto& opt = bench::detail::options();
  for (auto _ : state) state.SetIterationTime(0);
  auto& c = state.counters;
  if (opt.profile) c["profiled"] = 1;
  if (!opt.timeline.empty()) c["traced_calls"] = bench::detail::kTimelineCalls;
  c["verified"] = 1;
  c["max_abs_err"] = r.max_abs_err;
  c["rel_l2_err"] = r.rel_l2_err;
  replace_non_finite(c);
  const char* mode = opt.profile ? "profile" : !opt.timeline.empty() ? "timeline" : "verify";
  state.SetLabel(fmt::format("role={};impl={};fp={};mode={}", bench::to_string(v.role),
                             v.description, r.fingerprint_hash, mode));
}

// Which machine ran this: lent machines all call themselves "vm", so the kernel's boot id
// (fresh at every boot, so one per lease) is added to the host name.
std::string machine_id() {
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(boot, id);
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return id.empty() ? std::string(host) : fmt::format("{}/{}", host, id.substr(0, 8));
}

void add_context(const bench::DeviceInfo& d, int argc, char** argv) {
  const auto& b = bench::build_info();
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  const std::pair<const char*, std::string> entries[] = {
      {"gpu_name", d.name},
      {"hardware_key", d.hardware_key},
      {"compute_capability", fmt::format("{}.{}", d.cc_major, d.cc_minor)},
      {"sm_count", std::to_string(d.sm_count)},
      {"l2_bytes", std::to_string(d.l2_bytes)},
      {"memory_bus_bits", std::to_string(d.memory_bus_bits)},
      {"memory_clock_khz", std::to_string(d.memory_clock_khz)},
      {"sm_clock_khz", std::to_string(d.sm_clock_khz)},
      {"ecc", d.ecc ? "on" : "off"},
      {"driver_version", std::to_string(d.driver_version)},
      {"driver_release", d.driver_release},
      {"runtime_version", std::to_string(d.runtime_version)},
      {"nvcc_version", b.nvcc_version},
      {"cuda_flags", b.cuda_flags},
      {"cuda_architectures", b.cuda_architectures},
      {"build_type", b.build_type},
      {"git_sha", b.git_sha},
      {"command_line", command},
      {"machine_id", machine_id()},
  };
  for (const auto& [key, value] : entries) benchmark::AddCustomContext(key, value);
  if (bench::detail::options().profile) benchmark::AddCustomContext("bench_profile", "on");
  if (bench::detail::options().verify_only) benchmark::AddCustomContext("bench_verify_only", "on");
  if (!bench::detail::options().timeline.empty())
    benchmark::AddCustomContext("bench_timeline", bench::detail::options().timeline);
}

}  // namespace

int main(int argc, char** argv) {
  const int original_argc = argc;
  std::vector<char*> original_argv(argv, argv + argc);
  benchmark::Initialize(&argc, argv);
  if (auto error = bench::detail::parse_options(&argc, argv); !error.empty()) {
    std::fprintf(stderr, "%s\n", error.c_str());
    return 2;
  }
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;

  bool listing = bench::detail::options().list_variants;
  for (int i = 0; i < original_argc; ++i)
    listing |= std::string_view(original_argv[i]).rfind("--benchmark_list_tests", 0) == 0;

  std::unique_ptr<bench::detail::Runner> runner;
  if (!listing) {
    std::string why;
    if (bench::cuda_device_count(&why) == 0) {
      std::fprintf(stderr, "SKIPPED: no CUDA device: %s\n", why.c_str());
      return kNoDeviceExitCode;
    }
    const bench::DeviceInfo device = bench::query_device(0);
    std::string dir = bench::detail::options().expectations_dir;
    if (dir.empty()) dir = bench::build_info().source_dir + "/expectations";
    std::map<std::string, double> ceilings;
    try {
      ceilings = bench::load_ceilings(dir, device.hardware_key);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "warning: no percent-of-ceiling figures: %s\n", e.what());
    }
    add_context(device, original_argc, original_argv.data());
    runner = std::make_unique<bench::detail::Runner>(device, std::move(ceilings));
  }

  // A case that hangs names itself and ends the process (watchdog.hpp), where ctest or bench
  // compare would otherwise wait on it without a word.
  bench::detail::CaseWatchdog watchdog(bench::detail::case_time_limit_s());
  // Each selected point of an example's axes is an example of its own (registry.hpp).
  std::vector<const bench::detail::ExampleDef*> points;
  try {
    points = bench::detail::expand_points(bench::detail::sorted_examples(),
                                          bench::detail::options().points);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "bad axes: %s\n", e.what());
    return 2;
  }
  if (bench::detail::options().list_variants) {
    for (const auto* example : points)
      for (const auto& variant : example->variants)
        std::printf("%s %s %s\n", bench::detail::case_name(*example, variant).c_str(),
                    bench::to_string(variant.role), variant.description.c_str());
    return 0;
  }
  for (const auto* example : points) {
    for (const auto& variant : example->variants) {
      const std::string name = bench::detail::case_name(*example, variant);
      benchmark::RegisterBenchmark(
          name.c_str(),
          [example, &variant, name, &runner, &watchdog](benchmark::State& state) {
            const CaseRun r = [&] {
              const auto watching = watchdog.watch(name);
              note_progress("start", name);
              return runner->run(*example, variant);
            }();
            note_progress("end", name);
            if (r.outcome != CaseRun::Outcome::measured) {
              const char* tag = r.outcome == CaseRun::Outcome::skipped ? "SKIPPED: " : "FAILED: ";
              state.SkipWithError((tag + r.message).c_str());
              return;
            }
            if (bench::detail::options().profile || bench::detail::options().verify_only ||
                !bench::detail::options().timeline.empty())
              return report_untimed(state, variant, r);
            for (auto _ : state) state.SetIterationTime(bench::stats::median(r.samples));
            report(state, *example, variant, r, runner->ceilings());
            if (!bench::detail::options().samples_out.empty())
              write_samples(bench::detail::options().samples_out, name, *example, r);
          })
          ->UseManualTime()
          ->Iterations(1)
          ->Unit(benchmark::kMicrosecond);
    }
  }

  // The default display, less the library's misleading "built as DEBUG" warning.
  const auto display = bench::detail::make_display_reporter();
  benchmark::RunSpecifiedBenchmarks(display.get());
  benchmark::Shutdown();
  if (runner && !runner->context_lost().empty()) {
    std::fprintf(stderr, "FATAL: sticky CUDA error, the process ends: %s\n",
                 runner->context_lost().c_str());
    return 3;
  }
  return 0;
}

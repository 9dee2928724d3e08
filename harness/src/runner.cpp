// The measurement of one case, in the order of DESIGN §3:
//   requirements -> verify twice at the verification size -> build at the timing size ->
//   first call and warm-up -> escaped-work check -> adaptive sampling -> a last sample on fresh
//   inputs, re-verified -> throttle rule.
// With --bench_profile the case stops after the warm-up: one launch under the profiler, checked;
// with --bench_timeline, kTimelineCalls calls traced through CUPTI, the last one checked.
#include "runner.hpp"

#include <cuda_profiler_api.h>
#include <fmt/format.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <optional>
#include <random>

#include "arch_support.hpp"
#include "bench/expectations.hpp"
#include "options.hpp"
#include "sample_check.hpp"
#include "verify.hpp"
#include "work_tracer.hpp"
#include "workload.hpp"

namespace bench::detail {
namespace {

struct NvtxRange {
  explicit NvtxRange(const std::string& name) { nvtxRangePushA(name.c_str()); }
  ~NvtxRange() { nvtxRangePop(); }
};

// One phase of a case: an NVTX range that also records its host wall time in the result.
class Phase {
 public:
  Phase(const char* name, CaseRun& result) : range_(name), name_(name), result_(result) {}
  ~Phase() { result_.phase_seconds.emplace_back(name_, host_seconds() - start_); }

 private:
  NvtxRange range_;
  const char* name_;
  CaseRun& result_;
  double start_ = host_seconds();
};

struct Stream {
  // A blocking stream: work a variant puts on the legacy default stream serialises with it and
  // is timed, rather than escaping.
  Stream() { BENCH_CUDA_CHECK(cudaStreamCreate(&handle)); }
  ~Stream() { cudaStreamDestroy(handle); }
  cudaStream_t handle = nullptr;
};

// What every phase of one case reads and writes: the case, the harness's options and sampler, the
// case's stream and seed, and the result the phases fill in.
struct CaseContext {
  const ExampleDef& example;
  const VariantDef& variant;
  const Options& options;
  Sampler& sampler;
  cudaStream_t stream;
  uint64_t seed;  // the case's (case_seed): every run draws its inputs from a seed derived from it
  // Row 9's hold around each traced call, for a variant whose cold samples run behind one.
  Sampler* traced_hold;
  CaseRun& result;
};

uint64_t run_seed(uint64_t seed, int run) { return seed * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull * (run + 1); }

// A case's inputs come from the process's seed (secret and fresh per process unless
// --bench_seed fixes it) mixed with the case's own name: no variant ever meets the inputs another
// variant, or an earlier process, computed on, so an answer memoised there can never be served.
uint64_t case_seed(const ExampleDef& example, const VariantDef& variant) {
  return run_seed(process_seed() ^ fnv1a(example.chapter + "/" + example.name + "/" + variant.name),
                  0);
}

// Run numbers: 0 and 1 are the verification runs, 2 the profiled launch, 3 + i timed sample i.
// A --bench_timeline run takes no samples: its traced call i is run 2 + i.
constexpr int kProfiledRun = 2;
constexpr int kFirstSampleRun = 3;

// A hot batch repeats its launch on unchanged inputs; only the first launch meets fresh ones.
// A variant that remembers runs the repeats far faster than the first. Honest work differs by
// cache state and by the launch gap in front of the first launch (a few us): the margin below
// flags only a first launch more than 1.5x the repeats and 20 us over them.
constexpr double kMemoRatio = 1.5;
constexpr double kMemoSlackSeconds = 20e-6;

// VALIDITY row 18, hot batches, probed: a few batches with an event after every launch. Honest
// repeats of one launch on one input take about the same time; a variant that skips some of its
// repeats (it has seen their inputs) shows them as launches under half the median repeat. The
// probed batches are as long as the timed ones (CaseRun::batch launches, no cap: a probe shorter
// than a batch misses a variant that skips only past its length) and sit among them
// (TimedSamples): 4 (batch - 1) repeats are probed, and a variant that skips 1 repeat in 8 shows
// about 12.5% of them fast against a bar of 4% (kProbeBatches and fast_repeats_bar: runner.hpp,
// which the planted tests read too).
constexpr double kFastFraction = 0.5;         // "fast": under half the median
constexpr double kProbeFloorSeconds = 5e-6;   // under this a repeat is launch-bound: nothing to skip

// VALIDITY row 2, checked samples: every timed sample under half the median so far is checked on
// the spot; one sample at a secret position among the first min_samples is always checked (the
// last one if sampling stops before it). Where the example has a device reference, most others
// are checked on the device (TimedSamples::draw_checks). Without one, others at random (rate
// min(1, 8 / sample number)) while checking has cost no more than a quarter of the sampling time
// (at least 0.05 s): a check is then the CPU reference at the timing size, seconds at 1 GiB
// (docs/validity.md), so such cases get little more than the secret check. A smoke run takes no
// extra random ones.
constexpr double kRandomChecks = 8;
constexpr double kCheckBudgetShare = 0.25;
constexpr double kCheckBudgetFloorSeconds = 0.05;
// Device-checked samples (sample_check.hpp): at the rate device_check_probability() sets, while
// they cost at most kCompareBudgetShare of the sampling time (DeviceCheckPlan keeps the budget;
// in sustained mode it also decides which checks wait until sampling ends).
constexpr int kHostPassesBeforeOff = 2;
constexpr int kTracedCalls = 3;  // row 1: calls traced before and after the timed samples
// Row 9: how long a traced call's hold waits for the launch to return before it lets the stream go
// (a launch that blocks the host undeclared; cudaGraphLaunch of a conditional graph under CUPTI).
constexpr uint64_t kTracedHoldNs = 100'000'000;

// The timed samples the stop rule asks for at least (its minimum time over one launch's), at most
// what its timeout holds (batches of `batch` launches of `launch_seconds`), and no more than
// 10^4 or its own maximum: the range the probed batches are drawn over.
int samples_asked(const stats::StopRule& stop, double launch_seconds, int batch) {
  const double launch = std::max(launch_seconds, 1e-9);
  const double asked = std::min(stop.min_time_s / launch, stop.timeout_s / (batch * launch));
  return static_cast<int>(
      std::min({std::floor(asked), 1e4, static_cast<double>(stop.max_samples)}));
}

// The most timed samples sampling can take before its timeout stops it (each batch's time alone,
// at least), capped like samples_asked: sustained mode holds outputs for that many checks.
int samples_possible(const stats::StopRule& stop, double launch_seconds, int batch) {
  const double per_sample = std::max(launch_seconds, 1e-9) * batch;
  return static_cast<int>(std::min(
      {std::ceil(stop.timeout_s / per_sample), 1e4, static_cast<double>(stop.max_samples)}));
}

bool cuda_tool_present() {
  static const bool present = [] {
    std::string what;
    const bool found = under_cuda_tool(&what);
    if (found)
      fmt::print(stderr, "cudabench: a CUDA tool is injected ({}): cold samples run without the "
                         "blocking kernel; figures under a tool are not comparable\n", what);
    return found;
  }();
  return present;
}

std::string unsupported_reason(const ExampleDef& example, const VariantDef& variant,
                               const DeviceInfo& device) {
  const int cc = device.cc_major * 10 + device.cc_minor;
  if (device.device_count < example.min_gpus)
    return fmt::format("requires {} GPUs, this machine has {}", example.min_gpus,
                       device.device_count);
  const int need = std::max(example.min_compute_capability, variant.options.min_compute_capability);
  if (cc < need)
    return fmt::format("requires compute capability {}.{}, this GPU ({}) is {}.{}", need / 10,
                       need % 10, device.name, device.cc_major, device.cc_minor);
  return detail::arch_specific_reason(variant.options.arch_specific, cc, device.name,
                                      build_info().cuda_architectures);
}

std::string support_reason(const ExampleDef& example, const VariantDef& variant,
                           const WorkloadInstance& workload) {
  if (example.support) {
    if (auto why = example.support(workload.object.get()); !why.empty()) return why;
  }
  if (variant.support) return variant.support(workload.object.get());
  return {};
}

// At the timing size a device reference, when the example has one, replaces the CPU one.
bool uses_device_reference(const ExampleDef& example, const WorkloadInstance& workload) {
  return example.device_reference && !workload.setup->verifying;
}

// A checked run (VALIDITY rows 2-5) is: fresh inputs from `seed`, their checksum, a private host
// copy for the CPU reference, outputs poisoned with run-specific bytes; then the variant; then the
// inputs must be unchanged and every output must match the reference computed on that copy. A
// device reference reads the device inputs, which the checksum proves unchanged, so no host copy
// is made for it.
struct CheckedRun {
  uint64_t input_checksum = 0;
  HostBuffers host;
};

CheckedRun begin_checked_run(const ExampleDef& example, const WorkloadInstance& workload,
                             uint64_t seed, int run, cudaStream_t stream) {
  CheckedRun checked;
  fill_inputs(workload, seed, stream);
  checked.input_checksum = input_checksum(workload, stream);
  if (!uses_device_reference(example, workload))
    checked.host = copy_inputs_to_host(workload, stream);
  poison_outputs(workload, run, stream);
  return checked;
}

void end_checked_run(const ExampleDef& example, const WorkloadInstance& workload,
                     CheckedRun& checked, int run, cudaStream_t stream, const char* what,
                     CaseRun& result) {
  BENCH_CUDA_CHECK(cudaDeviceSynchronize());
  if (input_checksum(workload, stream) != checked.input_checksum)
    throw CheckFailure(fmt::format("{}: the variant modified its inputs (checksum changed)", what));
  // Outputs stay in their own dtype on the host; the comparison converts them as it reads.
  std::map<std::string, HostCopy> actual, device_expected;
  for (const auto& buffer : workload.buffers())
    if (!buffer.is_input) actual.emplace(buffer.name, copy_to_host(buffer, stream));
  const bool on_device = uses_device_reference(example, workload);
  if (on_device) {
    DeviceReference reference(example, workload);
    reference.run(run + 1, stream);
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (const auto& buffer : workload.buffers())
      if (!buffer.is_input) device_expected.emplace(buffer.name, reference.to_host(buffer, stream));
  } else {
    HostDataImpl impl(checked.host);
    HostData data(impl);
    example.reference(workload.object.get(), data);
  }
  for (const auto& buffer : workload.buffers()) {
    if (buffer.is_input) continue;
    const HostValues expected =
        on_device ? HostValues(device_expected.at(buffer.name))
                  : HostValues(std::span<const double>(checked.host.expected.at(buffer.name)));
    const Tolerance tol = resolve(example.tolerance, buffer.dtype);
    // VALIDITY row 5, checked at the verification size (the same reference and tolerance hold at
    // the timing size; the CPU reference always runs there). A scalar output has no spread to
    // test; the second checked run, on other inputs, is what stops a constant there.
    double mean = 0;
    if (workload.setup->verifying && expected.count > 1 &&
        constant_would_pass(checked.host.expected.at(buffer.name), tol, &mean))
      throw CheckFailure(fmt::format(
          "{}: reference output '{}' has no spread: a constant {:.6g} would pass the tolerance",
          what, buffer.name, mean));
    const Comparison cmp = compare(HostValues(actual.at(buffer.name)), expected, tol);
    result.max_abs_err = std::max(result.max_abs_err, cmp.max_abs_err);
    result.rel_l2_err = std::max(result.rel_l2_err, cmp.rel_l2_err);
    if (!cmp.pass) throw CheckFailure(fmt::format("{}: {}", what, cmp.describe(buffer.name)));
  }
  // At the verification size the device reference, when there is one, must agree with the CPU
  // reference too: at the timing size it is the only judge of every checked sample.
  if (workload.setup->verifying && example.device_reference) {
    DeviceReference reference(example, workload);
    reference.run(run + 1, stream);
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (const auto& buffer : workload.buffers()) {
      if (buffer.is_input) continue;
      const Comparison cmp =
          compare(HostValues(reference.to_host(buffer, stream)),
                  HostValues(std::span<const double>(checked.host.expected.at(buffer.name))),
                  resolve(example.tolerance, buffer.dtype));
      if (!cmp.pass)
        throw CheckFailure(
            fmt::format("{}: the example's device reference disagrees with its CPU reference: {}",
                        what, cmp.describe(buffer.name)));
    }
  }
}

// cudaProfilerStart/Stop around one launch (ncu --profile-from-start off, nsys
// --capture-range=cudaProfilerApi capture only this). Stopped even when the launch throws.
struct ProfilerRange {
  ProfilerRange() {
    BENCH_CUDA_CHECK(cudaProfilerStart());
    nvtxRangePushA("profiled_launch");
  }
  ~ProfilerRange() {
    nvtxRangePop();
    cudaProfilerStop();
  }
};

// One untimed launch prepared like a checked timed sample: fresh inputs (run `run`'s), poisoned
// outputs, L2 flushed, the device synchronised (host mode's sequence: flush, device sync, launch,
// device sync). The fill, poison, clock probe and flush kernels all run before `around` does, so a
// profiler range or a tracer's markers in it hold the variant's own work from exactly one launch.
// The caller checks the output with end_checked_run.
CheckedRun prepared_launch(const CaseContext& context, const WorkloadInstance& workload,
                           const Launch& around, int run) {
  CheckedRun checked = begin_checked_run(context.example, workload, run_seed(context.seed, run),
                                         run, context.stream);
  context.sampler.host(
      [&](cudaStream_t timed_stream) {
        around(timed_stream);
        BENCH_CUDA_CHECK(cudaDeviceSynchronize());
      },
      context.stream);
  return checked;
}

void profile_once(const CaseContext& context, const WorkloadInstance& workload,
                  const Launch& launch) {
  NvtxRange range("profile");
  const auto profiled = [&](cudaStream_t profiled_stream) {
    ProfilerRange profiling;
    launch(profiled_stream);
    BENCH_CUDA_CHECK(cudaDeviceSynchronize());  // inside the range: the launch's work is all in it
  };
  CheckedRun checked = prepared_launch(context, workload, profiled, kProfiledRun);
  end_checked_run(context.example, workload, checked, kProfiledRun, context.stream,
                  "profiled launch", context.result);
}

// One traced call: `launch` between the tracer's two markers, which tell its work from the rest.
Launch traced(WorkTracer& tracer, const Launch& launch) {
  return [&tracer, &launch](cudaStream_t stream) {
    tracer.mark(stream);
    launch(stream);
    tracer.mark(stream);
  };
}

// Every call traced was seen (a lost marker would shift the calls' lists against each other).
void require_all_traced(int seen, int calls) {
  if (seen != calls)
    throw std::runtime_error(
        fmt::format("the work tracer saw {} of the {} calls it traced", seen, calls));
}

// --bench_timeline: kTimelineCalls calls, each prepared as the profiled launch is and bracketed by
// the tracer's markers, then the last one's output checked. Written to the --bench_timeline path:
// per call, its kernels, copies and memsets in start order, the start relative to the call's first
// one (CUPTI's clock is one for every GPU, so offsets on several devices line up).
void trace_timeline(const CaseContext& context, const WorkloadInstance& workload,
                    const Launch& launch, const std::string& gpu) {
  const auto unavailable = [](const std::string& why) {
    return CheckFailure(
        "--bench_timeline traces through CUPTI's activity API, which is not available here: " +
        why);
  };
  // A tool that holds CUPTI (Nsight, compute-sanitizer) leaves no activity API to trace with.
  // Asked first: under a tool CUPTI is never touched, and WorkTracer::get() would probe it.
  if (cuda_tool_present()) throw unavailable("a CUDA tool is injected and holds it");
  WorkTracer& tracer = WorkTracer::get();
  if (!tracer.available()) throw unavailable(tracer.why_unavailable());
  NvtxRange range("timeline");
  const Launch call = traced(tracer, launch);
  tracer.start();
  CheckedRun last;
  for (int i = 0; i < kTimelineCalls; ++i)
    last = prepared_launch(context, workload, call, kProfiledRun + i);
  require_all_traced(tracer.stop(), kTimelineCalls);
  end_checked_run(context.example, workload, last, kProfiledRun + kTimelineCalls - 1,
                  context.stream, "last traced call", context.result);

  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  for (const auto& activities : tracer.calls()) {
    auto& listed = calls.emplace_back(nlohmann::ordered_json::array());
    for (const auto& a : activities)
      listed.push_back({{"kind", a.kind},
                        {"what", a.what},
                        {"device", a.device},
                        {"stream", a.stream},
                        {"start_ns", a.start - activities.front().start},
                        {"duration_ns", a.end - a.start}});
  }
  const std::string& path = context.options.timeline;
  const nlohmann::ordered_json out = {{"case", case_name(context.example, context.variant)},
                                      {"gpu_name", gpu},
                                      {"calls", kTimelineCalls},
                                      {"traced_calls", calls}};
  const std::filesystem::path file(path);
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  std::ofstream written(file);
  written << out.dump(1) << "\n";
  if (!written.flush()) throw std::runtime_error("--bench_timeline: could not write " + path);
}

// VALIDITY row 1 with CUPTI: every kernel, copy and memset these calls start, on any stream of any
// GPU, must be done when the case's stream reaches the point where a timed call's stop event is.
// Row 9, for a variant sampled behind the sampler's hold (cold, not blocking the host): each call
// is queued behind a hold of the case's stream, which keeps its opening marker waiting until the
// launch has returned, and none of its work may start before that marker: work that did was
// queued behind nothing the case's stream does. (Unheld, a call's marker may wait behind the last
// call's work, so nothing is asked of when its work starts.)
void trace_calls(const Launch& launch, cudaStream_t stream, int calls, CaseRun& result,
                 Sampler* hold) {
  WorkTracer& tracer = WorkTracer::get();
  const Launch call = traced(tracer, launch);
  tracer.start();
  for (int i = 0; i < calls; ++i) {
    if (hold != nullptr)
      hold->held(call, stream, kTracedHoldNs);
    else
      call(stream);
  }
  const int seen = tracer.stop();
  if (!tracer.escaped().empty())
    throw CheckFailure("work escaped the timed stream: " + tracer.escaped() +
                       "; join every stream the variant uses back to the case's stream");
  if (hold != nullptr && !tracer.ahead().empty())
    throw CheckFailure("work ran ahead of the timed call: " + tracer.ahead() +
                       "; start every stream's work from the case's stream (an event recorded "
                       "on it), and declare a variant that waits on the host blocks_host");
  require_all_traced(seen, calls);
  result.traced_calls += seen;
}

// An example scored by a metric: its value in what metrics() just reported after timed sample
// `sample` (1-based). Asked after every sample, so a variant cannot report the figure of a
// chosen call only; a figure it leaves out, or one that cannot be a ratio's term, fails the case.
double scored_value(const ExampleDef& example, const std::vector<Metric>& reported, int sample) {
  for (const auto& metric : reported)
    if (metric.name == example.scored_metric) {
      if (!std::isfinite(metric.value) || metric.value <= 0)
        throw CheckFailure(fmt::format(
            "timed sample {}: the variant reported {} = {}; the example is scored by it, "
            "so it must be a positive number",
            sample, example.scored_metric, metric.value));
      return metric.value;
    }
  throw CheckFailure(fmt::format(
      "timed sample {}: the variant did not report {}, the metric the example is scored "
      "by (every variant must report it after every timed sample)",
      sample, example.scored_metric));
}

// The variant's own measure of the whole call (bench::timed_call_ms), in seconds: every variant
// of an example scored by a metric reports one after every timed sample (else the case fails).
double timed_call_seconds(const ExampleDef& example, const std::vector<Metric>& reported,
                          int sample) {
  for (const auto& metric : reported) {
    if (!metric.whole_timed_call) continue;
    if (!std::isfinite(metric.value))
      throw CheckFailure(
          fmt::format("timed sample {}: the variant reported {} = {}: the whole "
                      "call's time must be a finite number of milliseconds",
                      sample, metric.name, metric.value));
    return metric.value * 1e-3;
  }
  throw CheckFailure(fmt::format(
      "timed sample {}: the example is scored by {}, a figure of the variant's own clock, but "
      "the variant reported no measure of the whole call by that clock (bench::timed_call_ms), "
      "which the harness checks against its events",
      sample, example.scored_metric));
}

// The medians of the variant's whole-call times and of the harness's (per call, in a hot batch)
// over the kept samples must agree: the variant's may fall short by what the events hold beyond
// its first and last marks (a launch, an event record: kTimedCallShortfall and
// kTimedCallSlackSeconds) and exceed them only by the clocks' disagreement and the timer floor
// the harness subtracts (kTimedCallExcess and the slack). Medians, not each sample: a short call
// is sometimes delayed between the harness's start event and the variant's first mark (seen on a
// short copy: docs/validity.md, row 21, has the figures).
constexpr double kTimedCallShortfall = 0.10, kTimedCallExcess = 0.02, kTimedCallSlackSeconds = 10e-6;
void check_timed_call(const ExampleDef& example, const std::vector<double>& variant_seconds,
                      const std::vector<double>& harness_seconds) {
  const double variant = stats::median(variant_seconds), harness = stats::median(harness_seconds);
  const bool too_short = variant < (1 - kTimedCallShortfall) * harness - kTimedCallSlackSeconds;
  const bool too_long = variant > (1 + kTimedCallExcess) * harness + kTimedCallSlackSeconds;
  if (too_short || too_long)
    throw CheckFailure(fmt::format(
        "the variant's own clock says a call took {:.4g} ms, the harness's events {:.4g} ms "
        "(medians of {} samples); {} is read off that clock, so the two must agree (within "
        "-{:.0f}%/+{:.0f}%, +-{:.0f} us)",
        variant * 1e3, harness * 1e3, variant_seconds.size(), example.scored_metric,
        100 * kTimedCallShortfall, 100 * kTimedCallExcess, kTimedCallSlackSeconds * 1e6));
}

// Verification size: two checked runs with different inputs and different poison.
void verify_at_verification_size(const CaseContext& context) {
  const ExampleDef& example = context.example;
  Phase phase("verify", context.result);
  WorkloadInstance workload = build_workload(example, /*verifying=*/true);
  if (auto why = support_reason(example, context.variant, workload); !why.empty())
    throw Unsupported(why);
  const Prepared prepared = context.variant.prepare(workload.object.get(), context.stream);
  if (!example.scored_metric.empty() && !prepared.metrics)
    throw CheckFailure(
        fmt::format("the example is scored by {}, but this variant reports no metrics: make it "
                    "a stateful variant whose metrics() reports {}",
                    example.scored_metric, example.scored_metric));
  const Launch& launch = prepared.launch;
  for (int run = 0; run < 2; ++run) {
    CheckedRun checked =
        begin_checked_run(example, workload, run_seed(context.seed, run), run, context.stream);
    launch(context.stream);
    end_checked_run(example, workload, checked, run, context.stream,
                    run == 0 ? "verification run 1" : "verification run 2", context.result);
  }
}

// The workload at the timing size and the variant prepared on it. The workload is declared first,
// so the prepared variant, whose state may refer to the workload's buffers, is destroyed first.
struct TimingWorkload {
  WorkloadInstance workload;
  Prepared prepared{};
  bool writes_outputs = false;
};

// Timing size: the workload built, its figures and ceilings recorded, its inputs filled from the
// case's seed, and the variant prepared on it.
TimingWorkload build_at_timing_size(const CaseContext& context, const DeviceInfo& device,
                                    const std::map<std::string, double>& ceilings) {
  const ExampleDef& example = context.example;
  const VariantDef& variant = context.variant;
  CaseRun& result = context.result;
  Phase phase("build", result);
  TimingWorkload timing{build_workload(example, /*verifying=*/false)};
  const WorkloadInstance& workload = timing.workload;
  if (auto why = support_reason(example, variant, workload); !why.empty()) throw Unsupported(why);
  result.bytes = workload.setup->bytes;
  result.flops = workload.setup->flops;
  double output_bytes = 0;
  for (const auto& buffer : workload.buffers())
    if (!buffer.is_input) output_bytes += static_cast<double>(buffer.bytes());
  result.l2_write_slack_bytes =
      std::min({static_cast<double>(device.l2_bytes), output_bytes, result.bytes});
  // A case with no outputs has nothing a sample could leave poisoned and nothing to verify: only a
  // calibration may be one (calibrate's event_pair_us times two event records, which write
  // nothing).
  timing.writes_outputs = output_bytes > 0;
  if (!timing.writes_outputs && example.chapter != "calibrate")
    throw CheckFailure(
        "the workload declares no outputs: there is nothing to verify (Setup::output)");
  result.bandwidth_ceiling = workload.setup->bandwidth_ceiling;
  // A tensor-core ceiling is the burst figure or the power-limited one, by the case's mode.
  result.compute_ceiling =
      ceiling_for_mode(variant.options.compute_ceiling ? variant.options.compute_ceiling
                                                       : workload.setup->compute_ceiling,
                       result.mode == Mode::sustained,
                       [&](const std::string& name) { return ceilings.count(name) > 0; });
  fill_inputs(workload, context.seed, context.stream);
  result.fingerprint = fingerprint_json(workload);
  result.fingerprint_hash = fingerprint_hash(result.fingerprint);
  timing.prepared = variant.prepare(timing.workload.object.get(), context.stream);
  return timing;
}

// First call (reported separately), then warm-up until first-use costs are gone.
void warm_up(const CaseContext& context, const Launch& launch) {
  CaseRun& result = context.result;
  Phase phase("warmup", result);
  double ignored = 0;
  result.first_call_s = context.sampler.wall_seconds(launch, context.stream, 1, &ignored);
  const double start = host_seconds();
  int calls = 0;
  do {
    result.warm_call_s = context.sampler.wall_seconds(launch, context.stream, 1, &ignored);
    ++calls;
  } while ((calls < 3 || host_seconds() - start < 0.01) && calls < 200);
}

// VALIDITY row 1: work the case's events did not see shows up as wall time they missed. Also sets
// the batch from one launch's event time (back to back), which it returns.
double check_escaped_work(const CaseContext& context, const Launch& launch) {
  CaseRun& result = context.result;
  Phase phase("escape_check", result);
  const int launches =
      std::clamp(static_cast<int>(std::ceil(5e-3 / std::max(result.warm_call_s, 1e-7))), 3, 2000);
  double events = 0;
  const double wall = context.sampler.wall_seconds(launch, context.stream, launches, &events);
  result.wall_event_ratio = events > 0 ? wall / events : INFINITY;
  // Exactly, where CUPTI can be had; else (under Nsight or compute-sanitizer, which hold it) by
  // the ratio of wall time to event time, which misses escapes under a quarter of the work.
  // Under a tool CUPTI is never touched: the tool owns it.
  const bool tool = cuda_tool_present();
  if (!tool && WorkTracer::get().available()) {
    result.escape_method = "cupti";
    trace_calls(launch, context.stream, kTracedCalls, result, context.traced_hold);
  } else {
    result.escape_method =
        fmt::format("wall-clock ratio ({})",
                    tool ? "a CUDA tool is injected" : WorkTracer::get().why_unavailable());
    if (wall - events > std::max(200e-6, 0.25 * wall))
      throw CheckFailure(fmt::format(
          "work escaped the timed stream: {} launches took {:.3f} ms of device-synchronised wall "
          "time but only {:.3f} ms between the case's events",
          launches, wall * 1e3, events * 1e3));
  }
  // A hot batch spans ~1 ms. A sustained one spans kSustainedBatchSeconds: the untimed refill,
  // poison and output check before each batch (row 18) leave the GPU a few hundred us at low
  // power, and over a 1.5 ms batch that let the clock recover (docs/architecture.md, sustained
  // mode); over 20 ms they are about the gap the host's own sync left before.
  const double batch_seconds = result.mode == Mode::sustained ? kSustainedBatchSeconds : 1e-3;
  const double launch_seconds = std::max(events, 1e-9) / launches;
  result.batch = std::clamp(static_cast<int>(std::ceil(batch_seconds / launch_seconds)), 1, 1000);
  if (result.mode == Mode::hot || result.mode == Mode::sustained)
    result.l2_write_slack_bytes /= result.batch;
  return launch_seconds;
}

// The stop rule the samples run under: the options' own, except in sustained mode, where the board
// is first brought to its power limit's steady state. Not in a smoke run (--bench_smoke, ctest's
// chapter tests), which makes every check and scores nothing: 3 s a sustained variant was most of
// a GPU's `./bench test`.
stats::StopRule soak_for_sustained_mode(const CaseContext& context, const Launch& launch) {
  const Options& options = context.options;
  CaseRun& result = context.result;
  stats::StopRule stop = options.stop;
  if (result.mode == Mode::sustained && !options.smoke) {
    Phase phase("soak", result);
    double ignored = 0;
    const double start = host_seconds();
    const double soak_s = options.sustained_soak_s.value_or(kSustainedSoakSeconds);
    while (host_seconds() - start < soak_s)
      context.sampler.wall_seconds(launch, context.stream, result.batch, &ignored);
    // The limiter's clock wanders ~2% over tenths of a second: a median must span several. The
    // stop rule sums one launch's time per sample, and each sample stands for result.batch
    // launches, so a window of kSustainedSampleSeconds of the board's time is that over
    // result.batch (result.batch seconds of work otherwise, which no case reached before its
    // timeout).
    stop.min_time_s = std::max(stop.min_time_s, kSustainedSampleSeconds / result.batch);
    stop.timeout_s = std::max(stop.timeout_s, 2 * kSustainedSampleSeconds);
    if (options.sustained_window_s) {
      // A fixed window: the noise bar is off, and the timeout (wall time less checks) only guards
      // against a batch far longer than its probe said.
      stop.min_time_s = *options.sustained_window_s / result.batch;
      stop.max_noise = std::numeric_limits<double>::infinity();
      stop.timeout_s = 2 * *options.sustained_window_s + 1;
    }
  }
  return stop;
}

// The timed samples as they were taken, kept and throttled alike.
struct SampleRecord {
  std::vector<Sample> samples;
  std::vector<double> seconds;       // every sample's time
  std::vector<double> scored;        // a scored metric's value after every sample, likewise
  std::vector<double> call_seconds;  // and the variant's own time of that sample's call
};

// A timed sample's life on the timing workload, one sample after another: fresh inputs from its
// own seed (their checksum kept) into freshly poisoned outputs; the sampler's cold, hot or host
// sample; its outputs proved written and the scored metric read; and, where chosen, its outputs
// checked against the reference, on the device (at once, or held until sampling ends) or on the
// host. Row 18's probed batches go in among the samples. The runner calls it once a phase: built
// before the samples (the poison's checksums, the held slots), then take_until_stopped() (phase
// "samples"), run_deferred_checks() (phase "deferred_checks") and finish_checks().
class TimedSamples {
 public:
  TimedSamples(const CaseContext& context, const TimingWorkload& timing, bool blocking_kernel,
               const stats::StopRule& stop, double launch_seconds);
  void take_until_stopped();
  void run_deferred_checks();
  // How the samples were checked, into the result; the held slots go back, before the calls
  // traced after.
  void finish_checks();
  const SampleRecord& record() const { return record_; }

 private:
  struct HeldSample {
    int sample;  // from 0: run number kFirstSampleRun + sample, its inputs' seed
    int slot;
    uint64_t inputs;  // the inputs' checksum before the sample, and again right after it
  };
  struct SampleChecks {
    bool fast;       // under half the median so far: checked on the host
    bool chosen;     // the secret position or a random draw: checked on the host
    bool on_device;  // drawn for a device check
  };

  uint64_t refill(int sample);
  Sample take();
  void require_outputs_written(int sample);
  void read_scored_metric(int sample);
  double sampling_seconds() const;
  SampleChecks draw_checks(int sample, bool fast);
  DeviceCheck::Verdict check_on_device(int sample, uint64_t inputs);
  void check_on_host_if_due(int sample, uint64_t inputs, const SampleChecks& checks,
                            DeviceCheck::Verdict verdict);
  DeviceCheck::Verdict judge_held(int slot, int sample, uint64_t inputs);
  double verify_on_host(int sample, uint64_t inputs, const std::string& why);
  void draw_probe_positions();
  template <class Due>
  void run_probes(Due due);
  void probe_batch(int probe, int launches);
  void judge_probe();

  const ExampleDef& example_;
  const Options& options_;
  Sampler& sampler_;
  const cudaStream_t stream_;
  const uint64_t seed_;
  CaseRun& result_;
  const WorkloadInstance& workload_;
  const Prepared& prepared_;
  const Launch& launch_;
  const bool writes_outputs_;
  const bool blocking_kernel_;
  const stats::StopRule stop_;
  const double launch_seconds_;  // one launch's event time, back to back
  const bool probe_among_samples_;
  const int min_samples_;
  uint64_t poisoned_[kPoisonPatterns];  // the outputs' checksum right after each poison pattern
  std::optional<DeviceCheck> device_check_;
  DeviceCheckPlan plan_{false, 0};
  std::vector<HeldSample> held_;
  SampleRecord record_;
  double metric_seconds_ = 0;  // host time in metrics() after samples: not sampling time
  std::vector<int> probe_at_;  // the samples the probed batches go in front of; -1 once run
  int probes_run_ = 0;
  double probe_seconds_ = 0;    // host time in probed batches: not sampling time
  std::vector<double> probed_;  // every probed repeat's own time
  // Empty until sampling starts, then seeded from std::random_device: a draw before that (which
  // would come from a fixed default seed, so predictable) throws instead (pick()).
  std::optional<std::mt19937_64> pick_;
  std::mt19937_64& pick() { return pick_.value(); }
  std::uniform_real_distribution<double> unit_{0.0, 1.0};
  int secret_ = 0;
  bool secret_checked_ = false;
  double last_check_seconds_ = 0;
  std::vector<double> check_chances_;    // each sample's chance of being checked, for escape_5pct
  stats::RunningMedian seconds_median_;  // of record_.seconds, kept as they come
  double start_ = 0;                     // when sampling started
};

TimedSamples::TimedSamples(const CaseContext& context, const TimingWorkload& timing,
                           bool blocking_kernel, const stats::StopRule& stop, double launch_seconds)
    : example_(context.example),
      options_(context.options),
      sampler_(context.sampler),
      stream_(context.stream),
      seed_(context.seed),
      result_(context.result),
      workload_(timing.workload),
      prepared_(timing.prepared),
      launch_(timing.prepared.launch),
      writes_outputs_(timing.writes_outputs),
      blocking_kernel_(blocking_kernel),
      stop_(stop),
      launch_seconds_(launch_seconds),
      probe_among_samples_(result_.batch > 1 &&
                           (result_.mode == Mode::hot || result_.mode == Mode::sustained)),
      min_samples_(std::max(1, stop.min_samples)) {
  // What the outputs checksum to right after each poison pattern: a timed sample that leaves
  // its outputs so wrote nothing.
  for (int k = 0; k < kPoisonPatterns; ++k) {
    poison_outputs(workload_, k, stream_);
    poisoned_[k] = output_checksum(workload_, stream_);
  }
  // Device checks (VALIDITY row 2). In sustained mode they wait until sampling ends: a drawn
  // sample's outputs are copied into a held slot right after it, and the device reference runs
  // on them after the last sample (phase deferred_checks). Run between batches, the checks (up
  // to twice the sampling time) let the board cool, and a sustained figure came out near the
  // boost clock (ch16's flash attention: docs/architecture.md, sustained mode). The slots are
  // allocated here, before the samples phase, for every check the sampling can ask for up to its
  // timeout, under the one cap on held copies (a quarter of the free memory). The check is an
  // optional so that they go back once every check has run, before the calls traced after.
  device_check_.emplace(example_, workload_);
  const bool defer_checks =
      result_.mode == Mode::sustained && !options_.interleaved_checks && device_check_->on();
  if (defer_checks)
    device_check_->reserve(
        1 + expected_device_checks(
                std::max(min_samples_, samples_possible(stop_, launch_seconds_, result_.batch))));
  // Slot 0 serves the checks run at once; the others hold samples until sampling ends.
  plan_ = DeviceCheckPlan(defer_checks, device_check_->slots() - 1);
}

void TimedSamples::take_until_stopped() {
  // VALIDITY row 18: every timed sample runs on inputs no call has seen (drawn from the
  // case's secret seed) into freshly poisoned outputs, and must write them. A variant that
  // skips work on inputs it has seen, or serves an answer memoised by another variant or
  // process, has nothing to skip or serve. Filling and poisoning are untimed.
  //
  // VALIDITY row 2 on timed samples: a sample that runs under half the median so far is checked
  // against the reference on the spot (its inputs are still there, their checksum proves them
  // unchanged), so a variant whose skipped samples run fast is caught on the first one; others
  // are checked on the device or at random, chosen by a generator the variant cannot see.
  Phase phase("samples", result_);
  pick_.emplace(std::random_device{}());
  secret_ = std::uniform_int_distribution<int>(0, min_samples_ - 1)(pick());
  draw_probe_positions();
  start_ = host_seconds();
  for (int sample = 0;; ++sample) {
    run_probes([&](int at) { return at == sample; });
    const uint64_t inputs = refill(sample);
    const double median_before = seconds_median_.size() >= 4 ? seconds_median_.median() : 0;
    record_.samples.push_back(take());
    record_.seconds.push_back(record_.samples.back().seconds);
    seconds_median_.add(record_.seconds.back());
    require_outputs_written(sample);
    read_scored_metric(sample);
    result_.stop = stats::should_stop(stop_, record_.seconds, sampling_seconds());
    const bool fast =
        median_before >= 1e-6 && record_.seconds.back() < kFastFraction * median_before;
    const SampleChecks checks = draw_checks(sample, fast);
    const auto verdict =
        checks.on_device ? check_on_device(sample, inputs) : DeviceCheck::Verdict::match;
    check_on_host_if_due(sample, inputs, checks, verdict);
    if (result_.stop != stats::StopReason::none) break;
  }
  run_probes([](int) { return true; });
  if (probe_among_samples_) judge_probe();
  result_.escape_5pct = worst_case_escape(check_chances_, 0.05);
}

// Timed sample `sample`'s inputs drawn from its own seed, their checksum (returned), and its
// outputs poisoned with its run's pattern.
uint64_t TimedSamples::refill(int sample) {
  fill_inputs(workload_, run_seed(seed_, kFirstSampleRun + sample), stream_);
  const uint64_t inputs = input_checksum(workload_, stream_);
  poison_outputs(workload_, kFirstSampleRun + sample, stream_);
  return inputs;
}

Sample TimedSamples::take() {
  switch (result_.mode) {
    case Mode::cold:
      return sampler_.cold(launch_, stream_, blocking_kernel_);
    case Mode::hot:
    case Mode::sustained:
      return sampler_.hot(launch_, stream_, result_.batch);
    case Mode::host:
      return sampler_.host(launch_, stream_);
  }
  return Sample{};
}

void TimedSamples::require_outputs_written(int sample) {
  if (writes_outputs_ && output_checksum(workload_, stream_) ==
                             poisoned_[(kFirstSampleRun + sample) % kPoisonPatterns])
    throw CheckFailure(
        fmt::format("timed sample {} wrote none of its outputs (they still hold "
                    "the poison written before it)",
                    sample + 1));
}

// After the sample's stop event: never in the timed region.
void TimedSamples::read_scored_metric(int sample) {
  if (example_.scored_metric.empty()) return;
  const double metric_start = host_seconds();
  BENCH_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<Metric> reported = prepared_.metrics();
  record_.scored.push_back(scored_value(example_, reported, sample + 1));
  record_.call_seconds.push_back(timed_call_seconds(example_, reported, sample + 1));
  metric_seconds_ += host_seconds() - metric_start;
}

// Sampling time, for the stop rule and the check budgets: the loop's wall time less what its
// checks and the scored metric's calls cost.
double TimedSamples::sampling_seconds() const {
  return host_seconds() - start_ - result_.verify_seconds - result_.compare_seconds -
         metric_seconds_ - probe_seconds_;
}

TimedSamples::SampleChecks TimedSamples::draw_checks(int sample, bool fast) {
  const double budget = std::max(kCheckBudgetFloorSeconds, kCheckBudgetShare * sampling_seconds());
  const bool at_secret =
      sample == secret_ || (result_.stop != stats::StopReason::none && !secret_checked_);
  // More checks only once the secret one has said what a check costs, and only within budget;
  // none where device checks run, which compare with the same device reference for less.
  const bool random_allowed = !options_.smoke && !device_check_->on() && secret_checked_ &&
                              result_.verify_seconds + last_check_seconds_ <= budget;
  const double random_chance = random_allowed ? std::min(1.0, kRandomChecks / (sample + 1)) : 0.0;
  const bool chosen = at_secret || unit_(pick()) < random_chance;
  secret_checked_ = secret_checked_ || at_secret;
  // Device checks, where the example has a device reference: at the rate that catches a 5%
  // corrupter with 99%, while they cost at most twice the sampling time (15 s at least),
  // counting those held for later at the last measured cost of one.
  const bool device_allowed = device_check_->on() && !(fast || chosen);
  const double device_chance =
      device_allowed ? plan_.chance(sample + 1, result_.compare_seconds, sampling_seconds()) : 0.0;
  const bool compared = unit_(pick()) < device_chance;
  const double secret_chance = sample < min_samples_ && !secret_checked_ ? 1.0 / min_samples_ : 0.0;
  check_chances_.push_back(
      fast || chosen ? 1.0 : 1 - (1 - secret_chance) * (1 - random_chance) * (1 - device_chance));
  return {fast, chosen, compared};
}

DeviceCheck::Verdict TimedSamples::check_on_device(int sample, uint64_t inputs) {
  auto verdict = DeviceCheck::Verdict::match;
  const auto where = plan_.place();
  const double compare_start = host_seconds();
  if (where != DeviceCheckPlan::Where::at_once && input_checksum(workload_, stream_) != inputs) {
    // Held or not, a variant that changed its inputs is sent to the host check now.
    verdict = DeviceCheck::Verdict::inputs_changed;
  } else if (where == DeviceCheckPlan::Where::deferred) {
    // Device to device, queued behind the sample: the next refill waits for nothing more.
    const int slot = 1 + plan_.held_count();
    device_check_->hold(slot, stream_);
    held_.push_back({sample, slot, inputs});
    plan_.held();
  } else if (where == DeviceCheckPlan::Where::measure_at_once) {
    // The first drawn sample goes through a held sample's whole check now, in slot 0: its
    // time is what each held one will cost, which the budget above needs.
    device_check_->hold(0, stream_);
    verdict = judge_held(0, sample, inputs);
  } else {
    if (plan_.deferred()) plan_.fell_back();  // every slot held
    verdict = device_check_->check(inputs, kFirstSampleRun + sample, stream_);
  }
  if (where != DeviceCheckPlan::Where::deferred || verdict != DeviceCheck::Verdict::match) {
    ++result_.compared_samples;
    const double took = host_seconds() - compare_start;
    result_.compare_seconds += took;
    plan_.ran(took);
  }
  return verdict;
}

void TimedSamples::check_on_host_if_due(int sample, uint64_t inputs, const SampleChecks& checks,
                                        DeviceCheck::Verdict verdict) {
  const bool mismatch = verdict != DeviceCheck::Verdict::match;  // the host check decides
  if (checks.fast || checks.chosen || mismatch) {
    const char* why = checks.fast ? " (under half the median so far)"
                      : verdict == DeviceCheck::Verdict::outputs_differ
                          ? " (its device check found outputs unlike the device reference)"
                          : "";
    last_check_seconds_ = verify_on_host(sample, inputs, why);
    result_.fast_samples_verified += checks.fast;
    // The host check passed what the device check did not (a tolerance met only by the
    // host's rounding): after kHostPassesBeforeOff such samples the device check stands down.
    if (mismatch && ++result_.compare_host_passes >= kHostPassesBeforeOff)
      device_check_->turn_off(fmt::format("{} device mismatches passed by the host check",
                                          result_.compare_host_passes));
  }
}

// A held sample's check: its inputs filled again from its own seed (the fill is deterministic,
// and the checksum proves these are the inputs it ran on), then the device reference against
// its held outputs. The refill is the harness's, so a checksum that differs is the harness's
// fault, not the variant's: the case fails saying so rather than blaming it.
DeviceCheck::Verdict TimedSamples::judge_held(int slot, int sample, uint64_t inputs) {
  fill_inputs(workload_, run_seed(seed_, kFirstSampleRun + sample), stream_);
  if (input_checksum(workload_, stream_) != inputs)
    throw std::runtime_error(fmt::format(
        "timed sample {}: refilling its inputs from their seed for its deferred device check did "
        "not reproduce them (checksum differs): the input fill is not deterministic",
        sample + 1));
  return device_check_->judge_held(slot, kFirstSampleRun + sample, stream_);
}

// A timed sample checked on the host against its own inputs, in place (their checksum must still
// be `inputs`); its outputs are the variant's. Returns the seconds it took.
double TimedSamples::verify_on_host(int sample, uint64_t inputs, const std::string& why) {
  const double check_start = host_seconds();
  CheckedRun checked{inputs, {}};  // end_checked_run compares the inputs' checksum with it first
  if (!uses_device_reference(example_, workload_))
    checked.host = copy_inputs_to_host(workload_, stream_);
  end_checked_run(example_, workload_, checked, kFirstSampleRun + sample, stream_,
                  fmt::format("timed sample {}{}", sample + 1, why).c_str(), result_);
  ++result_.verified_samples;
  const double took = host_seconds() - check_start;
  result_.verify_seconds += took;
  return took;
}

// Hot and sustained: the probed batches go in front of kProbeBatches distinct samples drawn
// here, uniformly over those the stop rule asks for (its minimum time over one launch's:
// ~50 of 20 ms for sustained mode's 1 s window; 250 hot samples of a 200 us launch for the
// default 0.05 s), at most what the timeout holds, so a variant that cheats only late
// meets them too; any not reached when sampling stops run then.
void TimedSamples::draw_probe_positions() {
  if (!probe_among_samples_) return;
  const int sure = samples_asked(stop_, launch_seconds_, result_.batch);
  const int range = std::max({min_samples_, kProbeBatches, sure});
  std::vector<int> all(static_cast<std::size_t>(range));
  std::iota(all.begin(), all.end(), 0);
  std::shuffle(all.begin(), all.end(), pick());
  probe_at_.assign(all.begin(), all.begin() + kProbeBatches);
}

// The probed batches whose position `due` says has come, each once.
template <class Due>
void TimedSamples::run_probes(Due due) {
  for (int& at : probe_at_)
    if (at >= 0 && due(at)) {
      const double probe_start = host_seconds();
      probe_batch(probes_run_++, result_.batch);
      probe_seconds_ += host_seconds() - probe_start;
      at = -1;
    }
}

// The probe's batches (row 18), hot and sustained alike: at kProbeBatches secret positions
// among the timed samples (draw_probe_positions), each as long as a timed batch and on fresh
// inputs into poisoned outputs as a sample is. A variant can count its calls and batches, or read
// its host clock, and so tell what ran before the samples (a sustained soak, a hot case's warm-up
// and escape check) from the samples; a probe run before them, or in batches of another
// length, would meet only its honest calls.
void TimedSamples::probe_batch(int probe, int launches) {
  fill_inputs(workload_, run_seed(~seed_, probe), stream_);  // inputs no sample or check draws
  poison_outputs(workload_, probe, stream_);
  const std::vector<double> each = sampler_.per_launch(launch_, stream_, launches);
  probed_.insert(probed_.end(), each.begin() + 1, each.end());
}

void TimedSamples::judge_probe() {
  const double median_repeat = stats::median(probed_);
  const auto fast = std::count_if(probed_.begin(), probed_.end(), [&](double repeat_seconds) {
    return repeat_seconds < kFastFraction * median_repeat;
  });
  result_.probed_repeats = static_cast<int>(probed_.size());
  result_.fast_repeats = static_cast<int>(fast);
  if (median_repeat >= kProbeFloorSeconds && fast >= fast_repeats_bar(probed_.size()))
    throw CheckFailure(fmt::format(
        "the variant skips work on inputs it has already seen: {} of {} repeats in probed {} "
        "batches ran under half the median repeat ({:.2f} us) (memoisation)",
        fast, probed_.size(), to_string(result_.mode), median_repeat * 1e6));
}

void TimedSamples::run_deferred_checks() {
  if (held_.empty()) return;
  // The held samples' checks, after sampling: each one's chance of a check was counted in
  // escape_5pct when it was drawn, so every one runs, even if the device check has stood down
  // since. A mismatch goes to the host check exactly as one found at once: the variant's held
  // outputs back in place, judged against its own inputs, and the sample named.
  Phase phase("deferred_checks", result_);
  for (const HeldSample& held : held_) {
    const double compare_start = host_seconds();
    const auto verdict = judge_held(held.slot, held.sample, held.inputs);
    ++result_.compared_samples;
    ++result_.deferred_samples;
    result_.compare_seconds += host_seconds() - compare_start;
    if (verdict == DeviceCheck::Verdict::match) continue;
    verify_on_host(held.sample, held.inputs,
                   " (its deferred device check found outputs unlike the device reference)");
    ++result_.compare_host_passes;  // the host check passed it: it threw otherwise
  }
}

void TimedSamples::finish_checks() {
  if (!device_check_->on())
    result_.sample_check = "cpu (" + device_check_->why_off() + ")";
  else if (!plan_.deferred())
    result_.sample_check = "device";
  else if (plan_.at_once_for_want_of_slots() == 0)
    result_.sample_check = "device-deferred";
  else
    result_.sample_check = fmt::format("device-deferred ({} checked at once: {} held slots)",
                                       plan_.at_once_for_want_of_slots(), plan_.slots());
  device_check_.reset();
}

// VALIDITY row 18, hot batches: the repeats of a batch run on the inputs its first launch saw.
void check_first_launches_against_repeats(CaseRun& result, const std::vector<Sample>& samples) {
  if (result.batch > 1 && (result.mode == Mode::hot || result.mode == Mode::sustained)) {
    std::vector<double> first, repeats;
    for (const auto& sample : samples) {
      first.push_back(sample.first_seconds);
      repeats.push_back((sample.seconds * result.batch - sample.first_seconds) /
                        (result.batch - 1));
    }
    const double first_median = stats::median(first), repeat_median = stats::median(repeats);
    result.fresh_repeat_ratio = repeat_median > 0 ? first_median / repeat_median : INFINITY;
    if (first_median > kMemoRatio * repeat_median + kMemoSlackSeconds)
      throw CheckFailure(fmt::format(
          "the variant runs {:.1f}x faster on inputs it has already seen: a batch's first launch "
          "(fresh inputs) took {:.2f} us, each repeat on the same inputs {:.2f} us (memoisation)",
          result.fresh_repeat_ratio, first_median * 1e6, repeat_median * 1e6));
  }
}

// Row 1 again after the samples: a variant that behaves only for its first calls.
void trace_calls_after_samples(const CaseContext& context, const Launch& launch) {
  if (context.result.escape_method != "cupti") return;
  Phase phase("final_check", context.result);
  trace_calls(launch, context.stream, kTracedCalls, context.result, context.traced_hold);
}

// A stateful variant's own figures, read once all its work is done.
void read_variant_metrics(const Prepared& prepared, CaseRun& result) {
  if (!prepared.metrics) return;
  BENCH_CUDA_CHECK(cudaDeviceSynchronize());
  result.metrics = prepared.metrics();
}

// A cold median at or under zero means the work is shorter than the timer floor's own
// variation: no honest figure comes out of that, so say so rather than report 0.
void require_cold_median_above_timer_floor(const CaseRun& result,
                                           const std::vector<double>& seconds) {
  if (result.mode == Mode::cold && stats::median(seconds) <= 0)
    throw CheckFailure(
        fmt::format("the work is shorter than the timer floor ({:.2f} us) can resolve; "
                    "time it in hot mode (back-to-back batches)",
                    result.timer_floor_s * 1e6));
}

// VALIDITY row 11: drop samples taken while the SM clock was throttled. Sustained mode times
// the power limiter's steady state on purpose, and its clock wanders by more than the rule's
// 10% (docs/architecture.md, throttle rule), so there the rule would keep the
// samples the limiter happened to let run faster: every sample is kept (a tolerance of 1
// drops only clocks under 0 MHz) and the clocks are still reported. Returns the kept samples'
// indices.
std::vector<std::size_t> drop_throttled_samples(const CaseContext& context,
                                                const std::vector<Sample>& samples) {
  CaseRun& result = context.result;
  std::vector<double> mhz;
  for (const auto& sample : samples) mhz.push_back(sample.sm_mhz);
  const double tolerance =
      result.mode == Mode::sustained ? 1.0 : context.options.throttle_tolerance;
  const auto throttle = stats::apply_throttle_rule(mhz, tolerance);
  result.throttle_kept_all = throttle.too_many_throttled;
  result.sm_mhz = mhz;
  for (auto i : throttle.kept) result.samples.push_back(samples[i].seconds);
  for (auto i : throttle.dropped) result.dropped.push_back(samples[i].seconds);
  return throttle.kept;
}

// A variant that does its work on some samples only gives two clusters of times: reported as
// suspect with the figures (the driver shows it), never scored as if it were one distribution.
void flag_two_clusters_of_times(CaseRun& result) {
  if (const auto clusters = stats::two_clusters(result.samples))
    result.suspect =
        fmt::format("two clusters of sample times: {:.0f}% near {:.2f} us, {:.0f}% near {:.2f} us",
                    100 * clusters->fast_share, clusters->fast_median * 1e6,
                    100 * (1 - clusters->fast_share), clusters->slow_median * 1e6);
}

// The scored figure follows the kept samples; its counter is their median, whatever the
// last call of metrics() (after the traced calls) said. A figure that is good on some
// samples only is suspect as sample times are.
void score_metric_over_kept_samples(const ExampleDef& example, CaseRun& result,
                                    const SampleRecord& record,
                                    const std::vector<std::size_t>& kept) {
  if (example.scored_metric.empty()) return;
  std::vector<double> kept_call_seconds;
  for (auto i : kept) {
    result.scored_values.push_back(record.scored[i]);
    kept_call_seconds.push_back(record.call_seconds[i]);
  }
  check_timed_call(example, kept_call_seconds, result.samples);
  const double median = stats::median(result.scored_values);
  std::erase_if(result.metrics,
                [&](const Metric& metric) { return metric.name == example.scored_metric; });
  result.metrics.push_back({example.scored_metric, median});
  if (const auto clusters = stats::two_clusters(result.scored_values))
    result.suspect += fmt::format("{}two clusters of {}: {:.0f}% near {:.4g}, {:.0f}% near {:.4g}",
                                  result.suspect.empty() ? "" : ", ", example.scored_metric,
                                  100 * clusters->fast_share, clusters->fast_median,
                                  100 * (1 - clusters->fast_share), clusters->slow_median);
}

}  // namespace

Runner::Runner(DeviceInfo device, std::map<std::string, double> ceilings)
    : device_(std::move(device)), ceilings_(std::move(ceilings)) {}

CaseRun Runner::run(const ExampleDef& example, const VariantDef& variant) {
  CaseRun result;
  result.mode = example.mode;
  if (options().mode && example.mode != Mode::host) result.mode = *options().mode;
  if (!context_lost_.empty()) {
    result.outcome = CaseRun::Outcome::failed;
    result.message = "CUDA context lost in an earlier case: " + context_lost_;
    return result;
  }
  if (auto why = unsupported_reason(example, variant, device_); !why.empty()) {
    result.outcome = CaseRun::Outcome::skipped;
    result.message = why;
    return result;
  }
  try {
    if (!sampler_) sampler_ = std::make_unique<Sampler>(device_);
    measure(example, variant, result);
  } catch (const Unsupported& e) {
    result.outcome = CaseRun::Outcome::skipped;
    result.message = e.what();
  } catch (const CudaError& e) {
    result.outcome = CaseRun::Outcome::failed;
    result.message = e.what();
    // A sticky error leaves the context unusable: later cases in this process cannot run.
    if (cudaDeviceSynchronize() != cudaSuccess) {
      context_lost_ = e.what();
      result.message += " (sticky: the CUDA context is lost)";
    }
  } catch (const std::exception& e) {
    result.outcome = CaseRun::Outcome::failed;
    result.message = e.what();
    cudaGetLastError();
  }
  return result;
}

void Runner::measure(const ExampleDef& example, const VariantDef& variant, CaseRun& result) {
  // NVTX: the range "ch07:transpose:optimized" holds the phases "verify", "build", "warmup",
  // "escape_check", "soak" (sustained), "samples", "deferred_checks" (sustained, when samples
  // were held for a device check) and "final_check" (each also timed into result.phase_seconds),
  // or "profile" with --bench_profile, "timeline" with --bench_timeline (no '/' in names: Nsight
  // reads it as nesting). On the H100, ncu's --nvtx-include did not select them; `bench profile`
  // selects with cudaProfilerStart/Stop instead (docs/profiling.md).
  NvtxRange case_range(fmt::format("{}:{}:{}", example.chapter, example.name, variant.name));
  Stream stream;
  const CaseContext context{
      .example = example,
      .variant = variant,
      .options = options(),
      .sampler = *sampler_,
      .stream = stream.handle,
      .seed = case_seed(example, variant),
      .traced_hold =
          result.mode == Mode::cold && !variant.options.blocks_host ? sampler_.get() : nullptr,
      .result = result,
  };
  result.seed = context.seed;

  verify_at_verification_size(context);
  // --bench_verify_only (bench sanitize): verified, never timed.
  if (context.options.verify_only) return;
  const TimingWorkload timing = build_at_timing_size(context, device_, ceilings_);
  const Launch& launch = timing.prepared.launch;
  warm_up(context, launch);
  if (context.options.profile) return profile_once(context, timing.workload, launch);
  if (!context.options.timeline.empty())
    return trace_timeline(context, timing.workload, launch, device_.name);
  const double launch_seconds = check_escaped_work(context, launch);

  // Cold samples run behind the sampler's blocking kernel unless the variant blocks the host or a
  // CUDA tool is injected; the timer floor subtracted from them is measured the same way.
  const bool blocking_kernel = !variant.options.blocks_host && !cuda_tool_present();
  if (result.mode == Mode::cold)
    result.timer_floor_s = context.sampler.timer_floor(context.stream, blocking_kernel);
  const stats::StopRule stop = soak_for_sustained_mode(context, launch);
  TimedSamples samples(context, timing, blocking_kernel, stop, launch_seconds);
  samples.take_until_stopped();
  samples.run_deferred_checks();
  samples.finish_checks();
  const SampleRecord& record = samples.record();

  check_first_launches_against_repeats(result, record.samples);
  trace_calls_after_samples(context, launch);
  read_variant_metrics(timing.prepared, result);
  require_cold_median_above_timer_floor(result, record.seconds);
  const std::vector<std::size_t> kept = drop_throttled_samples(context, record.samples);
  flag_two_clusters_of_times(result);
  score_metric_over_kept_samples(example, result, record, kept);
}

}  // namespace bench::detail

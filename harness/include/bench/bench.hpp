// bench/bench.hpp: the one header a chapter includes.
//
// An *example* is a workload (the problem: sizes, seeded inputs, outputs, cost model), a set of
// variants that do the same work (baseline, optional ladder steps, optimized, optional vendor),
// and a reference that says what correct means. The harness turns every variant into a Google
// Benchmark case named chNN/<example>/<variant>, verifies it before and after timing, and times
// it with CUDA events (see docs/architecture.md and docs/validity.md). An example whose cost
// depends on a shape declares *axes*; each point of them is a case of its own,
// chNN/<example>/<variant>/<axis>:<value>/... (docs/writing-an-example.md, "Axes").
//
//   struct Copy {
//     int64_t n;
//     bench::DeviceSpan<const float> src;
//     bench::DeviceSpan<float> dst;
//     explicit Copy(bench::Setup& s)
//         : n(s.size("n", int64_t{1} << 28, 100'003)),   // timing size, verification size
//           src(s.input<float>("src", n, bench::uniform(-1, 1))),
//           dst(s.output<float>("dst", n)) {
//       s.bytes(2 * n * sizeof(float));                  // fewest bytes the work must move
//     }
//   };
//   void launch_naive(const Copy& w, cudaStream_t stream);   // enqueue on `stream`, no sync
//   void reference(const Copy& w, bench::HostData& h);       // CPU, in double
//
//   BENCH_EXAMPLE(ch07, copy, Copy)              // cases ch07/copy/baseline, ch07/copy/optimized
//       .int_axis("mib", {16, 1024}, {1024})   // optional: ch07/copy/baseline/mib:1024, ...;
//                                              // the workload reads s.axis("mib")
//       .baseline("naive", launch_naive)
//       .optimized("vec4", launch_vec4)
//       .reference(reference)
//       .tolerance(bench::exact());
//
// This header stays light on purpose: no Google Benchmark, fmt, JSON or iostream, so nvcc
// compiles a chapter file quickly.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "bench/check.hpp"
#include "bench/dtype.hpp"

namespace bench {

// ---------------------------------------------------------------------------------------------
// Inputs: every input is generated on the device from the case's seed by one counter-based
// generator, so a variant's inputs are identical whichever variant runs first. Never all zeros.
struct Fill {
  enum class Kind { uniform, normal, integers } kind = Kind::uniform;
  double a = -1.0;  // uniform: low; normal: mean; integers: low (inclusive)
  double b = 1.0;   // uniform: high; normal: standard deviation; integers: high (inclusive)
};
inline Fill uniform(double low, double high) { return {Fill::Kind::uniform, low, high}; }
inline Fill normal(double mean, double stddev) { return {Fill::Kind::normal, mean, stddev}; }
inline Fill integers(int64_t low, int64_t high) {
  return {Fill::Kind::integers, static_cast<double>(low), static_cast<double>(high)};
}

// A typed view of device memory that the harness owns. Cheap to copy; valid while the workload
// lives.
template <class T>
struct DeviceSpan {
  T* ptr = nullptr;
  int64_t count = 0;
  T* data() const { return ptr; }
  int64_t size() const { return count; }
  std::size_t bytes() const { return static_cast<std::size_t>(count) * sizeof(T); }
  template <class U = T>
    requires(!std::is_const_v<U>)
  operator DeviceSpan<const U>() const {  // a writable span reads as a read-only one
    return {ptr, count};
  }
};

// RAII device allocation for scratch space a workload or a variant's state owns itself.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(int64_t count) : count_(count) {
    BENCH_CUDA_CHECK(cudaMalloc(&ptr_, bytes()));
  }
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    swap(other);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr_ != nullptr) cudaFree(ptr_);  // no check: destructors must not throw
  }
  T* data() const { return ptr_; }
  int64_t size() const { return count_; }
  std::size_t bytes() const { return static_cast<std::size_t>(count_) * sizeof(T); }
  DeviceSpan<T> span() const { return {ptr_, count_}; }

 private:
  void swap(DeviceBuffer& other) noexcept {
    std::swap(ptr_, other.ptr_);
    std::swap(count_, other.count_);
  }
  T* ptr_ = nullptr;
  int64_t count_ = 0;
};

// The named hardware ceilings a result can be compared with; the values live in the `ceilings`
// block of expectations/<hardware_key>.json (measured by `bench calibrate`).
namespace ceiling {
inline constexpr const char* hbm_copy = "hbm_copy_gbps";    // device-to-device, read + write
inline constexpr const char* hbm_read = "hbm_read_gbps";
inline constexpr const char* hbm_write = "hbm_write_gbps";
inline constexpr const char* l2 = "l2_gbps";
inline constexpr const char* smem = "smem_gbps";
inline constexpr const char* h2d_pinned = "h2d_pinned_gbps";
inline constexpr const char* d2h_pinned = "d2h_pinned_gbps";
inline constexpr const char* fp32 = "fp32_tflops";
inline constexpr const char* tf32 = "tf32_tflops";
inline constexpr const char* bf16 = "bf16_tflops";
inline constexpr const char* fp16 = "fp16_tflops";
inline constexpr const char* fp8 = "fp8_tflops";
}  // namespace ceiling

namespace detail {
class SetupImpl;
class HostDataImpl;
}  // namespace detail

// Handed to a workload's constructor. Allocates the buffers the harness manages (it fills
// inputs, poisons outputs, checksums and verifies them) and records the cost model.
class Setup {
 public:
  explicit Setup(detail::SetupImpl& impl) : impl_(impl) {}

  // True when building the small workload used for verification against the CPU reference.
  bool verifying() const;
  // A problem dimension: `timing` when timing, `verification` when verifying. The name and value
  // are part of the workload's fingerprint.
  int64_t size(std::string_view name, int64_t timing, int64_t verification);
  // A non-size parameter recorded in the fingerprint (a stride, a mode).
  void param(std::string_view name, int64_t value);
  // The value of one of the example's axes at the point being built (the same when verifying:
  // pass a timing size through size(name, s.axis(name), small) so verification stays small).
  // axis() reads an integer or bool axis, float_axis() a float one, string_axis() a string one;
  // an unknown name or the wrong kind throws std::invalid_argument (the case FAILS, naming it).
  int64_t axis(std::string_view name) const;
  double float_axis(std::string_view name) const;
  std::string string_axis(std::string_view name) const;

  template <class T>
  DeviceSpan<T> input(std::string_view name, int64_t count, Fill fill) {
    return {static_cast<T*>(add_input(name, dtype_of<T>(), count, fill)), count};
  }
  template <class T>
  DeviceSpan<T> output(std::string_view name, int64_t count) {
    return {static_cast<T*>(add_output(name, dtype_of<T>(), count)), count};
  }

  // Cost model, per run of a variant: the fewest bytes the work must move through device memory
  // (each input read once, each output written once) and the arithmetic it must do.
  void bytes(double bytes_moved, const char* bandwidth_ceiling = ceiling::hbm_copy);
  void flops(double flops, const char* compute_ceiling = ceiling::fp32);

 private:
  void* add_input(std::string_view name, DType dtype, int64_t count, Fill fill);
  void* add_output(std::string_view name, DType dtype, int64_t count);
  detail::SetupImpl& impl_;
};

// Host copies handed to the CPU reference: the inputs (a private copy, so a variant that
// modifies its inputs cannot make the reference agree) and the expected outputs to fill, in
// double precision.
class HostData {
 public:
  explicit HostData(detail::HostDataImpl& impl) : impl_(impl) {}
  template <class T>
  std::span<const T> input(std::string_view name) const {
    auto raw = input_bytes(name, dtype_of<T>());
    return {reinterpret_cast<const T*>(raw.data()), raw.size() / sizeof(T)};
  }
  std::span<double> expected(std::string_view name);

 private:
  std::span<const std::byte> input_bytes(std::string_view name, DType dtype) const;
  detail::HostDataImpl& impl_;
};

// Where a device reference of the FP32 form writes (Example::device_reference): one FP32 array
// per output of the workload, as long as the output, found by the output's name. For outputs
// narrower than FP32 (BF16, FP8) judged element by element: a reference that rounded its own
// result to the output's dtype would sit a whole unit in the last place from an honest variant
// that rounded the other way, where the tolerance allows half of one.
class ReferenceOutputs {
 public:
  float* operator[](std::string_view output) const;    // throws naming an output the workload lacks
  std::vector<std::pair<std::string, float*>> arrays;  // filled by the harness
};

// ---------------------------------------------------------------------------------------------
// Tolerance: how an output is compared with the reference. NaN never passes.
struct Tolerance {
  enum class Kind { exact, allclose, relative_l2, dtype_default } kind = Kind::dtype_default;
  double atol = 0.0;   // allclose: |out - ref| <= atol + rtol * |ref|
  double rtol = 0.0;
  double bound = 0.0;  // relative_l2: ||out - ref||_2 / ||ref||_2 <= bound
};
inline Tolerance exact() { return {Tolerance::Kind::exact}; }
inline Tolerance allclose(double atol, double rtol) {
  return {Tolerance::Kind::allclose, atol, rtol};
}
inline Tolerance relative_l2(double bound) { return {Tolerance::Kind::relative_l2, 0, 0, bound}; }
// The bound each output dtype gets unless the example says otherwise (docs/validity.md): tight
// enough that computing an FP32 result in BF16 fails.
Tolerance default_tolerance(DType dtype);

// How samples are taken (docs/architecture.md): cold flushes L2 and hides launch latency behind
// a blocking kernel; hot times back-to-back batches; host times with a host clock around a
// synchronised run, for lessons whose cost is on the host (pageable copies, allocation);
// sustained is hot after a soak of back-to-back launches (kSustainedSoakSeconds), sampled for at
// least kSustainedSampleSeconds, for work that holds the board at its power limit (8192^3
// tensor-core GEMMs): the limiter pulls the clock down within the first second of continuous work, so cold
// or short hot samples measure a burst whose size depends on the gaps and on what ran before.
enum class Mode { cold, hot, host, sustained };
inline constexpr double kSustainedSoakSeconds = 1.0;
inline constexpr double kSustainedSampleSeconds = 1.0;
inline constexpr double kSustainedBatchSeconds = 20e-3;  // one sustained sample: a batch this long

enum class Role { baseline, step, optimized, vendor };
const char* to_string(Role role);
const char* to_string(Mode mode);

// What a variant needs and how it behaves.
struct VariantOptions {
  int min_compute_capability = 0;  // e.g. 90 for Hopper-only instructions
  // Architecture-specific instructions (wgmma, setmaxnreg: 90 for sm_90a): the variant runs only
  // on that compute capability, from a build that includes that target, and is SKIPPED with the
  // reason elsewhere. Its kernel bodies go under BENCH_SM90A_DEVICE (kernels/arch.cuh), so that
  // builds for other targets (a Blackwell's 100a) still compile.
  int arch_specific = 0;
  bool blocks_host = false;        // it synchronises or blocks the host: no blocking kernel
  // Its time is set by the host (CPU, OS, launch path, host memory or the host's PCIe link),
  // which differs between machines of one GPU kind: `bench compare` then scores the example by
  // its other side's time, or by the spread seen over machines (docs/expectations.md).
  bool host_bound = false;
  // This variant's compute ceiling when it differs from the workload's (an FP8 rung of a BF16
  // workload is held to the FP8 ceiling), e.g. bench::ceiling::fp8.
  const char* compute_ceiling = nullptr;
};

// An extra figure a stateful variant reports next to its time, such as the latency of one
// critical kernel inside the timed work. A stateful type S that has
// `std::vector<bench::Metric> metrics()` is asked for them after its last timed sample; they
// become counters of the case (name as given, e.g. "critical_latency_us").
// In an example scored by a metric (Example::scored_by) metrics() is also asked after every
// timed sample, untimed, and must report the scored figure each time (docs/writing-an-example.md,
// "Scored by a metric").
// A metric that is the variant's own measure of the whole timed call, by the clock its scored
// figure comes from (%globaltimer stamps, events inside the call), in milliseconds, is reported
// with bench::timed_call_ms. An example scored by a metric needs one from every variant: the
// harness checks its median over the timed samples against the median of the calls' event
// times, so a figure read off the variant's clock (a p99 step latency) is tied to the harness's
// own measurement. A variant whose clock runs slow, or that scales what it reports, fails there.
struct Metric {
  std::string name;
  double value = 0;
  bool whole_timed_call = false;  // set by timed_call_ms: value is the call's time, in ms
};
inline Metric timed_call_ms(std::string name, double ms) { return {std::move(name), ms, true}; }

// Which way a scored metric is better: a latency is better lower, a rate higher.
enum class Better { lower, higher };
const char* to_string(Better better);  // "lower", "higher"

// One point of an example's axes, as registration predicates see it (variant_where,
// mode_where): "b:4/s:4096/causal:1". An unknown axis throws std::invalid_argument.
class Point {
 public:
  explicit Point(const std::string& text);
  int64_t axis(std::string_view name) const;  // an integer or bool axis's value
  double float_axis(std::string_view name) const;
  std::string string_axis(std::string_view name) const;
  const std::string& text() const { return text_; }

 private:
  std::string text_;
  std::vector<std::pair<std::string, std::string>> values_;
};
using PointPredicate = std::function<bool(const Point&)>;

namespace detail {

using Launch = std::function<void(cudaStream_t)>;
struct Prepared {
  Launch launch;                                 // what is timed
  std::function<std::vector<Metric>()> metrics;  // optional extra figures
};
// Prepares a variant for one workload instance (untimed: handles, graphs, plans) and returns
// the launch that is timed. The workload is type-erased to void*.
using Prepare = std::function<Prepared(void* workload, cudaStream_t stream)>;
// Returns an empty string when the variant can run this workload, else the reason it cannot.
using Support = std::function<std::string(const void* workload)>;

struct VariantDef {
  std::string name;         // the case's last component: "baseline", "optimized", or a step's
                            // or vendor rung's own name
  std::string description;  // what it is ("strided", "cublaslt"), shown in reports
  Role role = Role::baseline;
  Prepare prepare;
  VariantOptions options;
  Support support;
  PointPredicate where;  // empty: at every point; else only where it holds (variant_where)
};

// One axis of an example. Values are kept as the text they show in case names and --axis
// ("4096", "0.5", "1", "bf16"); add_axis checks them when the example is expanded into points.
struct AxisDef {
  enum class Kind { integer, floating, boolean, string } kind = Kind::integer;
  std::string name;
  std::vector<std::string> values;    // in the order declared
  std::vector<std::string> defaults;  // the values a default run takes; empty: every value
};
std::string axis_text(int64_t value);
std::string axis_text(double value);  // shortest form that reads back (%g, up to 17 digits)

struct ExampleDef {
  std::string chapter;
  std::string name;
  std::string file;
  std::function<std::shared_ptr<void>(Setup&)> make_workload;
  std::vector<VariantDef> variants;
  std::function<void(const void*, HostData&)> reference;
  std::function<void(const void*, const ReferenceOutputs&, cudaStream_t)> device_reference;
  bool device_reference_writes_f32 = false;  // into ReferenceOutputs, not the workload's outputs
  Tolerance tolerance;
  Mode mode = Mode::cold;
  int min_compute_capability = 0;
  int min_gpus = 1;
  Support support;
  // Optional: W::inputs_filled(stream), called after every refill of the inputs (untimed).
  std::function<void(void*, cudaStream_t)> inputs_filled;
  // Axes, in the order they appear in case names, and the points a default run takes
  // ("b:4/s:4096", every axis named; empty: the product of each axis's defaults).
  std::vector<AxisDef> axes;
  std::vector<std::string> default_points;
  std::vector<std::pair<PointPredicate, Mode>> modes_where;  // mode_where, the last match wins
  // scored_by: the figure every variant reports after each timed sample (Metric) and the example
  // is scored by instead of its time; empty: scored by time.
  std::string scored_metric;
  Better scored_better = Better::lower;
  // Set on the per-point copies the harness makes of an example (registry.hpp): "b:4/s:4096",
  // or "" for an example without axes.
  std::string point;
};

ExampleDef& register_example(std::string chapter, std::string name, std::string file);

}  // namespace detail

// The fluent registration returned by BENCH_EXAMPLE. W is the workload type: constructible from
// Setup&. A launch is callable as void(const W&, cudaStream_t). A stateful variant is a type S
// constructible from (const W&, cudaStream_t) (untimed setup) and callable as
// void(const W&, cudaStream_t) (timed). The constructor runs before the inputs are filled, and
// each checked run refills them: state may depend on sizes, never on input values.
template <class W>
class Example {
 public:
  explicit Example(detail::ExampleDef& def) : def_(def) {
    def_.make_workload = [](Setup& s) -> std::shared_ptr<void> { return std::make_shared<W>(s); };
    // A workload that keeps copies of its inputs outside the harness's buffers (one per GPU, in
    // ch04) refreshes them in `void inputs_filled(cudaStream_t)`: the harness calls it, untimed,
    // each time it refills the inputs, so the copies always hold the inputs of the coming run.
    if constexpr (requires(W& w, cudaStream_t s) { w.inputs_filled(s); })
      def_.inputs_filled = [](void* w, cudaStream_t s) { static_cast<W*>(w)->inputs_filled(s); };
  }

  template <class F>
  Example& baseline(std::string name, F launch, VariantOptions o = {}) {
    return add(std::move(name), Role::baseline, plain(launch), o);
  }
  template <class F>
  Example& step(std::string name, F launch, VariantOptions o = {}) {
    return add(std::move(name), Role::step, plain(launch), o);
  }
  template <class F>
  Example& optimized(std::string name, F launch, VariantOptions o = {}) {
    return add(std::move(name), Role::optimized, plain(launch), o);
  }
  template <class F>
  Example& vendor(std::string name, F launch, VariantOptions o = {}) {
    return add(std::move(name), Role::vendor, plain(launch), o);
  }
  // Stateful forms: Example::stateful<S>(Role::optimized, "graph").
  template <class S>
  Example& stateful(Role role, std::string name, VariantOptions o = {}) {
    detail::Prepare prepare = [](void* w, cudaStream_t stream) -> detail::Prepared {
      auto& workload = *static_cast<W*>(w);
      auto state = std::make_shared<S>(workload, stream);
      detail::Prepared prepared{[state, &workload](cudaStream_t s) { (*state)(workload, s); }, {}};
      if constexpr (requires(S& st) { st.metrics(); })
        prepared.metrics = [state] { return state->metrics(); };
      return prepared;
    };
    return add(std::move(name), role, std::move(prepare), o);
  }

  // The most recently added variant cannot run this workload when `why` returns a reason.
  template <class F>
  Example& variant_requires(F why) {
    def_.variants.back().support = [why](const void* w) -> std::string {
      return why(*static_cast<const W*>(w));
    };
    return *this;
  }
  // The whole example cannot run this workload (or on this machine) when `why` returns a reason.
  template <class F>
  Example& requires_that(F why) {
    def_.support = [why](const void* w) -> std::string { return why(*static_cast<const W*>(w)); };
    return *this;
  }
  // Axes (nvbench's idea): each point of their product is a case of its own,
  // chNN/<example>/<variant>/<axis>:<value>/...; `defaults` are the values a default run takes
  // (empty: all), `bench compare --sweep` takes every value and `--axis name=v` selects. The
  // workload reads the point's value with Setup::axis / float_axis / string_axis.
  Example& int_axis(std::string name, std::vector<int64_t> values,
                    std::vector<int64_t> defaults = {}) {
    return add_axis(detail::AxisDef::Kind::integer, std::move(name), values, defaults);
  }
  Example& float_axis(std::string name, std::vector<double> values,
                      std::vector<double> defaults = {}) {
    return add_axis(detail::AxisDef::Kind::floating, std::move(name), values, defaults);
  }
  // Values 0 and 1; a default run takes both unless `only_default` names one.
  Example& bool_axis(std::string name, std::vector<bool> only_default = {}) {
    std::vector<int64_t> defaults;
    for (bool b : only_default) defaults.push_back(b ? 1 : 0);
    return add_axis(detail::AxisDef::Kind::boolean, std::move(name), std::vector<int64_t>{0, 1},
                    defaults);
  }
  Example& string_axis(std::string name, std::vector<std::string> values,
                       std::vector<std::string> defaults = {}) {
    def_.axes.push_back(
        {detail::AxisDef::Kind::string, std::move(name), std::move(values), std::move(defaults)});
    return *this;
  }
  // The most recently added variant is a case only at the points where `where(point)` holds
  // (a rung that exists for one head_dim, a role that changes with the shape): elsewhere it is
  // not registered at all, rather than SKIPPED.
  Example& variant_where(PointPredicate where) {
    def_.variants.back().where = std::move(where);
    return *this;
  }
  // Sampling mode `m` at the points where `where(point)` holds (the 8192^3 GEMM is sustained,
  // the 4096^3 one cold); mode() sets every other point's.
  Example& mode_where(PointPredicate where, Mode m) {
    def_.modes_where.emplace_back(std::move(where), m);
    return *this;
  }
  // The points a default run takes when they are not a product of per-axis defaults, each
  // written as in a case name: {"b:4/s:4096/d:64/causal:1", "b:1/s:8192/d:128/causal:0"}.
  Example& default_points(std::vector<std::string> points) {
    def_.default_points = std::move(points);
    return *this;
  }
  // A piece of registration several examples share (a GEMM's checks, a ladder), applied here:
  // `f(*this)`. Keeps one BENCH_EXAMPLE per example where a helper would otherwise wrap it.
  template <class F>
  Example& with(F f) {
    f(*this);
    return *this;
  }
  Example& min_compute_capability(int cc) {
    def_.min_compute_capability = cc;
    return *this;
  }
  Example& min_gpus(int n) {
    def_.min_gpus = n;
    return *this;
  }

  // What correct means: a CPU function void(const W&, HostData&) computing in double.
  template <class F>
  Example& reference(F fn) {
    def_.reference = [fn](const void* w, HostData& h) { fn(*static_cast<const W*>(w), h); };
    return *this;
  }
  // Optional: a trusted device implementation void(const W&, cudaStream_t) writing the outputs,
  // used instead of the CPU reference to check timed samples at the timing size, where the CPU
  // reference would be too slow (large GEMMs); with one, nearly every timed sample is checked
  // on the device (docs/validity.md row 2, device-checked samples). Its FP32 form,
  // void(const W&, const ReferenceOutputs&, cudaStream_t), writes each output in FP32 into the
  // array ReferenceOutputs names instead, for narrow outputs under a tolerance finer than one
  // unit of their dtype (ch09's BF16 norms).
  template <class F>
  Example& device_reference(F fn) {
    if constexpr (std::is_invocable_v<F, const W&, const ReferenceOutputs&, cudaStream_t>) {
      def_.device_reference = [fn](const void* w, const ReferenceOutputs& out, cudaStream_t s) {
        fn(*static_cast<const W*>(w), out, s);
      };
      def_.device_reference_writes_f32 = true;
    } else {
      def_.device_reference = [fn](const void* w, const ReferenceOutputs&, cudaStream_t s) {
        fn(*static_cast<const W*>(w), s);
      };
      def_.device_reference_writes_f32 = false;
    }
    return *this;
  }
  Example& tolerance(Tolerance t) {
    def_.tolerance = t;
    return *this;
  }
  Example& mode(Mode m) {
    def_.mode = m;
    return *this;
  }
  // Scored by a figure of the run instead of its time (a p99 latency inside the timed work, a
  // simulated throughput built from kernel times measured live): every variant is stateful and
  // its metrics() reports `metric`, a positive number, after every timed sample; `bench compare`
  // takes the ratio of the two sides' medians, oriented so that above 1 is better, with its
  // bootstrap interval. Each variant is still verified and timed as any other, and its time is
  // still reported (docs/writing-an-example.md, "Scored by a metric").
  Example& scored_by(std::string metric, Better better) {
    def_.scored_metric = std::move(metric);
    def_.scored_better = better;
    return *this;
  }

 private:
  template <class F>
  static detail::Prepare plain(F launch) {
    return [launch](void* w, cudaStream_t) -> detail::Prepared {
      auto* workload = static_cast<const W*>(w);
      return {[launch, workload](cudaStream_t s) { launch(*workload, s); }, {}};
    };
  }
  template <class T>
  Example& add_axis(detail::AxisDef::Kind kind, std::string name, const std::vector<T>& values,
                    const std::vector<T>& defaults) {
    detail::AxisDef axis{kind, std::move(name), {}, {}};
    for (const T& v : values) axis.values.push_back(detail::axis_text(v));
    for (const T& v : defaults) axis.defaults.push_back(detail::axis_text(v));
    def_.axes.push_back(std::move(axis));
    return *this;
  }
  // Baseline and optimized cases are always named so (chNN/example/baseline, .../optimized), so
  // Google Benchmark's compare.py and the driver line them up; the given name describes them.
  Example& add(std::string name, Role role, detail::Prepare prepare, VariantOptions o) {
    const bool fixed = role == Role::baseline || role == Role::optimized;
    std::string case_name = fixed ? to_string(role) : name;
    def_.variants.push_back(
        {std::move(case_name), std::move(name), role, std::move(prepare), o, {}, {}});
    return *this;
  }
  detail::ExampleDef& def_;
};

// 2^from, 2^(from+1), ..., 2^to: the values of a power-of-two integer axis.
inline std::vector<int64_t> powers_of_two(int from, int to) {
  std::vector<int64_t> values;
  for (int e = from; e <= to; ++e) values.push_back(int64_t{1} << e);
  return values;
}

// Registration objects live for the whole process, like the Google Benchmark cases they become.
template <class W>
Example<W>& make_example(const char* chapter, const char* name, const char* file) {
  return *new Example<W>(detail::register_example(chapter, name, file));
}

}  // namespace bench

#define BENCH_CONCAT_INNER(a, b) a##b
#define BENCH_CONCAT(a, b) BENCH_CONCAT_INNER(a, b)

// Registers chNN/<example> with workload type W; chain the variants, reference and tolerance.
#define BENCH_EXAMPLE(chapter, example, W)                                    \
  [[maybe_unused]] static auto& BENCH_CONCAT(bench_example_, __COUNTER__) =   \
      ::bench::make_example<W>(#chapter, #example, __FILE__)

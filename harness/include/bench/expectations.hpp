// bench/expectations.hpp: reading and writing expectations/<hardware_key>.json (format in
// docs/expectations.md). Host-only; used by the harness's .cpp files and by the tools, never by
// chapter code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace bench {

// A malformed file: the message names the file, the line and column, and what was expected.
class ExpectationsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// One measured ceiling of the device (written by `bench calibrate`).
struct Ceiling {
  double value = 0.0;
  std::string unit;     // "GB/s", "TFLOP/s", "us"
  double noise = 0.0;   // relative noise of the measurement (0.004 = 0.4%)
  std::string method;   // how it was measured, e.g. "cudaMemcpyAsync D2D 1 GiB, read+write"
  std::string date;     // ISO 8601
};

// One variant's recorded median and noise.
struct VariantExpectation {
  double median_us = 0.0;
  double noise = 0.0;
};

// Where an example's numbers came from.
struct Provenance {
  std::string git_sha, date, command, driver, cuda, gpu;
};

// One machine's figures for an example whose score depends on the host (a variant declared
// host_bound): the spread over machines of one GPU kind is what its band is drawn from.
struct MachineRun {
  double speedup = 0.0;       // optimized over baseline
  double optimized_us = 0.0;  // the optimized side's median
  std::string host;           // the machine (host name), as the run's context gives it
  std::string date;           // ISO 8601
};

// The figure an example is scored by instead of its time (`.scored_by(name, bench::Better::lower)`,
// docs/expectations.md, "Scored by a metric"); `better` is "lower" or "higher".
struct ScoredMetric {
  std::string name;
  std::string better;
  bool operator==(const ScoredMetric&) const = default;
};

// What an example `chNN/<example>` is expected to do on this GPU.
struct ExampleExpectation {
  std::map<std::string, VariantExpectation> variants;  // by variant name
  // The scored metric, when the example declares one: `speedup` is then that metric's ratio,
  // oriented so that above 1 is better. std::nullopt: `speedup` is of time.
  std::optional<ScoredMetric> metric;
  double speedup = 0.0;                                // optimized over baseline
  double tolerance = 0.10;                             // relative: 0.10 accepts +-10%
  std::optional<double> pct_ceiling;                   // optimized side, percent
  Provenance provenance;
  std::vector<MachineRun> machines;                    // host-dependent examples (docs/expectations.md)
  // An outcome recorded as this example's own on this GPU (docs/expectations.md, "Recorded
  // outcomes"): empty when a speedup is expected; "no_speedup" (an honest 1.00x: speedup and
  // tolerance are the measured band it must stay in) or "skipped" (the optimized side is
  // refused here by design: no speedup, no tolerance). `reason` says why; for "skipped" it is
  // the harness's skip message, which a run must repeat.
  std::string expected_status;
  std::string reason;
};
inline constexpr const char* kExpectedNoSpeedup = "no_speedup";
inline constexpr const char* kExpectedSkipped = "skipped";

// The device the file describes (informative; the file name is the key).
struct DeviceDescription {
  std::string name;
  std::string compute_capability;
  int64_t sm_count = 0;
  int64_t l2_bytes = 0;
  int64_t memory_bytes = 0;
  int64_t memory_bus_bits = 0;
  int64_t memory_clock_khz = 0;
  int64_t device_count = 1;
};

struct Expectations {
  static constexpr int kFormatVersion = 1;
  std::string hardware_key;
  DeviceDescription device;
  std::map<std::string, Ceiling> ceilings;              // by ceiling name, e.g. hbm_copy_gbps
  std::map<std::string, ExampleExpectation> examples;   // by "chNN/<example>"
};

// Why an example key ("ch07/copy") names no example of the suite; empty when it names one, or
// when it cannot be told (the tools know the suite's examples, the harness does not).
using ExampleCheck = std::function<std::string(const std::string& example)>;

// Why an entry's recorded metric (std::nullopt: a speedup of time) is not what its example
// declares; empty when it is, or when the declaration is not known (the update knows it from
// the run it records: results carry it).
using MetricCheck = std::function<std::string(const std::string& example,
                                              const std::optional<ScoredMetric>& recorded)>;

// What a parse checks beyond the format.
struct ExpectationsChecks {
  std::string hardware_key;  // non-empty: the file's `hardware_key` must be this (its file name)
  ExampleCheck example;      // set: every example key must name an example of the suite
  MetricCheck metric;        // set: every entry must record the metric its example is scored by
};

// Strict parse: unknown keys, duplicate keys, wrong types, numbers out of their range (a
// non-positive speedup, median or tolerance, a noise outside [0, 1]), missing required keys,
// example keys not of the form chNN/name and malformed JSON throw
// ExpectationsError "<source>:<line>:<column>: <what was expected>".
Expectations parse_expectations(std::string_view text, const std::string& source_name,
                                const ExpectationsChecks& checks = {});
// Reads and parses a file, whose name must be its hardware key ("h200.json" holds "h200"). A
// missing file gives std::nullopt; an unreadable or malformed one throws ExpectationsError.
// `validate`, `compare` and the update all read files through here.
std::optional<Expectations> load_expectations(const std::filesystem::path& file,
                                              const ExampleCheck& example = {},
                                              const MetricCheck& metric = {});
// The one-GPU key of a machine's key: "2x_h200" -> "h200"; a one-GPU key comes back unchanged.
std::string single_gpu_key(const std::string& hardware_key);
// The GPU count a machine's key names: "2x_h200" -> 2, "h200" -> 1.
int64_t gpu_count_of_key(const std::string& hardware_key);
// What a run on `hardware_key` is scored against, from `dir`. A machine of N GPUs ("2x_h200")
// has a file for what only it runs (multi-GPU examples, its link ceilings); an example or ceiling
// that file lacks comes from the one-GPU file of the same GPU ("h200"), since a one-GPU example
// runs on one of its GPUs. The machine's own entries win. std::nullopt when neither file exists.
// `sources` (if given) receives the files read, the machine's first.
std::optional<Expectations> load_expectations_for(
    const std::filesystem::path& dir, const std::string& hardware_key,
    std::vector<std::filesystem::path>* sources = nullptr, const ExampleCheck& example = {});

// The ceilings a run on `hardware_key` sees, as name -> value (e.g. "hbm_copy_gbps" -> 3010.5),
// read as load_expectations_for reads them: on a machine of N GPUs its own file's (the links),
// then the one-GPU file's, so a chapter binary's pct_ceiling matches the one `bench compare`
// computes. No file gives an empty map; a malformed one throws ExpectationsError.
std::map<std::string, double> load_ceilings(const std::filesystem::path& dir,
                                            const std::string& hardware_key);

// The ceiling a case is measured against. Tensor-core peaks come twice: the burst a short or
// gapped GEMM runs at before the board's power limiter acts ("bf16_burst_tflops", timed cold) and
// the figure at that limit ("bf16_tflops", timed sustained). A sustained case gets the sustained
// name; every other mode gets the burst name when `has` says the ceilings hold it, else the name
// it declared. Names without a burst twin come back unchanged.
std::string ceiling_for_mode(const std::string& declared, bool sustained,
                             const std::function<bool(const std::string&)>& has);

// Line and column (both 1-based) of a byte offset into `text`, for error messages about JSON
// files ("file:line:column: ...").
struct TextPosition {
  std::size_t line = 1, column = 1;
};
TextPosition text_position(std::string_view text, std::size_t byte_offset);

}  // namespace bench

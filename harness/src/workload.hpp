// Internal: the buffers the harness manages for one workload instance, and the operations the
// validity checks need on them (fill, checksum, poison, copy to the host).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "bench/bench.hpp"
#include "host_copy.hpp"

namespace bench::detail {

struct Buffer {
  std::string name;
  DType dtype = DType::f32;
  int64_t count = 0;
  Fill fill;
  bool is_input = true;
  void* device = nullptr;
  std::size_t bytes() const { return static_cast<std::size_t>(count) * size_of(dtype); }
};

class SetupImpl {
 public:
  explicit SetupImpl(bool verifying) : verifying(verifying) {}
  ~SetupImpl();
  SetupImpl(const SetupImpl&) = delete;
  SetupImpl& operator=(const SetupImpl&) = delete;

  bool verifying;
  std::vector<Buffer> buffers;
  std::vector<std::pair<std::string, int64_t>> sizes;
  std::vector<std::pair<std::string, int64_t>> params;
  double bytes = 0, flops = 0;
  std::string bandwidth_ceiling, compute_ceiling;
  // The axis point being built ("b:4/s:4096", "" without axes) and each axis's kind and value,
  // which Setup::axis and its siblings read.
  std::string point;
  struct AxisValue {
    std::string name;
    AxisDef::Kind kind;
    std::string text;
  };
  std::vector<AxisValue> axis_values;
};

// One built workload: the harness-owned buffers and the chapter's typed object over them.
struct WorkloadInstance {
  std::unique_ptr<SetupImpl> setup;
  std::shared_ptr<void> object;
  std::function<void(cudaStream_t)> inputs_filled;  // the example's hook, bound to `object`
  const std::vector<Buffer>& buffers() const { return setup->buffers; }
};

// Builds the workload at the timing or the verification size. Out of device memory is thrown
// as bench::Unsupported (the case is SKIPPED, with the reason).
WorkloadInstance build_workload(const ExampleDef& example, bool verifying);

// Fills every input from `seed` (each buffer gets its own stream of the generator), then calls
// the workload's inputs_filled hook when it has one.
void fill_inputs(const WorkloadInstance& w, uint64_t seed, cudaStream_t stream);
// Order-independent 64-bit checksum of all inputs, computed on the device.
uint64_t input_checksum(const WorkloadInstance& w, cudaStream_t stream);
// The same over all outputs: a timed sample that leaves it equal to the poisoned outputs'
// checksum wrote nothing.
uint64_t output_checksum(const WorkloadInstance& w, cudaStream_t stream);
// Writes a byte pattern over every output; the pattern differs per `run` (NaN first) and
// repeats every kPoisonPatterns runs.
inline constexpr int kPoisonPatterns = 4;
void poison_outputs(const WorkloadInstance& w, int run, cudaStream_t stream);

struct HostBuffers {
  std::map<std::string, HostCopy> inputs;                 // read by the CPU reference
  std::map<std::string, HostArray<double>> expected;      // written by it
};
// Copies inputs to the host and sizes the expected outputs (NaN until the reference writes them).
HostBuffers copy_inputs_to_host(const WorkloadInstance& w, cudaStream_t stream);
// Copies one buffer to the host in its own dtype (after the work queued on `stream`).
HostCopy copy_to_host(const Buffer& buffer, cudaStream_t stream);

class HostDataImpl {
 public:
  explicit HostDataImpl(HostBuffers& b) : buffers(b) {}
  HostBuffers& buffers;
};

// The problem a variant solved: sizes, parameters, buffers and the distribution each input is
// drawn from. The input values are not part of it: every variant, and every timed sample,
// draws its own (docs/validity.md, memoisation). Its hash is what the driver compares.
std::string fingerprint_json(const WorkloadInstance& w);
std::string fingerprint_hash(const std::string& fingerprint_json);
// 64-bit FNV-1a of `text`: the fingerprint's hash, and what mixes a case's name into its seed.
uint64_t fnv1a(std::string_view text);

}  // namespace bench::detail

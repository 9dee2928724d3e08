// Harness-managed workload buffers: allocation, seeded fill, checksum, poison, host copies,
// and the fingerprint that proves two variants saw the same problem.
#include "workload.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "device_kernels.hpp"
#include "bench/parallel.hpp"
#include "registry.hpp"

namespace bench {

// ---- the chapter-facing Setup and HostData --------------------------------------------------
bool Setup::verifying() const { return impl_.verifying; }

int64_t Setup::size(std::string_view name, int64_t timing, int64_t verification) {
  const int64_t value = impl_.verifying ? verification : timing;
  impl_.sizes.emplace_back(std::string(name), value);
  return value;
}

void Setup::param(std::string_view name, int64_t value) {
  impl_.params.emplace_back(std::string(name), value);
}

namespace {
const std::string& axis_value(const detail::SetupImpl& impl, std::string_view name,
                              std::initializer_list<detail::AxisDef::Kind> kinds,
                              const char* reader) {
  for (const auto& a : impl.axis_values) {
    if (a.name != name) continue;
    if (std::find(kinds.begin(), kinds.end(), a.kind) == kinds.end())
      throw std::invalid_argument(
          fmt::format("axis '{}' cannot be read with Setup::{}", name, reader));
    return a.text;
  }
  throw std::invalid_argument(
      fmt::format("the workload reads axis '{}', which the example does not declare", name));
}
}  // namespace

int64_t Setup::axis(std::string_view name) const {
  using K = detail::AxisDef::Kind;
  return std::stoll(axis_value(impl_, name, {K::integer, K::boolean}, "axis"));
}
double Setup::float_axis(std::string_view name) const {
  using K = detail::AxisDef::Kind;
  return std::stod(axis_value(impl_, name, {K::floating}, "float_axis"));
}
std::string Setup::string_axis(std::string_view name) const {
  return axis_value(impl_, name, {detail::AxisDef::Kind::string}, "string_axis");
}

namespace {
void* allocate(detail::SetupImpl& impl, std::string_view name, DType dtype, int64_t count,
               Fill fill, bool is_input) {
  if (count <= 0)
    throw std::invalid_argument(fmt::format("buffer '{}' has {} elements", name, count));
  for (const auto& b : impl.buffers)
    if (b.name == name)
      throw std::invalid_argument(fmt::format("buffer '{}' declared twice", name));
  if (is_input && fill.a == 0 && fill.b == 0)  // every distribution degenerates to zeros
    throw std::invalid_argument(fmt::format("input '{}' would be all zeros", name));
  detail::Buffer buffer{std::string(name), dtype, count, fill, is_input, nullptr};
  const cudaError_t err = cudaMalloc(&buffer.device, buffer.bytes());
  if (err == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw Unsupported(fmt::format("not enough device memory for '{}' ({:.2f} GiB)", name,
                                  buffer.bytes() / double(1ull << 30)));
  }
  detail::check_cuda(err, "cudaMalloc", __FILE__, __LINE__);
  impl.buffers.push_back(buffer);
  return buffer.device;
}
}  // namespace

void* Setup::add_input(std::string_view name, DType dtype, int64_t count, Fill fill) {
  return allocate(impl_, name, dtype, count, fill, true);
}
void* Setup::add_output(std::string_view name, DType dtype, int64_t count) {
  return allocate(impl_, name, dtype, count, Fill{}, false);
}

void Setup::bytes(double bytes_moved, const char* bandwidth_ceiling) {
  impl_.bytes = bytes_moved;
  impl_.bandwidth_ceiling = bandwidth_ceiling;
}
void Setup::flops(double flops, const char* compute_ceiling) {
  impl_.flops = flops;
  impl_.compute_ceiling = compute_ceiling;
}

std::span<const std::byte> HostData::input_bytes(std::string_view name, DType dtype) const {
  auto it = impl_.buffers.inputs.find(std::string(name));
  if (it == impl_.buffers.inputs.end())
    throw std::invalid_argument(fmt::format("reference asked for unknown input '{}'", name));
  // A reference reading BF16 bits as float would compute garbage that might still "agree".
  if (it->second.dtype != dtype)
    throw std::invalid_argument(fmt::format("reference read input '{}' as {}, but it holds {}", name,
                                            to_string(dtype), to_string(it->second.dtype)));
  return it->second.bytes;
}

std::span<double> HostData::expected(std::string_view name) {
  auto it = impl_.buffers.expected.find(std::string(name));
  if (it == impl_.buffers.expected.end())
    throw std::invalid_argument(fmt::format("reference asked for unknown output '{}'", name));
  return it->second;
}

float* ReferenceOutputs::operator[](std::string_view output) const {
  for (const auto& [name, array] : arrays)
    if (name == output) return array;
  throw std::invalid_argument(
      fmt::format("device reference asked for unknown output '{}'", output));
}

namespace detail {

SetupImpl::~SetupImpl() {
  for (auto& b : buffers) cudaFree(b.device);
}

WorkloadInstance build_workload(const ExampleDef& example, bool verifying) {
  WorkloadInstance w;
  w.setup = std::make_unique<SetupImpl>(verifying);
  w.setup->point = example.point;
  if (!example.point.empty())
    for (std::size_t i = 0; const auto& [name, text] : parse_point(example.point))
      w.setup->axis_values.push_back({name, example.axes.at(i++).kind, text});
  Setup setup(*w.setup);
  w.object = example.make_workload(setup);
  if (example.inputs_filled)
    w.inputs_filled = [hook = example.inputs_filled, object = w.object.get()](cudaStream_t s) { hook(object, s); };
  return w;
}

void fill_inputs(const WorkloadInstance& w, uint64_t seed, cudaStream_t stream) {
  uint64_t salt = 0;
  for (const auto& b : w.buffers()) {
    ++salt;
    if (b.is_input) launch_fill(b.device, b.dtype, b.count, b.fill, seed, salt, stream);
  }
  if (w.inputs_filled) w.inputs_filled(stream);
}

namespace {
// One device word, allocated once and kept for the process (like the staging chunks below):
// the output checksum runs after every timed sample, where a cudaMalloc/cudaFree pair each
// time is overhead the sampling loop does not need.
unsigned long long* checksum_accumulator() {
  static unsigned long long* acc = [] {
    unsigned long long* p = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&p, sizeof *p));
    return p;
  }();
  return acc;
}

uint64_t checksum_of(const WorkloadInstance& w, bool inputs, cudaStream_t stream) {
  unsigned long long* acc = checksum_accumulator();
  BENCH_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof *acc, stream));
  for (const auto& b : w.buffers())
    if (b.is_input == inputs) launch_checksum(b.device, b.bytes(), acc, stream);
  unsigned long long host = 0;
  BENCH_CUDA_CHECK(cudaMemcpyAsync(&host, acc, sizeof host, cudaMemcpyDeviceToHost, stream));
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}
}  // namespace

uint64_t input_checksum(const WorkloadInstance& w, cudaStream_t stream) { return checksum_of(w, true, stream); }
uint64_t output_checksum(const WorkloadInstance& w, cudaStream_t stream) { return checksum_of(w, false, stream); }

void poison_outputs(const WorkloadInstance& w, int run, cudaStream_t stream) {
  // 0xFF is NaN for every float type and -1 for integers; the others are unlikely values
  // that change from run to run, so stale results from an earlier run cannot survive.
  static constexpr unsigned char patterns[kPoisonPatterns] = {0xFF, 0xA5, 0x5A, 0xC3};
  const int pattern = patterns[run % kPoisonPatterns];
  for (const auto& b : w.buffers())
    if (!b.is_input) BENCH_CUDA_CHECK(cudaMemsetAsync(b.device, pattern, b.bytes(), stream));
}

namespace {

// Device-to-host copies go through two pinned chunks kept for the life of the process: the copy
// engine fills one while the host's threads move the other into place (pageable copies of a GiB
// faulted every destination page in on one thread).
class Staging {
 public:
  static constexpr std::size_t kChunk = std::size_t{32} << 20;
  Staging() {
    for (int i = 0; i < 2; ++i) {
      BENCH_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&chunk_[i]), kChunk, cudaHostAllocDefault));
      BENCH_CUDA_CHECK(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming));
    }
  }
  // Copies `bytes` of device memory at `src` to `dst`, after the work already queued on `stream`.
  void copy(std::byte* dst, const void* src, std::size_t bytes, cudaStream_t stream) {
    const std::size_t chunks = (bytes + kChunk - 1) / kChunk;
    auto size_of_chunk = [&](std::size_t k) { return std::min(kChunk, bytes - k * kChunk); };
    auto issue = [&](std::size_t k) {
      BENCH_CUDA_CHECK(cudaMemcpyAsync(chunk_[k % 2], static_cast<const std::byte*>(src) + k * kChunk,
                                       size_of_chunk(k), cudaMemcpyDeviceToHost, stream));
      BENCH_CUDA_CHECK(cudaEventRecord(done_[k % 2], stream));
    };
    if (chunks > 0) issue(0);
    for (std::size_t k = 0; k < chunks; ++k) {
      if (k + 1 < chunks) issue(k + 1);  // into the chunk the previous iteration emptied
      BENCH_CUDA_CHECK(cudaEventSynchronize(done_[k % 2]));
      const std::byte* from = chunk_[k % 2];
      std::byte* to = dst + k * kChunk;
      parallel_chunks(size_of_chunk(k), [&](std::size_t, std::size_t begin, std::size_t end) {
        std::memcpy(to + begin, from + begin, end - begin);
      });
    }
  }

 private:
  std::byte* chunk_[2] = {};
  cudaEvent_t done_[2] = {};
};

Staging& staging() {
  static Staging* s = new Staging();  // never freed: it must outlive every check, even at exit
  return *s;
}

}  // namespace

HostCopy copy_to_host(const Buffer& buffer, cudaStream_t stream) {
  HostCopy copy{buffer.dtype, HostArray<std::byte>(buffer.bytes())};
  staging().copy(copy.bytes.data(), buffer.device, buffer.bytes(), stream);
  return copy;
}

HostBuffers copy_inputs_to_host(const WorkloadInstance& w, cudaStream_t stream) {
  HostBuffers host;
  for (const auto& b : w.buffers()) {
    if (b.is_input) {
      host.inputs.emplace(b.name, copy_to_host(b, stream));
    } else {
      HostArray<double> expected(static_cast<std::size_t>(b.count));
      parallel_chunks(expected.size(), [&](std::size_t, std::size_t begin, std::size_t end) {
        std::fill(expected.data() + begin, expected.data() + end, std::numeric_limits<double>::quiet_NaN());
      });
      host.expected.emplace(b.name, std::move(expected));
    }
  }
  return host;
}

std::string fingerprint_json(const WorkloadInstance& w) {
  static constexpr const char* kinds[] = {"uniform", "normal", "integers"};
  nlohmann::ordered_json j;
  if (!w.setup->point.empty()) j["point"] = w.setup->point;
  for (const auto& [name, value] : w.setup->sizes) j["sizes"][name] = value;
  for (const auto& [name, value] : w.setup->params) j["params"][name] = value;
  for (const auto& b : w.buffers()) {
    nlohmann::ordered_json buffer = {{"name", b.name},
                                     {"dtype", to_string(b.dtype)},
                                     {"count", b.count},
                                     {"role", b.is_input ? "input" : "output"}};
    if (b.is_input) buffer["fill"] = {kinds[static_cast<int>(b.fill.kind)], b.fill.a, b.fill.b};
    j["buffers"].push_back(buffer);
  }
  return j.dump();
}

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

std::string fingerprint_hash(const std::string& text) { return fmt::format("{:016x}", fnv1a(text)); }

}  // namespace detail
}  // namespace bench

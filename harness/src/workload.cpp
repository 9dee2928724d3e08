// Harness-managed workload buffers: allocation, seeded fill, checksum, poison, host copies,
// and the fingerprint that proves two variants saw the same problem.
#include "workload.hpp"

#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "device_kernels.hpp"
#include "parallel.hpp"

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

namespace detail {

SetupImpl::~SetupImpl() {
  for (auto& b : buffers) cudaFree(b.device);
}

WorkloadInstance build_workload(const ExampleDef& example, bool verifying) {
  WorkloadInstance w;
  w.setup = std::make_unique<SetupImpl>(verifying);
  Setup setup(*w.setup);
  w.object = example.make_workload(setup);
  return w;
}

void fill_inputs(const WorkloadInstance& w, uint64_t seed, cudaStream_t stream) {
  uint64_t salt = 0;
  for (const auto& b : w.buffers()) {
    ++salt;
    if (b.is_input) launch_fill(b.device, b.dtype, b.count, b.fill, seed, salt, stream);
  }
}

uint64_t input_checksum(const WorkloadInstance& w, cudaStream_t stream) {
  DeviceBuffer<unsigned long long> acc(1);
  BENCH_CUDA_CHECK(cudaMemsetAsync(acc.data(), 0, acc.bytes(), stream));
  for (const auto& b : w.buffers())
    if (b.is_input) launch_checksum(b.device, b.bytes(), acc.data(), stream);
  unsigned long long host = 0;
  BENCH_CUDA_CHECK(cudaMemcpyAsync(&host, acc.data(), sizeof host, cudaMemcpyDeviceToHost, stream));
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

void poison_outputs(const WorkloadInstance& w, int run, cudaStream_t stream) {
  // 0xFF is NaN for every float type and -1 for integers; the others are unlikely values
  // that change from run to run, so stale results from an earlier run cannot survive.
  static constexpr unsigned char patterns[] = {0xFF, 0xA5, 0x5A, 0xC3};
  const int pattern = patterns[run % 4];
  for (const auto& b : w.buffers())
    if (!b.is_input) BENCH_CUDA_CHECK(cudaMemsetAsync(b.device, pattern, b.bytes(), stream));
}

HostBuffers copy_inputs_to_host(const WorkloadInstance& w, cudaStream_t stream) {
  HostBuffers host;
  for (const auto& b : w.buffers()) {
    if (b.is_input) {
      auto& [dtype, bytes] = host.inputs[b.name];
      dtype = b.dtype;
      bytes.resize(b.bytes());
      BENCH_CUDA_CHECK(
          cudaMemcpyAsync(bytes.data(), b.device, b.bytes(), cudaMemcpyDeviceToHost, stream));
    } else {
      host.expected[b.name].assign(static_cast<std::size_t>(b.count),
                                   std::numeric_limits<double>::quiet_NaN());
    }
  }
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

namespace {
double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  double v;
  if (exp == 0)
    v = std::ldexp(mant, -24);
  else if (exp == 31)
    v = mant ? std::numeric_limits<double>::quiet_NaN() : INFINITY;
  else
    v = std::ldexp(mant + 1024, exp - 25);
  return sign ? -v : v;
}
double e4m3_to_double(uint8_t x) {
  const int sign = x >> 7, exp = (x >> 3) & 0xF, mant = x & 0x7;
  if (exp == 0xF && mant == 0x7) return std::numeric_limits<double>::quiet_NaN();
  const double v = exp == 0 ? std::ldexp(mant, -9) : std::ldexp(mant + 8, exp - 10);
  return sign ? -v : v;
}
}  // namespace

std::vector<double> copy_output_to_host(const Buffer& out, cudaStream_t stream) {
  std::vector<std::byte> raw(out.bytes());
  BENCH_CUDA_CHECK(
      cudaMemcpyAsync(raw.data(), out.device, raw.size(), cudaMemcpyDeviceToHost, stream));
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<double> values(static_cast<std::size_t>(out.count));
  const auto* p = raw.data();
  parallel_chunks(values.size(), [&](std::size_t, std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      auto load = [&](auto tag) {
        decltype(tag) v;
        std::memcpy(&v, p + i * sizeof v, sizeof v);
        return v;
      };
      switch (out.dtype) {
        case DType::f64:
          values[i] = load(double{});
          break;
        case DType::f32:
          values[i] = load(float{});
          break;
        case DType::f16:
          values[i] = half_to_double(load(uint16_t{}));
          break;
        case DType::bf16:
          values[i] = std::bit_cast<float>(uint32_t{load(uint16_t{})} << 16);
          break;
        case DType::fp8_e4m3:
          values[i] = e4m3_to_double(load(uint8_t{}));
          break;
        case DType::fp8_e5m2:
          values[i] = half_to_double(uint16_t(load(uint8_t{}) << 8));
          break;
        case DType::i64:
          values[i] = static_cast<double>(load(int64_t{}));
          break;
        case DType::i32:
          values[i] = load(int32_t{});
          break;
        case DType::i8:
          values[i] = load(int8_t{});
          break;
        case DType::u64:
          values[i] = static_cast<double>(load(uint64_t{}));
          break;
        case DType::u32:
          values[i] = load(uint32_t{});
          break;
        case DType::u8:
          values[i] = load(uint8_t{});
          break;
      }
    }
  });
  return values;
}

std::string fingerprint_json(const WorkloadInstance& w, uint64_t seed, uint64_t checksum) {
  nlohmann::ordered_json j;
  j["seed"] = seed;
  for (const auto& [name, value] : w.setup->sizes) j["sizes"][name] = value;
  for (const auto& [name, value] : w.setup->params) j["params"][name] = value;
  for (const auto& b : w.buffers())
    j["buffers"].push_back({{"name", b.name},
                            {"dtype", to_string(b.dtype)},
                            {"count", b.count},
                            {"role", b.is_input ? "input" : "output"}});
  j["input_checksum"] = fmt::format("{:016x}", checksum);
  return j.dump();
}

std::string fingerprint_hash(const std::string& text) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a, 64-bit
  for (unsigned char c : text) h = (h ^ c) * 0x100000001b3ull;
  return fmt::format("{:016x}", h);
}

}  // namespace detail
}  // namespace bench

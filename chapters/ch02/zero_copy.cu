// ch02/zero_copy: a kernel needs 4096 small records (64 bytes each) that live in host memory.
//
// What changes from baseline to optimized:
//   1. baseline: one cudaMemcpyAsync per record into a device staging buffer, then the kernel.
//      Each copy moves 64 bytes but costs a full driver call and a DMA setup, a few
//      microseconds; 4096 of them cost milliseconds to move 256 KiB;
//   2. optimized: no copies. The host table is pinned and mapped (cudaHostAlloc), so the kernel
//      dereferences the records in place: its loads cross PCIe as ordinary reads, each record
//      read exactly once, and the copy-engine and driver overhead disappear.
// Zero-copy wins here because every byte is read once and the transfers are tiny; for data read
// repeatedly, or large contiguous blocks, an explicit copy to device memory wins instead.
// Both variants compute out[r] = dot(record r, weights) from the same pinned table (the baseline
// from pinned memory too, so the lesson is the per-transfer overhead, not pinning). The
// baseline may queue more copies than the launch queue holds, so it blocks the host
// (blocks_host); its time is then the host's enqueue time, which is the cost being taught.
//
//   ./bench compare --chapter ch02 --example zero_copy
#include <bench/bench.hpp>

#include <cstdint>

namespace {

constexpr int kFields = 16;                   // floats per record: 64 bytes
constexpr int64_t kTableRows = int64_t{1} << 20;  // 64 MiB host table; records are scattered in it

__host__ __device__ int64_t row_of(int64_t r) { return (r * 7919) % kTableRows; }  // record r's row: scattered, distinct
__host__ __device__ float table_value(int64_t row, int f) {  // small integers: exact in float
  return static_cast<float>(static_cast<int>((static_cast<uint64_t>(row * kFields + f) * 2654435761u >> 11) & 0xFF) - 128);
}

struct Records {
  int64_t count;
  bench::DeviceSpan<const float> weights;
  bench::DeviceSpan<float> out;
  explicit Records(bench::Setup& s)
      : count(s.size("records", 4096, 1001)),
        weights(s.input<float>("weights", kFields, bench::uniform(-1, 1))),
        out(s.output<float>("out", count)) {
    s.bytes(double(count) * kFields * sizeof(float), bench::ceiling::h2d_pinned);
  }
};

// The host table, pinned and mapped; both variants own one (made once, untimed).
class HostTable {
 public:
  HostTable() {
    BENCH_CUDA_CHECK(cudaHostAlloc(&host_, kTableRows * kFields * sizeof(float), cudaHostAllocMapped));
    for (int64_t row = 0; row < kTableRows; ++row)
      for (int f = 0; f < kFields; ++f) host_[row * kFields + f] = table_value(row, f);
    BENCH_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_view_), host_, 0));
  }
  HostTable(const HostTable&) = delete;
  HostTable& operator=(const HostTable&) = delete;
  ~HostTable() { cudaFreeHost(host_); }
  const float* record(int64_t r) const { return host_ + row_of(r) * kFields; }
  const float* device_view() const { return device_view_; }

 private:
  float* host_ = nullptr;
  float* device_view_ = nullptr;
};

// One thread per record: record r is row r of `table` (the staged copy) or, `scattered`, its
// row row_of(r) in the whole host table.
__global__ void dot_records(const float* __restrict__ table, bool scattered, const float* __restrict__ weights,
                            float* __restrict__ out, int64_t count) {
  const int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (r >= count) return;
  const int64_t row = scattered ? row_of(r) : r;
  const auto* rec = reinterpret_cast<const float4*>(table + row * kFields);
  float sum = 0;
#pragma unroll
  for (int q = 0; q < kFields / 4; ++q) {
    const float4 v = rec[q];
    sum += v.x * weights[4 * q] + v.y * weights[4 * q + 1] + v.z * weights[4 * q + 2] + v.w * weights[4 * q + 3];
  }
  out[r] = sum;
}

void launch_dot(const Records& w, const float* table, bool scattered, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((w.count + 127) / 128);
  dot_records<<<blocks, 128, 0, stream>>>(table, scattered, w.weights.data(), w.out.data(), w.count);
  BENCH_CHECK_LAUNCH();
}

class CopyEachRecord {
 public:
  CopyEachRecord(const Records& w, cudaStream_t) : staging_(w.count * kFields) {}
  void operator()(const Records& w, cudaStream_t stream) {
    for (int64_t r = 0; r < w.count; ++r)
      BENCH_CUDA_CHECK(cudaMemcpyAsync(staging_.data() + r * kFields, table_.record(r), kFields * sizeof(float),
                                       cudaMemcpyHostToDevice, stream));
    launch_dot(w, staging_.data(), /*scattered=*/false, stream);
  }

 private:
  HostTable table_;
  bench::DeviceBuffer<float> staging_;
};

class ReadInPlace {
 public:
  ReadInPlace(const Records&, cudaStream_t) {}
  void operator()(const Records& w, cudaStream_t stream) { launch_dot(w, table_.device_view(), /*scattered=*/true, stream); }

 private:
  HostTable table_;
};

void reference(const Records& w, bench::HostData& h) {
  auto weights = h.input<float>("weights");
  auto out = h.expected("out");
  for (int64_t r = 0; r < w.count; ++r) {
    double sum = 0;
    for (int f = 0; f < kFields; ++f) sum += double(table_value(row_of(r), f)) * weights[f];
    out[r] = sum;
  }
}

// The timing-size check (docs/validity.md row 2): one thread per record computes its row's
// fields from the table's definition (no host table, no mapping) and the dot product in double.
__global__ void reference_records(const float* weights, float* out, int64_t count) {
  const int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (r >= count) return;
  double sum = 0;
  for (int f = 0; f < kFields; ++f) sum += double(table_value(row_of(r), f)) * weights[f];
  out[r] = static_cast<float>(sum);
}

void device_reference(const Records& w, cudaStream_t stream) {
  reference_records<<<static_cast<unsigned>((w.count + 255) / 256), 256, 0, stream>>>(w.weights.data(), w.out.data(), w.count);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch02, zero_copy, Records)
    .stateful<CopyEachRecord>(bench::Role::baseline, "cudaMemcpyAsync_per_record", {.blocks_host = true, .host_bound = true})
    .stateful<ReadInPlace>(bench::Role::optimized, "mapped_pinned_read_in_place", {.host_bound = true})
    .reference(reference)
    .device_reference(device_reference);

}  // namespace

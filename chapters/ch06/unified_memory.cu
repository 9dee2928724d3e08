// ch06/unified_memory: a host producer writes a 64 MiB batch into managed memory every step and
// a kernel consumes it (y = batch * x); the pages move between host and GPU on demand, or are
// prefetched to where they will be touched next.
//
// Managed memory (cudaMallocManaged) has one address on both sides; the driver migrates each
// page to the processor that touches it. On demand that means page faults: a GPU warp touching a
// page that lives in host memory stalls, the fault goes to the driver on the CPU, which migrates
// the page (with some neighbours) over PCIe and replays the access; the host writing a page that
// lives on the GPU takes a CPU page fault and migrates it back. Each fault costs microseconds, so
// 64 MiB moved this way crosses PCIe far slower than one bulk copy. cudaMemPrefetchAsync tells
// the driver ahead of time: it migrates the whole range in large chunks, as a copy engine
// transfer in stream order, and the access that follows finds every page already local.
//
// What changes from baseline to optimized (a ladder):
//   1. baseline: the host writes the batch, the kernel reads it: the GPU faults on every page the
//      host last wrote, and next step the host faults on every page the GPU last read;
//   2. step `prefetch_to_device`: cudaMemPrefetchAsync to the GPU before the kernel (CUDA 13
//      form: a cudaMemLocation and flags): the GPU's faults become one bulk migration;
//   3. optimized: also prefetch back to the host (cudaMemLocationTypeHost) before the host
//      writes, so neither side faults: two bulk migrations per step.
// Every variant writes the same values and runs the same kernel; y is checked exactly. The cost is
// on the host and its PCIe link (driver fault handling, migrations, the host's own writes), so
// it is timed with a host clock around the whole step (Mode::host) and all sides are host_bound:
// `bench compare` scores the pair against the spread of speedups recorded over machines.
// Small sizes only, and refused unless the device supports concurrent managed access and has
// far more free memory than the batch: an oversubscribed managed allocation on a shared GPU
// thrashes pages between host and device and can look like a hang.
//
//   ./bench compare --chapter ch06 --example unified_memory
#include <bench/bench.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace {

struct Batch {
  int64_t n;
  bench::DeviceSpan<const float> x;
  bench::DeviceSpan<float> y;
  explicit Batch(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 24, 100'003)),  // 64 MiB batch when timing
        x(s.input<float>("x", n, bench::uniform(-1, 1))),
        y(s.output<float>("y", n)) {
    s.bytes(double(n) * sizeof(float), bench::ceiling::h2d_pinned);  // the batch crosses PCIe once
  }
};

// What the host producer writes: small integers, exact in float, so y = batch * x is exact.
__host__ __device__ float batch_value(int64_t i) { return static_cast<float>(static_cast<int>((static_cast<uint64_t>(i) * 2654435761u >> 7) & 0xFF) - 128); }

std::string refuse_unless_safe(const Batch& w) {
  int device = 0, concurrent = 0;
  BENCH_CUDA_CHECK(cudaGetDevice(&device));
  BENCH_CUDA_CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device));
  if (!concurrent) return "the device lacks concurrent managed access (cudaDevAttrConcurrentManagedAccess)";
  size_t free_bytes = 0, total_bytes = 0;
  BENCH_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  const double batch_bytes = double(w.n) * sizeof(float);
  if (batch_bytes * 16 > double(free_bytes))
    return "the managed batch must be under 1/16 of the free device memory, to never oversubscribe";
  return {};
}

constexpr int kBlock = 256;
__global__ void scale_by_batch(const float* __restrict__ batch, const float* __restrict__ x, float* __restrict__ y,
                               int64_t n) {
  const int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  if (i < n) y[i] = batch[i] * x[i];
}

enum class Prefetch { none, to_device, both_ways };

template <Prefetch P>
class ManagedStep {
 public:
  ManagedStep(const Batch& w, cudaStream_t) : bytes_(static_cast<size_t>(w.n) * sizeof(float)) {
    BENCH_CUDA_CHECK(cudaMallocManaged(&batch_, bytes_));
    int device = 0;
    BENCH_CUDA_CHECK(cudaGetDevice(&device));
    device_ = {cudaMemLocationTypeDevice, device};
  }
  ManagedStep(const ManagedStep&) = delete;
  ManagedStep& operator=(const ManagedStep&) = delete;
  ~ManagedStep() { cudaFree(batch_); }
  void operator()(const Batch& w, cudaStream_t stream) {
    const auto start = Clock::now();
    if constexpr (P == Prefetch::both_ways)  // bring the pages home before the host writes them
      BENCH_CUDA_CHECK(cudaMemPrefetchAsync(batch_, bytes_, cudaMemLocation{cudaMemLocationTypeHost, 0}, 0, stream));
    // The producer must not overwrite a batch the previous step's kernel is still reading.
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    const auto written = Clock::now();
    for (int64_t i = 0; i < w.n; ++i) batch_[i] = batch_value(i);  // the host producer: dirties every page
    host_wait_ms_ = ms(written - start);
    host_write_ms_ = ms(Clock::now() - written);
    if constexpr (P != Prefetch::none)
      BENCH_CUDA_CHECK(cudaMemPrefetchAsync(batch_, bytes_, device_, 0, stream));
    scale_by_batch<<<static_cast<unsigned>((w.n + kBlock - 1) / kBlock), kBlock, 0, stream>>>(batch_, w.x.data(),
                                                                                               w.y.data(), w.n);
    BENCH_CHECK_LAUNCH();
  }
  // Where the host's part of the last step went (host clock): waiting for the stream (with the
  // prefetch home, for both_ways) and the producer's writes (CPU page faults included, where the
  // pages were on the GPU). The rest of a sample is the GPU side: the migration to the device
  // (faults or prefetch) and the kernel. Where prefetching does not pay on a machine, these say
  // which side of the link set the time.
  std::vector<bench::Metric> metrics() const {
    return {{"host_wait_ms", host_wait_ms_}, {"host_write_ms", host_write_ms_}};
  }

 private:
  using Clock = std::chrono::steady_clock;
  static double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }
  double host_wait_ms_ = 0, host_write_ms_ = 0;
  size_t bytes_;
  float* batch_ = nullptr;
  cudaMemLocation device_{};
};

void reference(const Batch& w, bench::HostData& h) {
  auto x = h.input<float>("x");
  auto y = h.expected("y");
  for (int64_t i = 0; i < w.n; ++i) y[i] = static_cast<float>(double(batch_value(i)) * x[i]);
}

// Every variant waits for the stream before the host writes (blocks_host), and its time is the
// host's and its PCIe link's (host_bound).
constexpr bench::VariantOptions kHostSide{.blocks_host = true, .host_bound = true};

// The timing-size check (docs/validity.md row 2): one thread per element computes the batch
// value itself (no managed memory, no host producer) and the product in double, rounded once.
__global__ void reference_scale(const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = static_cast<float>(double(batch_value(i)) * x[i]);
}

void device_reference(const Batch& w, cudaStream_t stream) {
  reference_scale<<<static_cast<unsigned>((w.n + kBlock - 1) / kBlock), kBlock, 0, stream>>>(w.x.data(), w.y.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch06, unified_memory, Batch)
    .stateful<ManagedStep<Prefetch::none>>(bench::Role::baseline, "fault_on_first_touch", kHostSide)
    .stateful<ManagedStep<Prefetch::to_device>>(bench::Role::step, "prefetch_to_device", kHostSide)
    .stateful<ManagedStep<Prefetch::both_ways>>(bench::Role::optimized, "prefetch_both_ways", kHostSide)
    .requires_that(refuse_unless_safe)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::exact())
    .mode(bench::Mode::host);

}  // namespace

// ch13/caching_allocator: a forward step whose layers allocate and free their temporaries with
// cudaMalloc/cudaFree → a framework-style caching allocator that keeps freed blocks for reuse.
//
// Every layer of the step needs scratch tensors of different sizes (here: n, n/2 and n/4 floats
// plus a 1 KiB one, and the next activation), as a framework's forward does. cudaMalloc asks the
// driver to map fresh memory (tens of microseconds for megabytes) and cudaFree waits for the
// whole device to go idle before unmapping it: every temporary stalls the host and drains the
// GPU. A caching allocator (PyTorch's CUDACachingAllocator is the model) never gives memory back:
//   - requests round up to a size class: 512-byte multiples up to 1 MiB, powers of two above,
//     so a block freed by one layer fits the same request from the next layer or the next step;
//   - each class keeps a free list; a free pushes the block there, with an event recorded on the
//     stream that used it;
//   - an allocation on the same stream takes the block at once (stream order already puts the
//     new user after the old one); on another stream only once the event has passed
//     (cudaEventQuery), else it falls back to cudaMalloc. After the first step nothing reaches
//     the driver: the host only enqueues kernels, and the GPU runs them back to back.
// ch06/stream_ordered_alloc teaches the driver's own pool (cudaMallocAsync) for one buffer; this
// file builds the allocator a framework layers on top, and keeps cudaMallocFromPoolAsync as a
// vendor rung.
//
// What changes from baseline to optimized:
//   1. baseline: cudaMalloc per temporary, cudaFree when the layer is done with it;
//   2. optimized: the same requests served by CachingAllocator (the driver is called only the
//      first time a size class runs dry);
//   vendor: cudaMallocFromPoolAsync/cudaFreeAsync on a pool that keeps its memory.
// All three run the same kernels on the same bytes. Each reports `allocations_per_step` (the
// requests) and `cudamalloc_per_step` (those that reached cudaMalloc, averaged over the steps
// after the first). Timed with a host clock around step + device synchronize (Mode::host): the
// cost is host work invisible to device events. The baseline is host_bound (driver calls, a
// device-wide sync per free); the optimized side's time is the GPU's, so it scores the pair.
//
//   ./bench compare --chapter ch13 --example caching_allocator
#include <bench/bench.hpp>
#include <kernels/mem_pool.hpp>

#include <cstdint>
#include <unordered_map>
#include <vector>

namespace {

constexpr int kLayers = 4;

struct Forward {
  int64_t n;
  bench::DeviceSpan<const float> x;
  bench::DeviceSpan<float> y;
  explicit Forward(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 24, 100'003)),  // 64 MiB activations when timing
        x(s.input<float>("x", n, bench::uniform(-1, 1))),
        y(s.output<float>("y", n)) {
    s.param("layers", kLayers);
    s.bytes(2.0 * n * sizeof(float));  // the step's input and output; temporaries are its choice
  }
};

// --- one layer: wide = 1.5 a + 0.25; half = pairwise sums; quarter = pairwise differences;
// stats = 256 per-lane scales; out = a + 0.25 * quarter[i / 4] * stats[i % 256] -------------------
constexpr int kBlock = 256;
constexpr int kStats = 256;  // floats: the 1 KiB temporary
int64_t half_of(int64_t n) { return (n + 1) / 2; }
unsigned blocks_for(int64_t n) { return static_cast<unsigned>((n + kBlock - 1) / kBlock); }

__global__ void widen(const float* __restrict__ a, float* __restrict__ wide, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  if (i < n) wide[i] = fmaf(1.5f, a[i], 0.25f);
}
// out[j] = in[2j] + sign * in[2j+1] (a missing odd tail element counts as 0)
__global__ void pair(const float* __restrict__ in, float* __restrict__ out, int64_t n_in,
                     float sign) {
  const int64_t j = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  if (2 * j >= n_in) return;
  out[j] = in[2 * j] + (2 * j + 1 < n_in ? sign * in[2 * j + 1] : 0.0f);
}
__global__ void make_stats(float* __restrict__ stats, int layer) {
  stats[threadIdx.x] = 1.0f + 0.125f * static_cast<float>((threadIdx.x * 7 + layer) % 5);
}
__global__ void combine(const float* __restrict__ a, const float* __restrict__ quarter,
                        const float* __restrict__ stats, float* __restrict__ out, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  if (i < n) out[i] = fmaf(0.25f * quarter[i / 4], stats[i % kStats], a[i]);
}

// The step, written once against any allocator: alloc(bytes, stream) / release(ptr, stream).
template <class Allocator>
void forward_step(const Forward& w, Allocator& mem, cudaStream_t stream) {
  const int64_t n = w.n, n2 = half_of(n), n4 = half_of(n2);
  const float* a = w.x.data();
  for (int layer = 0; layer < kLayers; ++layer) {
    auto* wide = static_cast<float*>(mem.alloc(n * sizeof(float), stream));
    auto* half = static_cast<float*>(mem.alloc(n2 * sizeof(float), stream));
    auto* quarter = static_cast<float*>(mem.alloc(n4 * sizeof(float), stream));
    auto* stats = static_cast<float*>(mem.alloc(kStats * sizeof(float), stream));
    const bool last = layer == kLayers - 1;
    float* out = last ? w.y.data() : static_cast<float*>(mem.alloc(n * sizeof(float), stream));
    widen<<<blocks_for(n), kBlock, 0, stream>>>(a, wide, n);
    BENCH_CHECK_LAUNCH();
    pair<<<blocks_for(n2), kBlock, 0, stream>>>(wide, half, n, 1.0f);
    BENCH_CHECK_LAUNCH();
    pair<<<blocks_for(n4), kBlock, 0, stream>>>(half, quarter, n2, -1.0f);
    BENCH_CHECK_LAUNCH();
    make_stats<<<1, kStats, 0, stream>>>(stats, layer);
    BENCH_CHECK_LAUNCH();
    combine<<<blocks_for(n), kBlock, 0, stream>>>(a, quarter, stats, out, n);
    BENCH_CHECK_LAUNCH();
    for (void* t : {static_cast<void*>(wide), static_cast<void*>(half), static_cast<void*>(quarter),
                    static_cast<void*>(stats)})
      mem.release(t, stream);
    if (layer > 0) mem.release(const_cast<float*>(a), stream);  // the previous layer's activation
    a = out;
  }
}

// Counts requests and driver allocations for the metrics every variant reports.
struct Counters {
  int64_t steps = 0, requests = 0, driver_calls = 0, driver_calls_first_step = 0;
  void end_step() {
    if (++steps == 1) driver_calls_first_step = driver_calls;
  }
  std::vector<bench::Metric> metrics() const {
    const double later = static_cast<double>(driver_calls - driver_calls_first_step);
    return {{"allocations_per_step", steps ? double(requests) / double(steps) : 0.0},
            {"cudamalloc_per_step", steps > 1 ? later / double(steps - 1) : 0.0}};
  }
};

// --- baseline: the driver for every temporary ----------------------------------------------------
struct DriverAllocator {
  Counters count;
  void* alloc(size_t bytes, cudaStream_t) {
    void* p = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&p, bytes));
    ++count.requests;
    ++count.driver_calls;
    return p;
  }
  void release(void* p, cudaStream_t) { BENCH_CUDA_CHECK(cudaFree(p)); }  // waits for the device
};

// --- optimized: size classes, a free list per class, event-guarded reuse -------------------------
class CachingAllocator {
 public:
  static constexpr size_t kSmallLimit = size_t{1} << 20;  // 512-byte multiples up to here
  static size_t size_class(size_t bytes) {
    if (bytes <= kSmallLimit) return (bytes + 511) / 512 * 512;
    size_t c = kSmallLimit;
    while (c < bytes) c *= 2;
    return c;
  }
  Counters count;
  CachingAllocator() = default;
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;
  ~CachingAllocator() {  // gives everything back; no check: destructors must not throw
    cudaDeviceSynchronize();
    for (auto& [ptr, block] : blocks_) {
      cudaEventDestroy(block.freed);
      cudaFree(ptr);
    }
  }
  void* alloc(size_t bytes, cudaStream_t stream) {
    ++count.requests;
    const size_t cls = size_class(bytes);
    auto& list = free_[cls];
    for (size_t i = list.size(); i-- > 0;) {  // most recently freed first: likely still in L2
      Block& b = blocks_.at(list[i]);
      if (b.stream == stream || cudaEventQuery(b.freed) == cudaSuccess) {
        void* p = list[i];
        list.erase(list.begin() + static_cast<std::ptrdiff_t>(i));
        b.stream = stream;
        return p;
      }
    }
    void* p = nullptr;
    BENCH_CUDA_CHECK(cudaMalloc(&p, cls));  // only when the class has nothing reusable
    ++count.driver_calls;
    Block b{cls, stream, nullptr};
    BENCH_CUDA_CHECK(cudaEventCreateWithFlags(&b.freed, cudaEventDisableTiming));
    blocks_.emplace(p, b);
    return p;
  }
  void release(void* p, cudaStream_t stream) {
    Block& b = blocks_.at(p);
    // The event passes once the work queued on `stream` so far (the block's last use) is done.
    BENCH_CUDA_CHECK(cudaEventRecord(b.freed, stream));
    b.stream = stream;
    free_[b.size].push_back(p);
  }

 private:
  struct Block {
    size_t size;          // its size class
    cudaStream_t stream;  // the stream that last used it
    cudaEvent_t freed;    // recorded on that stream when it was freed
  };
  std::unordered_map<void*, Block> blocks_;
  std::unordered_map<size_t, std::vector<void*>> free_;
};

// --- vendor: the driver's stream-ordered pool ----------------------------------------------------
class PoolAllocator {
 public:
  Counters count;
  PoolAllocator() = default;
  PoolAllocator(const PoolAllocator&) = delete;
  PoolAllocator& operator=(const PoolAllocator&) = delete;
  ~PoolAllocator() { cudaDeviceSynchronize(); }  // the frees are done before the pool goes
  void* alloc(size_t bytes, cudaStream_t stream) {
    void* p = nullptr;
    BENCH_CUDA_CHECK(cudaMallocFromPoolAsync(&p, bytes, pool_.get(), stream));
    ++count.requests;  // the driver is called every time, but its pool rarely maps memory
    return p;
  }
  void release(void* p, cudaStream_t stream) { BENCH_CUDA_CHECK(cudaFreeAsync(p, stream)); }

 private:
  kernels::KeepAllPool pool_;  // release threshold UINT64_MAX: never hands memory back
};

// A variant: one allocator kept across steps (built untimed), the step, the counters.
template <class Allocator>
struct WithAllocator {
  Allocator mem;
  WithAllocator(const Forward&, cudaStream_t) {}
  void operator()(const Forward& w, cudaStream_t stream) {
    forward_step(w, mem, stream);
    mem.count.end_step();
  }
  std::vector<bench::Metric> metrics() const { return mem.count.metrics(); }
};

void reference(const Forward& w, bench::HostData& h) {
  auto x = h.input<float>("x");
  auto y = h.expected("y");
  const int64_t n = w.n, n2 = half_of(n), n4 = half_of(n2);
  std::vector<double> a(x.begin(), x.end()), wide(n), half(n2), quarter(n4), out(n);
  for (int layer = 0; layer < kLayers; ++layer) {
    for (int64_t i = 0; i < n; ++i) wide[i] = 1.5 * a[i] + 0.25;
    for (int64_t j = 0; j < n2; ++j)
      half[j] = wide[2 * j] + (2 * j + 1 < n ? wide[2 * j + 1] : 0.0);
    for (int64_t j = 0; j < n4; ++j)
      quarter[j] = half[2 * j] - (2 * j + 1 < n2 ? half[2 * j + 1] : 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const double stat = 1.0 + 0.125 * static_cast<double>((i % kStats * 7 + layer) % 5);
      out[i] = a[i] + 0.25 * quarter[i / 4] * stat;
    }
    a.swap(out);
  }
  for (int64_t i = 0; i < n; ++i) y[i] = a[i];
}

// The timing-size check (docs/validity.md row 2): the CPU reference's layers in double, without
// temporaries. Output group j (elements 4j .. 4j+3) depends only on input group j in every layer:
// quarter[j] = (wide[4j] + wide[4j+1]) - (wide[4j+2] + wide[4j+3]), a wide value past n counting
// 0 as the CPU reference's bounds make it. So one thread per group carries its 4 values through
// the layers, sharing no code with the variants.
__global__ void reference_forward(const float* x, float* y, int64_t n) {
  const int64_t first = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * 4;
  if (first >= n) return;
  double a[4] = {};
  for (int k = 0; k < 4 && first + k < n; ++k) a[k] = x[first + k];
  for (int layer = 0; layer < kLayers; ++layer) {
    double wide[4] = {};
    for (int k = 0; k < 4 && first + k < n; ++k) wide[k] = 1.5 * a[k] + 0.25;
    const double quarter = (wide[0] + wide[1]) - (wide[2] + wide[3]);
    for (int k = 0; k < 4; ++k) {
      const int64_t i = first + k;
      const double stat = 1.0 + 0.125 * static_cast<double>((i % kStats * 7 + layer) % 5);
      a[k] = a[k] + 0.25 * quarter * stat;
    }
  }
  for (int k = 0; k < 4 && first + k < n; ++k) y[first + k] = static_cast<float>(a[k]);
}

void device_reference(const Forward& w, cudaStream_t stream) {
  reference_forward<<<blocks_for(half_of(half_of(w.n))), kBlock, 0, stream>>>(w.x.data(), w.y.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch13, caching_allocator, Forward)
    .stateful<WithAllocator<DriverAllocator>>(bench::Role::baseline, "cudaMalloc_cudaFree",
                                              {.blocks_host = true, .host_bound = true})
    .stateful<WithAllocator<CachingAllocator>>(bench::Role::optimized, "caching_allocator")
    .stateful<WithAllocator<PoolAllocator>>(bench::Role::vendor, "cudaMallocFromPoolAsync")
    .reference(reference)
    .device_reference(device_reference)
    .mode(bench::Mode::host);

}  // namespace

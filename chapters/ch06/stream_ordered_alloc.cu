// ch06/stream_ordered_alloc: a two-kernel step that needs a 64 MiB scratch buffer, allocated and
// freed every step, by cudaMalloc/cudaFree or by cudaMallocFromPoolAsync/cudaFreeAsync.
//
// cudaMalloc asks the driver for fresh device memory (page tables, a mapping; tens to hundreds of
// microseconds for 64 MiB), and cudaFree waits for the whole device to go idle before it gives
// the memory back: every step stalls the host and drains the GPU. Stream-ordered allocation
// takes the memory from a pool in stream order: the allocation is valid for work queued after
// it on the stream, the free returns it to the pool once the work queued before it is done, and
// nobody waits. With the pool's release threshold at "never", its memory stays reserved between
// steps, so after the first step an allocation is bookkeeping.
//
// What changes from baseline to optimized:
//   1. baseline: cudaMalloc, the two kernels, cudaFree (which synchronises the device);
//   2. optimized: cudaMallocFromPoolAsync from a pool the variant owns (created once, untimed,
//      cudaMemPoolAttrReleaseThreshold = UINT64_MAX), the two kernels, cudaFreeAsync: the host
//      only enqueues, and the GPU runs the kernels back to back.
// Both run the same kernels on the same bytes: scratch = 2x + 1, then y = scratch * x (the
// output proves the scratch was written and read). Timed with a host clock around the step and
// a device synchronize (Mode::host): allocation is host work, invisible to device events.
// The baseline's time is set by the host (driver calls, a device-wide sync): declared host_bound,
// so the pair is scored by the optimized side's time, which is the GPU's: ~320 MiB of traffic.
//
//   ./bench compare --chapter ch06 --example stream_ordered_alloc
#include <bench/bench.hpp>
#include <kernels/mem_pool.hpp>

#include <cstdint>

namespace {

struct Step {
  int64_t n;
  bench::DeviceSpan<const float> x;
  bench::DeviceSpan<float> y;
  explicit Step(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 24, 100'003)),  // 64 MiB per array when timing
        x(s.input<float>("x", n, bench::uniform(-1, 1))),
        y(s.output<float>("y", n)) {
    s.bytes(2.0 * n * sizeof(float));  // the step's inputs and outputs; the scratch is its own choice
  }
};

constexpr int kBlock = 256;

__global__ void write_scratch(const float* __restrict__ x, float* __restrict__ scratch, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  if (i < n) scratch[i] = fmaf(2.0f, x[i], 1.0f);
}

__global__ void read_scratch(const float* __restrict__ scratch, const float* __restrict__ x, float* __restrict__ y,
                             int64_t n) {
  const int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  if (i < n) y[i] = scratch[i] * x[i];
}

void run_kernels(const Step& w, float* scratch, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((w.n + kBlock - 1) / kBlock);
  write_scratch<<<blocks, kBlock, 0, stream>>>(w.x.data(), scratch, w.n);
  BENCH_CHECK_LAUNCH();
  read_scratch<<<blocks, kBlock, 0, stream>>>(scratch, w.x.data(), w.y.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

void malloc_every_step(const Step& w, cudaStream_t stream) {
  float* scratch = nullptr;
  BENCH_CUDA_CHECK(cudaMalloc(&scratch, w.n * sizeof(float)));
  run_kernels(w, scratch, stream);
  BENCH_CUDA_CHECK(cudaFree(scratch));  // waits for the device to be idle
}

class PoolEveryStep {
 public:
  PoolEveryStep(const Step&, cudaStream_t) {}  // the pool (kernels/mem_pool.hpp) is made here, untimed
  void operator()(const Step& w, cudaStream_t stream) {
    float* scratch = nullptr;
    BENCH_CUDA_CHECK(cudaMallocFromPoolAsync(reinterpret_cast<void**>(&scratch), w.n * sizeof(float), pool_.get(), stream));
    run_kernels(w, scratch, stream);
    BENCH_CUDA_CHECK(cudaFreeAsync(scratch, stream));  // back to the pool once the kernels are done
  }

 private:
  kernels::KeepAllPool pool_;  // release threshold UINT64_MAX: keeps its memory across syncs
};

void reference(const Step& w, bench::HostData& h) {
  auto x = h.input<float>("x");
  auto y = h.expected("y");
  for (int64_t i = 0; i < w.n; ++i) y[i] = (2.0 * x[i] + 1.0) * x[i];
}

// The timing-size check (docs/validity.md row 2): one thread per element, in double, with no
// scratch buffer, sharing no code with the variants.
__global__ void reference_step(const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = float((2.0 * x[i] + 1.0) * x[i]);
}

void device_reference(const Step& w, cudaStream_t stream) {
  reference_step<<<static_cast<unsigned>((w.n + kBlock - 1) / kBlock), kBlock, 0, stream>>>(w.x.data(), w.y.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch06, stream_ordered_alloc, Step)
    .baseline("cudaMalloc_cudaFree", malloc_every_step, {.blocks_host = true, .host_bound = true})
    .stateful<PoolEveryStep>(bench::Role::optimized, "cudaMallocFromPoolAsync_cudaFreeAsync")
    .reference(reference)
    .device_reference(device_reference)
    .mode(bench::Mode::host);

}  // namespace

// ch03/default_stream: four independent branches of work on four streams, each stage followed by
// a small bookkeeping kernel that code written without streams in mind launches on "the default
// stream".
//
// The legacy default stream (stream 0, cudaStreamLegacy) is a barrier for every blocking stream
// of the device: work on it starts only after all earlier work on those streams, and their later
// work waits for it. One kernel launched there, by a library or a helper that takes no stream,
// quietly serialises streams that were meant to run side by side.
//   1. baseline: the branch streams are created with cudaStreamCreate (blocking, the default
//      flags) and each stage's bookkeeping kernel goes to the legacy default stream. It sees the
//      stage's output only because of the barrier, and the barrier serialises the four branches:
//      one 16-block stage kernel at a time on a GPU of 132 SMs;
//   2. optimized: explicit streams created cudaStreamNonBlocking, and the bookkeeping launched on
//      its own branch's stream, so stream order, not a device-wide barrier, puts it after the
//      stage it reads. The branches run concurrently. (Moving the bookkeeping to stream 0 while
//      making the streams non-blocking would race: the barrier was the only thing ordering it.
//      Compiling with --default-stream per-thread, or passing cudaStreamPerThread, gives each
//      host thread its own default stream that is no barrier; a one-thread program still needs
//      the ordering shown here.)
// Same kernels, same arguments, same outputs (each branch's values and every bookkeeping sum).
// Timed with events on the case's stream, which both variants fork from and join back to.
//
//   ./bench compare --chapter ch03 --example default_stream
#include <bench/bench.hpp>
#include <kernels/dependent_fma.cuh>
#include <kernels/group_reduce.cuh>
#include <kernels/reference_rows.cuh>
#include <kernels/stream_fan.hpp>
#include <vector>

namespace {

constexpr int kBranches = 4;
constexpr int kStages = 8;
constexpr int kBlock = 256;

// Blocks per branch of the device reference, one element per thread.
int64_t reference_blocks(int64_t n) { return (n + kernels::kReferenceRowBlock - 1) / kernels::kReferenceRowBlock; }

struct Branches {
  int64_t n;  // elements per branch: 16 blocks of 256 when timing
  int iters;  // dependent FMAs per element and stage: ~10 us per stage kernel when timing
  bench::DeviceSpan<const float> in;  // kBranches x n
  bench::DeviceSpan<float> values;    // kBranches x n: each branch's running values
  bench::DeviceSpan<float> sums;      // kBranches x kStages: the bookkeeping after each stage
  bench::DeviceBuffer<double> reference_partials;  // the device reference's: per branch, stage, block
  explicit Branches(bench::Setup& s)
      : n(s.size("n", 16 * kBlock, 1001)),
        iters(static_cast<int>(s.size("iters", 4096, 64))),
        in(s.input<float>("in", kBranches * n, bench::uniform(-1, 1))),
        values(s.output<float>("values", kBranches * n)),
        sums(s.output<float>("sums", kBranches * kStages)),
        reference_partials(kBranches * kStages * reference_blocks(n)) {
    s.param("branches", kBranches);
    s.param("stages", kStages);
    s.flops(2.0 * kBranches * kStages * static_cast<double>(n) * iters);
  }
};

// One stage of one branch: a compute-bound chain per element.
__global__ void stage(const float* __restrict__ src, float* __restrict__ dst, int64_t n,
                      int iters) {
  const int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  if (i < n) dst[i] = kernels::dependent_fma_chain(src[i], iters);
}

// The bookkeeping: one block sums the branch's values in a fixed order.
__global__ void bookkeeping(const float* __restrict__ values, int64_t n, float* __restrict__ sum) {
  float s = 0;
  for (int64_t i = threadIdx.x; i < n; i += kBlock) s += values[i];
  s = kernels::group_reduce<kBlock>(s, kernels::Sum{});
  if (threadIdx.x == 0) *sum = s;
}

// Branch b, stage k: the stage kernel on `work`, then the bookkeeping on `bookkeeping_stream`.
void launch_stage(const Branches& w, int b, int k, cudaStream_t work,
                  cudaStream_t bookkeeping_stream) {
  float* values = w.values.data() + b * w.n;
  const float* src = k == 0 ? w.in.data() + b * w.n : values;
  stage<<<static_cast<unsigned>((w.n + kBlock - 1) / kBlock), kBlock, 0, work>>>(src, values, w.n,
                                                                                 w.iters);
  BENCH_CHECK_LAUNCH();
  bookkeeping<<<1, kBlock, 0, bookkeeping_stream>>>(values, w.n, w.sums.data() + b * kStages + k);
  BENCH_CHECK_LAUNCH();
}

// The stages are issued breadth first (every branch's stage k, then stage k+1), as a loop over
// layers or micro-batches issues them.
struct LegacyDefaultStream {
  kernels::StreamFan fan{kBranches, 0, cudaStreamDefault};  // blocking streams
  LegacyDefaultStream(const Branches&, cudaStream_t) {}
  void operator()(const Branches& w, cudaStream_t stream) {
    fan.fork(stream);
    for (int k = 0; k < kStages; ++k)
      for (int b = 0; b < kBranches; ++b) launch_stage(w, b, k, fan[b], cudaStreamLegacy);
    fan.join(stream);  // the case's stream is blocking too: it also waits for the last barrier
  }
};

struct NonBlockingStreams {
  kernels::StreamFan fan{kBranches};  // cudaStreamNonBlocking
  NonBlockingStreams(const Branches&, cudaStream_t) {}
  void operator()(const Branches& w, cudaStream_t stream) {
    fan.fork(stream);
    for (int k = 0; k < kStages; ++k)
      for (int b = 0; b < kBranches; ++b) launch_stage(w, b, k, fan[b], fan[b]);
    fan.join(stream);
  }
};

void reference(const Branches& w, bench::HostData& h) {
  auto in = h.input<float>("in");
  auto values = h.expected("values");
  auto sums = h.expected("sums");
  for (int b = 0; b < kBranches; ++b) {
    std::vector<float> v(in.begin() + b * w.n, in.begin() + (b + 1) * w.n);
    for (int k = 0; k < kStages; ++k) {
      double sum = 0;
      for (auto& x : v) {  // each stage's result is stored as float before the next reads it
        x = static_cast<float>(kernels::dependent_fma_chain<double>(x, w.iters));
        sum += x;
      }
      sums[b * kStages + k] = sum;
    }
    for (int64_t i = 0; i < w.n; ++i) values[b * w.n + i] = v[i];
  }
}

// The timing-size check (docs/validity.md row 2), on one stream, with no bookkeeping kernels: one
// thread per element runs its branch's stages in double (each rounded to float, as the CPU
// reference stores it), each block sums its elements per stage (kernels/reference_rows.cuh) into
// its own slot, then one block per (branch, stage) folds those slots.
__global__ void reference_stages(const float* in, float* values, double* partials, int64_t n, int iters) {
  const int b = blockIdx.y;
  const int64_t i = blockIdx.x * int64_t{kernels::kReferenceRowBlock} + threadIdx.x;
  const bool live = i < n;
  float v = live ? in[b * n + i] : 0.0f;
  for (int k = 0; k < kStages; ++k) {
    if (live) v = static_cast<float>(kernels::dependent_fma_chain<double>(v, iters));
    const double sum = kernels::reference_block_sum(live ? v : 0.0);  // every thread calls it
    if (threadIdx.x == 0) partials[(b * kStages + k) * int64_t{gridDim.x} + blockIdx.x] = sum;
  }
  if (live) values[b * n + i] = v;
}

__global__ void reference_sums(const double* partials, float* sums, int64_t blocks) {
  double sum = 0;
  for (int64_t j = threadIdx.x; j < blocks; j += kernels::kReferenceRowBlock) sum += partials[blockIdx.x * blocks + j];
  sum = kernels::reference_block_sum(sum);
  if (threadIdx.x == 0) sums[blockIdx.x] = static_cast<float>(sum);
}

void device_reference(const Branches& w, cudaStream_t stream) {
  const int64_t blocks = reference_blocks(w.n);
  reference_stages<<<dim3(static_cast<unsigned>(blocks), kBranches), kernels::kReferenceRowBlock, 0, stream>>>(
      w.in.data(), w.values.data(), w.reference_partials.data(), w.n, w.iters);
  BENCH_CHECK_LAUNCH();
  reference_sums<<<kBranches * kStages, kernels::kReferenceRowBlock, 0, stream>>>(w.reference_partials.data(), w.sums.data(), blocks);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch03, default_stream, Branches)
    .stateful<LegacyDefaultStream>(bench::Role::baseline, "blocking_streams_bookkeeping_on_stream0")
    .stateful<NonBlockingStreams>(bench::Role::optimized,
                                  "non_blocking_streams_bookkeeping_in_order")
    .reference(reference)
    .device_reference(device_reference);

}  // namespace

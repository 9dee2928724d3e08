// ch11/event_dependencies: four independent branches of four dependent stages each, then one
// kernel that combines the branches, ordered first with device-wide host syncs, then with
// events between streams.
//
//   1. baseline: for each stage, launch the four branches' kernels on the case's stream, then
//      cudaDeviceSynchronize() before the next stage. The host waits for the whole device
//      between stages (a round trip of launch and sync latency each time) and the four branch
//      kernels, each using 16 of the SMs, run one after another. It blocks the host, so it is
//      declared blocks_host and timed without the harness's blocking kernel;
//   2. optimized: each branch on its own stream forked from the case's stream; a branch's
//      stages are ordered by its stream alone, and the combine kernel waits, on the device, for
//      an event from every branch (cudaStreamWaitEvent). No host sync; branches run
//      concurrently. Streams and events are made once, in untimed setup.
// Same kernels, same arguments, same result.
//
//   ./bench compare --chapter ch11 --example event_dependencies
//   BENCH_TIMELINE=1 build/device/chapters/ch11/ch11 --bench_smoke \
//       --benchmark_filter='event_dependencies/optimized'   # per-stream event timestamps
#include "ch11_common.cuh"

namespace {

constexpr int kBranches = 4;
constexpr int kStages = 4;

struct Branches {
  int64_t n;  // elements per branch: 16 blocks of 256 when timing
  int iters;  // ~10 us per stage kernel when timing
  bench::DeviceSpan<const float> in;  // kBranches x n
  bench::DeviceSpan<float> out;       // n: the sum over branches
  bench::DeviceBuffer<float> scratch;  // kBranches x n: each branch's running value
  explicit Branches(bench::Setup& s)
      : n(s.size("n", 16 * 256, 1001)),
        iters(static_cast<int>(s.size("iters", 4096, 64))),
        in(s.input<float>("in", kBranches * n, bench::uniform(-1, 1))),
        out(s.output<float>("out", n)),
        scratch(kBranches * n) {
    s.param("branches", kBranches);
    s.param("stages", kStages);
    s.flops(2.0 * kBranches * kStages * static_cast<double>(n) * iters);
  }
};

__global__ void combine(const float* __restrict__ scratch, float* __restrict__ out, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    float sum = 0;
    for (int b = 0; b < kBranches; ++b) sum += scratch[b * n + i];
    out[i] = sum;
  }
}

// Stage 0 reads the branch's input; later stages update the branch's scratch in place.
void launch_stage(const Branches& w, int branch, int stage, cudaStream_t s) {
  const float* src = stage == 0 ? w.in.data() + branch * w.n : w.scratch.data() + branch * w.n;
  ch11::launch_busy(src, w.scratch.data() + branch * w.n, w.n, w.iters, 0, s);
}

void launch_combine(const Branches& w, cudaStream_t s) {
  combine<<<static_cast<unsigned>((w.n + 255) / 256), 256, 0, s>>>(w.scratch.data(), w.out.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

void launch_device_syncs(const Branches& w, cudaStream_t s) {
  for (int stage = 0; stage < kStages; ++stage) {
    for (int b = 0; b < kBranches; ++b) launch_stage(w, b, stage, s);
    BENCH_CUDA_CHECK(cudaDeviceSynchronize());
  }
  launch_combine(w, s);
}

struct EventOrdered {
  ch11::StreamFan fan{kBranches};
  ch11::Timeline timeline{"event_dependencies/optimized"};
  EventOrdered(const Branches&, cudaStream_t) {}
  void operator()(const Branches& w, cudaStream_t s) {
    timeline.start();
    fan.fork(s);
    for (int stage = 0; stage < kStages; ++stage)
      for (int b = 0; b < kBranches; ++b) {
        launch_stage(w, b, stage, fan[b]);
        timeline.mark(fan[b], b, stage, "stage_done");
      }
    fan.join(s);  // the combine kernel waits on every branch's event
    launch_combine(w, s);
    timeline.mark(s, kBranches, 0, "combine_done");
  }
};

void reference(const Branches& w, bench::HostData& h) {
  auto in = h.input<float>("in");
  auto out = h.expected("out");
  for (int64_t i = 0; i < w.n; ++i) {
    double sum = 0;
    for (int b = 0; b < kBranches; ++b) {
      float v = in[b * w.n + i];
      // Each stage's result is stored as float before the next stage reads it.
      for (int stage = 0; stage < kStages; ++stage) v = static_cast<float>(ch11::busy<double>(v, w.iters));
      sum += v;
    }
    out[i] = sum;
  }
}

// The timing-size check (docs/validity.md row 2): one thread per element, the CPU reference's
// stages in double (each rounded to float, as each stage stores it), no streams, no scratch.
__global__ void reference_branches(const float* in, float* out, int64_t n, int iters) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  double sum = 0;
  for (int b = 0; b < kBranches; ++b) {
    float v = in[b * n + i];
    for (int stage = 0; stage < kStages; ++stage) v = static_cast<float>(ch11::busy<double>(v, iters));
    sum += v;
  }
  out[i] = static_cast<float>(sum);
}

void device_reference(const Branches& w, cudaStream_t s) {
  reference_branches<<<static_cast<unsigned>((w.n + 255) / 256), 256, 0, s>>>(w.in.data(), w.out.data(), w.n, w.iters);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch11, event_dependencies, Branches)
    .baseline("device_sync_between_stages", launch_device_syncs, {.blocks_host = true, .host_bound = true})
    .stateful<EventOrdered>(bench::Role::optimized, "stream_per_branch_event_joins")
    .reference(reference)
    .device_reference(device_reference);

}  // namespace

// ch11/concurrent_kernels: 64 independent small kernels, each filling only 16 of the GPU's
// ~132 SMs, launched on one stream and then spread over eight streams.
//
//   1. baseline: all 64 kernels on the case's stream; stream order serialises them although
//      none reads another's output, so 7/8 of the SMs idle for the whole run;
//   2. optimized: the same launches round-robin over 8 streams forked from the case's stream
//      (fork/join events; streams made once in untimed setup); up to 8 kernels run at once,
//      8 x 16 = 128 blocks, about one per SM. Eight because the driver maps streams onto 8
//      hardware work queues by default (CUDA_DEVICE_MAX_CONNECTIONS): more streams share queues.
// Same kernels, same arguments, same results: only the stream each launch goes to changes.
//
//   ./bench compare --chapter ch11 --example concurrent_kernels
//   BENCH_TIMELINE=1 build/device/chapters/ch11/ch11 --bench_smoke \
//       --benchmark_filter='concurrent_kernels/optimized'   # per-stream event timestamps
#include "ch11_common.cuh"

namespace {

constexpr int kTasks = 64;
constexpr int kStreams = 8;

struct Tasks {
  int64_t per_task;  // elements per task: 16 blocks of 256 threads when timing
  int iters;         // dependent FMAs per element: ~40 us per kernel when timing
  bench::DeviceSpan<const float> in;
  bench::DeviceSpan<float> out;
  explicit Tasks(bench::Setup& s)
      : per_task(s.size("per_task", 16 * 256, 257)),
        iters(static_cast<int>(s.size("iters", 16384, 256))),
        in(s.input<float>("in", kTasks * per_task, bench::uniform(-1, 1))),
        out(s.output<float>("out", kTasks * per_task)) {
    s.param("tasks", kTasks);
    s.flops(2.0 * kTasks * static_cast<double>(per_task) * iters);
  }
};

void launch_task(const Tasks& w, int t, cudaStream_t s) {
  const int64_t offset = t * w.per_task;
  ch11::launch_busy(w.in.data() + offset, w.out.data() + offset, w.per_task, w.iters, 0, s);
}

void launch_one_stream(const Tasks& w, cudaStream_t s) {
  for (int t = 0; t < kTasks; ++t) launch_task(w, t, s);
}

struct ManyStreams {
  ch11::StreamFan fan{kStreams};
  ch11::Timeline timeline{"concurrent_kernels/optimized"};
  ManyStreams(const Tasks&, cudaStream_t) {}
  void operator()(const Tasks& w, cudaStream_t s) {
    timeline.start();
    fan.fork(s);
    for (int t = 0; t < kTasks; ++t) {
      const int lane = t % kStreams;
      timeline.mark(fan[lane], lane, t, "start");
      launch_task(w, t, fan[lane]);
      timeline.mark(fan[lane], lane, t, "done");
    }
    fan.join(s);
  }
};

void reference(const Tasks& w, bench::HostData& h) {
  auto in = h.input<float>("in");
  auto out = h.expected("out");
  for (std::size_t i = 0; i < in.size(); ++i) out[i] = ch11::busy_reference(in[i], w.iters, 1);
}

void device_reference(const Tasks& w, cudaStream_t s) {
  ch11::launch_busy_reference(w.in.data(), w.out.data(), w.in.size(), w.iters, 1, s);
}

BENCH_EXAMPLE(ch11, concurrent_kernels, Tasks)
    .baseline("64_kernels_one_stream", launch_one_stream)
    .stateful<ManyStreams>(bench::Role::optimized, "64_kernels_8_streams")
    .reference(reference)
    .device_reference(device_reference);

}  // namespace

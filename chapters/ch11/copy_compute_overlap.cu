// ch11/copy_compute_overlap: a batch that crosses PCIe both ways and is computed on, with the
// copies and the kernel serialised on one stream, then pipelined in chunks over four streams.
//
// The harness hands inputs and takes outputs in device memory, so the host side of the lesson
// is a round trip: the batch leaves the GPU into a pinned host buffer (D2H), comes back (H2D)
// and is computed on in place; think of activations offloaded to the host and fetched back.
// The pinned buffer belongs to the variant's state (allocated once, in untimed setup), so both
// variants copy from and to page-locked memory and the only difference is the schedule.
//
//   1. baseline: D2H of the whole batch, H2D of the whole batch, the kernel: three engines
//      (D2H copy engine, H2D copy engine, SMs) each busy a third of the time;
//   2. optimized: 32 chunks round-robin over 4 streams forked from the case's stream; chunk c's
//      kernel overlaps chunk c+1's H2D and chunk c+2's D2H, so the time tends to
//      max(copy, compute) plus one chunk of pipeline fill and drain.
// The two floors are measured in the same run: the `compute_only` step (the kernel alone, no
// copies), and ch11/copy_round_trip below (the two copies alone, serial and pipelined).
// Target: optimized within 15% of max(copy_round_trip/optimized, compute_only).
//
//   ./bench compare --chapter ch11 --example copy_compute_overlap
//   BENCH_TIMELINE=1 build/device/chapters/ch11/ch11 --bench_smoke \
//       --benchmark_filter='copy_compute_overlap/optimized'   # per-stream event timestamps
#include "ch11_common.cuh"

namespace {

template <bool kCompute>
struct RoundTrip {
  int64_t n;
  int iters;
  bench::DeviceSpan<const float> in;
  bench::DeviceSpan<float> out;
  explicit RoundTrip(bench::Setup& s)
      : n(s.size("n", int64_t{64} << 20, 1'000'003)),  // 256 MiB each way; odd size to verify
        iters(kCompute ? static_cast<int>(s.size("iters", 1536, 64)) : 0),  // compute ~ copy time on H100
        in(s.input<float>("in", n, bench::uniform(-1, 1))),
        out(s.output<float>("out", n)) {
    // PCIe bytes per direction: with both directions overlapped, one direction's bytes over one
    // direction's bandwidth is the copy floor.
    s.bytes(static_cast<double>(n) * sizeof(float), bench::ceiling::h2d_pinned);
    if (kCompute) s.flops(2.0 * static_cast<double>(n) * iters);
  }
};

// Page-locked host memory: the only kind a copy engine reads or writes asynchronously.
class PinnedBuffer {
 public:
  explicit PinnedBuffer(std::size_t bytes) { BENCH_CUDA_CHECK(cudaHostAlloc(&ptr_, bytes, cudaHostAllocDefault)); }
  ~PinnedBuffer() { cudaFreeHost(ptr_); }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  float* data() const { return static_cast<float*>(ptr_); }

 private:
  void* ptr_ = nullptr;
};

// Baseline: the whole batch through each engine in turn, on the case's stream.
template <bool kCompute>
struct Serial {
  PinnedBuffer host;
  Serial(const RoundTrip<kCompute>& w, cudaStream_t) : host(w.in.bytes()) {}
  void operator()(const RoundTrip<kCompute>& w, cudaStream_t s) const {
    BENCH_CUDA_CHECK(cudaMemcpyAsync(host.data(), w.in.data(), w.in.bytes(), cudaMemcpyDeviceToHost, s));
    BENCH_CUDA_CHECK(cudaMemcpyAsync(w.out.data(), host.data(), w.out.bytes(), cudaMemcpyHostToDevice, s));
    if constexpr (kCompute) ch11::launch_busy(w.out.data(), w.out.data(), w.n, w.iters, 0, s);
  }
};

// Optimized: the same three operations per chunk, chunks spread over four streams. Each stream
// keeps its own chunk's order (D2H -> H2D -> kernel); different streams overlap.
template <bool kCompute>
struct Pipelined {
  static constexpr int kChunks = 32;
  static constexpr int kStreams = 4;
  PinnedBuffer host;
  ch11::StreamFan fan{kStreams};
  ch11::Timeline timeline{kCompute ? "copy_compute_overlap/optimized" : "copy_round_trip/optimized"};

  Pipelined(const RoundTrip<kCompute>& w, cudaStream_t) : host(w.in.bytes()) {}
  void operator()(const RoundTrip<kCompute>& w, cudaStream_t s) {
    const int64_t chunk = ((w.n + kChunks - 1) / kChunks + 1023) / 1024 * 1024;  // 4 KiB multiples
    timeline.start();
    fan.fork(s);
    for (int c = 0; c * chunk < w.n; ++c) {
      const int64_t begin = c * chunk;
      const int64_t count = std::min(chunk, w.n - begin);
      const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(float);
      const int lane = c % kStreams;
      const cudaStream_t cs = fan[lane];
      timeline.mark(cs, lane, c, "start");
      BENCH_CUDA_CHECK(cudaMemcpyAsync(host.data() + begin, w.in.data() + begin, bytes, cudaMemcpyDeviceToHost, cs));
      timeline.mark(cs, lane, c, "d2h_done");
      BENCH_CUDA_CHECK(cudaMemcpyAsync(w.out.data() + begin, host.data() + begin, bytes, cudaMemcpyHostToDevice, cs));
      timeline.mark(cs, lane, c, "h2d_done");
      if constexpr (kCompute) {
        ch11::launch_busy(w.out.data() + begin, w.out.data() + begin, count, w.iters, 0, cs);
        timeline.mark(cs, lane, c, "kernel_done");
      }
    }
    fan.join(s);
  }
};

// The compute floor: the kernel alone on device-resident data, no copies.
void launch_compute_only(const RoundTrip<true>& w, cudaStream_t s) {
  ch11::launch_busy(w.in.data(), w.out.data(), w.n, w.iters, 0, s);
}

template <bool kCompute>
void reference(const RoundTrip<kCompute>& w, bench::HostData& h) {
  auto in = h.input<float>("in");
  auto out = h.expected("out");
  for (int64_t i = 0; i < w.n; ++i) out[i] = kCompute ? ch11::busy_reference(in[i], w.iters, 1) : in[i];
}

// At the timing size (64M elements x 2048 iterations) the CPU would take minutes.
void device_reference(const RoundTrip<true>& w, cudaStream_t s) {
  ch11::launch_busy_reference(w.in.data(), w.out.data(), w.n, w.iters, 1, s);
}

BENCH_EXAMPLE(ch11, copy_compute_overlap, RoundTrip<true>)
    .stateful<Serial<true>>(bench::Role::baseline, "d2h_h2d_kernel_one_stream")
    .step("compute_only", launch_compute_only)
    .stateful<Pipelined<true>>(bench::Role::optimized, "32_chunks_4_streams")
    .reference(reference<true>)
    .device_reference(device_reference);

// The round trip's timing-size check: the identity as a device-to-device copy by the copy
// engine, a path neither variant takes (theirs go through pinned host memory).
void device_copy_reference(const RoundTrip<false>& w, cudaStream_t s) {
  BENCH_CUDA_CHECK(
      cudaMemcpyAsync(w.out.data(), w.in.data(), w.n * sizeof(float), cudaMemcpyDeviceToDevice, s));
}

// The copy floor on its own (identity: the batch goes to the host and back).
BENCH_EXAMPLE(ch11, copy_round_trip, RoundTrip<false>)
    .stateful<Serial<false>>(bench::Role::baseline, "d2h_then_h2d_one_stream")
    .stateful<Pipelined<false>>(bench::Role::optimized, "32_chunks_4_streams")
    .reference(reference<false>)
    .device_reference(device_copy_reference)
    .tolerance(bench::exact());

}  // namespace

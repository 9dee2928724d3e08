// ch11/stream_priority: a latency-critical chain of small kernels issued next to bulk work that
// fills the GPU: on the bulk work's own stream, on a second stream of the same priority, and on
// a high-priority stream.
//
// Bulk: 12 kernels of 32768 blocks each (~31 waves of ~9 us blocks). Critical: 48 dependent
// one-block kernels (think decode steps), issued interleaved with the bulk kernels (one bulk
// kernel, then four critical steps), as a server would issue them.
//   1. baseline: everything on the case's stream: each critical step waits for the bulk kernel
//      issued before it, and the chain finishes with the batch;
//   2. step `same_priority_stream`: the chain on a second stream forked from the case's stream,
//      at the same (default, lowest) priority. The block scheduler serves kernels of equal
//      priority roughly in arrival order, so a critical kernel still waits until the bulk
//      kernel ahead of it has dispatched all its blocks;
//   3. optimized: the chain's stream is created with the greatest priority
//      (cudaDeviceGetStreamPriorityRange): its block takes the next free SM slot as soon as a
//      bulk block retires (no preemption: the wait is at most one bulk block).
// The case's time is the whole batch (bulk and chain, joined back); it improves because the
// chain no longer trails the bulk work. The number this lesson is about, the chain's latency
// (an event before its first kernel to one after its last, on the chain's stream, recorded in
// every variant), is reported as the case's counter `critical_latency_us` (and printed to stderr
// with p10/p90 when a variant's state is destroyed).
//
//   ./bench compare --chapter ch11 --example stream_priority
//   build/device/chapters/ch11/ch11 --benchmark_filter='stream_priority' 2>&1 | grep latency
#include "ch11_common.cuh"

#include <array>

namespace {

constexpr int kBulkKernels = 12;
constexpr int kCriticalKernels = 48;

struct Mixed {
  int64_t bulk_n, critical_n;
  int bulk_iters, critical_iters;
  bench::DeviceSpan<const float> bulk_in, critical_in;
  bench::DeviceSpan<float> bulk_out, critical_out;
  explicit Mixed(bench::Setup& s)
      : bulk_n(s.size("bulk_n", int64_t{1} << 23, 10'007)),        // 32768 blocks of 256
        critical_n(s.size("critical_n", 256, 255)),                 // one block
        bulk_iters(static_cast<int>(s.size("bulk_iters", 512, 32))),  // blocks of ~9 us
        critical_iters(static_cast<int>(s.size("critical_iters", 8192, 64))),  // ~20 us alone
        bulk_in(s.input<float>("bulk_in", bulk_n, bench::uniform(-1, 1))),
        critical_in(s.input<float>("critical_in", critical_n, bench::uniform(-1, 1))),
        bulk_out(s.output<float>("bulk_out", bulk_n)),
        critical_out(s.output<float>("critical_out", critical_n)) {
    s.flops(2.0 * (kBulkKernels * static_cast<double>(bulk_n) * bulk_iters +
                   kCriticalKernels * static_cast<double>(critical_n) * critical_iters));
  }
};

// Latency of the critical chain in each launch: a ring of event pairs, harvested once complete.
class LatencyLog {
 public:
  explicit LatencyLog(const char* title) : title_(title) {
    for (auto& p : slots_) {
      BENCH_CUDA_CHECK(cudaEventCreate(&p.begin));
      BENCH_CUDA_CHECK(cudaEventCreate(&p.end));
    }
  }
  ~LatencyLog() {
    if (cudaDeviceSynchronize() == cudaSuccess) {
      for (auto& p : slots_) harvest(p);
      std::sort(us_.begin(), us_.end());
      if (!us_.empty())
        std::fprintf(stderr, "%s: critical chain latency median %.1f us, p10 %.1f us, p90 %.1f us over %zu launches\n",
                     title_, us_[us_.size() / 2], us_[us_.size() / 10], us_[us_.size() * 9 / 10], us_.size());
    }
    for (auto& p : slots_) {
      cudaEventDestroy(p.begin);
      cudaEventDestroy(p.end);
    }
  }
  // Median over every completed launch so far (call after the device is synchronised).
  double median_us() {
    for (auto& p : slots_) harvest(p);
    if (us_.empty()) return 0;
    std::vector<double> sorted = us_;
    std::sort(sorted.begin(), sorted.end());
    return sorted[sorted.size() / 2];
  }
  LatencyLog(const LatencyLog&) = delete;
  LatencyLog& operator=(const LatencyLog&) = delete;
  void begin(cudaStream_t s) {
    current_ = &slots_[launches_++ % slots_.size()];
    harvest(*current_);  // the slot's previous launch, if it has completed
    BENCH_CUDA_CHECK(cudaEventRecord(current_->begin, s));
  }
  void end(cudaStream_t s) {
    BENCH_CUDA_CHECK(cudaEventRecord(current_->end, s));
    current_->pending = true;
  }

 private:
  struct Pair {
    cudaEvent_t begin = nullptr, end = nullptr;
    bool pending = false;
  };
  void harvest(Pair& p) {
    if (!p.pending || cudaEventQuery(p.end) != cudaSuccess) return;
    float ms = 0;
    if (cudaEventElapsedTime(&ms, p.begin, p.end) == cudaSuccess) us_.push_back(ms * 1e3);
    p.pending = false;
  }
  const char* title_;
  std::array<Pair, 64> slots_{};
  Pair* current_ = nullptr;
  std::size_t launches_ = 0;
  std::vector<double> us_;
};

int priority(bool high) {
  int least = 0, greatest = 0;
  BENCH_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
  return high ? greatest : least;
}

enum class Placement { one_stream, same_priority, high_priority };

// Bulk on the case's stream; the chain on that stream too, or on a second stream forked from it
// (and joined back) whose priority is the only other difference.
template <Placement P>
struct BulkAndCritical {
  static constexpr const char* kName = P == Placement::one_stream      ? "stream_priority/baseline"
                                       : P == Placement::same_priority ? "stream_priority/same_priority_stream"
                                                                       : "stream_priority/optimized";
  ch11::StreamFan critical{1, priority(P == Placement::high_priority)};
  LatencyLog latency{kName};
  ch11::Timeline timeline{kName};
  BulkAndCritical(const Mixed&, cudaStream_t) {}
  // Reported as the case's `critical_latency_us` counter (bench::Metric).
  std::vector<bench::Metric> metrics() { return {{"critical_latency_us", latency.median_us()}}; }
  void operator()(const Mixed& w, cudaStream_t s) {
    const bool forked = P != Placement::one_stream;
    const cudaStream_t cs = forked ? critical[0] : s;
    timeline.start();
    if (forked) critical.fork(s);
    latency.begin(cs);
    for (int j = 0; j < kCriticalKernels; ++j) {
      if (j % (kCriticalKernels / kBulkKernels) == 0) {
        const int b = j / (kCriticalKernels / kBulkKernels);
        ch11::launch_busy(w.bulk_in.data(), w.bulk_out.data(), w.bulk_n, w.bulk_iters, b, s);
        timeline.mark(s, 0, b, "bulk_done");
      }
      ch11::launch_busy(w.critical_in.data(), w.critical_out.data(), w.critical_n, w.critical_iters, j, cs);
      timeline.mark(cs, forked ? 1 : 0, j, "crit_done");
    }
    latency.end(cs);
    if (forked) critical.join(s);
  }
};

void reference(const Mixed& w, bench::HostData& h) {
  auto bulk_in = h.input<float>("bulk_in");
  auto critical_in = h.input<float>("critical_in");
  auto bulk_out = h.expected("bulk_out");
  auto critical_out = h.expected("critical_out");
  for (int64_t i = 0; i < w.bulk_n; ++i) bulk_out[i] = ch11::busy_reference(bulk_in[i], w.bulk_iters, kBulkKernels);
  for (int64_t i = 0; i < w.critical_n; ++i)
    critical_out[i] = ch11::busy_reference(critical_in[i], w.critical_iters, kCriticalKernels);
}

void device_reference(const Mixed& w, cudaStream_t s) {
  ch11::launch_busy_reference(w.bulk_in.data(), w.bulk_out.data(), w.bulk_n, w.bulk_iters, kBulkKernels, s);
  ch11::launch_busy_reference(w.critical_in.data(), w.critical_out.data(), w.critical_n, w.critical_iters,
                              kCriticalKernels, s);
}

BENCH_EXAMPLE(ch11, stream_priority, Mixed)
    .stateful<BulkAndCritical<Placement::one_stream>>(bench::Role::baseline, "bulk_and_critical_one_stream")
    .stateful<BulkAndCritical<Placement::same_priority>>(bench::Role::step, "same_priority_stream")
    .stateful<BulkAndCritical<Placement::high_priority>>(bench::Role::optimized, "high_priority_stream")
    .reference(reference)
    .device_reference(device_reference);

}  // namespace

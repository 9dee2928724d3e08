// ch20/op_breakdown.hpp: where a decode step's time goes, op by op. A step that is a fixed
// sequence of launches lists them once, as ops, and both its call and this breakdown run that list:
//   template <class Op> void ops(const DecoderLayer& w, cudaStream_t s, Op&& op) const {
//     op("qkv", streamed_bytes(w.w_qkv), [&] { ...the launches of the qkv projection... });
//     ...
//   }
//   void operator()(const DecoderLayer& w, cudaStream_t s) const { ops(w, s, JustLaunch{}); }
//   std::vector<bench::Metric> metrics() const { return time_ops(step, w, private_stream); }
//
// time_ops runs the step's ops uncaptured (a graphed rung's launches, outside its graph), with a
// CUDA event after each op, kBreakdownRepeats steps back to back, after the timed samples
// (metrics() is called once they are done, and nothing it does is timed). Each op's time is the
// span between the event before it and the one after: its kernels, their launch, one event record,
// and the L2 as the op before it left it, as in a timed step (an op repeated on its own would find
// its own weights in L2: W_o's 32 MiB fit the H100's 50 MB). The host could starve the GPU between
// short ops (a launch costs the host a few us), so a host function first holds the stream for
// kBreakdownHold while the host enqueues every repeat; a pass the host did not finish enqueueing
// inside the hold reports no breakdown rather than a padded one.
//
// Metrics (bench::Metric, printed by `bench compare` under the row):
//   op_us_<op>     the op's median time over the repeats;
//   op_gbps_<op>   for an op that streams a weight matrix or the KV cache, those bytes over that
//                  time (the activations it also reads and writes, not counted: at most 2.3% of
//                  the stream, the o projection's at batch 32);
//   op_us_sum      the sum of the ops' medians: held against the row's own time (one graph launch
//                  for a graphed rung), it says how much the graph and programmatic launches hide
//                  (the sum is longer) or what the graph adds (the sum is shorter).
#pragma once

#include <bench/bench.hpp>
#include <bench/stats.hpp>
#include <chrono>
#include <cstddef>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace ch20 {

// The bytes of a weight matrix or cache that an op must stream from HBM.
template <class T>
double streamed_bytes(bench::DeviceSpan<T> span) {
  return double(span.size()) * sizeof(T);
}

// The op callback of a plain call: launch the op, nothing else.
struct JustLaunch {
  template <class Launch>
  void operator()(const char*, double, Launch&& launch) const {
    launch();
  }
};

// One op of a step: its name, the bytes it streams (0 for an elementwise op: a few KB, no
// stream), and its time in each repeat.
struct OpTimes {
  std::string name;
  double streamed_bytes = 0;
  std::vector<double> us;
};

// The metrics above, in the step's op order (`bench compare` prints them sorted by name).
inline std::vector<bench::Metric> op_metrics(const std::vector<OpTimes>& ops) {
  std::set<std::string> seen;
  std::vector<bench::Metric> out;
  double sum = 0;
  for (const OpTimes& op : ops) {
    if (!seen.insert(op.name).second)
      throw std::logic_error("op_metrics: two ops named " + op.name);
    if (op.us.empty()) throw std::logic_error("op_metrics: no time for op " + op.name);
    const double us = bench::stats::median(op.us);
    out.push_back({"op_us_" + op.name, us});
    if (op.streamed_bytes > 0)
      out.push_back({"op_gbps_" + op.name, op.streamed_bytes / (us * 1e3)});
    sum += us;
  }
  if (!ops.empty()) out.push_back({"op_us_sum", sum});
  return out;
}

constexpr int kBreakdownRepeats = 7;
// The stream waits this long before the first repeat; time_ops checks that the host enqueued every
// repeat inside it, and reports nothing where it did not.
constexpr std::chrono::milliseconds kBreakdownHold{5};

// Events recorded along a stream, destroyed with the set.
class EventMarks {
 public:
  explicit EventMarks(std::size_t n) : events_(n, nullptr) {
    for (cudaEvent_t& e : events_) BENCH_CUDA_CHECK(cudaEventCreate(&e));
  }
  EventMarks(const EventMarks&) = delete;
  EventMarks& operator=(const EventMarks&) = delete;
  ~EventMarks() {  // no check: destructors must not throw
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  void record(std::size_t i, cudaStream_t s) {
    BENCH_CUDA_CHECK(cudaEventRecord(events_.at(i), s));
  }
  double us_between(std::size_t from, std::size_t to) const {
    float ms = 0;
    BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, events_.at(from), events_.at(to)));
    return ms * 1e3;
  }

 private:
  std::vector<cudaEvent_t> events_;
};

// Times step's ops on stream s (a private one: the harness's stream is the case's), as the header
// says; the step's outputs are written, as any call writes them.
template <class Step, class W>
std::vector<bench::Metric> time_ops(const Step& step, const W& w, cudaStream_t s) {
  std::vector<OpTimes> ops;  // the op list, from one untimed pass that also warms up
  step.ops(w, s, [&](const char* name, double bytes, auto&& launch) {
    ops.push_back({name, bytes, {}});
    launch();
  });
  BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
  const std::size_t marks_per_step = ops.size() + 1;
  EventMarks marks(kBreakdownRepeats * marks_per_step);
  using Clock = std::chrono::steady_clock;
  const Clock::time_point enqueue_start = Clock::now();
  BENCH_CUDA_CHECK(cudaLaunchHostFunc(
      s, [](void*) { std::this_thread::sleep_for(kBreakdownHold); }, nullptr));
  for (int r = 0; r < kBreakdownRepeats; ++r) {
    std::size_t mark = r * marks_per_step;
    marks.record(mark, s);
    step.ops(w, s, [&](const char*, double, auto&& launch) {
      launch();
      marks.record(++mark, s);
    });
    if (mark != (r + 1) * marks_per_step - 1)
      throw std::logic_error("time_ops: the step's op list changed between calls");
  }
  const bool enqueued_in_hold = Clock::now() - enqueue_start < kBreakdownHold;
  BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
  if (!enqueued_in_hold) return {};
  for (int r = 0; r < kBreakdownRepeats; ++r)
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const std::size_t before = r * marks_per_step + i;
      ops[i].us.push_back(marks.us_between(before, before + 1));
    }
  return op_metrics(ops);
}

}  // namespace ch20

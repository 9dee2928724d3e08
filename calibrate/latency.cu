// calibrate/latency: what one launch, one launch + synchronize, one graph node and one pair of
// events cost. Every kernel is one thread writing out[i] = in + i + 1, so each case's output
// proves that every launch (every graph node) ran.
//   launch_us       back-to-back launches, hot: the harness divides its events by the batch
//   launch_sync_us  launch + cudaStreamSynchronize, host clock (it blocks the host)
//   graph_node_us   a graph of kGraphNodes chained nodes replayed, hot; `bench calibrate`
//                   divides the case's time by kGraphNodes
//   event_pair_us   two event records with nothing between them, hot: device time per pair
//                   (nothing runs, so there is no output to check)
//
//   build/<preset>/calibrate/calibrate --benchmark_filter='_us'
#include <bench/bench.hpp>

#include "ceilings.hpp"

namespace {

using bench::calibration::kGraphNodes;

struct Counter {
  int count;
  bench::DeviceSpan<const int32_t> in;
  bench::DeviceSpan<int32_t> out;
  Counter(bench::Setup& s, int nodes)
      : count(nodes), in(s.input<int32_t>("in", 1, bench::integers(1, 1'000'000))), out(s.output<int32_t>("out", nodes)) {
    s.param("nodes", nodes);
  }
  void reference(bench::HostData& h) const {
    const int32_t v = h.input<int32_t>("in")[0];
    auto out = h.expected("out");
    for (int i = 0; i < count; ++i) out[i] = v + i + 1;
  }
};
struct OneLaunch : Counter {
  explicit OneLaunch(bench::Setup& s) : Counter(s, 1) {}
};
struct Graph : Counter {
  explicit Graph(bench::Setup& s) : Counter(s, kGraphNodes) {}
};

__global__ void bump(const int32_t* __restrict__ in, int32_t* __restrict__ out, int i) { out[i] = in[0] + i + 1; }

void launch_bump(const Counter& w, int i, cudaStream_t stream) {
  bump<<<1, 1, 0, stream>>>(w.in.data(), w.out.data(), i);
  BENCH_CHECK_LAUNCH();
}

void launch_one(const OneLaunch& w, cudaStream_t stream) { launch_bump(w, 0, stream); }

void launch_and_sync(const OneLaunch& w, cudaStream_t stream) {
  launch_bump(w, 0, stream);
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
}

template <class W>
void reference(const W& w, bench::HostData& h) {
  w.reference(h);
}

BENCH_EXAMPLE(calibrate, launch_us, OneLaunch)
    .baseline("one_thread_kernel", launch_one)
    .reference(reference<OneLaunch>)
    .tolerance(bench::exact())
    .mode(bench::Mode::hot);

BENCH_EXAMPLE(calibrate, launch_sync_us, OneLaunch)
    .baseline("one_thread_kernel_then_sync", launch_and_sync, {.blocks_host = true})
    .reference(reference<OneLaunch>)
    .tolerance(bench::exact())
    .mode(bench::Mode::host);

// The graph is captured once (untimed) from kGraphNodes launches on a private stream, so its
// nodes form a chain, as a captured sequence of dependent kernels does in real code.
class ChainGraph {
 public:
  ChainGraph(const Graph& w, cudaStream_t) {
    cudaStream_t capture = nullptr;
    BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking));
    BENCH_CUDA_CHECK(cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < w.count; ++i) launch_bump(w, i, capture);
    cudaGraph_t graph = nullptr;
    BENCH_CUDA_CHECK(cudaStreamEndCapture(capture, &graph));
    const cudaError_t err = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    cudaStreamDestroy(capture);
    BENCH_CUDA_CHECK(err);
  }
  ChainGraph(const ChainGraph&) = delete;
  ChainGraph& operator=(const ChainGraph&) = delete;
  ~ChainGraph() { cudaGraphExecDestroy(exec_); }
  void operator()(const Graph&, cudaStream_t stream) { BENCH_CUDA_CHECK(cudaGraphLaunch(exec_, stream)); }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

BENCH_EXAMPLE(calibrate, graph_node_us, Graph)
    .stateful<ChainGraph>(bench::Role::baseline, "graph_of_64_kernel_nodes")
    .reference(reference<Graph>)
    .tolerance(bench::exact())
    .mode(bench::Mode::hot);

// Hot: each launch records two timing events back to back on the stream, nothing between them;
// the harness's own events around a batch give the device time per pair. (A cold sample of
// nothing is the harness's timer floor, which it subtracts, so it cannot be a case itself.)
struct Nothing {
  explicit Nothing(bench::Setup&) {}
};

class EventPair {
 public:
  EventPair(const Nothing&, cudaStream_t) {
    BENCH_CUDA_CHECK(cudaEventCreate(&first_));
    BENCH_CUDA_CHECK(cudaEventCreate(&second_));
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    cudaEventDestroy(first_);
    cudaEventDestroy(second_);
  }
  void operator()(const Nothing&, cudaStream_t stream) {
    BENCH_CUDA_CHECK(cudaEventRecord(first_, stream));
    BENCH_CUDA_CHECK(cudaEventRecord(second_, stream));
  }

 private:
  cudaEvent_t first_ = nullptr, second_ = nullptr;
};

BENCH_EXAMPLE(calibrate, event_pair_us, Nothing)
    .stateful<EventPair>(bench::Role::baseline, "two_event_records")
    .reference([](const Nothing&, bench::HostData&) {})
    .mode(bench::Mode::hot);

}  // namespace

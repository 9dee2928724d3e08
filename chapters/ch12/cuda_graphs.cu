// ch12/cuda_graphs: a chain of 256 small dependent kernels, launched one by one from the host,
// then captured once into a CUDA graph and replayed with one cudaGraphLaunch.
//
//   1. baseline: 256 <<<>>> launches per run. Each kernel does well under a microsecond of
//      work, so the run is bound by the launch path: the host's per-launch cost (a few us of
//      driver work) and the device's per-kernel dispatch gap;
//   2. optimized: the same 256 launches are captured from a private stream into a graph once,
//      in untimed setup (instantiated and uploaded there too); a run is one cudaGraphLaunch,
//      which hands the whole chain to the device in one submission. What remains per kernel is
//      the graph-node latency (`bench calibrate`'s graph_node_us ceiling).
// Sampling is hot (back-to-back batches between two events): the lesson is the launch cost, and
// cold sampling would queue every launch behind the harness's blocking kernel and so hide the
// host's share of it. Per-kernel time = median / 256. Target: within 1.5x of graph_node_us.
//
//   ./bench compare --chapter ch12 --example cuda_graphs
#include <bench/bench.hpp>

namespace {

constexpr int kKernels = 256;

struct Chain {
  int64_t n;
  bench::DeviceSpan<const float> in;
  bench::DeviceSpan<float> out;
  explicit Chain(bench::Setup& s)
      : n(s.size("n", 2048, 1001)), in(s.input<float>("in", n, bench::uniform(-1, 1))), out(s.output<float>("out", n)) {
    s.param("kernels", kKernels);
  }
};

// Step k of the chain: dst = 0.99 src + k / 65536. One block; step k reads what step k-1 wrote.
__global__ void chain_step(const float* src, float* dst, int64_t n, int k) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i] * 0.99f + static_cast<float>(k) * (1.0f / 65536);
}

void launch_chain(const Chain& w, cudaStream_t s) {
  for (int k = 0; k < kKernels; ++k) {
    chain_step<<<1, 256, 0, s>>>(k == 0 ? w.in.data() : w.out.data(), w.out.data(), w.n, k);
    BENCH_CHECK_LAUNCH();
  }
}

// The chain captured once from a private stream (its nodes depend on each other in launch
// order, as the stream ordered them), instantiated and uploaded in setup; replayed when timed.
class CapturedChain {
 public:
  CapturedChain(const Chain& w, cudaStream_t stream) {
    cudaStream_t capture = nullptr;
    BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&capture, cudaStreamNonBlocking));
    cudaGraph_t graph = nullptr;
    cudaError_t err = cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal);
    if (err == cudaSuccess) {
      launch_chain(w, capture);
      err = cudaStreamEndCapture(capture, &graph);
    }
    if (err == cudaSuccess) err = cudaGraphInstantiate(&exec_, graph, 0);
    if (err == cudaSuccess) err = cudaGraphUpload(exec_, stream);
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaStreamDestroy(capture);
    BENCH_CUDA_CHECK(err);
  }
  ~CapturedChain() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  }
  CapturedChain(const CapturedChain&) = delete;
  CapturedChain& operator=(const CapturedChain&) = delete;
  void operator()(const Chain&, cudaStream_t s) { BENCH_CUDA_CHECK(cudaGraphLaunch(exec_, s)); }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

void reference(const Chain& w, bench::HostData& h) {
  auto in = h.input<float>("in");
  auto out = h.expected("out");
  for (int64_t i = 0; i < w.n; ++i) {
    double v = in[i];
    for (int k = 0; k < kKernels; ++k) v = v * static_cast<double>(0.99f) + k / 65536.0;
    out[i] = v;
  }
}

BENCH_EXAMPLE(ch12, cuda_graphs, Chain)
    .baseline("256_launches", launch_chain)
    .stateful<CapturedChain>(bench::Role::optimized, "one_graph_of_256_nodes")
    .reference(reference)
    .mode(bench::Mode::hot);

}  // namespace

// ch12/graph_update: a 32-kernel graph whose kernel arguments change every step (the chain's
// intermediate buffer alternates between two, as a ping-pong or a per-step workspace does):
// rebuilt from scratch every step, then updated in place.
//
//   1. baseline: every step captures the 32 launches again, instantiates the graph, launches it
//      and destroys it: stream capture plus cudaGraphInstantiate (tens to hundreds of us of host
//      work) for a graph whose shape never changed;
//   2. step `exec_update`: the executable graph is instantiated once, in setup; every step still
//      captures, but cudaGraphExecUpdate patches the existing executable instead of building a
//      new one (the topology matches, only arguments differ);
//   3. optimized: the graph is built once in setup with cudaGraphAddKernelNode, keeping each
//      node's handle; a step rewrites only the changed arguments with
//      cudaGraphExecKernelNodeSetParams and launches. No capture, no instantiation.
// All three run the same 32 kernels with the same arguments in every step.
// Sampling is host-timed (Mode::host: host clock around one step plus a device synchronize):
// the cost being removed is host work (capture, instantiation) that device events would miss
// under cold sampling, where the launch is queued behind the harness's blocking kernel.
//
//   ./bench compare --chapter ch12 --example graph_update
#include <bench/bench.hpp>

#include <array>

namespace {

constexpr int kNodes = 32;

struct Steps {
  int64_t n;
  bench::DeviceSpan<const float> in;
  bench::DeviceSpan<float> out;
  std::array<bench::DeviceBuffer<float>, 2> workspace;  // the step's parity picks one
  explicit Steps(bench::Setup& s)
      : n(s.size("n", 4096, 1001)),
        in(s.input<float>("in", n, bench::uniform(-1, 1))),
        out(s.output<float>("out", n)),
        workspace{bench::DeviceBuffer<float>(n), bench::DeviceBuffer<float>(n)} {
    s.param("nodes", kNodes);
  }
};

__global__ void chain_step(const float* src, float* dst, int64_t n, int k) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i] * 0.99f + static_cast<float>(k) * (1.0f / 65536);
}

// Node k's arguments in step `parity`: in -> ws, ws -> ws (in place) ..., ws -> out.
struct NodeArgs {
  const float* src;
  float* dst;
  int64_t n;
  int k;
};
NodeArgs node_args(const Steps& w, int k, int parity) {
  float* ws = w.workspace[parity].data();
  return {k == 0 ? w.in.data() : ws, k == kNodes - 1 ? w.out.data() : ws, w.n, k};
}

void capture_chain(const Steps& w, int parity, cudaStream_t capture, cudaGraph_t* graph) {
  BENCH_CUDA_CHECK(cudaStreamBeginCapture(capture, cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < kNodes; ++k) {
    const NodeArgs a = node_args(w, k, parity);
    chain_step<<<1, 256, 0, capture>>>(a.src, a.dst, a.n, a.k);
    if (cudaGetLastError() != cudaSuccess) break;  // EndCapture reports the failure
  }
  BENCH_CUDA_CHECK(cudaStreamEndCapture(capture, graph));
}

// Owns a private capture stream and the current executable graph.
class GraphState {
 public:
  GraphState() { BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&capture_, cudaStreamNonBlocking)); }
  ~GraphState() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    cudaStreamDestroy(capture_);
  }
  GraphState(const GraphState&) = delete;
  GraphState& operator=(const GraphState&) = delete;

 protected:
  int next_parity() { return static_cast<int>(step_++ & 1); }
  cudaStream_t capture_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  uint64_t step_ = 0;
};

struct Recapture : GraphState {
  Recapture(const Steps&, cudaStream_t) {}
  void operator()(const Steps& w, cudaStream_t s) {
    cudaGraph_t graph = nullptr;
    capture_chain(w, next_parity(), capture_, &graph);
    if (exec_ != nullptr) BENCH_CUDA_CHECK(cudaGraphExecDestroy(exec_));  // freed once done
    exec_ = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    BENCH_CUDA_CHECK(err);
    BENCH_CUDA_CHECK(cudaGraphLaunch(exec_, s));
  }
};

struct ExecUpdate : GraphState {
  ExecUpdate(const Steps& w, cudaStream_t s) {
    cudaGraph_t graph = nullptr;
    capture_chain(w, 1, capture_, &graph);
    const cudaError_t err = cudaGraphInstantiate(&exec_, graph, 0);
    cudaGraphDestroy(graph);
    BENCH_CUDA_CHECK(err);
    BENCH_CUDA_CHECK(cudaGraphUpload(exec_, s));
  }
  void operator()(const Steps& w, cudaStream_t s) {
    cudaGraph_t graph = nullptr;
    capture_chain(w, next_parity(), capture_, &graph);
    cudaGraphExecUpdateResultInfo info{};
    const cudaError_t err = cudaGraphExecUpdate(exec_, graph, &info);
    cudaGraphDestroy(graph);
    BENCH_CUDA_CHECK(err);  // fails if the topology had changed: then re-instantiate
    BENCH_CUDA_CHECK(cudaGraphLaunch(exec_, s));
  }
};

struct NodeUpdate : GraphState {
  cudaGraph_t graph_ = nullptr;
  std::array<cudaGraphNode_t, kNodes> nodes{};
  std::array<NodeArgs, kNodes> args{};
  std::array<std::array<void*, 4>, kNodes> arg_ptrs{};

  NodeUpdate(const Steps& w, cudaStream_t s) {
    cudaGraph_t graph = nullptr;
    BENCH_CUDA_CHECK(cudaGraphCreate(&graph, 0));
    for (int k = 0; k < kNodes; ++k) {
      args[k] = node_args(w, k, 1);
      const cudaKernelNodeParams p = params(k);
      const cudaError_t err = cudaGraphAddKernelNode(&nodes[k], graph, k == 0 ? nullptr : &nodes[k - 1], k == 0 ? 0 : 1, &p);
      if (err != cudaSuccess) cudaGraphDestroy(graph);
      BENCH_CUDA_CHECK(err);
    }
    graph_ = graph;  // kept: its node handles name the executable's nodes in SetParams
    BENCH_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
    BENCH_CUDA_CHECK(cudaGraphUpload(exec_, s));
  }
  ~NodeUpdate() {
    if (graph_ != nullptr) cudaGraphDestroy(graph_);
  }
  NodeUpdate(const NodeUpdate&) = delete;
  NodeUpdate& operator=(const NodeUpdate&) = delete;
  cudaKernelNodeParams params(int k) {
    arg_ptrs[k] = {&args[k].src, &args[k].dst, &args[k].n, &args[k].k};
    cudaKernelNodeParams p{};
    p.func = reinterpret_cast<void*>(chain_step);
    p.gridDim = dim3(1);
    p.blockDim = dim3(256);
    p.kernelParams = arg_ptrs[k].data();
    return p;
  }
  void operator()(const Steps& w, cudaStream_t s) {
    const int parity = next_parity();
    for (int k = 0; k < kNodes; ++k) {
      args[k] = node_args(w, k, parity);
      const cudaKernelNodeParams p = params(k);
      BENCH_CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec_, nodes[k], &p));
    }
    BENCH_CUDA_CHECK(cudaGraphLaunch(exec_, s));
  }
};

void reference(const Steps& w, bench::HostData& h) {
  auto in = h.input<float>("in");
  auto out = h.expected("out");
  for (int64_t i = 0; i < w.n; ++i) {
    double v = in[i];
    for (int k = 0; k < kNodes; ++k) v = v * static_cast<double>(0.99f) + k / 65536.0;
    out[i] = v;
  }
}

BENCH_EXAMPLE(ch12, graph_update, Steps)
    .stateful<Recapture>(bench::Role::baseline, "capture_and_instantiate_every_step")
    .stateful<ExecUpdate>(bench::Role::step, "exec_update")
    .stateful<NodeUpdate>(bench::Role::optimized, "kernel_node_set_params")
    .reference(reference)
    .mode(bench::Mode::host);

}  // namespace

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
#include "ch12_graph.cuh"

#include <array>

namespace {

constexpr int kNodes = 32;

struct Steps {
  int64_t n;
  bench::DeviceSpan<const float> in;
  bench::DeviceSpan<float> out;
  std::array<bench::DeviceBuffer<float>, 2> workspace;  // the step's parity picks one
  explicit Steps(bench::Setup& s)
      : n(s.size("n", 256, 201)),  // one element per thread: the GPU part stays small
        in(s.input<float>("in", n, bench::uniform(-1, 1))),
        out(s.output<float>("out", n)),
        workspace{bench::DeviceBuffer<float>(n), bench::DeviceBuffer<float>(n)} {
    s.param("nodes", kNodes);
  }
};

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

ch12::Graph capture_step(const Steps& w, int parity, cudaStream_t capture) {
  return ch12::capture(capture, [&](cudaStream_t cs) {
    for (int k = 0; k < kNodes; ++k) {
      const NodeArgs a = node_args(w, k, parity);
      ch12::launch_chain_step(a.src, a.dst, a.n, a.k, cs);
    }
  });
}

// Every variant owns a private capture stream and an executable graph, and alternates parity.
struct GraphState {
  ch12::OwnedStream capture;
  ch12::GraphExec exec;
  uint64_t step = 0;
  int next_parity() { return static_cast<int>(step++ & 1); }
};

struct Recapture : GraphState {
  Recapture(const Steps&, cudaStream_t) {}
  void operator()(const Steps& w, cudaStream_t s) {
    const ch12::Graph graph = capture_step(w, next_parity(), capture.get());
    exec.instantiate(graph.get());  // the previous executable is destroyed here
    exec.launch(s);
  }
};

struct ExecUpdate : GraphState {
  ExecUpdate(const Steps& w, cudaStream_t s) {
    exec.instantiate(capture_step(w, 1, capture.get()).get());
    exec.upload(s);
  }
  void operator()(const Steps& w, cudaStream_t s) {
    const ch12::Graph graph = capture_step(w, next_parity(), capture.get());
    cudaGraphExecUpdateResultInfo info{};
    BENCH_CUDA_CHECK(cudaGraphExecUpdate(exec.get(), graph.get(), &info));  // fails if the topology changed
    exec.launch(s);
  }
};

struct NodeUpdate : GraphState {
  ch12::Graph graph;  // kept: its node handles name the executable's nodes in SetParams
  std::array<cudaGraphNode_t, kNodes> nodes{};
  std::array<NodeArgs, kNodes> args{};
  std::array<std::array<void*, 4>, kNodes> arg_ptrs{};

  NodeUpdate(const Steps& w, cudaStream_t s) {
    cudaGraph_t g = nullptr;
    BENCH_CUDA_CHECK(cudaGraphCreate(&g, 0));
    graph.reset(g);
    for (int k = 0; k < kNodes; ++k) {
      args[k] = node_args(w, k, 1);
      const cudaKernelNodeParams p = params(k);
      BENCH_CUDA_CHECK(cudaGraphAddKernelNode(&nodes[k], g, k == 0 ? nullptr : &nodes[k - 1], k == 0 ? 0 : 1, &p));
    }
    exec.instantiate(g);
    exec.upload(s);
  }
  cudaKernelNodeParams params(int k) {
    arg_ptrs[k] = {&args[k].src, &args[k].dst, &args[k].n, &args[k].k};
    cudaKernelNodeParams p{};
    p.func = reinterpret_cast<void*>(ch12::chain_step);
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
      BENCH_CUDA_CHECK(cudaGraphExecKernelNodeSetParams(exec.get(), nodes[k], &p));
    }
    exec.launch(s);
  }
};

void reference(const Steps& w, bench::HostData& h) { ch12::chain_reference(h.input<float>("in"), h.expected("out"), kNodes); }

void device_reference(const Steps& w, cudaStream_t s) { ch12::chain_device_reference(w.in.data(), w.out.data(), w.n, kNodes, s); }

BENCH_EXAMPLE(ch12, graph_update, Steps)
    .stateful<Recapture>(bench::Role::baseline, "capture_and_instantiate_every_step", {.host_bound = true})
    .stateful<ExecUpdate>(bench::Role::step, "exec_update", {.host_bound = true})
    .stateful<NodeUpdate>(bench::Role::optimized, "kernel_node_set_params", {.host_bound = true})
    .reference(reference)
    .device_reference(device_reference)
    .mode(bench::Mode::host);

}  // namespace

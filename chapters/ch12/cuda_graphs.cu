// ch12/cuda_graphs: a chain of 256 small dependent kernels, launched one by one from the host,
// then captured once into a CUDA graph and replayed with one cudaGraphLaunch.
//
//   1. baseline: 256 <<<>>> launches per run. Each kernel is one block touching 256 elements,
//      well under a microsecond of work, so the run is bound by the launch path: the host's
//      per-launch cost (a few us of driver work) and the device's per-kernel dispatch gap;
//   2. optimized: the same 256 launches are captured from a private stream into a graph once,
//      in untimed setup (instantiated and uploaded there too); a run is one cudaGraphLaunch,
//      which hands the whole chain to the device in one submission. What remains per kernel is
//      the graph-node latency (`bench calibrate`'s graph_node_us ceiling).
// Sampling is hot (back-to-back batches between two events): the lesson is the launch cost, and
// cold sampling would queue every launch behind the harness's blocking kernel and so hide the
// host's share of it. Per-kernel time = median / 256. Target: within 1.5x of graph_node_us.
//
//   ./bench compare --chapter ch12 --example cuda_graphs
#include "ch12_graph.cuh"

namespace {

constexpr int kKernels = 256;

struct Chain {
  int64_t n;
  bench::DeviceSpan<const float> in;
  bench::DeviceSpan<float> out;
  explicit Chain(bench::Setup& s)
      : n(s.size("n", 256, 201)), in(s.input<float>("in", n, bench::uniform(-1, 1))), out(s.output<float>("out", n)) {
    s.param("kernels", kKernels);
  }
};

// Step 0 reads the input; every later step updates the output in place.
void launch_chain(const Chain& w, cudaStream_t s) {
  for (int k = 0; k < kKernels; ++k) ch12::launch_chain_step(k == 0 ? w.in.data() : w.out.data(), w.out.data(), w.n, k, s);
}

// The chain captured once from a private stream (its nodes depend on each other in launch
// order, as the stream ordered them), instantiated and uploaded in setup; replayed when timed.
struct CapturedChain {
  ch12::GraphExec exec;
  CapturedChain(const Chain& w, cudaStream_t s) {
    ch12::OwnedStream capture;
    const ch12::Graph graph = ch12::capture(capture.get(), [&](cudaStream_t cs) { launch_chain(w, cs); });
    exec.instantiate(graph.get());
    exec.upload(s);
  }
  void operator()(const Chain&, cudaStream_t s) const { exec.launch(s); }
};

void reference(const Chain& w, bench::HostData& h) { ch12::chain_reference(h.input<float>("in"), h.expected("out"), kKernels); }

void device_reference(const Chain& w, cudaStream_t s) { ch12::chain_device_reference(w.in.data(), w.out.data(), w.n, kKernels, s); }

BENCH_EXAMPLE(ch12, cuda_graphs, Chain)
    .baseline("256_launches", launch_chain, {.host_bound = true})
    .stateful<CapturedChain>(bench::Role::optimized, "one_graph_of_256_nodes")
    .reference(reference)
    .device_reference(device_reference)
    .mode(bench::Mode::hot);

}  // namespace

// ch12/ch12_graph.cuh: what the ch12 graph examples share.
//   - OwnedStream, Graph, GraphExec: RAII for a private capture stream and graph handles;
//   - capture(): the graph that an enqueue function records on a stream;
//   - chain_step: one small dependent kernel of the chains that cuda_graphs and graph_update
//     launch, and its CPU reference.
#pragma once

#include <bench/bench.hpp>

#include <memory>
#include <span>
#include <type_traits>

namespace ch12 {
namespace {  // each chapter file gets its own copy of the kernel (no relocatable device code)

class OwnedStream {
 public:
  OwnedStream() { BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~OwnedStream() { cudaStreamDestroy(stream_); }
  OwnedStream(const OwnedStream&) = delete;
  OwnedStream& operator=(const OwnedStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

struct GraphDeleter {
  void operator()(cudaGraph_t g) const { cudaGraphDestroy(g); }
};
using Graph = std::unique_ptr<std::remove_pointer_t<cudaGraph_t>, GraphDeleter>;

// The graph `enqueue(stream)` records. A failed launch inside is reported by EndCapture.
template <class F>
Graph capture(cudaStream_t stream, F&& enqueue) {
  BENCH_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    enqueue(stream);
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);  // leave the stream usable
    if (graph != nullptr) cudaGraphDestroy(graph);
    throw;
  }
  BENCH_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  return Graph(graph);
}

// An executable graph; instantiate() replaces the current one (an in-flight launch of the old
// one still completes: the driver frees it afterwards).
class GraphExec {
 public:
  GraphExec() = default;
  ~GraphExec() { reset(); }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  void instantiate(cudaGraph_t graph) {
    reset();
    BENCH_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph, 0));
  }
  void upload(cudaStream_t s) const { BENCH_CUDA_CHECK(cudaGraphUpload(exec_, s)); }
  void launch(cudaStream_t s) const { BENCH_CUDA_CHECK(cudaGraphLaunch(exec_, s)); }
  cudaGraphExec_t get() const { return exec_; }

 private:
  void reset() {
    if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
  }
  cudaGraphExec_t exec_ = nullptr;
};

// Step k of a chain: dst = 0.99 src + k / 65536, one block, so step k reads what step k-1 wrote
// and the kernel is as small as a launch gets while still touching every element.
__global__ void chain_step(const float* src, float* dst, int64_t n, int k) {
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) dst[i] = src[i] * 0.99f + static_cast<float>(k) * (1.0f / 65536);
}

inline void launch_chain_step(const float* src, float* dst, int64_t n, int k, cudaStream_t s) {
  chain_step<<<1, 256, 0, s>>>(src, dst, n, k);
  BENCH_CHECK_LAUNCH();
}

// `steps` chain steps applied to `in`, in double.
inline void chain_reference(std::span<const float> in, std::span<double> out, int steps) {
  for (std::size_t i = 0; i < in.size(); ++i) {
    double v = in[i];
    for (int k = 0; k < steps; ++k) v = v * static_cast<double>(0.99f) + k / 65536.0;
    out[i] = v;
  }
}

}  // namespace
}  // namespace ch12

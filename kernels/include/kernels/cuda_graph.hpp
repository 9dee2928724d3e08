// kernels/cuda_graph.hpp: RAII for a private capture stream and CUDA graph handles, and capture():
// the graph an enqueue function records on a stream (ch12's graph lessons, ch16's decode step).
//   kernels::OwnedStream capture_stream;
//   const kernels::Graph graph = kernels::capture(capture_stream.get(), [&](cudaStream_t s) { enqueue(s); });
//   kernels::GraphExec exec;
//   exec.instantiate(graph.get());
//   exec.upload(stream);       // untimed: the first launch does not pay for it
//   exec.launch(stream);       // one submission for the whole graph
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <type_traits>

#include <bench/check.hpp>

namespace kernels {

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

}  // namespace kernels

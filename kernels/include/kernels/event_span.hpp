// kernels/event_span.hpp: the GPU timeline between two points of a stream, for a stateful
// variant that reports a figure of its own next to the harness's time (a step's samples per
// second, a generation's time per token), or setup code that times a choice (cuBLASLt's
// candidate algorithms). ms() waits for the end event, so it may be read at once.
//   kernels::EventSpan span;             // untimed setup
//   span.begin(stream); ...work...; span.end(stream);
//   double ms = span.ms();               // waits for the end event
#pragma once

#include <bench/bench.hpp>

namespace kernels {

class EventSpan {
 public:
  EventSpan() {
    BENCH_CUDA_CHECK(cudaEventCreate(&begin_));
    BENCH_CUDA_CHECK(cudaEventCreate(&end_));
  }
  EventSpan(const EventSpan&) = delete;
  EventSpan& operator=(const EventSpan&) = delete;
  ~EventSpan() {  // no check: destructors must not throw
    cudaEventDestroy(begin_);
    cudaEventDestroy(end_);
  }
  void begin(cudaStream_t stream) { BENCH_CUDA_CHECK(cudaEventRecord(begin_, stream)); }
  void end(cudaStream_t stream) { BENCH_CUDA_CHECK(cudaEventRecord(end_, stream)); }
  double ms() const {
    BENCH_CUDA_CHECK(cudaEventSynchronize(end_));
    float ms = 0;
    BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, begin_, end_));
    return ms;
  }

 private:
  cudaEvent_t begin_ = nullptr, end_ = nullptr;
};

}  // namespace kernels

// kernels/stream_fan.hpp: extra streams forked from a case's stream and joined back to it with
// events, so no work escapes the case's timing (VALIDITY row 1). Made once, in untimed setup.
//   kernels::StreamFan fan{4};                       // four non-blocking streams
//   fan.fork(stream); ...work on fan[i]...; fan.join(stream);
// `flags` is cudaStreamNonBlocking unless a lesson needs the legacy default stream's implicit
// synchronisation (ch03/default_stream's baseline asks for cudaStreamDefault).
#pragma once

#include <bench/bench.hpp>
#include <vector>

namespace kernels {

class StreamFan {
 public:
  explicit StreamFan(int count, int priority = 0, unsigned flags = cudaStreamNonBlocking)
      : streams_(count), done_(count) {
    for (int i = 0; i < count; ++i) {
      BENCH_CUDA_CHECK(cudaStreamCreateWithPriority(&streams_[i], flags, priority));
      BENCH_CUDA_CHECK(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming));
    }
    BENCH_CUDA_CHECK(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));
  }
  ~StreamFan() {  // no check: destructors must not throw
    for (auto e : done_) cudaEventDestroy(e);
    for (auto s : streams_) cudaStreamDestroy(s);
    cudaEventDestroy(forked_);
  }
  StreamFan(const StreamFan&) = delete;
  StreamFan& operator=(const StreamFan&) = delete;

  int size() const { return static_cast<int>(streams_.size()); }
  cudaStream_t operator[](int i) const { return streams_[i]; }
  // Every extra stream starts after the work queued on `origin` so far.
  void fork(cudaStream_t origin) const {
    BENCH_CUDA_CHECK(cudaEventRecord(forked_, origin));
    for (auto s : streams_) BENCH_CUDA_CHECK(cudaStreamWaitEvent(s, forked_, 0));
  }
  // `origin` continues only after everything queued on every extra stream.
  void join(cudaStream_t origin) const {
    for (int i = 0; i < size(); ++i) {
      BENCH_CUDA_CHECK(cudaEventRecord(done_[i], streams_[i]));
      BENCH_CUDA_CHECK(cudaStreamWaitEvent(origin, done_[i], 0));
    }
  }

 private:
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> done_;
  cudaEvent_t forked_ = nullptr;
};

}  // namespace kernels

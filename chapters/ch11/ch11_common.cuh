// ch11/ch11_common.cuh: what every ch11 example shares.
//   - busy(): a compute-bound, deterministic per-element function whose cost is set by `iters`;
//   - the kernel that applies it (one "task" of the chapter), and a double-precision device
//     reference for re-checking timing-size outputs, where the CPU would be too slow;
//   - StreamFan (kernels/stream_fan.hpp): extra streams forked from the case's stream and joined
//     back to it with events, so no work escapes the case's timing;
//   - Timeline: per-stream event timestamps of one launch, printed to stderr when the
//     environment variable BENCH_TIMELINE is set (the chapter README's overlap evidence).
#pragma once

#include <bench/bench.hpp>
#include <kernels/dependent_fma.cuh>
#include <kernels/stream_fan.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace ch11 {
namespace {  // each chapter file gets its own copy of the kernels (no relocatable device code)

// The chapter's unit of work: kernels::dependent_fma_chain (a chain of dependent FMAs).
template <class T>
__host__ __device__ inline T busy(T x0, int iters) {
  return kernels::dependent_fma_chain(x0, iters);
}

// Term j of an accumulated output scales its input by 1/(1+j), so every term differs.
__host__ __device__ inline float term_scale(int term) { return 1.0f / static_cast<float>(1 + term); }

// out[i] (+)= busy(in[i] * scale(term)); term 0 overwrites, later terms accumulate. `in` may alias
// `out` (the copy/compute pipeline computes in place), hence no __restrict__.
__global__ void busy_kernel(const float* in, float* out, int64_t n, int iters, int term) {
  const float scale = term_scale(term);
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float v = busy(in[i] * scale, iters);
    out[i] = term == 0 ? v : out[i] + v;
  }
}

inline void launch_busy(const float* in, float* out, int64_t n, int iters, int term, cudaStream_t s,
                        unsigned max_blocks = 1u << 20) {
  constexpr int kBlock = 256;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((n + kBlock - 1) / kBlock, max_blocks));
  busy_kernel<<<blocks, kBlock, 0, s>>>(in, out, n, iters, term);
  BENCH_CHECK_LAUNCH();
}

// out[i] = sum over terms j < terms of busy(float(in[i] * scale(j))), in double: the trusted
// device reference for the timing size.
__global__ void busy_reference_kernel(const float* in, float* out, int64_t n, int iters, int terms) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    double sum = 0;
    for (int j = 0; j < terms; ++j) sum += busy<double>(static_cast<double>(in[i] * term_scale(j)), iters);
    out[i] = static_cast<float>(sum);
  }
}

inline void launch_busy_reference(const float* in, float* out, int64_t n, int iters, int terms, cudaStream_t s) {
  busy_reference_kernel<<<4096, 256, 0, s>>>(in, out, n, iters, terms);
  BENCH_CHECK_LAUNCH();
}

// The same sum on the CPU, for the verification size.
inline double busy_reference(float x, int iters, int terms) {
  double sum = 0;
  for (int j = 0; j < terms; ++j) sum += busy<double>(static_cast<double>(x * term_scale(j)), iters);
  return sum;
}

using kernels::StreamFan;

// Timestamps of the last launch, one event per mark, printed when the state is destroyed. Off
// (no events recorded at all) unless BENCH_TIMELINE is set: a test run, not a timed one.
class Timeline {
 public:
  explicit Timeline(const char* title) : on_(std::getenv("BENCH_TIMELINE") != nullptr), title_(title) {}
  ~Timeline() {
    if (!on_ || used_ == 0 || cudaDeviceSynchronize() != cudaSuccess) return;
    std::fprintf(stderr, "timeline %s (us after the first mark; lane = stream)\n", title_);
    for (std::size_t i = 0; i < used_; ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, marks_[0].event, marks_[i].event);
      std::fprintf(stderr, "  lane %d  #%-3d %-10s %10.1f\n", marks_[i].lane, marks_[i].tag, marks_[i].label, ms * 1e3);
    }
    for (auto& m : marks_) cudaEventDestroy(m.event);
  }
  Timeline(const Timeline&) = delete;
  Timeline& operator=(const Timeline&) = delete;

  void start() { used_ = 0; }  // at the beginning of every launch: keep only the last one
  // `label` must be a string literal; `tag` says which chunk or task the mark belongs to.
  void mark(cudaStream_t s, int lane, int tag, const char* label) {
    if (!on_) return;
    if (used_ == marks_.size()) {
      marks_.push_back({});
      BENCH_CUDA_CHECK(cudaEventCreate(&marks_.back().event));
    }
    marks_[used_].lane = lane;
    marks_[used_].tag = tag;
    marks_[used_].label = label;
    BENCH_CUDA_CHECK(cudaEventRecord(marks_[used_].event, s));
    ++used_;
  }

 private:
  struct Mark {
    cudaEvent_t event = nullptr;
    int lane = 0;
    int tag = 0;
    const char* label = "";
  };
  bool on_;
  const char* title_;
  std::vector<Mark> marks_;
  std::size_t used_ = 0;
};

}  // namespace
}  // namespace ch11

// ch12/ch12_graph.cuh: what the ch12 graph examples share.
//   - OwnedStream, Graph, GraphExec, capture() from kernels/cuda_graph.hpp (ch16 uses them too);
//   - chain_step: one small dependent kernel of the chains that cuda_graphs and graph_update
//     launch, and its CPU and device references.
#pragma once

#include <bench/bench.hpp>
#include <kernels/cuda_graph.hpp>

#include <memory>
#include <span>
#include <type_traits>

namespace ch12 {
namespace {  // each chapter file gets its own copy of the kernel (no relocatable device code)

using kernels::capture;
using kernels::Graph;
using kernels::GraphExec;
using kernels::OwnedStream;

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

// The same steps on the device, for the timing-size check (docs/validity.md row 2): one thread
// per element, in double, one launch, sharing no code with the chains under test.
__global__ void chain_reference_kernel(const float* in, float* out, int64_t n, int steps) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  double v = in[i];
  for (int k = 0; k < steps; ++k) v = v * static_cast<double>(0.99f) + k / 65536.0;
  out[i] = static_cast<float>(v);
}

inline void chain_device_reference(const float* in, float* out, int64_t n, int steps, cudaStream_t s) {
  chain_reference_kernel<<<static_cast<unsigned>((n + 255) / 256), 256, 0, s>>>(in, out, n, steps);
  BENCH_CHECK_LAUNCH();
}

}  // namespace
}  // namespace ch12

// ch08/register_spills.cuh: the kernel both sides of register_spills instantiate, with a
// different number of elements per thread. It lives here, not in register_spills.cu, only so
// that the spilling instance can be compiled alone (register_spills_baseline.cu and the
// chapter's CMakeLists.txt say why).
#pragma once

#include <bench/bench.hpp>

namespace ch08 {
namespace {  // each including file gets its own copy: kernels must not clash at link time

constexpr int kChainBlock = 256;
// 8 resident blocks of 256 threads = 2048, the SM's maximum: 65536 / 2048 = 32 registers per
// thread at most, which ptxas must respect.
constexpr int kChainMinBlocksPerSm = 8;

// Each thread runs kItems independent recurrences p <- p t + x0 (t = x0 / 2, `steps` steps,
// then halved: kernels::dependent_fma_chain's), one per element, interleaved step by step.
// Live state: x0, t and p per element, 3 x kItems registers, all carried around the k loop.
template <int kItems>
__global__ void __launch_bounds__(kChainBlock, kChainMinBlocksPerSm)
    interleaved_chains(const float* __restrict__ x, float* __restrict__ y, int64_t n, int steps) {
  const int64_t first = blockIdx.x * int64_t{kChainBlock} * kItems + threadIdx.x;
  float x0[kItems], t[kItems], p[kItems];
#pragma unroll
  for (int j = 0; j < kItems; ++j) {
    const int64_t i = first + int64_t{j} * kChainBlock;  // lanes adjacent: coalesced
    x0[j] = i < n ? x[i] : 0.0f;
    t[j] = 0.5f * x0[j];
    p[j] = x0[j];
  }
  for (int k = 0; k < steps; ++k)
#pragma unroll
    for (int j = 0; j < kItems; ++j) p[j] = fmaf(p[j], t[j], x0[j]);
#pragma unroll
  for (int j = 0; j < kItems; ++j)
    if (const int64_t i = first + int64_t{j} * kChainBlock; i < n) y[i] = 0.5f * p[j];
}

template <int kItems>
void launch_chains(const float* x, float* y, int64_t n, int steps, cudaStream_t stream) {
  constexpr int64_t kPerBlock = int64_t{kChainBlock} * kItems;
  const auto blocks = static_cast<unsigned>((n + kPerBlock - 1) / kPerBlock);
  interleaved_chains<kItems><<<blocks, kChainBlock, 0, stream>>>(x, y, n, steps);
  BENCH_CHECK_LAUNCH();
}

}  // namespace
}  // namespace ch08

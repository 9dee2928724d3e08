// ch07/copy_workload.cuh: the workload that copy_vectorized and hbm_copy share: dst = src over
// n floats (1 GiB per buffer when timing, an odd size when verifying), its CPU reference and the
// plain one-float-per-thread copy both start from.
#pragma once

#include <bench/bench.hpp>

namespace ch07 {
namespace {  // each including file gets its own copy: kernels must not clash at link time

struct Copy {
  int64_t n;
  bench::DeviceSpan<const float> src;
  bench::DeviceSpan<float> dst;
  explicit Copy(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 28, 1'000'003)),
        src(s.input<float>("src", n, bench::uniform(-1, 1))),
        dst(s.output<float>("dst", n)) {
    s.bytes(2.0 * n * sizeof(float));  // each element read once and written once
  }
};

void copy_reference(const Copy& w, bench::HostData& h) {
  auto src = h.input<float>("src");
  auto dst = h.expected("dst");
  for (int64_t i = 0; i < w.n; ++i) dst[i] = src[i];
}

// One thread per element, 4-byte accesses: the copy anyone writes first.
__global__ void scalar_copy(const float* __restrict__ src, float* __restrict__ dst, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) dst[i] = src[i];
}

void launch_scalar_copy(const Copy& w, cudaStream_t stream) {
  constexpr int kBlock = 256;
  scalar_copy<<<static_cast<unsigned>((w.n + kBlock - 1) / kBlock), kBlock, 0, stream>>>(w.src.data(), w.dst.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

}  // namespace
}  // namespace ch07

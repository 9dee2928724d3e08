// ch07/copy_workload.cuh: the workload that copy_coalescing, copy_vectorized and hbm_copy share:
// dst = src over n floats (the axis `mib` MiB per buffer when timing, an odd size when
// verifying), its CPU and device references, the plain one-float-per-thread copy two of them
// start from, and the one-float4-per-thread copy both use.
#pragma once

#include <bench/bench.hpp>
#include <kernels/vector_access.cuh>

namespace ch07 {
namespace {  // each including file gets its own copy: kernels must not clash at link time

// The sizes of each buffer, in MiB, on the axis `mib`: 4 MiB (both buffers fit the 50 MB L2)
// to 1 GiB (20x it), the default.
inline const std::vector<int64_t> kCopyMib = {4, 16, 64, 256, 1024};
inline const std::vector<int64_t> kCopyMibDefault = {1024};

struct Copy {
  int64_t n;
  bench::DeviceSpan<const float> src;
  bench::DeviceSpan<float> dst;
  explicit Copy(bench::Setup& s)
      : n(s.size("n", s.axis("mib") << 18, 1'000'003)),  // the axis kCopyMib, in floats
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

// The timing-size check (docs/validity.md row 2, device-checked samples): the copy engine's copy,
// which no variant's kernel shares.
void device_copy_reference(const Copy& w, cudaStream_t stream) {
  BENCH_CUDA_CHECK(cudaMemcpyAsync(w.dst.data(), w.src.data(), w.src.bytes(), cudaMemcpyDeviceToDevice, stream));
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

// One float4 per thread (LDG.E.128 / STG.E.128); the threads past the last full float4 copy
// the n % 4 tail. kStreamingHints adds no-L1-allocate loads and evict-first stores
// (copy_vectorized keeps them; hbm_copy measured the plain form faster on the H200).
constexpr int kFloat4CopyBlock = 256;
template <bool kStreamingHints>
__global__ void __launch_bounds__(kFloat4CopyBlock) float4_copy(const float* __restrict__ src,
                                                               float* __restrict__ dst, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{kFloat4CopyBlock} + threadIdx.x;
  const int64_t vectors = n / 4;
  if (i < vectors) {
    const auto* in = reinterpret_cast<const float4*>(src) + i;
    auto* out = reinterpret_cast<float4*>(dst) + i;
    if constexpr (kStreamingHints) kernels::store_stream(out, kernels::load_stream(in));
    else *out = *in;
  } else if (const int64_t j = 4 * vectors + (i - vectors); j < n) {  // at most 3 tail elements
    dst[j] = src[j];
  }
}

template <bool kStreamingHints>
void launch_float4_copy(const Copy& w, cudaStream_t stream) {
  const int64_t threads = w.n / 4 + w.n % 4;
  const auto blocks = static_cast<unsigned>((threads + kFloat4CopyBlock - 1) / kFloat4CopyBlock);
  float4_copy<kStreamingHints><<<blocks, kFloat4CopyBlock, 0, stream>>>(
      w.src.data(), w.dst.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

}  // namespace
}  // namespace ch07

// ch06/vector_add.cuh: the workload add_parallel and add_vectorized share: c = a + b over n
// floats (sizes chosen by each example), its CPU reference and its device reference.
#pragma once

#include <bench/bench.hpp>

namespace ch06 {
namespace {  // each including file gets its own copy

template <int64_t kTimingN, int64_t kVerificationN>
struct VectorAdd {
  int64_t n;
  bench::DeviceSpan<const float> a, b;
  bench::DeviceSpan<float> c;
  explicit VectorAdd(bench::Setup& s)
      : n(s.size("n", kTimingN, kVerificationN)),
        a(s.input<float>("a", n, bench::uniform(-1, 1))),
        b(s.input<float>("b", n, bench::uniform(-1, 1))),
        c(s.output<float>("c", n)) {
    s.bytes(3.0 * n * sizeof(float));  // three streams: read a, read b, write c
  }
};

// A float sum rounds once, as the kernels do, so the comparison is exact.
template <class W>
void vector_add_reference(const W& w, bench::HostData& h) {
  auto a = h.input<float>("a");
  auto b = h.input<float>("b");
  auto c = h.expected("c");
  for (int64_t i = 0; i < w.n; ++i) c[i] = static_cast<float>(a[i] + b[i]);
}

// The timing-size check (docs/validity.md row 2): one thread per element, the plainest form,
// sharing no code with the variants.
__global__ void reference_vector_add(const float* a, const float* b, float* c, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

template <class W>
void vector_add_device_reference(const W& w, cudaStream_t stream) {
  constexpr int kBlock = 256;
  reference_vector_add<<<static_cast<unsigned>((w.n + kBlock - 1) / kBlock), kBlock, 0, stream>>>(
      w.a.data(), w.b.data(), w.c.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

}  // namespace
}  // namespace ch06

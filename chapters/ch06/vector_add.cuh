// ch06/vector_add.cuh: the workload add_parallel and add_vectorized share: c = a + b over n
// floats (sizes chosen by each example), and its CPU reference.
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

}  // namespace
}  // namespace ch06

// ch14/aliasing: the same loop with and without __restrict__: what the compiler must do when a
// store might change the memory its next load reads, and what it may do when promised otherwise.
//
// The work: evaluate a degree-16 polynomial at every x by Horner's rule, written the way it
// often is, accumulating straight into the output: y[i] = c[16]; y[i] = y[i] * x[i] + c[k] for
// k = 15 .. 0. Every pointer is a plain float*, so as far as the compiler knows y + i could be
// x + i or c + k: each store to y[i] may have changed x[i] and every coefficient.
//   1. baseline "may_alias": the compiler keeps the program's memory order. Each of the 16
//      steps stores y[i] (STG.E) and then reloads x[i] and c[k] (LDG.E) because the store might
//      have changed them: 17 stores and 33 loads per element where 1 and 18 would do. The
//      redundant loads hit L1; the redundant stores do not: L1 writes through, so every one is a
//      128-byte line write per warp into L2, 16x the output traffic, and L2's write bandwidth
//      sets the time.
//   2. optimized "restrict": the same body with `const float* __restrict__ x, c` and
//      `float* __restrict__ y`. No pointer aliases another, so the compiler keeps y[i] and x[i]
//      in registers, issues the single store at the end, and, the inputs being read-only for the
//      whole kernel, loads them through the non-coherent read-only path (ld.global.nc,
//      LDG.E.CONSTANT in SASS). The source text of the loop is unchanged: the qualifiers are the
//      whole difference.
// Both do the same FMAs in the same order (each step contracts to one FFMA in both), so the
// outputs are bit-identical. The README shows the two kernels' SASS.
// __restrict__ is a promise: if y did overlap x, the optimized kernel would be wrong, silently.
//
//   ./bench compare --chapter ch14 --example aliasing
//   cuobjdump -sass build/default/chapters/ch14/ch14 | grep -A60 'Function : .*may_alias'  (and
//   restrict_ptrs)
#include <bench/bench.hpp>

namespace {

constexpr int kDegree = 16;  // coefficients c[0] .. c[16]

struct Polynomial {
  int64_t n;
  bench::DeviceSpan<const float> x;       // [-1, 1]
  bench::DeviceSpan<const float> coeffs;  // kDegree + 1, in [-1, 1]
  bench::DeviceSpan<float> y;
  explicit Polynomial(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 26, 100'003)),  // 256 MB each way, 5x L2; odd to verify
        x(s.input<float>("x", n, bench::uniform(-1, 1))),
        coeffs(s.input<float>("coeffs", kDegree + 1, bench::uniform(-1, 1))),
        y(s.output<float>("y", n)) {
    s.param("degree", kDegree);
    s.bytes(double(x.bytes()) + double(coeffs.bytes()) + double(y.bytes()));
    s.flops(2.0 * kDegree * double(n));
  }
};

constexpr int kBlock = 256;

__global__ void __launch_bounds__(kBlock)
    may_alias(const float* x, const float* coeffs, float* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  y[i] = coeffs[kDegree];
#pragma unroll
  for (int k = kDegree - 1; k >= 0; --k) y[i] = y[i] * x[i] + coeffs[k];
}

__global__ void __launch_bounds__(kBlock)
    restrict_ptrs(const float* __restrict__ x, const float* __restrict__ coeffs,
                  float* __restrict__ y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  y[i] = coeffs[kDegree];
#pragma unroll
  for (int k = kDegree - 1; k >= 0; --k) y[i] = y[i] * x[i] + coeffs[k];
}

template <auto kKernel>
void launch(const Polynomial& w, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((w.n + kBlock - 1) / kBlock);
  kKernel<<<blocks, kBlock, 0, stream>>>(w.x.data(), w.coeffs.data(), w.y.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

void reference(const Polynomial& w, bench::HostData& h) {
  auto x = h.input<float>("x");
  auto c = h.input<float>("coeffs");
  auto y = h.expected("y");
  for (int64_t i = 0; i < w.n; ++i) {
    double acc = c[kDegree];
    for (int k = kDegree - 1; k >= 0; --k) acc = acc * x[i] + c[k];
    y[i] = acc;
  }
}

// Horner's rule in float, one rounding per step (FFMA): the error is at most gamma_(2K)
// * sum |c_k| |x|^k (Higham, Accuracy and Stability, 5.1; the FMA halves it), with |c_k|, |x|
// <= 1: (2K + 1) u (K + 1), u = 2^-24, K = 16: 3.3e-5, on values of order 1.
constexpr double kErrorBound = (2 * kDegree + 1) * 0x1p-24 * (kDegree + 1);

// The timing-size check (docs/validity.md row 2): one thread per element, Horner in double as
// the CPU reference, sharing no code with the variants.
__global__ void reference_polynomial(const float* x, const float* c, float* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  double acc = c[kDegree];
  for (int k = kDegree - 1; k >= 0; --k) acc = acc * x[i] + c[k];
  y[i] = static_cast<float>(acc);
}

void device_reference(const Polynomial& w, cudaStream_t stream) {
  reference_polynomial<<<static_cast<unsigned>((w.n + kBlock - 1) / kBlock), kBlock, 0, stream>>>(w.x.data(), w.coeffs.data(), w.y.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch14, aliasing, Polynomial)
    .baseline("may_alias", launch<may_alias>)
    .optimized("restrict", launch<restrict_ptrs>)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::allclose(kErrorBound, 0));

}  // namespace

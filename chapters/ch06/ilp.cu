// ch06/ilp: evaluate one degree-12287 polynomial at 16,384 points: one dependent FMA chain per
// thread, or eight independent chains.
//
// An FMA's result is ready 4 cycles after it issues (Hopper). A warp whose next instruction needs
// that result waits, and its SM sub-partition issues from another warp, if it has one. Here the
// problem is small: 16,384 points are 128 threads per SM on an H100, ONE warp per sub-partition,
// so nothing covers the wait. Horner's rule, p = (...(c[K-1] x + c[K-2]) x + ...) x + c[0], is a
// single chain: each FMA needs the one before, and the pipe issues one FMA every 4 cycles.
// The cure when threads are scarce is instruction-level parallelism: give each thread several
// chains that do not depend on each other, so it can issue one while the others wait.
//
// What changes from baseline to optimized:
//   1. baseline: Horner in x, 12,287 dependent FMAs per point;
//   2. optimized: split the coefficients by k mod 8: p(x) = sum_j x^j E_j(x^8), with
//      E_j(y) = sum_m c[8m + j] y^m. The eight E_j are eight independent Horner chains in
//      y = x^8 (12,280 FMAs, 8 in flight), then one short Horner in x joins them (7 FMAs; y costs
//      3 multiplies): 12,290 operations against 12,287, and a quarter of the time if the issue
//      slots, not the latency, become the limit (8 FMAs + 2 broadcast LDS.128 per 4+ cycles);
//   3. the same independence for the coefficient loads: the chain loop is unrolled by 8, so 16
//      LDS.128 are in flight before the first of their 64 FMAs. Unrolled by 2 (4 loads, then 16
//      FMAs), one warp per sub-partition waited ~30 cycles on shared memory every round, and the
//      split gained much less (README).
// Same polynomial, same points, same coefficients in shared memory on both sides; the sums are
// reassociated, so the results agree to rounding, not bitwise. Against the double reference the
// split measured relative L2 4.0e-5 on the H100 (Horner under 1e-5): y = x^8 is rounded once
// and y^m carries that error m times (m up to 1535), which matters near |x| = 1 where the high
// terms do not decay, and the eight partial sums there cancel. Tolerance: relative L2 2e-4.
// kernels/dependent_fma.cuh is a recurrence with a fixed multiplier and no coefficient stream,
// a scheduling load for other lessons; a polynomial is the honest form of "one accumulator that
// could be several".
// With a full GPU of threads (say 64 warps per SM) the baseline's waits would be hidden by other
// warps and ILP would buy little: this lesson is for latency that occupancy cannot cover.
//
//   ./bench compare --chapter ch06 --example ilp
#include <bench/bench.hpp>

namespace {

constexpr int kTerms = 12'288;  // coefficients: 48 KiB, the most static shared memory a block may have
constexpr int kChains = 8;      // independent accumulators in the optimized kernel
constexpr int kBlock = 128;     // one warp per SM sub-partition when the blocks spread one per SM
static_assert(kTerms % (4 * kChains) == 0, "coefficients are staged as float4 and split 8 ways");

struct Polynomial {
  int64_t points;
  bench::DeviceSpan<const float> coefficients, x;
  bench::DeviceSpan<float> p;
  explicit Polynomial(bench::Setup& s)
      : points(s.size("points", 16'384, 1'001)),
        coefficients(s.input<float>("coefficients", kTerms, bench::uniform(-1, 1))),
        x(s.input<float>("x", points, bench::uniform(-1, 1))),
        p(s.output<float>("p", points)) {
    s.flops(2.0 * points * (kTerms - 1));  // Horner's count: one FMA per coefficient after the first
  }
};

// kChains = 1: Horner, one dependent chain; kChains = 8: eight independent chains in y = x^8.
// Both stage the coefficients the same way: the block copies them all to shared memory (float4,
// coalesced), then every thread reads them by broadcast.
template <int kChainCount>
__global__ void __launch_bounds__(kBlock) evaluate(const float* __restrict__ coefficients, const float* __restrict__ x,
                                                   float* __restrict__ p, int points) {
  __shared__ __align__(16) float c[kTerms];
  for (int i = threadIdx.x; i < kTerms / 4; i += kBlock)
    reinterpret_cast<float4*>(c)[i] = reinterpret_cast<const float4*>(coefficients)[i];
  __syncthreads();
  const int i = blockIdx.x * kBlock + threadIdx.x;
  if (i >= points) return;
  const float xi = x[i];
  if constexpr (kChainCount == 1) {
    float acc = c[kTerms - 1];
#pragma unroll 16
    for (int k = kTerms - 2; k >= 0; --k) acc = fmaf(acc, xi, c[k]);  // each FMA waits for the last
    p[i] = acc;
  } else {
    static_assert(kChainCount == kChains, "the split below is written for eight chains");
    const float x2 = xi * xi, x4 = x2 * x2, y = x4 * x4;
    float e[kChains];  // e[j] = E_j(y), from the coefficients c[8m + j]
#pragma unroll
    for (int j = 0; j < kChains; ++j) e[j] = c[kTerms - kChains + j];
#pragma unroll 8
    for (int m = kTerms / kChains - 2; m >= 0; --m) {
      const float4 lo = reinterpret_cast<const float4*>(c)[2 * m];  // c[8m .. 8m+3]
      const float4 hi = reinterpret_cast<const float4*>(c)[2 * m + 1];
      e[0] = fmaf(e[0], y, lo.x);  // eight FMAs, none waiting on another
      e[1] = fmaf(e[1], y, lo.y);
      e[2] = fmaf(e[2], y, lo.z);
      e[3] = fmaf(e[3], y, lo.w);
      e[4] = fmaf(e[4], y, hi.x);
      e[5] = fmaf(e[5], y, hi.y);
      e[6] = fmaf(e[6], y, hi.z);
      e[7] = fmaf(e[7], y, hi.w);
    }
    float acc = e[kChains - 1];  // p = E_0 + x (E_1 + x (E_2 + ... + x E_7))
#pragma unroll
    for (int j = kChains - 2; j >= 0; --j) acc = fmaf(acc, xi, e[j]);
    p[i] = acc;
  }
}

template <auto Kernel>
void launch(const Polynomial& w, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((w.points + kBlock - 1) / kBlock);
  Kernel<<<blocks, kBlock, 0, stream>>>(w.coefficients.data(), w.x.data(), w.p.data(), static_cast<int>(w.points));
  BENCH_CHECK_LAUNCH();
}

void reference(const Polynomial& w, bench::HostData& h) {
  auto c = h.input<float>("coefficients");
  auto x = h.input<float>("x");
  auto p = h.expected("p");
  for (int64_t i = 0; i < w.points; ++i) {
    double acc = c[kTerms - 1];
    for (int k = kTerms - 2; k >= 0; --k) acc = acc * x[i] + c[k];
    p[i] = acc;
  }
}

// The timing-size check (docs/validity.md row 2): one thread per point, Horner's rule in double
// from global memory, as the CPU reference computes it, sharing no code with the variants.
__global__ void reference_evaluate(const float* c, const float* x, float* p, int64_t points) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= points) return;
  double acc = c[kTerms - 1];
  for (int k = kTerms - 2; k >= 0; --k) acc = acc * x[i] + c[k];
  p[i] = float(acc);
}

void device_reference(const Polynomial& w, cudaStream_t stream) {
  reference_evaluate<<<static_cast<unsigned>((w.points + kBlock - 1) / kBlock), kBlock, 0, stream>>>(
      w.coefficients.data(), w.x.data(), w.p.data(), w.points);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch06, ilp, Polynomial)
    .baseline("one_dependent_chain", launch<evaluate<1>>)
    .optimized("eight_independent_chains", launch<evaluate<kChains>>)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(2e-4));  // the split's cancellation, above

}  // namespace

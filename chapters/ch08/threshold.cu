// ch08/threshold: when the two sides of a data-dependent branch differ only in their
// parameters, select the parameters and run one instruction stream: a divergent warp pays for
// both sides, a predicated one for one.
//
// What the hardware does: a warp issues one instruction for its 32 lanes. At a branch whose
// condition differs between lanes, it runs the taken side with the other lanes masked off,
// then the other side, then reconverges (BSSY/BSYNC in SASS): the warp's time is the sum of
// both sides, however few lanes take each.
//
// The work: a threshold picks which of two response curves applies to each element,
//   y = x >= 0 ? curve(x, gain  0.5) : curve(x, gain -0.25),
// where curve(x, g) iterates p <- p * (g x) + x `steps` times (a compute-bound stand-in for a
// polynomial or transcendental approximation; |g x| <= 1/2, so p stays bounded). Inputs are
// uniform in [-1, 1): every warp has lanes on both sides (all 32 on one side: p = 2^-31).
//
// What changes from baseline to optimized:
//   1. baseline: if/else, one loop per side; every warp runs both loops, 2 x steps FMAs issued
//      per element, half of its lanes idle in each;
//   2. optimized: the gain is chosen with a select (one FSEL, no branch), then one loop:
//      steps FMAs per element, all lanes busy. The FMAs, their operands and their order are
//      those of the taken side, so the two variants' outputs are bit-identical (each is checked
//      against the double reference);
//   3. the same idea covers branches the compiler can fold into arithmetic: |x| and copysignf
//      for odd functions, fminf/fmaxf for clamps; with unequal sides the saving is the cheaper
//      side's cost.
// Both read and write each element once; compute-bound at steps = 256.
//
//   ./bench compare --chapter ch08 --example threshold
#include <bench/bench.hpp>

#include "iterated_map.cuh"

namespace {

using ch08::IteratedMap;  // n elements, `steps` FMAs each; sizes and cost model there

constexpr float kGainAbove = 0.5f;   // x >= kThreshold
constexpr float kGainBelow = -0.25f; // x <  kThreshold
constexpr float kThreshold = 0.0f;

void reference(const IteratedMap& w, bench::HostData& h) {
  auto x = h.input<float>("x");
  auto y = h.expected("y");
  for (int64_t i = 0; i < w.n; ++i) {
    const double xi = x[i];
    const double t = (xi >= kThreshold ? double{kGainAbove} : double{kGainBelow}) * xi;
    double p = xi;
    for (int k = 0; k < w.steps; ++k) p = p * t + xi;
    y[i] = p;
  }
}

constexpr int kBlock = 256;

// curve(x, gain): p <- p * (gain x) + x, `steps` times.
__device__ __forceinline__ float curve(float x, float gain, int steps) {
  const float t = gain * x;
  float p = x;
#pragma unroll 4
  for (int k = 0; k < steps; ++k) p = fmaf(p, t, x);
  return p;
}

// Baseline: the branch as written, each side with its own loop (written out, not two calls of
// curve(), which the compiler could merge into one call with a selected argument: the
// optimization this example teaches). Lanes with x >= 0 run the first loop while the others
// wait, then the others run the second one.
__global__ void __launch_bounds__(kBlock) divergent(const float* __restrict__ x,
                                                    float* __restrict__ y, int64_t n, int steps) {
  const int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  if (i >= n) return;
  const float xi = x[i];
  float out;
  if (xi >= kThreshold) {
    const float t = kGainAbove * xi;
    out = xi;
#pragma unroll 4
    for (int k = 0; k < steps; ++k) out = fmaf(out, t, xi);
  } else {
    const float t = kGainBelow * xi;
    out = xi;
#pragma unroll 4
    for (int k = 0; k < steps; ++k) out = fmaf(out, t, xi);
  }
  y[i] = out;
}

// Optimized: the condition picks a value, not a path.
__global__ void __launch_bounds__(kBlock) predicated(const float* __restrict__ x,
                                                     float* __restrict__ y, int64_t n, int steps) {
  const int64_t i = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  if (i >= n) return;
  const float xi = x[i];
  const float gain = xi >= kThreshold ? kGainAbove : kGainBelow;  // FSEL
  y[i] = curve(xi, gain, steps);
}

template <auto kKernel>
void launch(const IteratedMap& w, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((w.n + kBlock - 1) / kBlock);
  kKernel<<<blocks, kBlock, 0, stream>>>(w.x.data(), w.y.data(), w.n, w.steps);
  BENCH_CHECK_LAUNCH();
}

// The timing-size check (docs/validity.md row 2): one thread per element, the CPU reference's
// loop in double, sharing no code with the variants.
__global__ void reference_threshold(const float* x, float* y, int64_t n, int steps) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const double xi = x[i];
  const double t = (xi >= kThreshold ? double{kGainAbove} : double{kGainBelow}) * xi;
  double p = xi;
  for (int k = 0; k < steps; ++k) p = p * t + xi;
  y[i] = float(p);
}

void device_reference(const IteratedMap& w, cudaStream_t stream) {
  reference_threshold<<<static_cast<unsigned>((w.n + kBlock - 1) / kBlock), kBlock, 0, stream>>>(w.x.data(), w.y.data(), w.n, w.steps);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch08, threshold, IteratedMap)
    .baseline("divergent_if_else", launch<divergent>)
    .optimized("select_then_one_loop", launch<predicated>)
    .reference(reference)
    .device_reference(device_reference);  // FP32 default; the two variants agree bit for bit (see above)

}  // namespace

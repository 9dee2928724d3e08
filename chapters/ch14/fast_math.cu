// ch14/fast_math: the accurate expf, logf (2 and 1 ulp) and IEEE division against the
// hardware's approximate special-function unit (__expf, __logf, __fdividef), with the error the
// intrinsics can cost derived from their documented bounds, stated, and checked on every run.
//
// The work: y = (1/8) * sum over k of log(1 + exp(t_k x)) / t_k, a softplus (smooth ReLU) at
// eight temperatures t_k read from memory: 8 exponentials, 8 logarithms and 8 divisions per
// element for 8 bytes of traffic, so the special functions set the time.
//   - Precise (what expf, logf and / compile to without -use_fast_math): expf is a range
//     reduction and a correction around one MUFU.EX2 (max 2 ulp), logf a polynomial of about
//     15 FMAs (max 1 ulp), x / y an IEEE division: MUFU.RCP, Newton steps and a slow-path test.
//   - Fast: __expf(x) is ex2.approx(x * log2 e), __logf(x) is lg2.approx(x) * ln 2 and
//     __fdividef(x, y) is x * rcp.approx(y): one MUFU instruction and one FMUL each. The MUFU
//     pipe issues 16 results per clock per SM against 128 for FMAs, so 3 MUFU + 3 FMUL per term
//     replace roughly 40 FMA-pipe instructions.
//   1. baseline "precise": expf, logf, '/';
//   2. optimized "intrinsics": __expf, __logf, __fdividef; everything else identical (same
//      products t * x, same summation order, same final scale by 1/8, an exact power of two).
// Nothing else changes: this file is compiled without -use_fast_math (which would also flush
// denormals and approximate sqrt), so the three calls are the whole difference.
//
// Error bound (CUDA C++ Programming Guide, "Intrinsic Functions"), with x in [-1, 1], t in
// [0.5, 4], so |t x| <= 4, and u = 2^-24 (half an ulp, relative):
//   a. z = t x rounds by u|z| <= 4u relative in exp(z); __expf(z) adds at most 2 + floor(1.173
//      |z|) = 6 ulp <= 12u; 1 + e rounds by u: s = 1 + e is off by at most 17u relative;
//   b. log turns that into 17u absolute; __logf adds at most 3 ulp of a result below 8 (s <=
//      1 + e^4 < 56), 3 * 2^-21 = 24u (for s in [0.5, 2] the guide's bound is 2^-21.41, smaller);
//   c. __fdividef(L, t) divides that absolute error by t >= 0.5 and adds 2 ulp of a quotient
//      below 2 (log(1 + e^(t x)) / t <= log(1 + e^0.5) / 0.5 = 1.95 over this range): 8u;
//   d. the 7 additions of the sum (partial sums below 16) add 7 * 16u, divided by 8: 14u, and
//      the reference is rounded to float once more: 2u (|y| < 2).
// Total: (17u + 24u) / 0.5 + 8u + 14u + 2u = 106u = 6.3e-6 absolute on outputs of 0.1 to 1.5.
// The precise form's own error is a small fraction of that. The harness reports the measured
// maximum error of each variant (max_abs_err), which the README lists next to this bound.
//
//   ./bench compare --chapter ch14 --example fast_math
#include <bench/bench.hpp>

#include <cmath>

namespace {

constexpr int kTerms = 8;
constexpr float kMinTemperature = 0.5f, kMaxTemperature = 4.0f;

struct SoftplusMix {
  int64_t n;
  bench::DeviceSpan<const float> x;      // [-1, 1]
  bench::DeviceSpan<const float> temps;  // kTerms temperatures in [0.5, 4]
  bench::DeviceSpan<float> y;
  explicit SoftplusMix(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 26, 100'003)),  // 256 MB each way; odd to verify
        x(s.input<float>("x", n, bench::uniform(-1, 1))),
        temps(s.input<float>("temps", kTerms, bench::uniform(kMinTemperature, kMaxTemperature))),
        y(s.output<float>("y", n)) {
    s.param("terms", kTerms);
    s.bytes(2.0 * n * sizeof(float));
    // Per term: the product t x, the add 1 + e, the add into the sum; exp, log and the
    // division counted as one flop each (they are one SFU result each in the fast form).
    s.flops(6.0 * kTerms * n);
  }
};

constexpr int kBlock = 256;

template <bool kIntrinsics>
__global__ void __launch_bounds__(kBlock)
    softplus_mix(const float* __restrict__ x, const float* __restrict__ temps,
                 float* __restrict__ y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const float xi = x[i];
  float sum = 0.0f;
#pragma unroll
  for (int k = 0; k < kTerms; ++k) {
    const float t = __ldg(temps + k);  // the same 32 bytes for every thread: L1 hits
    const float z = t * xi;
    if constexpr (kIntrinsics)
      sum += __fdividef(__logf(1.0f + __expf(z)), t);
    else
      sum += logf(1.0f + expf(z)) / t;
  }
  y[i] = sum * (1.0f / kTerms);
}

template <bool kIntrinsics>
void launch(const SoftplusMix& w, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((w.n + kBlock - 1) / kBlock);
  softplus_mix<kIntrinsics>
      <<<blocks, kBlock, 0, stream>>>(w.x.data(), w.temps.data(), w.y.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

// The definition in double (log1p for accuracy near 1 + tiny), shared by both references.
__host__ __device__ inline double softplus_mix_exact(double x, const float* temps) {
  double sum = 0;
  for (int k = 0; k < kTerms; ++k) sum += log1p(exp(double(temps[k]) * x)) / double(temps[k]);
  return sum / kTerms;
}

void reference(const SoftplusMix& w, bench::HostData& h) {
  auto x = h.input<float>("x");
  auto temps = h.input<float>("temps");
  auto y = h.expected("y");
  for (int64_t i = 0; i < w.n; ++i) y[i] = softplus_mix_exact(x[i], temps.data());
}

// At the timing size (2^26 elements x 16 transcendentals in double: tens of seconds on a CPU)
// the last timed output is checked against the same definition evaluated in double on the GPU.
__global__ void softplus_mix_double(const float* __restrict__ x, const float* __restrict__ temps,
                                    float* __restrict__ y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < n) y[i] = static_cast<float>(softplus_mix_exact(x[i], temps));
}

void device_reference(const SoftplusMix& w, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((w.n + kBlock - 1) / kBlock);
  softplus_mix_double<<<blocks, kBlock, 0, stream>>>(w.x.data(), w.temps.data(), w.y.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

// The bound derived in the header comment, written out so a change of range updates it.
constexpr double kU = 0x1p-24;
constexpr double kMaxAbsZ = 1.0 * kMaxTemperature;
constexpr double kExpUlps = 2 + 4;                                   // 2 + floor(1.173 * 4)
constexpr double kRelErrS = kMaxAbsZ * kU + kExpUlps * 2 * kU + kU;  // a.
constexpr double kLogAbsErr = 3 * 0x1p-21;                           // b. 3 ulp below 8
constexpr double kMaxQuotient = 2.0;                                 // c. log(1 + e^0.5) / 0.5
constexpr double kTermErr = (kRelErrS + kLogAbsErr) / kMinTemperature + 2 * 2 * kU * kMaxQuotient;
constexpr double kSumErr = (kTerms - 1) * kU * kTerms * kMaxQuotient / kTerms;  // d.
constexpr double kErrorBound = kTermErr + kSumErr + 2 * kU;  // + reference rounding
static_assert(kErrorBound > 6e-6 && kErrorBound < 7e-6, "the header comment states 6.3e-6");

BENCH_EXAMPLE(ch14, fast_math, SoftplusMix)
    .baseline("precise", launch<false>)
    .optimized("intrinsics", launch<true>)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::allclose(kErrorBound, 0));

}  // namespace

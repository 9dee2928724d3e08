// ch19/fused_quantize: row-wise FP8 quantisation needs each group's abs-max before it can cast a
// single value of the group. Done as two kernels, the BF16 input crosses HBM twice; held in
// registers between the reduction and the cast, once, and the kernel runs at the copy ceiling.
//
// The work: x [rows][8192] BF16 (rows an axis, 8192 by default) -> codes q [rows][8192] FP8 E4M3
// and scales [rows][8192 / group] FP32, with group (the `scale` axis) a whole row ("row") or 128
// consecutive values of a row ("block128", the activations' granularity of fine-grained FP8
// GEMMs). Per group: amax = max |x|, (dequant, quant) = kernels::e4m3_scales(amax), then
// q = E4M3(x * quant), saturating, round to nearest even (the rule: kernels/fp8_e4m3.hpp).
//
// What changes from baseline to optimized:
//   1. baseline "two_pass": kernel 1 reads x and writes each group's dequant scale (an output) and
//      quant factor (scratch); kernel 2 reads x again and casts. 2 + 2 + 1 bytes a value cross
//      HBM instead of 2 + 1.
//   2. optimized "one_pass": one CTA of 256 threads per row issues all its 16-byte loads first (a
//      row of 8192 BF16 is 4 loads a thread: 64 bytes a thread in flight), keeps the 32 values in
//      registers, still packed, reduces the abs-max (from the bits: 16-bit integer maxima of
//      the magnitudes; then a block reduction for "row", or 4 shuffles over the 16 lanes that
//      hold one 128-value block for "block128"), and widens and casts each slot as it stores it.
//      36 registers: 7 CTAs (rows) an SM, 112 KB of loads in flight.
// Both compute the same FP32 product and the same cvt.rn.satfinite, so codes and scales are
// bit-exact against the CPU reference (tolerance exact). Bytes counted: 2 read + 1 written a
// value, plus 4 per scale; held to the copy ceiling. Target: >= 95% of it.
// Limits: cols a multiple of 128 and at most 8192 (the registers one row fits in).
//
//   ./bench compare --chapter ch19 --example fused_quantize
//   ./bench compare --chapter ch19 --example fused_quantize --sweep   # rows 4096 to 16384
#include <cmath>
#include <kernels/fp8_quantize.cuh>
#include <string>
#include <vector>

namespace {

using bf16 = __nv_bfloat16;
using fp8 = __nv_fp8_e4m3;
using kernels::kBf16PerVector;
constexpr int kThreads = 256;
constexpr int kSlots = 4;  // 16-byte vectors a thread holds
constexpr int64_t kMaxCols = int64_t{kThreads} * kSlots * kBf16PerVector;  // 8192
constexpr int kBlock = 128;                              // "block128": values per scale
constexpr int kLanesPerBlock = kBlock / kBf16PerVector;  // 16 lanes, one 16-byte load each

struct Quantize {
  int64_t rows, cols, group, groups;
  bool per_row;
  bench::DeviceSpan<const bf16> x;
  bench::DeviceSpan<fp8> q;
  bench::DeviceSpan<float> scales;
  explicit Quantize(bench::Setup& s)
      : rows(s.size("rows", s.axis("rows"), 37)),
        // 1152 columns to verify: slots partly empty, a half-warp's worth in the last warp.
        cols(s.size("cols", kMaxCols, 9 * kBlock)),
        group(s.string_axis("scale") == "row" ? cols : kBlock),
        groups(rows * (cols / group)),
        per_row(group == cols),
        // N(0, 1): each row's amax lands near 4, most values well inside E4M3's normal range, a
        // few in its subnormals; the amax itself maps to 448 (x * quant rounds to 448 or a hair
        // past it: the saturating path).
        x(s.input<bf16>("x", rows * cols, bench::normal(0, 1))),
        q(s.output<fp8>("q", rows * cols)),
        scales(s.output<float>("scales", groups)) {
    if (cols % kBlock != 0 || cols > kMaxCols)
      throw bench::Unsupported("cols must be a multiple of 128, at most 8192");
    s.bytes(3.0 * rows * cols + 4.0 * groups);  // read x once, write q once, write the scales
  }
};

// Half-warp (16 lanes: one 128-value block) maximum; every lane gets it.
__device__ __forceinline__ float block_max(float m) {
#pragma unroll
  for (int mask = kLanesPerBlock / 2; mask > 0; mask /= 2)
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, mask));
  return m;
}
// max |x| of 8 BF16 values already widened (the two-pass baseline's way); the one-pass kernel
// takes it from the packed bits (kernels::abs_max_bf16x8) and unpacks only to cast.
__device__ __forceinline__ float abs_max8(const float (&v)[kBf16PerVector]) {
  float m = 0.0f;
#pragma unroll
  for (int e = 0; e < kBf16PerVector; ++e) m = fmaxf(m, fabsf(v[e]));
  return m;
}

// ---- baseline: two passes --------------------------------------------------------------------
// Pass 1, one CTA per row: each group's amax, then its dequant scale (output) and quant (scratch).
template <bool kPerRow>
__global__ void __launch_bounds__(kThreads)
    group_scales(const bf16* __restrict__ x, float* __restrict__ scales, float* __restrict__ quant,
                 int64_t cols) {
  const int64_t row = blockIdx.x, vectors = cols / kBf16PerVector;
  const auto* src = reinterpret_cast<const uint4*>(x + row * cols);
  float row_max = 0.0f;
  for (int64_t v0 = 0; v0 < vectors; v0 += kThreads) {  // uniform trip count: the shuffles below
    const int64_t v = v0 + threadIdx.x;
    float f[kBf16PerVector] = {};
    if (v < vectors) kernels::unpack_bf16x8(kernels::load_stream(src + v), f);
    const float m = abs_max8(f);
    if constexpr (kPerRow) {
      row_max = fmaxf(row_max, m);
    } else {
      const float amax = block_max(m);  // a half-warp is all in or all out: cols % 128 == 0
      if (v < vectors && threadIdx.x % kLanesPerBlock == 0) {
        const int64_t g = (row * cols + v * kBf16PerVector) / kBlock;
        const kernels::E4m3Scales s = kernels::e4m3_scales(amax);
        scales[g] = s.dequant, quant[g] = s.quant;
      }
    }
  }
  if constexpr (kPerRow) {
    const float amax = kernels::group_reduce<kThreads>(row_max, kernels::Max{});
    if (threadIdx.x == 0) {
      const kernels::E4m3Scales s = kernels::e4m3_scales(amax);
      scales[row] = s.dequant, quant[row] = s.quant;
    }
  }
}

// Pass 2, elementwise: vector i of the whole matrix belongs to group i x 8 / group.
__global__ void __launch_bounds__(kThreads)
    cast_by_group(const bf16* __restrict__ x, const float* __restrict__ quant, fp8* __restrict__ q,
                  int64_t vectors, int64_t group) {
  const int64_t i = blockIdx.x * int64_t{kThreads} + threadIdx.x;
  if (i >= vectors) return;
  float f[kBf16PerVector];
  kernels::unpack_bf16x8(kernels::load_stream(reinterpret_cast<const uint4*>(x) + i), f);
  reinterpret_cast<uint2*>(q)[i] = kernels::e4m3x8(f, quant[i * kBf16PerVector / group]);
}

struct TwoPass {
  bench::DeviceBuffer<float> quant;  // scratch: each group's 448 / amax, from pass 1 to pass 2
  TwoPass(const Quantize& w, cudaStream_t) : quant(w.groups) {}
  void operator()(const Quantize& w, cudaStream_t stream) {
    if (w.per_row)
      group_scales<true><<<unsigned(w.rows), kThreads, 0, stream>>>(w.x.data(), w.scales.data(),
                                                                    quant.data(), w.cols);
    else
      group_scales<false><<<unsigned(w.rows), kThreads, 0, stream>>>(w.x.data(), w.scales.data(),
                                                                     quant.data(), w.cols);
    BENCH_CHECK_LAUNCH();
    const int64_t vectors = w.rows * w.cols / kBf16PerVector;
    cast_by_group<<<unsigned((vectors + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
        w.x.data(), quant.data(), w.q.data(), vectors, w.group);
    BENCH_CHECK_LAUNCH();
  }
};

// ---- optimized: one pass, the row in registers ----------------------------------------------
template <bool kPerRow>
__global__ void __launch_bounds__(kThreads)
    quantize_rows(const bf16* __restrict__ x, fp8* __restrict__ q, float* __restrict__ scales,
                  int64_t cols) {
  const int64_t row = blockIdx.x, vectors = cols / kBf16PerVector;
  const auto* src = reinterpret_cast<const uint4*>(x + row * cols);
  auto* dst = reinterpret_cast<uint2*>(q + row * cols);
  uint4 raw[kSlots];
#pragma unroll
  for (int k = 0; k < kSlots; ++k) {  // every load issued before the first is used
    const int64_t v = k * kThreads + threadIdx.x;
    raw[k] = v < vectors ? kernels::load_stream(src + v) : make_uint4(0, 0, 0, 0);
  }
  float m[kSlots];
#pragma unroll
  for (int k = 0; k < kSlots; ++k) m[k] = kernels::abs_max_bf16x8(raw[k]);
  // The cast widens a slot only when it stores it: 16 registers of row held, not 48.
  auto cast = [&](int k, float quant) {
    float f[kBf16PerVector];
    kernels::unpack_bf16x8(raw[k], f);
    return kernels::e4m3x8(f, quant);
  };

  if constexpr (kPerRow) {
    float thread_max = m[0];
#pragma unroll
    for (int k = 1; k < kSlots; ++k) thread_max = fmaxf(thread_max, m[k]);
    const kernels::E4m3Scales s =
        kernels::e4m3_scales(kernels::group_reduce<kThreads>(thread_max, kernels::Max{}));
    if (threadIdx.x == 0) scales[row] = s.dequant;
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int64_t v = k * kThreads + threadIdx.x;
      if (v < vectors) dst[v] = cast(k, s.quant);
    }
  } else {
    static_assert(kThreads % kLanesPerBlock == 0, "a slot's 128-value blocks are whole half-warps");
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int64_t v = k * kThreads + threadIdx.x;
      const kernels::E4m3Scales s = kernels::e4m3_scales(block_max(m[k]));
      if (v < vectors) {
        if (threadIdx.x % kLanesPerBlock == 0)
          scales[(row * cols + v * kBf16PerVector) / kBlock] = s.dequant;
        dst[v] = cast(k, s.quant);
      }
    }
  }
}

void launch_one_pass(const Quantize& w, cudaStream_t stream) {
  if (w.per_row)
    quantize_rows<true><<<unsigned(w.rows), kThreads, 0, stream>>>(w.x.data(), w.q.data(),
                                                                   w.scales.data(), w.cols);
  else
    quantize_rows<false><<<unsigned(w.rows), kThreads, 0, stream>>>(w.x.data(), w.q.data(),
                                                                    w.scales.data(), w.cols);
  BENCH_CHECK_LAUNCH();
}

// The reference: the same rule on the host, the cast modelled exactly (kernels/fp8_e4m3.hpp).
void reference(const Quantize& w, bench::HostData& h) {
  const auto x = h.input<bf16>("x");
  const auto q = h.expected("q");
  const auto scales = h.expected("scales");
  for (int64_t g = 0; g < w.groups; ++g) {
    const int64_t first = g * w.group;
    float amax = 0.0f;
    for (int64_t i = first; i < first + w.group; ++i)
      amax = std::fmax(amax, std::fabs(float(x[i])));
    const kernels::E4m3Scales s = kernels::e4m3_scales(amax);
    scales[g] = s.dequant;
    for (int64_t i = first; i < first + w.group; ++i)
      q[i] = kernels::round_e4m3(float(x[i]) * s.quant);
  }
}

// The device reference (docs/validity.md row 2: timed samples checked on the device): a thread a
// group running the CPU reference's loop, widening each BF16 value on its own and casting with
// __nv_fp8_e4m3's constructor (round to nearest even, saturating to finite: the rule's cast). No
// vector loads, no packed maxima, no shuffles: slow next to the variants (a thread walks a whole
// row when the group is one), plainly right; held bit for bit to the CPU reference in both
// verification runs.
__global__ void quantize_reference(const bf16* __restrict__ x, fp8* __restrict__ q,
                                   float* __restrict__ scales, int64_t groups, int64_t group) {
  const int64_t g = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (g >= groups) return;
  const int64_t first = g * group;
  float amax = 0.0f;
  for (int64_t i = first; i < first + group; ++i) amax = fmaxf(amax, fabsf(__bfloat162float(x[i])));
  const kernels::E4m3Scales s = kernels::e4m3_scales(amax);
  scales[g] = s.dequant;
  for (int64_t i = first; i < first + group; ++i) q[i] = fp8(__bfloat162float(x[i]) * s.quant);
}

void device_reference(const Quantize& w, cudaStream_t stream) {
  quantize_reference<<<unsigned((w.groups + kThreads - 1) / kThreads), kThreads, 0, stream>>>(
      w.x.data(), w.q.data(), w.scales.data(), w.groups, w.group);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch19, fused_quantize, Quantize)
    .int_axis("rows", {4096, 8192, 16384}, /*defaults=*/{8192})
    .string_axis("scale", {"row", "block128"})
    .stateful<TwoPass>(bench::Role::baseline, "two_pass")
    .optimized("one_pass", launch_one_pass)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::exact());

}  // namespace

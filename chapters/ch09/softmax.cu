// ch09/softmax: row-wise softmax, y[r, j] = exp(x[r, j] - max_r) / sum_k exp(x[r, k] - max_r), in
// three passes over device memory → one.
//
// BF16 in and out, FP32 statistics. softmax: 16384 rows x 8192 columns (256 MiB each way);
// softmax_short_rows: 262144 x 1024 (512 MiB each way), the attention-row shape. About 4 flops per
// element over 4 bytes (read 2, write 2): memory-bound, and the floor is one read and one write of
// the matrix at the HBM copy bandwidth. That is the declared byte count.
//
// What the hardware does: a row is 16 KB (2 KB short), far below what an SM can hold in
// registers (256 KB), but the matrix is 5x the 50 MB L2, so every pass that re-reads a row goes
// back to HBM. The baseline pays three reads and one write (8 bytes per element for 4 useful).
//
// What changes from baseline to optimized:
//   1. baseline "three_kernels": (a) row max, (b) row sum of exp(x - max), (c) normalise, each a
//      separate launch re-reading x; the statistics go through two FP32 scratch arrays. Same row
//      to thread mapping and the same 16-byte loads as the optimized kernel, so what differs is
//      the passes and the launches only;
//   2. optimized "online_registers": one group of threads per row reads the row once into
//      registers (4 x 16-byte streaming loads per thread = 32 BF16) and keeps it there: a block of
//      256 threads per 8192-column row, one warp per 1024-column row (8 rows per block, no
//      barrier). Each thread reduces its 32 values to a pair (m, s): its max and sum of
//      exp(x - m). The pairs combine with the online-softmax rule
//        m = max(m1, m2),  s = s1 exp(m1 - m) + s2 exp(m2 - m)
//      in one butterfly-and-block reduction (kernels/group_reduce.cuh), where the two-step form
//      needs a max reduction and then a sum reduction, each with its own barriers. The thread then
//      writes exp(x - m_row) / s_row from the registers: HBM sees one read and one write.
// exp(x - m) is 2^(x log2(e) - m log2(e)): one FFMA and one MUFU.EX2 per element.
// Numerics: m_row is the true row max, so every exponent is <= 0 (no overflow for any finite
// input) and the largest term is 1 (s >= 1). FP32 relative error ~1e-6 before the BF16 rounding.
// Tolerance: per element |y - ref| <= 4e-3 |ref|: rounding to BF16 (8 significant bits) moves
// a value by at most half an ulp, 2^-8 = 3.9e-3 of it; 4e-3 leaves 2% for the FP32 error, and any
// element off by one BF16 ulp fails.
// Requirements: cols % 8 == 0 (16-byte vectors; the workload refuses other shapes) and, for the
// optimized kernel, cols <= 8192 (declared through variant_requires).
//
//   ./bench compare --chapter ch09 --example softmax
//   ./bench compare --chapter ch09 --example softmax_short_rows
#include <cuda_bf16.h>

#include <bench/bench.hpp>
#include <cmath>
#include <kernels/bf16_pack.cuh>
#include <kernels/group_reduce.cuh>
#include <kernels/reference_rows.cuh>
#include <kernels/vector_access.cuh>
#include <string>

namespace {

using bf16 = __nv_bfloat16;
using kernels::kBf16PerVector;

constexpr int kBlock = 256;
constexpr int kVecsPerThread = 4;                                     // 32 BF16 per thread in registers
constexpr int kWarpRowCols = 32 * kVecsPerThread * kBf16PerVector;    // 1024: a warp per row up to here
constexpr int kBlockRowCols = kBlock * kVecsPerThread * kBf16PerVector;  // 8192: a block per row up to here
constexpr float kLog2e = 1.4426950408889634f;

// 2^t as the bare MUFU.EX2 (flushing subnormal results to 0): exp2f adds range fix-ups around it
// for subnormal results, several instructions per element that a memory-bound kernel still issues.
// Every exponent here is <= 0 and a flushed term is below 2^-126 of the row's largest, which is 1.
__device__ __forceinline__ float exp2_ftz(float t) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(t));
  return r;
}

struct Softmax {
  int64_t rows, cols;
  bench::DeviceSpan<const bf16> x;
  bench::DeviceSpan<bf16> y;
  bench::DeviceBuffer<float> row_max, row_sum;  // baseline scratch
  Softmax(bench::Setup& s, int64_t timing_rows, int64_t timing_cols, int64_t verify_rows, int64_t verify_cols)
      : rows(s.size("rows", timing_rows, verify_rows)),
        cols(s.size("cols", timing_cols, verify_cols)),
        x(s.input<bf16>("x", rows * cols, bench::uniform(-8, 8))),  // exponents spread over e^16
        y(s.output<bf16>("y", rows * cols)),
        row_max(rows),
        row_sum(rows) {
    if (cols % kBf16PerVector != 0) throw bench::Unsupported("softmax: cols must be a multiple of 8 (16-byte vectors)");
    s.bytes(2.0 * rows * cols * sizeof(bf16), bench::ceiling::hbm_copy);
    s.flops(4.0 * rows * cols);  // max, exp, add, scale
  }
};
// Verification shapes: odd row counts, and rows 8 columns short of the kernel's maximum, so the
// last thread of each row holds a partial set of vectors.
struct LongRows : Softmax {
  explicit LongRows(bench::Setup& s) : Softmax(s, 16384, 8192, 37, 8184) {}
};
// Short rows at 262144, not 65536: with 128 MiB each way up to a fifth of the written matrix
// (the 50 MB L2) was still dirty in L2 when the timer stopped, and the kernel "beat" the copy
// ceiling (README); at 512 MiB each way that tail is within the copy's own.
struct ShortRows : Softmax {
  explicit ShortRows(bench::Setup& s) : Softmax(s, 262144, 1024, 999, 1016) {}
};

// The threads of one row: kRowThreads consecutive threads (32: a warp, kBlock: the block).
template <int kRowThreads>
struct RowGroup {
  static constexpr int kRowsPerBlock = kBlock / kRowThreads;
  int64_t row;
  int lane;
  __device__ RowGroup() : row(blockIdx.x * int64_t{kRowsPerBlock} + threadIdx.x / kRowThreads), lane(threadIdx.x % kRowThreads) {}
};
template <int kRowThreads>
unsigned row_blocks(int64_t rows) { return static_cast<unsigned>((rows + kBlock / kRowThreads - 1) / (kBlock / kRowThreads)); }

// --- baseline: three kernels -----------------------------------------------------------------------
template <int kRowThreads>
__global__ void __launch_bounds__(kBlock) softmax_row_max(const bf16* __restrict__ x, float* __restrict__ row_max, int64_t rows, int64_t cols) {
  const RowGroup<kRowThreads> g;
  if (g.row >= rows) return;  // whole warps only: a block-wide group never gets here
  const auto* src = reinterpret_cast<const uint4*>(x + g.row * cols);
  float m = -INFINITY, v[kBf16PerVector];
  for (int64_t j = g.lane; j < cols / kBf16PerVector; j += kRowThreads) {
    kernels::unpack_bf16x8(kernels::load_stream(src + j), v);
    for (float e : v) m = fmaxf(m, e);
  }
  m = kernels::group_reduce<kRowThreads>(m, kernels::Max{});
  if (g.lane == 0) row_max[g.row] = m;
}

template <int kRowThreads>
__global__ void __launch_bounds__(kBlock) softmax_row_sum(const bf16* __restrict__ x, const float* __restrict__ row_max,
                                                          float* __restrict__ row_sum, int64_t rows, int64_t cols) {
  const RowGroup<kRowThreads> g;
  if (g.row >= rows) return;
  const auto* src = reinterpret_cast<const uint4*>(x + g.row * cols);
  const float shift = row_max[g.row] * kLog2e;
  float s = 0.0f, v[kBf16PerVector];
  for (int64_t j = g.lane; j < cols / kBf16PerVector; j += kRowThreads) {
    kernels::unpack_bf16x8(kernels::load_stream(src + j), v);
    for (float e : v) s += exp2_ftz(fmaf(e, kLog2e, -shift));
  }
  s = kernels::group_reduce<kRowThreads>(s, kernels::Sum{});
  if (g.lane == 0) row_sum[g.row] = s;
}

// One thread per 16-byte vector of the whole matrix.
__global__ void softmax_normalise(const bf16* __restrict__ x, const float* __restrict__ row_max, const float* __restrict__ row_sum,
                                  bf16* __restrict__ y, int64_t rows, int64_t cols) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x, vecs_per_row = cols / kBf16PerVector;
  if (i >= rows * vecs_per_row) return;
  const int64_t r = i / vecs_per_row;
  const float shift = row_max[r] * kLog2e, inv_sum = 1.0f / row_sum[r];
  float v[kBf16PerVector];
  kernels::unpack_bf16x8(kernels::load_stream(reinterpret_cast<const uint4*>(x) + i), v);
  for (float& e : v) e = exp2_ftz(fmaf(e, kLog2e, -shift)) * inv_sum;
  kernels::store_stream(reinterpret_cast<uint4*>(y) + i, kernels::pack_bf16x8(v));
}

// --- optimized: one read, statistics combined online, one write ---------------------------------
// (max, sum of exp(x - max)) of two disjoint parts of a row. Products are rounded before the add
// (__fmul_rn: no FMA contraction), so combine(a, b) == combine(b, a) bit for bit and every lane of
// the butterfly ends with the same pair. An empty part is (-inf, 0).
struct OnlineCombine {
  __device__ float2 operator()(float2 a, float2 b) const {
    const float m = fmaxf(a.x, b.x);
    if (m == -INFINITY) return a;  // both empty: avoid (-inf) - (-inf)
    return make_float2(m, __fmul_rn(a.y, exp2_ftz((a.x - m) * kLog2e)) + __fmul_rn(b.y, exp2_ftz((b.x - m) * kLog2e)));
  }
};

template <int kRowThreads>
__global__ void __launch_bounds__(kBlock) softmax_online(const bf16* __restrict__ x, bf16* __restrict__ y, int64_t rows, int64_t cols) {
  const RowGroup<kRowThreads> g;
  if (g.row >= rows) return;  // whole warps only
  const auto* src = reinterpret_cast<const uint4*>(x + g.row * cols);
  auto* dst = reinterpret_cast<uint4*>(y + g.row * cols);
  const int64_t vecs = cols / kBf16PerVector;
  // All loads first: 64 bytes per thread in flight before any arithmetic waits on them.
  uint4 raw[kVecsPerThread];
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    const int64_t j = g.lane + int64_t{k} * kRowThreads;
    if (j < vecs) raw[k] = kernels::load_stream(src + j);
  }
  // This thread's pair: its max, then its sum of exp(x - max), both over registers.
  float v[kBf16PerVector], m = -INFINITY, s = 0.0f;
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    if (g.lane + int64_t{k} * kRowThreads >= vecs) continue;
    kernels::unpack_bf16x8(raw[k], v);
    for (float e : v) m = fmaxf(m, e);
  }
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    if (g.lane + int64_t{k} * kRowThreads >= vecs) continue;
    kernels::unpack_bf16x8(raw[k], v);
    for (float e : v) s += exp2_ftz(fmaf(e, kLog2e, -m * kLog2e));
  }
  const float2 row = kernels::group_reduce<kRowThreads>(make_float2(m, s), OnlineCombine{});
  const float shift = row.x * kLog2e, inv_sum = 1.0f / row.y;
#pragma unroll
  for (int k = 0; k < kVecsPerThread; ++k) {
    const int64_t j = g.lane + int64_t{k} * kRowThreads;
    if (j >= vecs) continue;
    kernels::unpack_bf16x8(raw[k], v);
    for (float& e : v) e = exp2_ftz(fmaf(e, kLog2e, -shift)) * inv_sum;
    kernels::store_stream(dst + j, kernels::pack_bf16x8(v));
  }
}

// Rows up to 1024 columns: a warp per row; longer rows: the block.
template <int kRowThreads>
void launch_three_kernels_as(const Softmax& w, cudaStream_t stream) {
  softmax_row_max<kRowThreads><<<row_blocks<kRowThreads>(w.rows), kBlock, 0, stream>>>(w.x.data(), w.row_max.data(), w.rows, w.cols);
  BENCH_CHECK_LAUNCH();
  softmax_row_sum<kRowThreads><<<row_blocks<kRowThreads>(w.rows), kBlock, 0, stream>>>(w.x.data(), w.row_max.data(), w.row_sum.data(),
                                                                                         w.rows, w.cols);
  BENCH_CHECK_LAUNCH();
  const int64_t vectors = w.rows * w.cols / kBf16PerVector;
  softmax_normalise<<<static_cast<unsigned>((vectors + kBlock - 1) / kBlock), kBlock, 0, stream>>>(
      w.x.data(), w.row_max.data(), w.row_sum.data(), w.y.data(), w.rows, w.cols);
  BENCH_CHECK_LAUNCH();
}
void launch_three_kernels(const Softmax& w, cudaStream_t stream) {
  w.cols <= kWarpRowCols ? launch_three_kernels_as<32>(w, stream) : launch_three_kernels_as<kBlock>(w, stream);
}

void launch_online(const Softmax& w, cudaStream_t stream) {
  if (w.cols <= kWarpRowCols)
    softmax_online<32><<<row_blocks<32>(w.rows), kBlock, 0, stream>>>(w.x.data(), w.y.data(), w.rows, w.cols);
  else
    softmax_online<kBlock><<<row_blocks<kBlock>(w.rows), kBlock, 0, stream>>>(w.x.data(), w.y.data(), w.rows, w.cols);
  BENCH_CHECK_LAUNCH();
}

void reference(const Softmax& w, bench::HostData& h) {
  auto x = h.input<bf16>("x");
  auto y = h.expected("y");
  for (int64_t r = 0; r < w.rows; ++r) {
    const bf16* row = x.data() + r * w.cols;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < w.cols; ++j) m = std::fmax(m, double(__bfloat162float(row[j])));
    for (int64_t j = 0; j < w.cols; ++j) s += std::exp(double(__bfloat162float(row[j])) - m);
    for (int64_t j = 0; j < w.cols; ++j) y[r * w.cols + j] = std::exp(double(__bfloat162float(row[j])) - m) / s;
  }
}

// The timing-size check (docs/validity.md row 2): the CPU reference's arithmetic in double (its
// max, its sum of exp(x - max), each element's quotient), one block per row
// (kernels/reference_rows.cuh), sharing no code with the variants. It writes FP32 (the FP32 form
// of a device reference): the tolerance is finer than one BF16 unit, and an honest variant that
// rounds the other way from a reference rounded to BF16 would be a unit off.
__global__ void reference_softmax(const bf16* x, float* y, int64_t cols) {
  const bf16* row = x + blockIdx.x * cols;
  const auto at = [&](int64_t j) { return double(__bfloat162float(row[j])); };
  double m = -INFINITY;
  for (int64_t j = threadIdx.x; j < cols; j += kernels::kReferenceRowBlock) m = fmax(m, at(j));
  m = kernels::reference_block_max(m);
  double s = 0;
  for (int64_t j = threadIdx.x; j < cols; j += kernels::kReferenceRowBlock) s += exp(at(j) - m);
  s = kernels::reference_block_sum(s);
  for (int64_t j = threadIdx.x; j < cols; j += kernels::kReferenceRowBlock)
    y[blockIdx.x * cols + j] = float(exp(at(j) - m) / s);
}

void device_reference(const Softmax& w, const bench::ReferenceOutputs& out, cudaStream_t stream) {
  reference_softmax<<<unsigned(w.rows), kernels::kReferenceRowBlock, 0, stream>>>(w.x.data(),
                                                                                  out["y"], w.cols);
  BENCH_CHECK_LAUNCH();
}

// Both row lengths' registration: the same two variants, references and tolerance.
void softmax_ladder(auto& example) {
  example.baseline("three_kernels", launch_three_kernels)
      .optimized("online_registers", launch_online)
      .variant_requires([](const Softmax& w) -> std::string {
        return w.cols <= kBlockRowCols ? "" : "online_registers: a row must fit in one block's registers (cols <= 8192)";
      })
      .reference(reference)
      .device_reference(device_reference)
      .tolerance(bench::allclose(0.0, 4e-3));
}

BENCH_EXAMPLE(ch09, softmax, LongRows).with([](auto& e) { softmax_ladder(e); });
BENCH_EXAMPLE(ch09, softmax_short_rows, ShortRows).with([](auto& e) { softmax_ladder(e); });

}  // namespace

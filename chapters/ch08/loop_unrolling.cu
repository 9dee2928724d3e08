// ch08/loop_unrolling: a loop that folds every load into one accumulator waits for each load
// before it issues the next; unrolling with independent accumulators puts several in flight.
//
// The work: y = A^T x for a K x R row-major matrix A (K = 512 rows, R = 2^19 columns, 1 GiB),
// i.e. y[r] = sum_k A[k][r] x[k]. Thread r walks down column r; the 32 lanes of a warp read 32
// adjacent floats of a row, so every load is coalesced on both sides.
//
// What the hardware does: a warp issues in order. In the rolled loop (#pragma unroll 1, one
// accumulator) the FMA of iteration k needs A[k][r], so the warp stalls on that load (hundreds
// of ns from HBM) before it reaches iteration k+1's load: one load in flight per thread, and
// 2048 resident threads x 4 bytes = 8 KB per SM, short of what HBM needs to stream (see
// hbm_streaming for the Little's-law arithmetic): rolled, it leaves part of the read ceiling
// unused; unrolled, it reaches it (README). The arithmetic is not the limit: 2 flops per 4 bytes.
//
// What changes from baseline to optimized:
//   1. baseline: `for k: acc = fma(A[k][r], x[k], acc)` kept rolled (#pragma unroll 1: the loop
//      as written, and as it runs whenever the compiler declines to unroll). In program order
//      the FMA consuming load k comes before load k+1, so the in-order warp cannot reach the
//      next load until this one has returned;
//   2. optimized: 8 rows per step, the 8 loads issued back to back before any FMA uses them (8
//      LDG then 8 FFMA in SASS): 8 loads in flight per thread. The 8 accumulators are
//      independent so that the 8 FMAs do not form one dependent chain (4 cycles each) either;
//   3. the K % 8 leftover rows go to the accumulators in the same round-robin, and the 8 partial
//      sums are added in a tree at the end.
// Same loads, same 2 K R flops on both sides. The sums are associated differently, so the
// outputs differ by rounding (both checked against the double reference at FP32's tolerance).
//
//   ./bench compare --chapter ch08 --example loop_unrolling
#include <bench/bench.hpp>

namespace {

struct ColumnDot {  // y = A^T x
  int64_t k_rows, r_cols;
  bench::DeviceSpan<const float> a, x;
  bench::DeviceSpan<float> y;
  explicit ColumnDot(bench::Setup& s)
      : k_rows(s.size("k", 512, 37)),
        r_cols(s.size("r", int64_t{1} << 19, 1'001)),
        a(s.input<float>("a", k_rows * r_cols, bench::uniform(-1, 1))),
        x(s.input<float>("x", k_rows, bench::uniform(-1, 1))),
        y(s.output<float>("y", r_cols)) {
    // A and x read once, y written once: almost all reads, so held to the read ceiling.
    s.bytes(4.0 * (k_rows * r_cols + k_rows + r_cols), bench::ceiling::hbm_read);
    s.flops(2.0 * k_rows * r_cols);
  }
};

void reference(const ColumnDot& w, bench::HostData& h) {
  auto a = h.input<float>("a");
  auto x = h.input<float>("x");
  auto y = h.expected("y");
  for (int64_t r = 0; r < w.r_cols; ++r) y[r] = 0;
  for (int64_t k = 0; k < w.k_rows; ++k)
    for (int64_t r = 0; r < w.r_cols; ++r) y[r] += double{a[k * w.r_cols + r]} * x[k];
}

constexpr int kBlock = 256;
constexpr int kLanes = 8;  // independent accumulators = loads in flight per thread

__global__ void __launch_bounds__(kBlock) rolled(const float* __restrict__ a,
                                                 const float* __restrict__ x,
                                                 float* __restrict__ y, int k_rows, int64_t r_cols) {
  const int64_t r = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  if (r >= r_cols) return;
  float acc = 0.0f;
#pragma unroll 1
  for (int k = 0; k < k_rows; ++k) acc = fmaf(a[k * r_cols + r], x[k], acc);
  y[r] = acc;
}

__global__ void __launch_bounds__(kBlock) unrolled(const float* __restrict__ a,
                                                   const float* __restrict__ x,
                                                   float* __restrict__ y, int k_rows, int64_t r_cols) {
  const int64_t r = blockIdx.x * int64_t{kBlock} + threadIdx.x;
  if (r >= r_cols) return;
  float acc[kLanes] = {};  // static indices only (full unroll below): these stay in registers
  int k = 0;
  for (; k + kLanes <= k_rows; k += kLanes) {
    float v[kLanes];
#pragma unroll
    for (int j = 0; j < kLanes; ++j) v[j] = a[(k + j) * r_cols + r];  // all loads first
#pragma unroll
    for (int j = 0; j < kLanes; ++j) acc[j] = fmaf(v[j], x[k + j], acc[j]);
  }
#pragma unroll
  for (int j = 0; j < kLanes; ++j)  // the k_rows % kLanes leftover rows
    if (k + j < k_rows) acc[j] = fmaf(a[(k + j) * r_cols + r], x[k + j], acc[j]);
#pragma unroll
  for (int width = kLanes / 2; width > 0; width /= 2)
#pragma unroll
    for (int j = 0; j < width; ++j) acc[j] += acc[j + width];
  y[r] = acc[0];
}

template <auto kKernel>
void launch(const ColumnDot& w, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>((w.r_cols + kBlock - 1) / kBlock);
  kKernel<<<blocks, kBlock, 0, stream>>>(w.a.data(), w.x.data(), w.y.data(),
                                         static_cast<int>(w.k_rows), w.r_cols);
  BENCH_CHECK_LAUNCH();
}

// The timing-size check (docs/validity.md row 2): one thread per output column, one accumulator
// in double, sharing no code with the variants.
__global__ void reference_column_dot(const float* a, const float* x, float* y, int64_t k_rows, int64_t r_cols) {
  const int64_t r = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (r >= r_cols) return;
  double sum = 0;
  for (int64_t k = 0; k < k_rows; ++k) sum += double{a[k * r_cols + r]} * x[k];
  y[r] = float(sum);
}

void device_reference(const ColumnDot& w, cudaStream_t stream) {
  reference_column_dot<<<static_cast<unsigned>((w.r_cols + kBlock - 1) / kBlock), kBlock, 0, stream>>>(
      w.a.data(), w.x.data(), w.y.data(), w.k_rows, w.r_cols);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch08, loop_unrolling, ColumnDot)
    .baseline("rolled_1_accumulator", launch<rolled>)
    .optimized("unrolled_8_accumulators", launch<unrolled>)
    .reference(reference)
    .device_reference(device_reference);

}  // namespace

// ch08/hbm_streaming: to stream from HBM at full speed an SM must keep enough bytes in flight
// to cover the memory latency; 16-byte loads, several issued before the first is used, get
// there with any occupancy.
//
// Little's law: bytes in flight = bandwidth x latency. On the H100 (HBM3, ~3.0 TB/s copy,
// ~600-800 ns loaded DRAM latency) that is 3.0e12 B/s x ~700e-9 s ~= 2.1 MB across the GPU, so
// ~16 KB per SM (2.1 MB / 132 SMs), and more as queues fill under load.
//   - baseline: one 4-byte load in flight per thread; at full occupancy (2048 threads) that is
//     8 KB per SM, half that estimate. Measured, it gets well over half the bandwidth (README):
//     by Little's law the mean latency at that load is shorter than the 600-800 ns assumed
//     above, so the estimate overstates the bytes needed; 8 KB per SM still leaves HBM idle
//     part of the time;
//   - optimized: 4 float4 loads in flight per thread = 64 B; 256-thread blocks, 8 per SM:
//     128 KB per SM, ~8x the estimate: enough for the whole read ceiling.
//
// The work: the sum of each row of a rows x cols FP32 matrix (16384 x 16384, 1 GiB, read once;
// a reduction, so no stores to overlap with: the loads alone set the pace). One 256-thread
// block per row, the per-thread partial sums folded by kernels::group_reduce.
//
// What changes from baseline to optimized:
//   1. baseline: `for c: acc += row[c]`, strided by the block, kept rolled (#pragma unroll 1):
//      each add waits for its load before the next load issues;
//   2. optimized: float4 loads (LDG.E.128, with the streaming no-L1-allocate hint of
//      kernels/vector_access.cuh: each byte is read once), kInFlight = 4 of them issued before
//      the first is summed: 16x the bytes in flight per thread;
//   3. rows need not start on 16 bytes (odd cols): the first 0-3 elements up to the boundary
//      and the last 0-3 after the last whole float4 are summed as scalars.
// ch07/copy_vectorized and ch07/hbm_copy teach the 16-byte access itself (fewer instructions
// per byte); ch08/loop_unrolling the in-order issue that serialises a rolled loop. Here the
// figure to watch is bytes in flight. Target: >= 90% of the HBM read ceiling (a read-only
// stream runs a little faster than a copy, which turns the bus around for its writes: this
// kernel measured past the copy ceiling, so it is held to the read ceiling; the bytes declared
// are the matrix read once and the row sums written once).
//
//   ./bench compare --chapter ch08 --example hbm_streaming
#include <bench/bench.hpp>
#include <kernels/group_reduce.cuh>
#include <kernels/reference_rows.cuh>
#include <kernels/vector_access.cuh>

namespace {

struct RowSums {
  int64_t rows, cols;
  bench::DeviceSpan<const float> x;
  bench::DeviceSpan<float> y;
  explicit RowSums(bench::Setup& s)
      : rows(s.size("rows", 16'384, 37)),
        cols(s.size("cols", 16'384, 4'099)),  // odd: rows start off 16-byte boundaries
        x(s.input<float>("x", rows * cols, bench::uniform(-1, 1))),
        y(s.output<float>("y", rows)) {
    s.bytes(4.0 * (rows * cols + rows), bench::ceiling::hbm_read);  // x read once, one sum per row written
    s.flops(1.0 * rows * cols);           // one add per element
  }
};

void reference(const RowSums& w, bench::HostData& h) {
  auto x = h.input<float>("x");
  auto y = h.expected("y");
  for (int64_t r = 0; r < w.rows; ++r) {
    double sum = 0;
    for (int64_t c = 0; c < w.cols; ++c) sum += x[r * w.cols + c];
    y[r] = sum;
  }
}

constexpr int kBlock = 256;
constexpr int kInFlight = 4;  // float4 loads per thread issued before the first is used

__global__ void __launch_bounds__(kBlock) scalar_row_sums(const float* __restrict__ x,
                                                          float* __restrict__ y, int64_t cols) {
  const float* row = x + blockIdx.x * cols;
  float acc = 0.0f;
#pragma unroll 1
  for (int64_t c = threadIdx.x; c < cols; c += kBlock) acc += row[c];
  acc = kernels::group_reduce<kBlock>(acc, kernels::Sum{});
  if (threadIdx.x == 0) y[blockIdx.x] = acc;
}

__device__ __forceinline__ float horizontal_sum(float4 v) { return (v.x + v.y) + (v.z + v.w); }

__global__ void __launch_bounds__(kBlock) vector_row_sums(const float* __restrict__ x,
                                                          float* __restrict__ y, int64_t cols) {
  const int64_t start = blockIdx.x * cols;  // x itself is 256-byte aligned (cudaMalloc)
  const int64_t to_boundary = (4 - start % 4) % 4;  // scalars before the first 16-byte boundary
  const int64_t head = to_boundary < cols ? to_boundary : cols;
  const int64_t vectors = (cols - head) / 4;
  const int64_t tail = cols - head - 4 * vectors;  // scalars after the last whole float4
  const float* row = x + start;
  const auto* body = reinterpret_cast<const float4*>(row + head);

  float acc = 0.0f;
  int64_t i = threadIdx.x;
  for (; i + (kInFlight - 1) * kBlock < vectors; i += kInFlight * kBlock) {
    float4 v[kInFlight];
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) v[j] = kernels::load_stream(body + i + j * kBlock);
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) acc += horizontal_sum(v[j]);
  }
  for (; i < vectors; i += kBlock) acc += horizontal_sum(kernels::load_stream(body + i));
  if (threadIdx.x < head) acc += row[threadIdx.x];
  if (threadIdx.x < tail) acc += row[head + 4 * vectors + threadIdx.x];
  acc = kernels::group_reduce<kBlock>(acc, kernels::Sum{});
  if (threadIdx.x == 0) y[blockIdx.x] = acc;
}

template <auto kKernel>
void launch(const RowSums& w, cudaStream_t stream) {
  kKernel<<<static_cast<unsigned>(w.rows), kBlock, 0, stream>>>(w.x.data(), w.y.data(), w.cols);
  BENCH_CHECK_LAUNCH();
}

// The timing-size check (docs/validity.md row 2): one block per row, each thread summing a
// strided share of it in double (kernels/reference_rows.cuh), sharing no code with the variants.
__global__ void reference_row_sums(const float* x, float* y, int64_t cols) {
  double sum = 0;
  for (int64_t c = threadIdx.x; c < cols; c += kernels::kReferenceRowBlock) sum += x[blockIdx.x * cols + c];
  sum = kernels::reference_block_sum(sum);
  if (threadIdx.x == 0) y[blockIdx.x] = float(sum);
}

void device_reference(const RowSums& w, cudaStream_t stream) {
  reference_row_sums<<<static_cast<unsigned>(w.rows), kernels::kReferenceRowBlock, 0, stream>>>(w.x.data(), w.y.data(), w.cols);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch08, hbm_streaming, RowSums)
    .baseline("scalar_1_in_flight", launch<scalar_row_sums>)
    .optimized("float4_4_in_flight", launch<vector_row_sums>)
    .reference(reference)
    .device_reference(device_reference);

}  // namespace

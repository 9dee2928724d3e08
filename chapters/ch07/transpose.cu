// ch07/transpose: out = inᵀ for a rows x cols FP32 matrix, as a three-rung ladder.
//
//   1. naive: each thread reads in[r][c] and writes out[c][r]; reads are coalesced, but a warp's
//      writes land `rows` elements apart, one sector per element;
//   2. tiled: a block stages a 32x32 tile in shared memory, so both the global read and the
//      global write are row-wise and coalesced; the column read from shared memory, though,
//      sends all 32 lanes of a warp to the same bank (a 32-way conflict);
//   3. padded: one extra float per tile row shifts each row by one bank, so the column read
//      touches 32 different banks and shared memory runs at full speed.
// Target (CHAPTERS.md): padded at >= 85% of the optimized copy's bandwidth on the same bytes.
//
//   ./bench compare --chapter ch07 --example transpose
#include <bench/bench.hpp>

namespace {

struct Transpose {
  int64_t rows, cols;
  bench::DeviceSpan<const float> in;
  bench::DeviceSpan<float> out;
  explicit Transpose(bench::Setup& s)
      : rows(s.size("rows", 8192, 1000)),   // 256 MiB per matrix; odd, non-tile sizes to verify
        cols(s.size("cols", 8192, 1003)),
        in(s.input<float>("in", rows * cols, bench::uniform(-1, 1))),
        out(s.output<float>("out", rows * cols)) {
    s.bytes(2.0 * rows * cols * sizeof(float));
  }
};

constexpr int kTile = 32;     // tile edge
// A 32x4 block moves a 32x32 tile in eight passes: 8 loads in flight per thread. On the H200's
// faster HBM 32x8 blocks (4 in flight) left the padded rung short of the copy; 32x4 was the
// fastest of the block and tile shapes swept (README).
constexpr int kRowsPerPass = 4;

__global__ void naive_transpose(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  const int c = blockIdx.x * kTile + threadIdx.x;
  for (int r = blockIdx.y * kTile + threadIdx.y; r < min(rows, int(blockIdx.y + 1) * kTile); r += kRowsPerPass)
    if (c < cols) out[int64_t{c} * rows + r] = in[int64_t{r} * cols + c];
}

// Pad = 0 gives the bank-conflicted tile, Pad = 1 the conflict-free one.
template <int Pad>
__global__ void tiled_transpose(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ float tile[kTile][kTile + Pad];
  const int c = blockIdx.x * kTile + threadIdx.x;
  for (int dy = threadIdx.y; dy < kTile; dy += kRowsPerPass) {
    const int r = blockIdx.y * kTile + dy;
    if (r < rows && c < cols) tile[dy][threadIdx.x] = in[int64_t{r} * cols + c];
  }
  __syncthreads();
  // The block now writes the transposed tile: output row = input column.
  const int out_c = blockIdx.y * kTile + threadIdx.x;  // column of `out` = row of `in`
  for (int dy = threadIdx.y; dy < kTile; dy += kRowsPerPass) {
    const int out_r = blockIdx.x * kTile + dy;
    if (out_r < cols && out_c < rows) out[int64_t{out_r} * rows + out_c] = tile[threadIdx.x][dy];
  }
}

dim3 grid_of(const Transpose& w) {
  return dim3(static_cast<unsigned>((w.cols + kTile - 1) / kTile), static_cast<unsigned>((w.rows + kTile - 1) / kTile));
}
const dim3 kBlockShape(kTile, kRowsPerPass);

void launch_naive(const Transpose& w, cudaStream_t stream) {
  naive_transpose<<<grid_of(w), kBlockShape, 0, stream>>>(w.in.data(), w.out.data(), int(w.rows), int(w.cols));
  BENCH_CHECK_LAUNCH();
}

void launch_tiled(const Transpose& w, cudaStream_t stream) {
  tiled_transpose<0><<<grid_of(w), kBlockShape, 0, stream>>>(w.in.data(), w.out.data(), int(w.rows), int(w.cols));
  BENCH_CHECK_LAUNCH();
}

void launch_padded(const Transpose& w, cudaStream_t stream) {
  tiled_transpose<1><<<grid_of(w), kBlockShape, 0, stream>>>(w.in.data(), w.out.data(), int(w.rows), int(w.cols));
  BENCH_CHECK_LAUNCH();
}

void reference(const Transpose& w, bench::HostData& h) {
  auto in = h.input<float>("in");
  auto out = h.expected("out");
  for (int64_t r = 0; r < w.rows; ++r)
    for (int64_t c = 0; c < w.cols; ++c) out[c * w.rows + r] = in[r * w.cols + c];
}

// The timing-size check (docs/validity.md row 2): one thread per element, the plainest form,
// sharing no code with the variants.
__global__ void reference_transpose(const float* in, float* out, int64_t rows, int64_t cols) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < rows * cols) out[(i % cols) * rows + i / cols] = in[i];
}

void device_reference(const Transpose& w, cudaStream_t stream) {
  constexpr int kBlock = 256;
  reference_transpose<<<static_cast<unsigned>((w.rows * w.cols + kBlock - 1) / kBlock), kBlock, 0, stream>>>(
      w.in.data(), w.out.data(), w.rows, w.cols);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch07, transpose, Transpose)
    .baseline("naive", launch_naive)
    .step("tiled", launch_tiled)
    .optimized("padded", launch_padded)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::exact());

}  // namespace

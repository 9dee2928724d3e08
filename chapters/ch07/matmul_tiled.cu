// ch07/matmul_tiled: C = A B in FP32 on the SIMT cores, each operand fetched from device memory
// per use or once per tile.
//
// What changes from baseline to optimized:
//   1. baseline: one thread per C element walks row i of A and column j of B in global memory:
//      2K loads per 2K flops, each A and B element fetched N and M times over (L1/L2 catch
//      some of it, but the load pipe and the caches, not the FMA units, set the pace);
//   2. optimized: a 32x32 block walks K in 32-wide steps; each step the block copies a 32x32
//      tile of A and of B into shared memory once (coalesced, zero-filled past the edges) and
//      every thread reads its row and column from there: global traffic falls 32-fold, and the
//      inner loop reads a broadcast A value and a conflict-free B row from shared memory;
//   3. register blocking (several C elements per thread) is ch09's micro_tiling_matmul.
// Same products, same summation order along K, so both give the same FP32 rounding pattern.
// The timing-size check uses a separate simple kernel that accumulates in double
// (device_reference): the CPU reference would take minutes at 4096^3.
//
//   ./bench compare --chapter ch07 --example matmul_tiled
#include <bench/bench.hpp>

namespace {

struct Matmul {
  int64_t m, n, k;
  bench::DeviceSpan<const float> a;  // m x k, row-major
  bench::DeviceSpan<const float> b;  // k x n, row-major
  bench::DeviceSpan<float> c;        // m x n, row-major
  explicit Matmul(bench::Setup& s)
      : m(s.size("m", 4096, 100)),  // odd, non-tile verification sizes
        n(s.size("n", 4096, 131)),
        k(s.size("k", 4096, 77)),
        a(s.input<float>("a", m * k, bench::uniform(-1, 1))),
        b(s.input<float>("b", k * n, bench::uniform(-1, 1))),
        c(s.output<float>("c", m * n)) {
    s.flops(2.0 * m * n * k, bench::ceiling::fp32);
    s.bytes(double(a.bytes() + b.bytes() + c.bytes()));  // fewest bytes: A, B read; C written
  }
};

constexpr int kTile = 32;

__global__ void naive_matmul(const float* __restrict__ a, const float* __restrict__ b,
                             float* __restrict__ c, int m, int n, int k) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  float acc = 0.0f;
  for (int p = 0; p < k; ++p) acc += a[int64_t{row} * k + p] * b[int64_t{p} * n + col];
  c[int64_t{row} * n + col] = acc;
}

__global__ void __launch_bounds__(kTile * kTile) tiled_matmul(const float* __restrict__ a,
                                                               const float* __restrict__ b,
                                                               float* __restrict__ c, int m, int n,
                                                               int k) {
  __shared__ float as[kTile][kTile];  // as[ty][p]: a warp (fixed ty) reads one broadcast word
  __shared__ float bs[kTile][kTile];  // bs[p][tx]: a warp reads 32 consecutive words
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int row = blockIdx.y * kTile + ty;
  const int col = blockIdx.x * kTile + tx;
  float acc = 0.0f;
  for (int p0 = 0; p0 < k; p0 += kTile) {
    as[ty][tx] = (row < m && p0 + tx < k) ? a[int64_t{row} * k + p0 + tx] : 0.0f;
    bs[ty][tx] = (p0 + ty < k && col < n) ? b[int64_t{p0 + ty} * n + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int p = 0; p < kTile; ++p) acc += as[ty][p] * bs[p][tx];
    __syncthreads();
  }
  if (row < m && col < n) c[int64_t{row} * n + col] = acc;
}

// The trusted check at the timing size: the plainest loop, accumulated in double.
__global__ void reference_matmul(const float* __restrict__ a, const float* __restrict__ b,
                                 float* __restrict__ c, int m, int n, int k) {
  const int col = blockIdx.x * blockDim.x + threadIdx.x;
  const int row = blockIdx.y * blockDim.y + threadIdx.y;
  if (row >= m || col >= n) return;
  double acc = 0.0;
  for (int p = 0; p < k; ++p) acc += double(a[int64_t{row} * k + p]) * double(b[int64_t{p} * n + col]);
  c[int64_t{row} * n + col] = static_cast<float>(acc);
}

dim3 grid_of(const Matmul& w) {
  return dim3(static_cast<unsigned>((w.n + kTile - 1) / kTile), static_cast<unsigned>((w.m + kTile - 1) / kTile));
}

void launch_naive(const Matmul& w, cudaStream_t stream) {
  naive_matmul<<<grid_of(w), dim3(kTile, kTile), 0, stream>>>(w.a.data(), w.b.data(), w.c.data(), int(w.m), int(w.n), int(w.k));
  BENCH_CHECK_LAUNCH();
}

void launch_tiled(const Matmul& w, cudaStream_t stream) {
  tiled_matmul<<<grid_of(w), dim3(kTile, kTile), 0, stream>>>(w.a.data(), w.b.data(), w.c.data(), int(w.m), int(w.n), int(w.k));
  BENCH_CHECK_LAUNCH();
}

void launch_reference(const Matmul& w, cudaStream_t stream) {
  reference_matmul<<<grid_of(w), dim3(kTile, kTile), 0, stream>>>(w.a.data(), w.b.data(), w.c.data(), int(w.m), int(w.n), int(w.k));
  BENCH_CHECK_LAUNCH();
}

void reference(const Matmul& w, bench::HostData& h) {
  auto a = h.input<float>("a");
  auto b = h.input<float>("b");
  auto c = h.expected("c");
  for (int64_t i = 0; i < w.m; ++i)
    for (int64_t j = 0; j < w.n; ++j) {
      double acc = 0.0;
      for (int64_t p = 0; p < w.k; ++p) acc += double(a[i * w.k + p]) * double(b[p * w.n + j]);
      c[i * w.n + j] = acc;
    }
}

// Default FP32 tolerance (rel-L2 1e-5): FP32 sums of K = 4096 products of U(-1,1) values drift
// from the double result by about sqrt(K) * 2^-24 ~ 4e-6 relative at worst, typically far less.
BENCH_EXAMPLE(ch07, matmul_tiled, Matmul)
    .baseline("naive", launch_naive)
    .optimized("smem_tiled", launch_tiled)
    .reference(reference)
    .device_reference(launch_reference);

}  // namespace

// ch09/micro_tiling_matmul: FP32 SIMT matmul, shared-memory tiles → register-blocked micro-tiles.
//
// D (m x n, column-major) = A (m x k, row-major) x B (k x n, column-major), 4096^3 FP32: the TN
// layout, both operands k-contiguous, as the rest of the chapter. Roofline: 2mnk flops over
// 4(mk + nk + mn) bytes = 683 flop/byte at 4096^3: far right of the ridge; the limit is how many
// FFMA the SMs issue per byte they read from *shared memory*, not HBM.
//
// What changes from baseline to optimized:
//   1. baseline: 32 x 32 tiles in shared memory, one output per thread: every FFMA needs two
//      shared-memory loads (one broadcast, one per-lane), so the LSU pipe, at half the FMA rate,
//      caps the kernel near a quarter of FP32 peak;
//   2. optimized: a 128 x 128 block tile, k-steps of 8, 256 threads each holding an 8 x 8
//      micro-tile of D in 64 registers: per k a thread loads 8 A and 8 B values as four 16-byte
//      shared loads (LDS.128) and does 64 FFMA: 16x more math per shared byte;
//   3. A and B tiles are stored k-major in shared memory (transposed on the way in), so a
//      thread's 4 consecutive rows or columns are one float4; the micro-tile is split 2 x 2 in
//      4 x 4 pieces 64 apart, so a warp's float4 loads are broadcasts or conflict-free;
//   4. the next k-step's tile is fetched into registers while this one is computed (two shared
//      buffers, one barrier per step).
// Both accumulate along k in order in FP32; checked against a double CPU reference at an odd
// 100 x 131 x 77 (edges zero-filled) and against kernels/reference_gemm.cuh at 4096^3.
//
//   ./bench compare --chapter ch09 --example micro_tiling_matmul
#include <bench/bench.hpp>
#include <kernels/reference_gemm.cuh>

namespace {

struct Matmul {
  int64_t m, n, k;
  bench::DeviceSpan<const float> a, b;  // a: m x k row-major; b: k x n column-major
  bench::DeviceSpan<float> d;           // m x n column-major
  explicit Matmul(bench::Setup& s)
      : m(s.size("m", 4096, 100)),
        n(s.size("n", 4096, 131)),
        k(s.size("k", 4096, 77)),
        a(s.input<float>("a", m * k, bench::uniform(-1, 1))),
        b(s.input<float>("b", n * k, bench::uniform(-1, 1))),
        d(s.output<float>("d", m * n)) {
    s.flops(2.0 * m * n * k, bench::ceiling::fp32);
  }
};

// --- baseline: 32 x 32 shared tiles, one output per thread ------------------------------------
constexpr int kTile = 32;

__global__ void __launch_bounds__(kTile * kTile) tiled(const float* __restrict__ a, const float* __restrict__ b,
                                                      float* __restrict__ d, int m, int n, int k) {
  __shared__ float as[kTile][kTile + 1], bs[kTile][kTile + 1];  // [row or column][p], padded
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row0 = blockIdx.x * kTile, col0 = blockIdx.y * kTile;
  float acc = 0.0f;
  for (int p0 = 0; p0 < k; p0 += kTile) {
    as[ty][tx] = row0 + ty < m && p0 + tx < k ? a[(row0 + ty) * k + p0 + tx] : 0.0f;
    bs[ty][tx] = col0 + ty < n && p0 + tx < k ? b[(col0 + ty) * k + p0 + tx] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kTile; ++q) acc += as[tx][q] * bs[ty][q];
    __syncthreads();
  }
  if (row0 + tx < m && col0 + ty < n) d[(col0 + ty) * m + row0 + tx] = acc;
}

// --- optimized: 128 x 128 block tile, 8 x 8 per thread ------------------------------------------
constexpr int kBM = 128, kBN = 128, kBK = 8, kThreads = 256;

// Thread t fetches 4 consecutive k of row (or column) t / 2 of a 128 x 8 tile, zero past edges.
__device__ __forceinline__ void fetch(const float* __restrict__ src, int64_t rows, int k, int64_t row0, int p0,
                                      float (&r)[4]) {
  const int64_t row = row0 + threadIdx.x / 2;
  const int p = p0 + (threadIdx.x % 2) * 4;
#pragma unroll
  for (int q = 0; q < 4; ++q) r[q] = row < rows && p + q < k ? src[row * k + p + q] : 0.0f;
}
// ... and stores them k-major: tile[p][row].
__device__ __forceinline__ void stash(float (*tile)[kBM], const float (&r)[4]) {
#pragma unroll
  for (int q = 0; q < 4; ++q) tile[(threadIdx.x % 2) * 4 + q][threadIdx.x / 2] = r[q];
}

__global__ void __launch_bounds__(kThreads) micro_tiled(const float* __restrict__ a, const float* __restrict__ b,
                                                        float* __restrict__ d, int m, int n, int k) {
  __shared__ __align__(16) float as[2][kBK][kBM], bs[2][kBK][kBN];
  const int64_t row0 = blockIdx.x * int64_t{kBM}, col0 = blockIdx.y * int64_t{kBN};
  const int tr = (threadIdx.x % 16) * 4, tc = (threadIdx.x / 16) * 4;  // micro-tile origin
  float acc[8][8] = {};
  float ra[4], rb[4];
  fetch(a, m, k, row0, 0, ra);
  fetch(b, n, k, col0, 0, rb);
  stash(as[0], ra);
  stash(bs[0], rb);
  __syncthreads();
  int buf = 0;
  for (int p0 = 0; p0 < k; p0 += kBK) {
    const bool more = p0 + kBK < k;
    if (more) {  // next tile into registers while this one is used
      fetch(a, m, k, row0, p0 + kBK, ra);
      fetch(b, n, k, col0, p0 + kBK, rb);
    }
#pragma unroll
    for (int p = 0; p < kBK; ++p) {
      float x[8], y[8];
      *reinterpret_cast<float4*>(x) = *reinterpret_cast<const float4*>(&as[buf][p][tr]);
      *reinterpret_cast<float4*>(x + 4) = *reinterpret_cast<const float4*>(&as[buf][p][tr + 64]);
      *reinterpret_cast<float4*>(y) = *reinterpret_cast<const float4*>(&bs[buf][p][tc]);
      *reinterpret_cast<float4*>(y + 4) = *reinterpret_cast<const float4*>(&bs[buf][p][tc + 64]);
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(x[i], y[j], acc[i][j]);
    }
    if (more) {
      stash(as[buf ^ 1], ra);
      stash(bs[buf ^ 1], rb);
    }
    __syncthreads();
    buf ^= 1;
  }
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int64_t col = col0 + tc + (j % 4) + (j / 4) * 64;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int64_t row = row0 + tr + (i % 4) + (i / 4) * 64;
      if (row < m && col < n) d[col * m + row] = acc[i][j];
    }
  }
}

void launch_tiled(const Matmul& w, cudaStream_t stream) {
  const dim3 grid(unsigned((w.m + kTile - 1) / kTile), unsigned((w.n + kTile - 1) / kTile));
  tiled<<<grid, dim3(kTile, kTile), 0, stream>>>(w.a.data(), w.b.data(), w.d.data(), int(w.m), int(w.n), int(w.k));
  BENCH_CHECK_LAUNCH();
}

void launch_micro_tiled(const Matmul& w, cudaStream_t stream) {
  const dim3 grid(unsigned((w.m + kBM - 1) / kBM), unsigned((w.n + kBN - 1) / kBN));
  micro_tiled<<<grid, kThreads, 0, stream>>>(w.a.data(), w.b.data(), w.d.data(), int(w.m), int(w.n), int(w.k));
  BENCH_CHECK_LAUNCH();
}

void device_reference(const Matmul& w, cudaStream_t stream) {
  kernels::reference_gemm_tn(w.a.data(), w.b.data(), w.d.data(), w.m, w.n, w.k, stream);
}

void reference(const Matmul& w, bench::HostData& h) {
  auto a = h.input<float>("a");
  auto b = h.input<float>("b");
  auto d = h.expected("d");
  for (int64_t j = 0; j < w.n; ++j)
    for (int64_t i = 0; i < w.m; ++i) {
      double sum = 0;
      for (int64_t p = 0; p < w.k; ++p) sum += double(a[i * w.k + p]) * b[j * w.k + p];
      d[j * w.m + i] = sum;
    }
}

BENCH_EXAMPLE(ch09, micro_tiling_matmul, Matmul)
    .baseline("smem_tiled_32", launch_tiled)
    .optimized("register_micro_tile_8x8", launch_micro_tiled)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(1e-5));  // FP32 products and sums, order differs from the reference's

}  // namespace

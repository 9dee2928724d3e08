// ch07/tma_copy: a 2D stencil, out[y][x] = sum over a (2R+1)^2 window of w[dy][dx] in[y+dy-R][x+dx-R]
// (zero outside the image), over a 16384 x 16384 FP32 image. Each block computes 128-wide tiles of
// outputs from a box of input staged in shared memory: the tile plus its halo, so boxes overlap
// their neighbours and start at negative coordinates along the top and left edges, and the parts
// outside the image must read as zeros. Every rung runs the same compute function on the same box
// layout; only how the box gets into shared memory changes.
//
// What changes along the ladder:
//   1. baseline: one block per tile; its threads load the box global -> registers -> shared
//      (bounds check per piece, zero fill), __syncthreads, compute, store. No load is in flight
//      while a block computes, and a block computes nothing while it waits for its box.
//   2. step cp_async: persistent blocks with a kStages-deep ring of boxes filled by cp.async
//      (LDGSTS): the next boxes load while this one is computed. The threads still generate
//      every 16-byte piece's address and bounds check.
//   3. optimized: the same ring filled by the copy engine: one thread issues one
//      cp.async.bulk.tensor.2d per box (UTMALDG) at the box's signed start coordinate and arms an
//      mbarrier with the box's byte count (expect_tx); the engine generates the addresses and
//      zero-fills what lies outside the image; the other threads just wait on the barrier.
// Same FP32 operations in the same order in every rung: bitwise-identical outputs, so the FP32
// default tolerance against the double reference (rel-L2 1e-5) is the only rounding allowed; the
// timing-size check uses a double-accumulating kernel (device_reference). The configuration below
// (radius, tile height, stages) is the one an H100 sweep of seven chose: the README has it.
//
//   ./bench compare --chapter ch07 --example tma_copy
#include <bench/bench.hpp>
#include <kernels/async_copy.cuh>
#include <kernels/occupancy.cuh>
#include <kernels/tma.cuh>

#include <algorithm>
#include <string>

namespace {

// Configuration.
constexpr int kR = 4;                      // stencil radius: (2R+1)^2 taps
constexpr int kTileW = 128;                // outputs per tile row: 32 lanes x 4 columns
constexpr int kRowsPerThread = 8;          // each thread computes an 8 x 4 block of outputs
constexpr int kSyncH = 32;                 // baseline tile height (output rows)
constexpr int kCpH = 32, kCpStages = 4;    // cp.async ring: tile height, boxes in the ring
constexpr int kTmaH = 32, kTmaStages = 4;  // TMA ring

// A fixed, non-separable filter with weights k / 256 (exact in FP32): FFMA immediates in SASS.
__host__ __device__ constexpr float weight(int dy, int dx) {
  const int ax = dx < kR ? kR - dx : dx - kR, ay = dy < kR ? kR - dy : dy - kR;
  return float((kR + 1 - ax) * (kR + 1 - ay) + (dx * dx + 3 * dy * dy) % 5) / 256.0f;
}

struct Stencil {
  int64_t rows, cols;
  bench::DeviceSpan<const float> in;
  bench::DeviceSpan<float> out;
  explicit Stencil(bench::Setup& s)
      : rows(s.size("rows", 16384, 1001)),  // 1 GiB in, 1 GiB out; odd rows to verify
        cols(s.size("cols", 16384, 1036)),  // not a multiple of 128; cols * 4 bytes a multiple of 16 (TMA)
        in(s.input<float>("in", rows * cols, bench::uniform(-1, 1))),
        out(s.output<float>("out", rows * cols)) {
    s.bytes(2.0 * rows * cols * sizeof(float), bench::ceiling::hbm_copy);
    s.flops(2.0 * (2 * kR + 1) * (2 * kR + 1) * rows * cols, bench::ceiling::fp32);
  }
};

// The box a tile of H output rows needs: R halo rows above and below; on the sides the halo is
// widened to kHalo = R rounded up to 4 floats, so that every box row starts on a 16-byte boundary
// (x0 - kHalo). The copy engine requires that of the box's inner start coordinate: at x0 - 2 the
// H100 faults with cudaErrorIllegalInstruction. Manual staging then copies 16-byte pieces too.
constexpr int kHalo = (kR + 3) / 4 * 4, kShift = kHalo - kR;  // box column of the window's left edge
template <int H>
struct Box {
  static constexpr int kW = kTileW + 2 * kHalo, kH = H + 2 * kR, kFloats = kW * kH;
  static constexpr int kThreads = 32 * (H / kRowsPerThread);  // one warp per 8 output rows
  static constexpr int kPiecesPerRow = kW / 4, kPieces = kH * kPiecesPerRow;  // 16-byte pieces
  static_assert(kR % 2 == 0 && H % kRowsPerThread == 0 && kW <= 256 && kH <= 256, "TMA box limits");
};
template <int H>
constexpr int kStageFloats = (Box<H>::kFloats + 31) / 32 * 32;  // ring stages stay 128-byte aligned

// Computes the tile at (x0, y0) from its box (box[0] = in[y0 - R][x0 - kHalo]) and stores it.
template <int H>
__device__ __forceinline__ void stencil_tile(const float* box, float* __restrict__ out, int rows, int cols, int x0, int y0) {
  constexpr int kWin = 4 + 2 * kR, kIn = kRowsPerThread + 2 * kR;
  const int lane = threadIdx.x % 32, band = threadIdx.x / 32;
  const float* s = box + band * kRowsPerThread * Box<H>::kW + kShift + 4 * lane;
  float acc[kRowsPerThread][4] = {};
#pragma unroll
  for (int j = 0; j < kIn; ++j) {  // input row j feeds output rows j - 2R .. j
    float v[kWin];  // 16-byte shared loads when the window is aligned (R % 4 == 0), else 8-byte
    if constexpr (kShift % 4 == 0) {
#pragma unroll
      for (int q = 0; q < kWin / 4; ++q) {
        const float4 t = reinterpret_cast<const float4*>(s + j * Box<H>::kW)[q];
        v[4 * q] = t.x, v[4 * q + 1] = t.y, v[4 * q + 2] = t.z, v[4 * q + 3] = t.w;
      }
    } else {
#pragma unroll
      for (int q = 0; q < kWin / 2; ++q) {
        const float2 t = reinterpret_cast<const float2*>(s + j * Box<H>::kW)[q];
        v[2 * q] = t.x, v[2 * q + 1] = t.y;
      }
    }
#pragma unroll
    for (int dy = 0; dy <= 2 * kR; ++dy) {
      const int y = j - dy;
      if (y < 0 || y >= kRowsPerThread) continue;
#pragma unroll
      for (int dx = 0; dx <= 2 * kR; ++dx)
#pragma unroll
        for (int k = 0; k < 4; ++k) acc[y][k] = fmaf(weight(dy, dx), v[k + dx], acc[y][k]);
    }
  }
  const int x = x0 + 4 * lane;
  if (x >= cols) return;
#pragma unroll
  for (int y = 0; y < kRowsPerThread; ++y) {
    const int gy = y0 + band * kRowsPerThread + y;
    if (gy < rows) *reinterpret_cast<float4*>(out + int64_t{gy} * cols + x) = make_float4(acc[y][0], acc[y][1], acc[y][2], acc[y][3]);
  }
}

// Manual staging: where piece p of the box comes from, where it goes, whether it is in the image.
template <int H>
struct PieceAt {
  int64_t src;
  int dst;
  bool inside;
  __device__ PieceAt(int p, int rows, int cols, int x0, int y0) {
    const int r = p / Box<H>::kPiecesPerRow, c = p % Box<H>::kPiecesPerRow;
    const int gy = y0 - kR + r, gx = x0 - kHalo + 4 * c;
    inside = gy >= 0 && gy < rows && gx >= 0 && gx < cols;  // cols % 4 == 0: all in or all out
    src = int64_t{gy} * cols + gx;
    dst = r * Box<H>::kW + 4 * c;
  }
};

template <int H>
__global__ void __launch_bounds__(Box<H>::kThreads) stencil_sync(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  __shared__ __align__(16) float box[Box<H>::kFloats];
  const int x0 = blockIdx.x * kTileW, y0 = blockIdx.y * H;
  for (int p = threadIdx.x; p < Box<H>::kPieces; p += Box<H>::kThreads) {
    const PieceAt<H> at(p, rows, cols, x0, y0);
    *reinterpret_cast<float4*>(box + at.dst) = at.inside ? __ldg(reinterpret_cast<const float4*>(in + at.src)) : float4{};
  }
  __syncthreads();
  stencil_tile<H>(box, out, rows, cols, x0, y0);
}

// Persistent blocks walk tiles blockIdx.x, blockIdx.x + gridDim.x, ... in row-major order.
struct Walk {
  int tiles_x, tiles, mine;
  __device__ Walk(int tx, int t) : tiles_x(tx), tiles(t), mine((t - int(blockIdx.x) + int(gridDim.x) - 1) / int(gridDim.x)) {}
  __device__ int x(int k) const { return (int(blockIdx.x) + k * int(gridDim.x)) % tiles_x * kTileW; }
  __device__ int y(int k, int h) const { return (int(blockIdx.x) + k * int(gridDim.x)) / tiles_x * h; }
};

template <int H>
__device__ __forceinline__ void prefetch_box(float* box, const float* in, int rows, int cols, int x0, int y0) {
  for (int p = threadIdx.x; p < Box<H>::kPieces; p += Box<H>::kThreads) {
    const PieceAt<H> at(p, rows, cols, x0, y0);
    kernels::cp_async::copy16(box + at.dst, at.inside ? in + at.src : in, at.inside ? 16 : 0);  // 0 bytes: zero fill
  }
}

template <int H, int S>
__global__ void __launch_bounds__(Box<H>::kThreads) stencil_cp_async(const float* __restrict__ in, float* __restrict__ out, int rows, int cols, int tiles_x, int tiles) {
  extern __shared__ __align__(128) float ring[];  // S boxes
  const Walk t(tiles_x, tiles);
  for (int k = 0; k < S - 1; ++k) {  // prologue: S - 1 boxes in flight
    if (k < t.mine) prefetch_box<H>(ring + k * kStageFloats<H>, in, rows, cols, t.x(k), t.y(k, H));
    kernels::cp_async::commit();
  }
  for (int k = 0; k < t.mine; ++k) {
    kernels::cp_async::wait<S - 2>();  // box k has landed (this thread's pieces) ...
    __syncthreads();                    // ... every thread's; box k - 1 is consumed
    const int next = k + S - 1;
    if (next < t.mine) prefetch_box<H>(ring + next % S * kStageFloats<H>, in, rows, cols, t.x(next), t.y(next, H));
    kernels::cp_async::commit();
    stencil_tile<H>(ring + k % S * kStageFloats<H>, out, rows, cols, t.x(k), t.y(k, H));
  }
}

template <int H, int S>
__global__ void __launch_bounds__(Box<H>::kThreads) stencil_tma(const __grid_constant__ CUtensorMap map, float* __restrict__ out, int rows, int cols, int tiles_x, int tiles) {
  namespace tma = kernels::tma;
  extern __shared__ __align__(128) unsigned char smem[];
  auto* ring = reinterpret_cast<float*>(smem);  // S boxes, then S barriers
  auto* full = reinterpret_cast<uint64_t*>(smem + S * kStageFloats<H> * sizeof(float));
  const Walk t(tiles_x, tiles);
  auto issue = [&](int k) {  // one instruction moves the whole box, halo and zero fill included
    tma::arrive_expect_tx(&full[k % S], Box<H>::kFloats * sizeof(float));
    tma::load_2d(ring + k % S * kStageFloats<H>, &map, t.x(k) - kHalo, t.y(k, H) - kR, &full[k % S]);
  };
  if (threadIdx.x == 0) {
    for (int st = 0; st < S; ++st) tma::mbarrier_init(&full[st], 1);
    tma::fence_barrier_init();
    for (int k = 0; k < min(S, t.mine); ++k) issue(k);
  }
  __syncthreads();
  for (int k = 0; k < t.mine; ++k) {
    tma::wait_parity(&full[k % S], (k / S) & 1);  // box k has landed
    stencil_tile<H>(ring + k % S * kStageFloats<H>, out, rows, cols, t.x(k), t.y(k, H));
    __syncthreads();  // every thread is done with stage k % S: refill it
    if (threadIdx.x == 0 && k + S < t.mine) issue(k + S);
  }
}

void launch_sync(const Stencil& w, cudaStream_t stream) {
  const dim3 grid(unsigned((w.cols + kTileW - 1) / kTileW), unsigned((w.rows + kSyncH - 1) / kSyncH));
  stencil_sync<kSyncH><<<grid, Box<kSyncH>::kThreads, 0, stream>>>(w.in.data(), w.out.data(), int(w.rows), int(w.cols));
  BENCH_CHECK_LAUNCH();
}

// Untimed setup of a ring: the tensor map (TMA), the shared-memory opt-in, the persistent grid.
template <int H, int S, bool kTma>
struct Ring {
  static constexpr size_t kSmem = S * kStageFloats<H> * sizeof(float) + (kTma ? S * sizeof(uint64_t) : 0);
  CUtensorMap map{};
  int tiles_x, tiles;
  unsigned grid;
  Ring(const Stencil& w, cudaStream_t) : tiles_x(int((w.cols + kTileW - 1) / kTileW)), tiles(tiles_x * int((w.rows + H - 1) / H)) {
    if constexpr (kTma) map = kernels::tma::make_map_2d_f32(w.in.data(), w.rows, w.cols, Box<H>::kH, Box<H>::kW);
    const void* kernel = kTma ? reinterpret_cast<const void*>(stencil_tma<H, S>) : reinterpret_cast<const void*>(stencil_cp_async<H, S>);
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmem)));
    grid = std::min<unsigned>(tiles, kernels::resident_grid(kernel, Box<H>::kThreads, kSmem));
  }
  void operator()(const Stencil& w, cudaStream_t stream) const {
    if constexpr (kTma)
      stencil_tma<H, S><<<grid, Box<H>::kThreads, kSmem, stream>>>(map, w.out.data(), int(w.rows), int(w.cols), tiles_x, tiles);
    else
      stencil_cp_async<H, S><<<grid, Box<H>::kThreads, kSmem, stream>>>(w.in.data(), w.out.data(), int(w.rows), int(w.cols), tiles_x, tiles);
    BENCH_CHECK_LAUNCH();
  }
};

// out[y][x] in double, for the image `in` (host or device code).
__host__ __device__ inline double stencil_at(const float* in, int64_t rows, int64_t cols, int64_t y, int64_t x) {
  double acc = 0.0;
  for (int dy = 0; dy <= 2 * kR; ++dy)
    for (int dx = 0; dx <= 2 * kR; ++dx) {
      const int64_t gy = y + dy - kR, gx = x + dx - kR;
      if (gy >= 0 && gy < rows && gx >= 0 && gx < cols) acc += double(weight(dy, dx)) * in[gy * cols + gx];
    }
  return acc;
}

__global__ void stencil_reference(const float* __restrict__ in, float* __restrict__ out, int64_t rows, int64_t cols) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < rows * cols) out[i] = float(stencil_at(in, rows, cols, i / cols, i % cols));
}

void launch_reference(const Stencil& w, cudaStream_t stream) {
  stencil_reference<<<unsigned((w.rows * w.cols + 255) / 256), 256, 0, stream>>>(w.in.data(), w.out.data(), w.rows, w.cols);
  BENCH_CHECK_LAUNCH();
}

void reference(const Stencil& w, bench::HostData& h) {
  auto in = h.input<float>("in");
  auto out = h.expected("out");
  for (int64_t y = 0; y < w.rows; ++y)
    for (int64_t x = 0; x < w.cols; ++x) out[y * w.cols + x] = stencil_at(in.data(), w.rows, w.cols, y, x);
}

BENCH_EXAMPLE(ch07, tma_copy, Stencil)
    .baseline("sync_staging", launch_sync)
    .stateful<Ring<kCpH, kCpStages, false>>(bench::Role::step, "cp_async_ring")
    .stateful<Ring<kTmaH, kTmaStages, true>>(bench::Role::optimized, "tma_ring", {.min_compute_capability = 90})
    .reference(reference)
    .device_reference(launch_reference)
    .requires_that([](const Stencil& w) -> std::string {
      return w.cols % 4 == 0 ? "" : "cols must be a multiple of 4 (16-byte rows: TMA strides, float4 stores)";
    });

}  // namespace

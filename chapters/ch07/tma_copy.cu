// ch07/tma_copy: a tiled transform out = 1.5 in + 0.25 over a rows x cols FP32 matrix, each
// 32 x 128 tile staged in shared memory by the threads or by the Hopper copy engine (TMA).
//
// What changes along the ladder:
//   1. baseline: the chapter's manual staging: every thread loads 4-byte elements global ->
//      registers -> shared, __syncthreads, then reads shared, applies the op and stores to
//      global; one block per tile, bounds checked per element;
//   2. step vec4_staging: the same with 16-byte accesses (what copy_vectorized teaches);
//   3. optimized: one thread hands the copy engine a tensor map and a tile coordinate
//      (cp.async.bulk.tensor.2d, UTMALDG in SASS): it moves the 16 KB box into shared memory
//      and signals an mbarrier with the byte count (expect_tx); the threads only apply the op in
//      shared memory; one thread then stores the box back (cp.async.bulk.tensor shared ->
//      global, UTMASTG). Blocks are persistent and keep kStages tiles in flight. The engine does
//      the address arithmetic and the edges (zero fill on load, clipping on store), so the
//      threads issue no load/store instruction per element and memory never waits for them.
// Measured on the H100: no gain. The manual kernels already run at 99% of cudaMemcpy's bandwidth
// (this transform is a pure stream), and the TMA version lands at ~96% for every depth and box
// tried (2-8 stages, 16-64 rows): what TMA saves is thread instructions and registers, which a
// streaming kernel has to spare. The README says where that pays (ch10's pipelines).
// Same op on the same elements: identical results. TMA needs cols * 4 bytes to be a multiple
// of 16, so the verification size is 1001 x 1036 (odd rows, columns not a multiple of 128).
//
//   ./bench compare --chapter ch07 --example tma_copy
#include <bench/bench.hpp>
#include <kernels/occupancy.cuh>
#include <kernels/tma.cuh>

#include <algorithm>

namespace {

struct Transform {
  int64_t rows, cols;
  bench::DeviceSpan<const float> in;
  bench::DeviceSpan<float> out;
  explicit Transform(bench::Setup& s)
      : rows(s.size("rows", 16384, 1001)),  // 1 GiB per matrix
        cols(s.size("cols", 16384, 1036)),
        in(s.input<float>("in", rows * cols, bench::uniform(-1, 1))),
        out(s.output<float>("out", rows * cols)) {
    s.bytes(2.0 * rows * cols * sizeof(float));
  }
};

constexpr int kBoxRows = 32, kBoxCols = 128;                      // one tile: 16 KB
constexpr int kTileFloats = kBoxRows * kBoxCols;
constexpr int kBlock = 256;                                       // manual staging
constexpr int kTmaBlock = 128;                                    // TMA: threads only do the op
constexpr int kStages = 4;                                        // tiles in flight per block
constexpr size_t kTmaSmem = kStages * kTileFloats * sizeof(float) + kStages * sizeof(uint64_t);

__device__ __forceinline__ float op(float x) { return fmaf(x, 1.5f, 0.25f); }
__device__ __forceinline__ float4 op(float4 v) { return make_float4(op(v.x), op(v.y), op(v.z), op(v.w)); }

// T = float (baseline) or float4 (step). cols must be a multiple of 4 when T = float4.
template <class T>
__global__ void __launch_bounds__(kBlock) manual_staging(const float* __restrict__ in, float* __restrict__ out, int rows, int cols) {
  constexpr int kV = sizeof(T) / sizeof(float);
  constexpr int kRowT = kBoxCols / kV;         // tile row in units of T
  constexpr int kRowsPerPass = kBlock / kRowT;
  __shared__ T tile[kBoxRows][kRowT];
  const int c = blockIdx.x * kBoxCols + (threadIdx.x % kRowT) * kV;
  const int r0 = blockIdx.y * kBoxRows;
  for (int dy = threadIdx.x / kRowT; dy < kBoxRows; dy += kRowsPerPass)
    if (r0 + dy < rows && c < cols) tile[dy][threadIdx.x % kRowT] = *reinterpret_cast<const T*>(in + int64_t{r0 + dy} * cols + c);
  __syncthreads();
  for (int dy = threadIdx.x / kRowT; dy < kBoxRows; dy += kRowsPerPass)
    if (r0 + dy < rows && c < cols) *reinterpret_cast<T*>(out + int64_t{r0 + dy} * cols + c) = op(tile[dy][threadIdx.x % kRowT]);
}

__global__ void __launch_bounds__(kTmaBlock) tma_transform(const __grid_constant__ CUtensorMap in_map,
                                                           const __grid_constant__ CUtensorMap out_map,
                                                           int tiles_x, int tiles) {
  namespace tma = kernels::tma;
  extern __shared__ __align__(128) unsigned char smem[];
  auto* stage = reinterpret_cast<float*>(smem);  // kStages tiles, each 128-byte aligned
  auto* full = reinterpret_cast<uint64_t*>(smem + kStages * kTileFloats * sizeof(float));
  const bool leader = threadIdx.x == 0;
  const int mine = (tiles - static_cast<int>(blockIdx.x) + gridDim.x - 1) / gridDim.x;
  auto x_of = [&](int k) { return (int(blockIdx.x) + k * int(gridDim.x)) % tiles_x * kBoxCols; };
  auto y_of = [&](int k) { return (int(blockIdx.x) + k * int(gridDim.x)) / tiles_x * kBoxRows; };
  auto issue_load = [&](int k) {
    const int st = k % kStages;
    tma::arrive_expect_tx(&full[st], kTileFloats * sizeof(float));
    tma::load_2d(stage + st * kTileFloats, &in_map, x_of(k), y_of(k), &full[st]);
  };
  if (leader) {
    for (int st = 0; st < kStages; ++st) tma::mbarrier_init(&full[st], 1);
    tma::fence_barrier_init();
  }
  __syncthreads();
  if (leader)
    for (int k = 0; k < min(kStages, mine); ++k) issue_load(k);
  for (int k = 0; k < mine; ++k) {
    const int st = k % kStages;
    float4* tile = reinterpret_cast<float4*>(stage + st * kTileFloats);
    tma::wait_parity(&full[st], (k / kStages) & 1);  // the box has landed
#pragma unroll
    for (int v = threadIdx.x; v < kTileFloats / 4; v += kTmaBlock) tile[v] = op(tile[v]);
    tma::fence_proxy_async_shared();  // our shared writes, before the engine reads them
    __syncthreads();
    if (leader) {
      tma::store_2d(&out_map, x_of(k), y_of(k), tile);
      tma::commit();
      if (k + kStages < mine) {
        tma::wait_read<0>();  // the store has read the stage: refill it
        issue_load(k + kStages);
      }
    }
  }
  if (leader) tma::wait_all<0>();
}

dim3 tile_grid(const Transform& w) {
  return dim3(static_cast<unsigned>((w.cols + kBoxCols - 1) / kBoxCols), static_cast<unsigned>((w.rows + kBoxRows - 1) / kBoxRows));
}

void launch_scalar(const Transform& w, cudaStream_t stream) {
  manual_staging<float><<<tile_grid(w), kBlock, 0, stream>>>(w.in.data(), w.out.data(), int(w.rows), int(w.cols));
  BENCH_CHECK_LAUNCH();
}

void launch_vec4(const Transform& w, cudaStream_t stream) {
  manual_staging<float4><<<tile_grid(w), kBlock, 0, stream>>>(w.in.data(), w.out.data(), int(w.rows), int(w.cols));
  BENCH_CHECK_LAUNCH();
}

// Untimed setup: the two tensor maps, the shared-memory opt-in and the persistent grid size.
struct TmaTransform {
  CUtensorMap in_map, out_map;
  int tiles_x, tiles;
  unsigned grid;
  TmaTransform(const Transform& w, cudaStream_t) {
    in_map = kernels::tma::make_map_2d_f32(w.in.data(), w.rows, w.cols, kBoxRows, kBoxCols);
    out_map = kernels::tma::make_map_2d_f32(w.out.data(), w.rows, w.cols, kBoxRows, kBoxCols);
    const dim3 g = tile_grid(w);
    tiles_x = static_cast<int>(g.x);
    tiles = static_cast<int>(g.x * g.y);
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(tma_transform, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kTmaSmem)));
    grid = std::min(static_cast<unsigned>(tiles), kernels::resident_grid(tma_transform, kTmaBlock, kTmaSmem));
  }
  void operator()(const Transform&, cudaStream_t stream) const {
    tma_transform<<<grid, kTmaBlock, kTmaSmem, stream>>>(in_map, out_map, tiles_x, tiles);
    BENCH_CHECK_LAUNCH();
  }
};

void reference(const Transform& w, bench::HostData& h) {
  auto in = h.input<float>("in");
  auto out = h.expected("out");
  for (int64_t i = 0; i < w.rows * w.cols; ++i) out[i] = 1.5 * in[i] + 0.25;
}

BENCH_EXAMPLE(ch07, tma_copy, Transform)
    .baseline("manual_staging", launch_scalar)
    .step("vec4_staging", launch_vec4)
    .stateful<TmaTransform>(bench::Role::optimized, "tma_4_stage", {.min_compute_capability = 90})
    .reference(reference);

}  // namespace

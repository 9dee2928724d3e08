// ch10/persistent_gemm: launch one CTA per SM and let each walk many tiles, so that the loads of
// a CTA's next tile run while its math warpgroups finish and store this one.
//
// The GEMM (every variant): BF16 D = A B, FP32 accumulate, the suite's TN layout
// (kernels/gemm_bf16.cuh), 4096^3 (persistent_gemm) and 8192^3 (persistent_gemm_8192), with
// warp_specialization's tile (ws_gemm.cuh): 128 x 256 of D^T, a 4-stage TMA ring of 48 KiB
// stages, a producer warpgroup (one thread issues the copies) and two consumer warpgroups of
// 64 x 256 (4 wgmma.m64n256k16 per k-block), setmaxnreg 40/232, bf16x2 stores from registers.
// Both kernels run the same two roles, produce_tile and consume_tile; only the schedule differs.
//
// What the hardware does: a CTA holds its SM's shared memory (193 KiB: one CTA per SM) from
// launch to exit. Launching the next CTA on an SM waits for the previous one to exit; the new
// one initialises its barriers, and its first wgmma waits a full memory latency for the first
// stage, which nothing was loading before the CTA existed.
//
// Why the baseline pays: with one tile per CTA (grid = 512 tiles at 4096^3, ~3.9 waves of 132),
// every tile pays that start: the ring starts empty, the consumers wait for the first TMA copy
// to arrive from HBM, and while they store the finished tile (64 KiB of D) the producer has no
// next tile to load and the tensor cores idle. 4 waves of it per GEMM at 4096^3, 16 at 8192^3.
//
// The changes, baseline "one_tile_per_cta" -> optimized "persistent" (sm_90a):
//   1. grid = the CTAs resident at once (132 on an H100 SXM: kernels::resident_grid), at most one
//      per tile; CTA b runs tiles b, b + grid, b + 2 grid, ... (a static schedule: equal tiles,
//      so a queue would buy nothing), each through grouped_tile's rasterisation, so the CTAs
//      running at one time still cover neighbouring tiles and share operands in L2;
//   2. the ring and its barriers carry on across tiles: each role counts the k-blocks it has put
//      through the ring (the slot) over all its tiles, so a stage's parity flips per ring wrap,
//      not per tile; the consumers release a tile's last stage before its epilogue;
//   3. hence the overlap: when the consumers queue their tile's last k-blocks, the stages they
//      free are refilled with the next tile's first k-blocks, which are in shared memory by the
//      time the epilogue is done: no empty ring, no launch, no barrier init between tiles.
// The vendor rung, "cublaslt": cuBLASLt BF16 on the same buffers, the fastest of its heuristic's
// candidates (kernels/cublaslt_gemm_bf16.hpp), timed in the same run.
// Not done here (issue 12's later rungs): the epilogue still runs on the consumers, so the
// tensor cores idle while they store (the TMA-store epilogue and ping-pong consumers remove
// that); no clusters or multicast; no split or stream-K for the last wave (at 4096^3, 512 tiles
// over 132 CTAs: 116 CTAs run a 4th tile, 16 idle through it).
// Expected (H100, not measured): baseline ~195 us (warp_specialization's producer_consumer,
// measured), persistent ~185-190 us, 1.02-1.06x: it removes a tile's start (a TMA round trip
// and the CTA switch, ~1-2 us) out of ~49 us per tile; both below cuBLASLt (171 us), which
// overlaps its epilogue. At 8192^3 timed sustained (the board at its power limit, as ch09).
// Verification: relative L2 <= 1e-2 (ch09's GEMM bound: BF16 output, FP32 sums in another order)
// against a double CPU reference at 2816 x 1664 x 320: 11 x 13 = 143 tiles, more than the
// persistent grid and not a multiple of it (on 132 SMs, 11 CTAs run 2 tiles and 121 run 1; on
// 114, 29 run 2), 5 k-blocks a tile, so the ring wraps inside a tile and a CTA's second tile
// starts mid-ring (slot 5: stage 1, parity 1); and kernels/reference_gemm.cuh at the timing
// size, where each CTA runs 3-4 tiles (16 at 8192^3). Shapes must be whole tiles (m % 256,
// n % 128, k % 64); sm_90a only: elsewhere SKIPPED with the reason. Checked without a GPU:
// ptxas (sm_90a) reports no spills, no C7508 (setmaxnreg honoured), no C7515 (wgmma not
// serialised); the barrier protocol across tiles by reading and by a host model of the roles
// (README). Only a GPU run can say whether it is right and how fast.
//
//   ./bench compare --chapter ch10 --example persistent_gemm
#include <bench/bench.hpp>
#include <kernels/bf16_pack.cuh>
#include <kernels/cublaslt_gemm_bf16.hpp>
#include <kernels/occupancy.cuh>

#include <algorithm>

#include "ws_gemm.cuh"

namespace {

using namespace ch10::ws;

// ---- Baseline: ws::producer_consumer (ws_gemm.cuh), one tile per CTA, grid = tile count.

// ---- Optimized: the same roles, looped over this CTA's tiles. `slot` runs on across tiles.
__global__ void __launch_bounds__(kSpecialisedThreads, 1)
    persistent(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_y,
               bf16* __restrict__ out, int rows, int cols, int k) {
#if BENCH_SM90A_DEVICE
  extern __shared__ uint8_t raw[];
  Smem& sm = init_ring(raw, 1);  // full: the producer's one expect_tx per stage
  const int tiles = (rows / kBM) * (cols / kBN), kblocks = k / kBK;
  uint32_t slot = 0;  // k-blocks this role has put through the ring, over all its tiles
  if (threadIdx.x / kWarpgroup == 0) {
    wgmma::shrink_registers<kProducerRegisters>();
    if (threadIdx.x == 0)
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x)
        produce_tile(sm, &map_x, &map_y, grouped_tile(tile, rows, cols), kblocks, slot);
  } else {
    wgmma::grow_registers<kConsumerRegisters>();
    const int cw = threadIdx.x / kWarpgroup - 1;
    float acc[128];  // each tile's first wgmma overwrites it; zeroed once so it is never undefined
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x)
      consume_tile(acc, sm, cw, grouped_tile(tile, rows, cols), kblocks, slot, out, cols);
  }
#endif
}

// ---- Optimized: the same persistent CTA; the consumers' epilogue goes through shared memory
// and a TMA store, so the copy engine writes D while the consumers go back to the ring.
//
// Staging, per consumer: 2 buffers of 64 x 64 BF16 (8 KiB, one store box each), in the 128-byte
// swizzle, 32 KiB for both consumers. Why not a whole 128 x 256 tile (64 KiB): with the 4-stage
// ring (192 KiB) it exceeds the 227 KiB an SM gives one CTA, and a 3-stage ring leaves one stage
// of slack against HBM latency in the main loop, which runs every k-block; the staging only has
// to hold what the copy engine has not read yet, and it reads 8 KiB of shared memory in well
// under the time a chunk takes to write. 4 chunks a tile, alternating buffers.
constexpr int kStoreCols = 64;  // one 128-byte swizzle row of BF16: the store box's width
constexpr int kStoreBuffers = 2;
constexpr int kChunks = kBN / kStoreCols;  // 4 column chunks of a consumer's 64 x 256
static_assert(kChunks % kStoreBuffers == 0,
              "a tile's chunks must leave the buffer rotation in step");

struct alignas(1024) TmaStoreSmem {
  Smem ring;  // first: init_ring's aligned base is this struct's
  bf16 staging[kConsumers][kStoreBuffers][kXShare * kStoreCols];  // 1024-aligned (sizeof(Smem))
};
constexpr size_t kTmaStoreSmemBytes = sizeof(TmaStoreSmem) + 1024;  // 225 KiB + alignment room
static_assert(kTmaStoreSmemBytes <= 227 * 1024, "one CTA per SM: at most 227 KiB");

// Synchronises the 128 threads of one warpgroup only (ids 1, 2; 0 is __syncthreads). The id is
// a register, so ptxas reserves all 16 named barriers: free at one CTA per SM.
__device__ __forceinline__ void warpgroup_sync(int id) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(kWarpgroup) : "memory");
}
// Two floats as BF16 into 4 bytes of shared memory: st.shared, not a generic store (the
// staging pointer comes from aligning the dynamic base, which hides its address space).
__device__ __forceinline__ void store_shared_bf16x2(uint32_t addr, float lo, float hi) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(kernels::pack_bf16x2(lo, hi)) : "memory");
}

// Consumer `cw` stores its 64 x 256 of tile t as 4 chunks of 64 x 64. Per chunk: the leader
// (thread 0 of the warpgroup, which alone issues and waits for its bulk groups) waits until the
// store that last used this buffer (two chunks back, maybe the previous tile's) has read it; a
// warpgroup barrier; every thread writes its fragments; each fences its writes into the async
// proxy; a barrier; the leader issues the chunk's TMA store and commits it as one bulk group, and
// nobody waits for it: the next chunk goes to the other buffer.
__device__ __forceinline__ void store_tile_tma(const float (&acc)[128],
                                               bf16 (&staging)[kStoreBuffers][kXShare * kStoreCols],
                                               const CUtensorMap* map_d, int cw, Tile t) {
  const int thread = threadIdx.x % kWarpgroup, lane = thread % 32;
  const bool leader = thread == 0;
  // Fragment rows (wgmma's accumulator layout, as wgmma::store_m64n256_bf16): row and row + 8,
  // both with row % 8 == lane / 4; each 16-byte unit (8 columns) of a 128-byte staging row sits
  // at unit ^ (row % 8), the swizzle the store map undoes. For one store instruction a warp's 8
  // rows then hit 8 different units: 32 distinct banks, no conflict.
  const int row = (thread / 32) * 16 + lane / 4, swizzle = lane / 4, pair = 2 * (lane % 4);
#pragma unroll
  for (int chunk = 0; chunk < kChunks; ++chunk) {
    const bf16* buf = staging[chunk % kStoreBuffers];
    const uint32_t top = tma::smem_addr(buf + row * kStoreCols),
                   bottom = top + 8 * kStoreCols * sizeof(bf16);
    if (leader) tma::wait_read<kStoreBuffers - 1>();  // all but the newest group (other buffer)
    warpgroup_sync(1 + cw);
#pragma unroll
    for (int unit = 0; unit < kStoreCols / 8; ++unit) {
      const int i = chunk * (kStoreCols / 8) + unit;  // fragment column group: columns 8i..8i+7
      const uint32_t offset = (unit ^ swizzle) * 16 + pair * sizeof(bf16);  // bytes in the row
      store_shared_bf16x2(top + offset, acc[4 * i], acc[4 * i + 1]);
      store_shared_bf16x2(bottom + offset, acc[4 * i + 2], acc[4 * i + 3]);
    }
    tma::fence_proxy_async_shared();  // this thread's writes, before the copy engine reads them
    warpgroup_sync(1 + cw);           // ... and everyone's, before the leader issues the copy
    if (leader) {
      tma::store_2d(map_d, t.c0 + chunk * kStoreCols, t.r0 + cw * kXShare, buf);
      tma::commit();
    }
  }
}

__global__ void __launch_bounds__(kSpecialisedThreads, 1)
    persistent_tma_store(const __grid_constant__ CUtensorMap map_x,
                         const __grid_constant__ CUtensorMap map_y, bf16* /* D: through map_d */,
                         int rows, int cols, int k, const __grid_constant__ CUtensorMap map_d) {
#if BENCH_SM90A_DEVICE
  extern __shared__ uint8_t raw[];
  auto& sm = reinterpret_cast<TmaStoreSmem&>(init_ring(raw, 1));
  const int tiles = (rows / kBM) * (cols / kBN), kblocks = k / kBK;
  uint32_t slot = 0;
  if (threadIdx.x / kWarpgroup == 0) {
    wgmma::shrink_registers<kProducerRegisters>();
    if (threadIdx.x == 0)
      for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x)
        produce_tile(sm.ring, &map_x, &map_y, grouped_tile(tile, rows, cols), kblocks, slot);
  } else {
    wgmma::grow_registers<kConsumerRegisters>();
    const int cw = threadIdx.x / kWarpgroup - 1;
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      mma_tile(acc, sm.ring, cw, kblocks, slot);
      store_tile_tma(acc, sm.staging[cw], &map_d, cw, grouped_tile(tile, rows, cols));
    }
    // The last stores must have read the staging buffers before the CTA's shared memory goes.
    if (threadIdx.x % kWarpgroup == 0) tma::wait_all<0>();
  }
#endif
}

// ---- Host side.
// Grid of a persistent kernel: the CTAs resident at once (one per SM), at most one per tile.
// Asked once, after the shared-memory limit is raised (before it the calculator fits no CTA of
// this size), outside the timed launches like the attribute itself.
template <auto Kernel, size_t kSmem>
unsigned persistent_grid(const kernels::GemmBf16& w) {
  static const unsigned resident = [] {
    allow_smem<Kernel, kSmem>();
    return kernels::resident_grid(Kernel, kSpecialisedThreads, kSmem);
  }();
  return std::min(resident, unsigned(tile_count(w)));
}

void launch_persistent(const kernels::GemmBf16& w, cudaStream_t stream) {
  launch<persistent, kSpecialisedThreads>(w, persistent_grid<persistent, kSmemBytes>(w), stream);
}

void launch_persistent_tma_store(const kernels::GemmBf16& w, cudaStream_t stream) {
  // D^T (n x m, row-major) in 64 x 64 boxes, 128-byte swizzled like the staging buffers.
  const CUtensorMap map_d =
      tma::make_map_2d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, sizeof(bf16), w.d.data(), uint64_t(w.n),
                       uint64_t(w.m), kXShare, kStoreCols, CU_TENSOR_MAP_SWIZZLE_128B);
  launch<persistent_tma_store, kSpecialisedThreads, kTmaStoreSmemBytes>(
      w, persistent_grid<persistent_tma_store, kTmaStoreSmemBytes>(w), stream, map_d);
}

template <class W>
void register_ladder(bench::Example<W>& e) {
  e.baseline("one_tile_per_cta", launch_per_tile<producer_consumer, kSpecialisedThreads>,
             {.arch_specific = 90})
      .step("persistent", launch_persistent, {.arch_specific = 90})
      .optimized("persistent_tma_store", launch_persistent_tma_store, {.arch_specific = 90})
      .template stateful<kernels::CublasltGemmBf16>(bench::Role::vendor, "cublaslt")
      .requires_that(requirements)
      .reference(kernels::reference_gemm_bf16)
      .device_reference(kernels::device_reference_gemm_bf16)
      .tolerance(bench::relative_l2(1e-2));
}

// Verification: 11 x 13 tiles (143: more than one wave, not a multiple of it), 5 k-blocks.
using Gemm4096 = SizedGemm<4096, 4096, 4096, 2816, 1664, 320>;
using Gemm8192 = SizedGemm<8192, 8192, 8192, 2816, 1664, 320>;

[[maybe_unused]] const bool registered = [] {
  register_ladder(bench::make_example<Gemm4096>("ch10", "persistent_gemm", __FILE__));
  // At 8192^3 the board runs at its power limit: timed sustained, as ch09's 8192^3 GEMMs are.
  register_ladder(bench::make_example<Gemm8192>("ch10", "persistent_gemm_8192", __FILE__)
                      .mode(bench::Mode::sustained));
  return true;
}();

}  // namespace

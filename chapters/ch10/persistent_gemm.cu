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

// ---- Host side.
void launch_persistent(const kernels::GemmBf16& w, cudaStream_t stream) {
  // Asked once, after the shared-memory limit is raised (before it, the calculator fits no CTA
  // of 193 KiB): one CTA per SM. Outside the timed launches, like the attribute itself.
  static const unsigned resident = [] {
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(persistent, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(kSmemBytes)));
    return kernels::resident_grid(persistent, kSpecialisedThreads, kSmemBytes);
  }();
  launch<persistent, kSpecialisedThreads>(w, std::min(resident, unsigned(tile_count(w))), stream);
}

template <class W>
void register_ladder(bench::Example<W>& e) {
  e.baseline("one_tile_per_cta", launch_per_tile<producer_consumer, kSpecialisedThreads>,
             {.arch_specific = 90})
      .optimized("persistent", launch_persistent, {.arch_specific = 90})
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

// ch10/warp_specialization: give the loads to a warpgroup of their own, so the warpgroups that
// do the math never wait for each other, and move the loader's unused registers to them.
//
// The GEMM (both variants, identical): BF16 D = A B, FP32 accumulate, the suite's TN layout
// (kernels/gemm_bf16.cuh), 4096^3, and the tile code in kernels/ws_gemm.cuh, which persistent_gemm
// shares. One CTA computes a 128 x 256 tile of D^T (ch09's wgmma rung):
// a 4-stage ring of (128 x 64 B block, 256 x 64 A block) k-blocks written by TMA in the 128-byte
// swizzle, "full" mbarriers (the bytes landed) and "empty" mbarriers (both math warpgroups are
// done with the stage); two math warpgroups, each 64 x 256 of the tile (128 FP32 accumulators a
// thread), 4 wgmma.m64n256k16 per k-block, one group kept in flight (commit, wait for the one
// before); the same TMA boxes (64 B rows and 128 A rows per copy, 4 copies per stage); grouped
// rasterisation; the epilogue stores bf16x2 from registers. Only who issues the loads changes.
//
// What the hardware does: wgmma is issued by a whole warpgroup (4 warps) at once, and runs
// asynchronously on the tensor cores; TMA copies are issued by one thread and complete on an
// mbarrier. A stage may be refilled only when every warpgroup that reads it has finished.
//
// Why the baseline pays: with no loader, each math warpgroup refills its share of the stage it
// just finished (its 64 B rows and half of the A block), and before it may do so it must wait on
// the empty barrier for the *other* warpgroup to be done with that stage too. Its leader thread
// waits inside the math loop, and since wgmma is warpgroup-collective the whole warpgroup's next
// k-block waits with it: the two math warpgroups run in lockstep, and any delay of one (a later
// full barrier, a smaller share of the tensor cores for a while) stalls both, while only one
// wgmma group of each is queued. The load issue itself (expect_tx, two copies) sits on the
// math warps' instruction stream too.
//
// The changes, baseline "every_warpgroup_loads" -> optimized "producer_consumer" (sm_90a):
//   1. a third warpgroup, the producer: one thread issues all 4 copies of each stage (one
//      expect_tx of 48 KiB) as soon as the stage's empty barrier completes; the math warpgroups
//      (consumers) only wait on "full", compute and arrive on "empty": they never wait on each
//      other, and their loop holds nothing but wgmma and barrier waits;
//   2. setmaxnreg: 384 threads get at most 168 registers each at launch (65,536 / 384); the
//      producer drops to 40 (setmaxnreg.dec) and the consumers rise to 232 (setmaxnreg.inc):
//      40 x 128 + 232 x 256 = 64,512. The baseline's 256 threads already have up to 255, so
//      without this step the loader would cost the math warps registers. Here the 64 x 256
//      accumulator (128 registers) fits in 168, so it buys headroom, not time; it is what lets
//      a consumer grow its tile (persistent_gemm's rungs).
// Expected (H100; measured: README): both near ch09's wgmma rung at 4096^3;
// the decoupling is worth a few percent at most in a one-tile-per-CTA kernel, 1.00-1.08x. If it
// scores NO_SPEEDUP, that is the measurement: the producer pays in persistent kernels, where it
// runs ahead into the next tile while the consumers store this one.
// Verification: relative L2 <= 1e-2 against a double CPU reference at 512 x 384 x 448 (m != n,
// 6 CTAs, 7 k-blocks: the ring wraps and the parities flip) and kernels/reference_gemm.cuh at
// 4096^3. Shapes must be whole tiles (m % 256, n % 128, k % 64); sm_90a only: another GPU, or a
// build for another architecture, SKIPs with the reason.
//
//   ./bench compare --chapter ch10 --example warp_specialization
#include <bench/bench.hpp>

#include <kernels/ws_gemm.cuh>

namespace {

using namespace kernels::ws;

constexpr int kBaselineThreads = kConsumers * kWarpgroup;  // 2 math warpgroups, no producer

// Timing 4096^3; verification 512 x 384 x 448 (m != n, 6 CTAs, 7 k-blocks: the ring wraps).
using Gemm = SizedGemm<4096, 4096, 4096, 512, 384, 448>;

// Both kernels are sm_90a code: in a build for any other target their bodies are empty, and
// the variants' {.arch_specific = 90} makes the harness SKIP them, with the reason, on any GPU
// but compute capability 9.0 and from any build without 90a.

// ---- Baseline: two warpgroups, each loads its own share of every stage and computes.
__global__ void __launch_bounds__(kBaselineThreads, 1)
    every_warpgroup_loads(const __grid_constant__ CUtensorMap map_x,
                          const __grid_constant__ CUtensorMap map_y, bf16* __restrict__ out,
                          int rows, int cols, int k) {
#if BENCH_SM90A_DEVICE
  extern __shared__ uint8_t raw[];
  Smem& sm = init_ring(raw, kConsumers);  // full: both warpgroups' shares have landed
  const Tile tile = grouped_tile(blockIdx.x, rows, cols);
  const int kblocks = k / kBK;
  const int cw = threadIdx.x / kWarpgroup;
  const bool leader = threadIdx.x % kWarpgroup == 0;
  auto issue = [&](int kb) {  // this warpgroup's share of k-block kb
    tma::arrive_expect_tx(&sm.full[kb % kStages], kShareBytes);
    // A constant share per branch: TMA coordinates computed from threadIdx (cw) are not provably
    // uniform, and ptxas then serialised the in-flight wgmma (warning C7515).
    if (cw == 0)
      load_share(sm, &map_x, &map_y, tile, kb, kb % kStages, 0);
    else
      load_share(sm, &map_x, &map_y, tile, kb, kb % kStages, 1);
  };
  if (leader)
    for (int kb = 0; kb < kStages && kb < kblocks; ++kb) issue(kb);

  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  for (int kb = 0; kb < kblocks; ++kb) {
    mma_k_block(acc, sm, cw, kb, kb == 0);  // one tile: the ring slot is the k-block
    wgmma::wait<1>();  // k-block kb - 1's group is done: its stage can be released
    const int done = kb - 1;
    if (kb > 0 && leader) tma::arrive(&sm.empty[done % kStages]);
    if (kb > 0 && done + kStages < kblocks) {
      // The cost this example is about: the refill waits, in the math loop, until the other
      // warpgroup has finished the same stage (the whole warpgroup waits: its next wgmma needs
      // every warp, the leader's included).
      tma::wait_parity(&sm.empty[done % kStages], (done / kStages) & 1);
      if (leader) issue(done + kStages);
    }
  }
  wgmma::wait<0>();
  wgmma::store_m64n256_bf16(acc, out, cols, tile.r0 + cw * kXShare, tile.c0);
#endif
}

// ---- Optimized: a producer warpgroup (one thread issues every copy) and two consumers:
// ws::producer_consumer in kernels/ws_gemm.cuh (persistent_gemm's baseline too), with its roles
// produce_tile and consume_tile.

// ---- Host side: ws::launch_per_tile (one CTA per tile) for both.
BENCH_EXAMPLE(ch10, warp_specialization, Gemm)
    .baseline("every_warpgroup_loads", launch_per_tile<every_warpgroup_loads, kBaselineThreads>, {.arch_specific = 90})
    .optimized("producer_consumer", launch_per_tile<producer_consumer, kSpecialisedThreads>, {.arch_specific = 90})
    .requires_that(requirements)
    .reference(kernels::reference_gemm_bf16)
    .device_reference(kernels::device_reference_gemm_bf16)
    .tolerance(bench::relative_l2(1e-2));  // ch09's GEMM bound

}  // namespace

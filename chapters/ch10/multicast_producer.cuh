// ch10/multicast_producer.cuh: kernels/ws_gemm.cuh's producer role for a cluster of 2 CTAs that
// share an operand: persistent_gemm's "persistent_multicast".
//
// The two CTAs of a cluster compute two tiles stacked in D^T's rows (a 256 x 256 pair: rows
// r0 and r0 + 128, the same 256 columns), so they need the same Y (= A) block every k-block and
// different X (= B) blocks. Each CTA's producer loads its own X block (16 KiB, 2 boxes) and half
// of the shared Y block (128 of its 256 rows, 16 KiB), multicast: one read of L2 lands in both
// CTAs' stage at the same offset and tells both CTAs' full barrier its bytes. A stage therefore
// still brings 48 KiB into each CTA (the full barrier's expect_tx is unchanged), but each CTA
// reads only 32 KiB of it from L2: a third less L2 -> shared-memory traffic.
//
// The price is the coupling: a producer writes into its peer's stage too, so it may refill a
// stage only once the consumers of both CTAs have released it. Each empty barrier therefore
// counts 4 arrivals (2 consumers x 2 CTAs) and a consumer releases a stage in both CTAs
// (tma::arrive_each_cta<2>: mapa + a remote arrive at CTA scope; kernels/tma.cuh's arrive_cluster
// says why no cluster-scope release is needed, and what one cost). Two more rules keep the shared
// memory alive while the peer uses it: a cluster barrier after the barrier inits (nothing is
// multicast to, or arrives on, a barrier before it exists), and drain_ring before a CTA exits
// (every arrival and every multicast this CTA takes part in is complete once both CTAs'
// consumers have released its last stages).
//
// sm_90a device code, like kernels/ws_gemm.cuh: call it only under BENCH_SM90A_DEVICE.
#pragma once

#include <kernels/ws_gemm.cuh>

namespace ch10::ws {
using namespace kernels::ws;  // the tile this file builds on (kernels/ws_gemm.cuh)

constexpr int kClusterCtas = 2;
constexpr uint16_t kBothCtas = 0b11;  // multicast mask: ranks 0 and 1
constexpr int kPairRows = kClusterCtas * kBM;

// CTA `rank`'s tile of pair number `pair`: the grouped rasterisation (kernels/ws_gemm.cuh) over
// pairs (256 x 256 units of D^T, kGroupRows pair rows per column band), then the rank's 128 rows.
__device__ __forceinline__ Tile pair_tile(int pair, int rows, int cols, uint32_t rank) {
  const UnitCoord at = grouped_raster<kGroupRows>(pair, rows / kPairRows, cols / kBN);
  return {at.row * kPairRows + int(rank) * kBM, at.col * kBN};
}

// The producer's one thread, CTA `rank`: for each k-block of tile t, wait until all 4 consumers
// of the cluster released the stage's previous use, one expect_tx for the whole 48 KiB stage,
// its own X block, and its half of Y multicast to both CTAs.
__device__ __forceinline__ void produce_tile_multicast(Smem& sm, const CUtensorMap* map_x,
                                                       const CUtensorMap* map_y, Tile t,
                                                       int kblocks, uint32_t rank, uint32_t& slot) {
  for (int kb = 0; kb < kblocks; ++kb, ++slot) {
    const int s = int(slot % kStages);
    if (slot >= kStages) tma::wait_parity(&sm.empty[s], ((slot / kStages) - 1) & 1);
    tma::arrive_expect_tx(&sm.full[s], kStageBytes);
    for (int part = 0; part < kConsumers; ++part)
      tma::load_2d(&sm.x[s][part * kXShare * kBK], map_x, kb * kBK, t.r0 + part * kXShare,
                   &sm.full[s]);
    tma::load_2d_multicast(&sm.y[s][rank * kYShare * kBK], map_y, kb * kBK,
                           t.c0 + int(rank) * kYShare, &sm.full[s], kBothCtas);
  }
}

// Called by the producer thread after its last tile, with its final slot: waits until the last
// kStages slots (all there are, if fewer) have been released by every consumer of the cluster.
// Then the peer's consumers will not arrive on this CTA's barriers again, and the multicasts
// into and out of this CTA have landed (each was waited for before its stage was released).
__device__ __forceinline__ void drain_ring(Smem& sm, uint32_t slot) {
  for (const uint32_t end = slot + kStages; slot < end; ++slot)
    if (slot >= kStages)
      tma::wait_parity(&sm.empty[slot % kStages], ((slot / kStages) - 1) & 1);
}

}  // namespace ch10::ws

// ch10/persistent_gemm: launch one CTA per SM and let each walk many tiles, so that the loads of
// a CTA's next tile run while its math warpgroups finish this one; then let the copy engine
// store the finished tile, and let two CTAs share one read of their common operand.
//
// The GEMM (every variant): BF16 D = A B, FP32 accumulate, the suite's TN layout
// (kernels/gemm_bf16.cuh), 4096^3 and 8192^3 (the axis mnk: persistent_gemm/<variant>/mnk:4096 and mnk:8192), with
// warp_specialization's tile (kernels/ws_gemm.cuh): 128 x 256 of D^T, a 4-stage TMA ring of 48 KiB
// stages, a producer warpgroup (one thread issues the copies) and two consumer warpgroups of
// 64 x 256 (4 wgmma.m64n256k16 per k-block), setmaxnreg 40/232. Every kernel runs the same
// math (mma_tile); the schedule, the epilogue and how a stage is filled change, one per rung.
//
// What the hardware does: a CTA holds its SM's shared memory (one CTA per SM here) from launch to
// exit; the next CTA on an SM starts when it exits, with an empty ring, and its first wgmma waits
// a memory latency. A warpgroup's st.global of its accumulators issues 64 stores a thread, each
// scattered over 16 rows, and the warpgroup does no math until they have issued. Every TMA copy
// reads L2, unless CTAs of one cluster share it: a multicast copy lands in each of them.
//
// Why the baseline pays: with one tile per CTA (512 at 4096^3, ~3.9 waves of 132) every tile
// pays a start, and while the consumers store the finished tile (64 KiB of D) the producer has no
// next tile to load and the tensor cores idle.
//
// The ladder (sm_90a), baseline "one_tile_per_cta" (ws::producer_consumer, grid = tile count):
//   step "persistent":
//   1. grid = the CTAs resident at once (132 on an H100 SXM), at most one per tile; CTA b runs
//      tiles b, b + grid, ... (a static schedule: equal tiles, so a queue would buy nothing),
//      through grouped_tile's rasterisation, so the CTAs running at one time share operands in L2;
//   2. the ring carries on across tiles: each role counts the k-blocks it has put through it (the
//      slot), so a stage's parity flips per ring wrap, not per tile; the consumers release a
//      tile's last stage before their epilogue, and the producer fills the freed stages with the
//      next tile's first k-blocks while they store: no empty ring, launch or init between tiles.
//   optimized "persistent_tma_store", the same CTA:
//   3. each consumer writes its 64 x 256 into shared memory as 4 chunks of 64 x 64, in the
//      128-byte swizzle (conflict-free: a warp's 8 rows land in 8 different 16-byte units), and
//      one thread hands each chunk to the copy engine (TMA store, one bulk group per chunk);
//   4. the fences: each thread's fence.proxy.async.shared::cta after its writes, then a warpgroup
//      barrier, before the store is issued; before a buffer is rewritten, wait_group.read until
//      the store two chunks back has read it; the global writes are waited for only at exit.
//      2 buffers per consumer (32 KiB) keep the 4-stage ring: kernels/tma_store_epilogue.cuh
//      says why.
//   step "persistent_multicast", clusters of 2 of that CTA (multicast_producer.cuh), registered
//   after the optimized rung because it measures the same (README):
//   5. the CTAs of a cluster take stacked tiles (a 256 x 256 pair) that need the same Y block;
//      each loads its own X and multicasts half of Y to both: 32 KiB of L2 reads per 48 KiB stage
//      instead of 48 (the ring moves 11.7 KB from L2 per MFLOP: several TB/s across 132 SMs at
//      the steps' rates in ch10's README, 'Measured', a likely limit of the steps above);
//   6. the coupling: a stage is refilled only when the consumers of both CTAs have released it
//      (empty barriers of 4 arrivals, released in both CTAs, at CTA scope: with cluster-scope
//      release/acquire the step ran slower, by the figures in ch10's README, 'The multicast
//      step's barrier scope'; kernels/tma.cuh's arrive_cluster says why), a cluster barrier
//      after the inits, and each producer drains the ring before its
//      CTA may exit.
//   step "persistent_stream_k", persistent_tma_store's CTA with the last wave split
//   (stream_k_plan.hpp, stream_k.cuh); verified, and no faster where the GPU is at its power
//   limit (8192^3 sustained: a tie; 4096^3: slower; ch10's README, 'Tried and not kept'):
//   7. each CTA runs its whole tiles (8192^3: 15 of 2048 over 132 CTAs), then a contiguous range
//      of the last 68 tiles' k-blocks (~66 of 128): at most the end of one tile, which it writes
//      out in FP32, and the head of the next, which it finishes: its producer waits for the other
//      parts' flags, its consumers add those parts and store the tile. The last wave shrinks
//      from a whole tile's time, half the SMs idle, to ~half of it on every SM (3% estimated at
//      8192^3, the gap to cuBLASLt on the H200).
// Vendor "cublaslt": cuBLASLt BF16 on the same buffers, its heuristic's fastest, same run.
// Not done here: ping-pong consumers (the tensor cores still idle while both consumers write the
// staging).
// Measured: the README's tables. Multicast (after its barrier-scope fix) runs at the optimized
// rung's time: at this tile L2 -> shared bandwidth does not limit. At 8192^3 timed sustained,
// as ch09.
// Verification: relative L2 <= 1e-2 (ch09's GEMM bound: BF16 output, FP32 sums in another order)
// against a double CPU reference at 2816 x 1792 x 320: 11 x 14 = 154 tiles (77 pairs), more
// than the persistent grid and not a multiple of it (on 132 SMs 22 CTAs run 2 tiles, and 11 of
// 66 clusters 2 pairs), 5 k-blocks a tile, so the ring wraps inside a tile and a CTA's second
// tile starts mid-ring (slot 5: stage 1, parity 1) and reuses the staging buffers;
// kernels/reference_gemm.cuh at the timing size (3-4 tiles a CTA, 16 at 8192^3). Whole tiles only
// (m % 256, n % 128, k % 64; pairs: n % 256); sm_90a only.
// Checked without a GPU: ptxas (sm_90a) 168 registers, no spills, no C7508 (setmaxnreg
// honoured), no C7515; the PTX order of each kernel's barriers, fences, copies and waits; the
// ring, multicast, drain and staging protocol by reading and by host models (README). Only a
// GPU run can say whether it is right and how fast.
//
//   ./bench compare --chapter ch10 --example persistent_gemm
#include <bench/bench.hpp>
#include <kernels/cublaslt_gemm_bf16.hpp>
#include <kernels/occupancy.cuh>
#include <kernels/tma_store_epilogue.cuh>
#include <kernels/ws_gemm.cuh>

#include <algorithm>

#include "multicast_producer.cuh"
#include "stream_k.cuh"

namespace {

using namespace kernels::ws;
using namespace ch10::ws;  // the multicast producer built on it
namespace stream_k = ch10::stream_k;

// ---- Baseline: ws::producer_consumer (kernels/ws_gemm.cuh), one tile per CTA, grid = tile count.

// ---- Step: the same roles, looped over this CTA's tiles. `slot` runs on across tiles.
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
    float acc[128];
    const int cw = start_consumer(acc);
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x)
      consume_tile(acc, sm, cw, grouped_tile(tile, rows, cols), kblocks, slot, out, cols);
  }
#endif
}

// ---- Step: the same persistent CTA; the consumers' epilogue goes through shared memory
// and a TMA store, so the copy engine writes D while the consumers go back to the ring.
//
// (kernels/tma_store_epilogue.cuh: the staging buffers and store_tile_tma.)
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
    float acc[128];
    const int cw = start_consumer(acc);
    for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      mma_tile(acc, sm.ring, cw, kblocks, slot);
      store_tile_tma(acc, sm.staging[cw], &map_d, cw, grouped_tile(tile, rows, cols));
    }
    // The last stores must have read the staging buffers before the CTA's shared memory goes.
    if (threadIdx.x % kWarpgroup == 0) tma::wait_all<0>();
  }
#endif
}

// ---- Optimized: clusters of 2 persistent CTAs, each with the TMA-store epilogue, that share
// the Y operand by multicast (multicast_producer.cuh: the pairing, the producer, the drain).
// A cluster walks pairs of tiles; both CTAs run the same pairs, hence the same slots.
__global__ void __cluster_dims__(kClusterCtas, 1, 1) __launch_bounds__(kSpecialisedThreads, 1)
    persistent_multicast(const __grid_constant__ CUtensorMap map_x,
                         const __grid_constant__ CUtensorMap map_y, bf16* /* D: through map_d */,
                         int rows, int cols, int k, const __grid_constant__ CUtensorMap map_d) {
#if BENCH_SM90A_DEVICE
  extern __shared__ uint8_t raw[];
  // Empty barriers: a release from each consumer of both CTAs.
  auto& sm = reinterpret_cast<TmaStoreSmem&>(init_ring(raw, 1, kConsumers * kClusterCtas));
  tma::cluster_sync();  // both CTAs' barriers exist before either multicasts or arrives on them
  const uint32_t rank = tma::cluster_rank();
  const int pairs = (rows / kPairRows) * (cols / kBN), kblocks = k / kBK;
  const int cluster = int(blockIdx.x) / kClusterCtas, clusters = int(gridDim.x) / kClusterCtas;
  uint32_t slot = 0;
  if (threadIdx.x / kWarpgroup == 0) {
    wgmma::shrink_registers<kProducerRegisters>();
    if (threadIdx.x == 0) {
      for (int pair = cluster; pair < pairs; pair += clusters)
        produce_tile_multicast(sm.ring, &map_x, &map_y, pair_tile(pair, rows, cols, rank), kblocks,
                               rank, slot);
      drain_ring(sm.ring, slot);  // this CTA's shared memory stays until the peer is done with it
    }
  } else {
    float acc[128];
    const int cw = start_consumer(acc);
    for (int pair = cluster; pair < pairs; pair += clusters) {
      mma_tile<kClusterCtas>(acc, sm.ring, cw, kblocks, slot);
      store_tile_tma(acc, sm.staging[cw], &map_d, cw, pair_tile(pair, rows, cols, rank));
    }
    if (threadIdx.x % kWarpgroup == 0) tma::wait_all<0>();
  }
#endif
}

// ---- Step: persistent_tma_store's CTA with the last wave split over every CTA by k-blocks
// (stream-K; stream_k_plan.hpp says who runs what, stream_k.cuh how a split tile is added up).
// Each CTA runs its whole tiles, then its range of the remaining tiles' k-blocks: a part that is
// not a tile's head writes its sums to the workspace and moves on; a head adds the others' parts
// to its own and stores the tile like any other.
__global__ void __launch_bounds__(kSpecialisedThreads, 1)
    persistent_stream_k(const __grid_constant__ CUtensorMap map_x,
                        const __grid_constant__ CUtensorMap map_y, bf16* /* D: through map_d */,
                        int rows, int cols, int k, const __grid_constant__ CUtensorMap map_d,
                        float* __restrict__ workspace, unsigned* __restrict__ flags) {
#if BENCH_SM90A_DEVICE
  extern __shared__ uint8_t raw[];
  auto& all = tma::aligned_1024<stream_k::Smem>(raw);
  if (threadIdx.x == 0)  // before init_ring's barrier makes every init visible
    for (int cw = 0; cw < kConsumers; ++cw) tma::mbarrier_init(&all.ready[cw], 1);
  TmaStoreSmem& sm = reinterpret_cast<TmaStoreSmem&>(init_ring(raw, 1));  // == all.base
  const stream_k::Plan plan{(rows / kBM) * (cols / kBN), k / kBK, int(gridDim.x)};
  const int cta = int(blockIdx.x);
  const int range_begin = plan.begin(cta), range_end = plan.begin(cta + 1);
  uint32_t slot = 0;
  if (threadIdx.x / kWarpgroup == 0) {
    wgmma::shrink_registers<kProducerRegisters>();
    if (threadIdx.x == 0) {
      for (int tile = cta; tile < plan.first_split_tile(); tile += int(gridDim.x))
        produce_tile(sm.ring, &map_x, &map_y, grouped_tile(tile, rows, cols), plan.kblocks, slot);
      for (int at = range_begin; at < range_end;) {
        const stream_k::Unit unit = plan.unit_at(at, range_end);
        produce_k_blocks(sm.ring, &map_x, &map_y, grouped_tile(unit.tile, rows, cols),
                         unit.kb_begin, unit.kb_end, slot);
        at += unit.kb_end - unit.kb_begin;
        // A head that is not the whole tile (always this CTA's last unit): wait for the tile's
        // other parts, published by the later CTAs whose ranges start before the tile ends.
        if (unit.head() && !unit.whole(plan.kblocks)) {
          for (int part = plan.next_part(cta, unit.tile); part < plan.ctas;
               part = plan.next_part(part, unit.tile))
            stream_k::wait_for_partials(flags, part);
          for (int cw = 0; cw < kConsumers; ++cw) tma::arrive(&all.ready[cw]);
        }
      }
    }
  } else {
    float acc[128];
    const int cw = start_consumer(acc);
    for (int tile = cta; tile < plan.first_split_tile(); tile += int(gridDim.x)) {
      mma_tile(acc, sm.ring, cw, plan.kblocks, slot);
      store_tile_tma(acc, sm.staging[cw], &map_d, cw, grouped_tile(tile, rows, cols));
    }
    for (int at = range_begin; at < range_end;) {
      const stream_k::Unit unit = plan.unit_at(at, range_end);
      at += unit.kb_end - unit.kb_begin;
      mma_tile(acc, sm.ring, cw, unit.kb_end - unit.kb_begin, slot);
      if (!unit.head()) {  // only ever this CTA's first unit
        stream_k::publish_partial(acc, workspace, flags, cta, cw);
        continue;
      }
      if (!unit.whole(plan.kblocks)) {
        tma::wait_parity(&all.ready[cw], 0);  // the producer saw every part published
        for (int part = plan.next_part(cta, unit.tile); part < plan.ctas;
             part = plan.next_part(part, unit.tile))
          stream_k::add_partial(acc, workspace, part, cw);
      }
      store_tile_tma(acc, sm.staging[cw], &map_d, cw, grouped_tile(unit.tile, rows, cols));
    }
    if (threadIdx.x % kWarpgroup == 0) tma::wait_all<0>();
  }
#endif
}

// ---- Host side.
// (persistent_grid: kernels/ws_gemm.cuh; output_map: kernels/tma_store_epilogue.cuh.)
void launch_persistent(const kernels::GemmBf16& w, cudaStream_t stream) {
  launch<persistent, kSpecialisedThreads>(w, persistent_grid<persistent, kSmemBytes>(w), stream);
}

void launch_persistent_tma_store(const kernels::GemmBf16& w, cudaStream_t stream) {
  launch<persistent_tma_store, kSpecialisedThreads, kTmaStoreSmemBytes>(
      w, persistent_grid<persistent_tma_store, kTmaStoreSmemBytes>(w), stream, output_map(w));
}

// Grid of the cluster kernel: 2 CTAs per cluster resident at once (a cluster's CTAs must fit in
// one GPC, so this can be fewer than the SMs / 2), at most one cluster per pair of tiles.
void launch_persistent_multicast(const kernels::GemmBf16& w, cudaStream_t stream) {
  static const int resident_clusters = [] {
    allow_smem<persistent_multicast, kTmaStoreSmemBytes>();
    // One cluster's grid; the cluster shape comes from __cluster_dims__.
    const int clusters = kernels::resident_clusters(persistent_multicast, kClusterCtas,
                                                    kSpecialisedThreads, kTmaStoreSmemBytes);
    return std::max(clusters, 1);
  }();
  const int pairs = int((w.n / kPairRows) * (w.m / kBN));
  launch<persistent_multicast, kSpecialisedThreads, kTmaStoreSmemBytes>(
      w, unsigned(kClusterCtas * std::min(resident_clusters, pairs)), stream, output_map(w));
}

// persistent_stream_k's state: the grid, and its workspace (a slot of partial sums per CTA, both
// consumers' accumulators: 17 MB on 132 SMs) and flags (one per CTA and consumer, zeroed once
// here; each launch leaves them at zero).
class StreamKGemm {
 public:
  StreamKGemm(const kernels::GemmBf16& w, cudaStream_t stream)
      : grid_(persistent_grid<persistent_stream_k, stream_k::kSmemBytes>(w)),
        workspace_(int64_t{grid_} * stream_k::kSlotFloats),
        flags_(int64_t{grid_} * kConsumers) {
    BENCH_CUDA_CHECK(cudaMemsetAsync(flags_.data(), 0, flags_.bytes(), stream));
  }
  void operator()(const kernels::GemmBf16& w, cudaStream_t stream) {
    launch<persistent_stream_k, kSpecialisedThreads, stream_k::kSmemBytes>(
        w, grid_, stream, output_map(w), workspace_.data(), flags_.data());
  }

 private:
  unsigned grid_;
  bench::DeviceBuffer<float> workspace_;
  bench::DeviceBuffer<unsigned> flags_;
};

// Verification: 11 x 14 tiles (154: more than one wave, not a multiple of it), 77 pairs of
// them for the clusters (more than one wave of clusters too), 5 k-blocks. Timing: the axis mnk.
using Gemm = SquareGemm<2816, 1792, 320>;

BENCH_EXAMPLE(ch10, persistent_gemm, Gemm)
    .int_axis("mnk", {4096, 8192})
    // At 8192^3 the board runs at its power limit: timed sustained, as ch09's 8192^3 GEMMs are.
    .mode_where([](const bench::Point& p) { return p.axis("mnk") == 8192; }, bench::Mode::sustained)
    .baseline("one_tile_per_cta", launch_per_tile<producer_consumer, kSpecialisedThreads>, {.arch_specific = 90})
    .step("persistent", launch_persistent, {.arch_specific = 90})
    .optimized("persistent_tma_store", launch_persistent_tma_store, {.arch_specific = 90})
    // Measured at persistent_tma_store's time on the H100 and the H200 (README): at this tile
    // the L2 traffic it saves was not the limit, so it is a step.
    .step("persistent_multicast", launch_persistent_multicast, {.arch_specific = 90})
    .variant_requires([](const kernels::GemmBf16& w) {
      return w.n % kPairRows == 0 ? std::string() : "pairs of tiles: needs n % 256 == 0";
    })
    // Measured no faster than persistent_tma_store on the H100 and the H200 (README): a step.
    .stateful<StreamKGemm>(bench::Role::step, "persistent_stream_k", {.arch_specific = 90})
    .variant_requires([](const kernels::GemmBf16& w) {
      return w.k / kBK < stream_k::kMaxKBlocks ? std::string()
                                               : "its plan counts k-blocks in 32 bits: needs k < 131072";
    })
    .stateful<kernels::CublasltGemmBf16>(bench::Role::vendor, "cublaslt")
    .requires_that(requirements)
    .reference(kernels::reference_gemm_bf16)
    .device_reference(kernels::device_reference_gemm_bf16)
    .tolerance(bench::relative_l2(1e-2));

}  // namespace

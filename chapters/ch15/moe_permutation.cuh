// ch15/moe_permutation.cuh: moe_dispatch's kernels around the expert GEMMs: the device-side
// permutation of the routed rows into expert-major order (histogram, scan, stable placement, then
// a row copy or only a row index) and the combine that brings each token's expert outputs back,
// weighted. Plain CUDA, except permute_in_cluster (a thread-block cluster: sm_90) and
// permute_in_grid, the same steps as device code that a cooperative launch runs before its own
// work (moe_dispatch's fused_permute GEMM); the example says which side runs which.
//
// Routed row number a = token * top_k + j. Its place in the sorted buffers is position[a]:
// expert-major, and within an expert in routed order (as moe::plan_permutation on the host).
#pragma once

#include <cooperative_groups.h>
#include <cuda_bf16.h>

#include <cstdint>
#include <cub/block/block_scan.cuh>
#include <kernels/bf16_pack.cuh>
#include <kernels/grid_barrier.cuh>
#include <kernels/vector_access.cuh>

#include "moe_dispatch_plan.hpp"

namespace ch15::moe {
namespace {  // each including file gets its own copy: kernels must not clash at link time

using bf16 = __nv_bfloat16;
namespace cg = cooperative_groups;
constexpr int kWarps = 8;  // warps per block of the warp-per-item kernels here

// ---- Both sides: the combine (unpermute). A warp per token, 8 columns (16 bytes) a lane. The
// token's kTopK places and weights are loaded once, a lane each, and shuffled to the warp, so a
// row load never waits for the load of its place; with kTopK fixed the kTopK row loads of a column
// step are all in flight together (each a streaming 16-byte load: y_sorted is read once).
template <int kTopK>
__global__ void __launch_bounds__(32 * kWarps)
    combine(const bf16* __restrict__ y_sorted, const int32_t* __restrict__ position,
            const float* __restrict__ weight, int64_t tokens, int ffn, bf16* __restrict__ y) {
  static_assert(kTopK <= 32, "a lane per routed row of the token");
  const int64_t token = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32;
  if (token >= tokens) return;
  const int lane = threadIdx.x % 32;
  const int32_t my_place = lane < kTopK ? position[token * kTopK + lane] : 0;
  const float my_weight = lane < kTopK ? weight[token * kTopK + lane] : 0.0f;
  int64_t row[kTopK];
  float g[kTopK];
#pragma unroll
  for (int j = 0; j < kTopK; ++j) {
    row[j] = int64_t{__shfl_sync(0xffffffffu, my_place, j)} * ffn;
    g[j] = __shfl_sync(0xffffffffu, my_weight, j);
  }
  for (int c = 8 * lane; c < ffn; c += 8 * 32) {
    uint4 v[kTopK];
#pragma unroll
    for (int j = 0; j < kTopK; ++j)  // read once: no L1 allocation (and volatile: issued in order)
      v[j] = kernels::load_stream(reinterpret_cast<const uint4*>(y_sorted + row[j] + c));
    float sum[kernels::kBf16PerVector] = {};
#pragma unroll
    for (int j = 0; j < kTopK; ++j) {
      float h[kernels::kBf16PerVector];
      kernels::unpack_bf16x8(v[j], h);
#pragma unroll
      for (int i = 0; i < kernels::kBf16PerVector; ++i) sum[i] += g[j] * h[i];
    }
    kernels::store_stream(reinterpret_cast<uint4*>(y + token * ffn + c), kernels::pack_bf16x8(sum));
  }
}
// Copies row `src` of a row-major matrix `cols` wide (cols % 8 == 0) to row `dst`, a warp.
__device__ __forceinline__ void copy_row(const bf16* from, int64_t src, bf16* to, int64_t dst,
                                         int64_t cols) {
  for (int64_t c = 8 * (threadIdx.x % 32); c < cols; c += 8 * 32)
    *reinterpret_cast<uint4*>(to + dst * cols + c) =
        *reinterpret_cast<const uint4*>(from + src * cols + c);
}

// Routed rows in chunks of kChunk, a warp each; histograms are [expert][chunk] so that one
// exclusive scan over them gives every (expert, chunk) its first row in expert-major order.
constexpr int kChunk = 256;

__global__ void __launch_bounds__(32 * kWarps)
    count_chunks(const int32_t* __restrict__ expert, int64_t routed, int experts, int chunks,
                 int32_t* __restrict__ chunk_counts) {
  extern __shared__ int32_t histograms[];  // kWarps x experts
  int32_t* mine = histograms + (threadIdx.x / 32) * experts;
  const int chunk = int(blockIdx.x) * kWarps + int(threadIdx.x / 32), lane = threadIdx.x % 32;
  if (chunk >= chunks) return;
  for (int e = lane; e < experts; e += 32) mine[e] = 0;
  __syncwarp();
  const int64_t end = min(routed, int64_t{chunk + 1} * kChunk);
  for (int64_t a = int64_t{chunk} * kChunk + lane; a < end; a += 32) atomicAdd(&mine[expert[a]], 1);
  __syncwarp();
  for (int e = lane; e < experts; e += 32) chunk_counts[int64_t{e} * chunks + chunk] = mine[e];
}

// One CTA: the exclusive scan of the histograms in place, then per expert its count, first row
// (offsets, experts + 1 of them) and first work item of the grouped GEMM (tile_prefix).
constexpr int kScanThreads = 1024;
__global__ void __launch_bounds__(kScanThreads)
    scan_chunks(int32_t* __restrict__ chunk_base, int experts, int chunks, int routed,
                int tile_rows, int n_tiles, int32_t* __restrict__ counts,
                int32_t* __restrict__ offsets, int32_t* __restrict__ tile_prefix) {
  using Scan = cub::BlockScan<int32_t, kScanThreads>;
  __shared__ typename Scan::TempStorage scratch;
  const int n = experts * chunks, per = (n + kScanThreads - 1) / kScanThreads;
  const int begin = min(n, int(threadIdx.x) * per), end = min(n, begin + per);
  int32_t sum = 0;
  for (int i = begin; i < end; ++i) sum += chunk_base[i];
  int32_t running;
  Scan(scratch).ExclusiveSum(sum, running);
  for (int i = begin; i < end; ++i) {
    const int32_t c = chunk_base[i];
    chunk_base[i] = running;
    running += c;
  }
  __syncthreads();  // every base written; and the scan's scratch free again
  const int e = int(threadIdx.x);
  int32_t rows = 0;
  if (e < experts) {
    const int32_t first = chunk_base[e * chunks];
    rows = (e + 1 < experts ? chunk_base[(e + 1) * chunks] : routed) - first;
    counts[e] = rows;
    offsets[e] = first;
    if (e == experts - 1) offsets[experts] = routed;
  }
  int32_t first_item, items = e < experts ? ch15::moe::row_tiles(rows, tile_rows) * n_tiles : 0;
  int32_t total;
  Scan(scratch).ExclusiveSum(items, first_item, total);
  if (e < experts) tile_prefix[e] = first_item;
  if (e == 0) tile_prefix[experts] = total;
}

// A warp per chunk, in routed-row order 32 at a time: each row's place is its expert's next free
// row; rows of one expert among the 32 take consecutive places in lane order (match_any), so the
// order within an expert is the routed order, as moe::plan_permutation's. With row_token (not
// null) also the inverse, each place's token (routed row / top_k): the index a GEMM that gathers
// its rows from x reads instead of a permuted copy.
__global__ void __launch_bounds__(32 * kWarps)
    place_rows(const int32_t* __restrict__ expert, int64_t routed, int experts, int chunks,
               const int32_t* __restrict__ chunk_base, int32_t* __restrict__ position,
               int top_k = 1, int32_t* __restrict__ row_token = nullptr) {
  extern __shared__ int32_t cursors[];  // kWarps x experts
  int32_t* next = cursors + (threadIdx.x / 32) * experts;
  const int chunk = int(blockIdx.x) * kWarps + int(threadIdx.x / 32), lane = threadIdx.x % 32;
  if (chunk >= chunks) return;
  for (int e = lane; e < experts; e += 32) next[e] = chunk_base[int64_t{e} * chunks + chunk];
  __syncwarp();
  for (int64_t a0 = int64_t{chunk} * kChunk; a0 < min(routed, int64_t{chunk + 1} * kChunk);
       a0 += 32) {
    const int64_t a = a0 + lane;
    const int e = a < routed ? expert[a] : -1;
    const unsigned peers = __match_any_sync(0xffffffffu, e);
    const int rank = __popc(peers & ((1u << lane) - 1));
    const int32_t place = e >= 0 ? next[e] + rank : 0;
    __syncwarp();
    if (e >= 0) {
      position[a] = place;
      if (row_token != nullptr) row_token[place] = int32_t(a / top_k);
      if (rank == 0) next[e] += __popc(peers);
    }
    __syncwarp();
  }
}

// ---- The permutation in one kernel: one cluster of 16 CTAs, else 8 (sm_90) ---------------------
// The three kernels above cost three launches, one CTA that scans 32K chunk counts alone, and
// 256 warps on 32 SMs that walk their chunks twice. A cluster's CTAs can read each other's shared
// memory (DSMEM) and meet at a hardware barrier, so the whole permutation fits one launch:
//   1. each warp counts its contiguous run of routed rows per expert (match_any groups a round's
//      equal experts; the group's first lane adds, so no atomics), into its row of a
//      [warp][expert] table in shared memory; each CTA sums its warps' rows;
//   2. cluster.sync(); a thread per expert reads the CTAs' counts through DSMEM: the expert's
//      total and its rows in the CTAs before this one; two block scans over the experts give the
//      offsets and the GEMM's work-item numbering (CTA 0 writes them); each warp's first place per
//      expert follows (the offset, the earlier CTAs' rows, the earlier warps' rows);
//   3. each warp walks its rows again: a row's place is its warp's next place for its expert plus
//      its rank among the round's equal experts (stable: routed order within an expert, as the
//      host plan's). A last cluster.sync() keeps every CTA's shared memory alive until the
//      others' DSMEM reads are done.
// Routed rows in (cluster CTAs) x kClusterWarps contiguous runs, one per warp, in routed order.
// The kernel is latency-bound per warp (a warp's rounds of match, shared-memory update and store
// are a dependent chain), so it runs as wide a cluster as this GPU can hold: 16 CTAs (a
// non-portable size, which Hopper allows where a GPC has 16 free SMs), else 8 (the portable size).
constexpr int kClusterCtasWide = 16, kClusterCtas = 8;
constexpr int kClusterThreads = 1024;
constexpr int kClusterWarps = kClusterThreads / 32;
// A thread per expert in step 2: moe_dispatch's requirement (experts <= kScanThreads) covers it.
static_assert(kClusterThreads == kScanThreads,
              "experts <= kScanThreads must fit the cluster's CTA");

// Dynamic shared memory: the [warp][expert] table and the CTA's counts per expert.
inline size_t cluster_permutation_smem(int experts) {
  return size_t(kClusterWarps + 1) * size_t(experts) * sizeof(int32_t);
}

// A warp reads the experts of kRoundsInFlight rounds of 32 routed rows before it matches any:
// one memory latency for 8 rounds, not one a round (the rows are cold in L2 after a flush).
constexpr int kRoundsInFlight = 8;
// The experts of rows first + 32 r + lane (-1 at or past `end`).
__device__ __forceinline__ void load_experts(const int32_t* __restrict__ expert, int first, int end,
                                             int lane, int (&ex)[kRoundsInFlight]) {
#pragma unroll
  for (int r = 0; r < kRoundsInFlight; ++r) {
    const int a = first + 32 * r + lane;
    ex[r] = a < end ? __ldg(expert + a) : -1;
  }
}

// ---- The steps of the one-launch permutations: permute_in_cluster below, and permute_in_grid,
// which the grouped GEMM of moe_dispatch's fused_permute runs in its own launch. Each warp owns a
// contiguous run of the routed rows; `table` is [warp][expert] in shared memory, and `mine` the
// warp's row of it.
struct WarpRun {
  int begin, end;
};
// Run `slot` of `slots` equal runs, in routed order.
__device__ __forceinline__ WarpRun warp_run(int routed, int slot, int slots) {
  const int per_warp = (routed + slots - 1) / slots;
  const int begin = min(routed, slot * per_warp);
  return {begin, min(routed, begin + per_warp)};
}

// 1. Count the run's rows per expert into `mine`: match_any groups a round's equal experts and the
// group's first lane adds, so no atomics.
__device__ __forceinline__ void count_run(const int32_t* __restrict__ expert, WarpRun run,
                                          int experts, int32_t* mine) {
  const int lane = int(threadIdx.x) % 32;
  const unsigned lanes_below = (1u << lane) - 1;
  for (int e = lane; e < experts; e += 32) mine[e] = 0;
  __syncwarp();
  for (int a0 = run.begin; a0 < run.end; a0 += 32 * kRoundsInFlight) {
    int ex[kRoundsInFlight];
    load_experts(expert, a0, run.end, lane, ex);
#pragma unroll
    for (int r = 0; r < kRoundsInFlight; ++r) {
      const unsigned peers = __match_any_sync(0xffffffffu, ex[r]);
      if (ex[r] >= 0 && (peers & lanes_below) == 0) mine[ex[r]] += __popc(peers);
      __syncwarp();
    }
  }
}

// The CTA's rows of expert e: its warps' counts summed.
__device__ __forceinline__ int32_t cta_rows_of(const int32_t* table, int warps, int experts,
                                               int e) {
  int32_t rows = 0;
  for (int w = 0; w < warps; ++w) rows += table[w * experts + e];
  return rows;
}

// 2. A thread per expert (experts <= kThreads): from every CTA's rows of its expert
// (rows_in(r, e) for CTA r), the expert's total and its rows in the CTAs before this one; two
// block scans over the experts give the offsets and the GEMM's work-item numbering, which CTA 0
// writes; then each warp's first place per expert (the offset, the earlier CTAs' rows, the
// earlier warps' rows) replaces its count in `table`.
template <int kThreads, class RowsIn>
__device__ __forceinline__ void number_places(
    RowsIn rows_in, int cta, int ctas, int experts, int routed, int tile_rows, int n_tiles,
    int32_t* table, typename cub::BlockScan<int32_t, kThreads>::TempStorage& scratch,
    int32_t* counts, int32_t* offsets, int32_t* tile_prefix) {
  using Scan = cub::BlockScan<int32_t, kThreads>;
  const int e = int(threadIdx.x);
  int32_t total = 0, in_earlier_ctas = 0;
  if (e < experts) {
#pragma unroll 16  // independent loads in flight: one latency per 16 CTAs, not one per CTA
    for (int r = 0; r < ctas; ++r) {
      const int32_t rows = rows_in(r, e);
      total += rows;
      if (r < cta) in_earlier_ctas += rows;
    }
  }
  int32_t first, first_item, all_items;
  const int32_t items = e < experts ? row_tiles(total, tile_rows) * n_tiles : 0;
  Scan(scratch).ExclusiveSum(total, first);
  __syncthreads();  // the scan's scratch free again
  Scan(scratch).ExclusiveSum(items, first_item, all_items);
  if (e < experts) {
    if (cta == 0) {
      counts[e] = total;
      offsets[e] = first;
      tile_prefix[e] = first_item;
    }
    int32_t next = first + in_earlier_ctas;
    for (int w = 0; w < kThreads / 32; ++w) {
      const int32_t rows = table[w * experts + e];
      table[w * experts + e] = next;
      next += rows;
    }
  }
  if (cta == 0 && e == 0) {
    offsets[experts] = routed;
    tile_prefix[experts] = all_items;
  }
  __syncthreads();
}

// 3. Place the run's rows: a row's place is its warp's next place for its expert plus its rank
// among the round's equal experts (stable: routed order within an expert, as the host plan's).
// With row_token (not null) also each place's token.
__device__ __forceinline__ void place_run(const int32_t* __restrict__ expert, WarpRun run,
                                          int top_k, int32_t* mine, int32_t* position,
                                          int32_t* row_token) {
  const int lane = int(threadIdx.x) % 32;
  const unsigned lanes_below = (1u << lane) - 1;
  for (int a0 = run.begin; a0 < run.end; a0 += 32 * kRoundsInFlight) {
    int ex[kRoundsInFlight];
    load_experts(expert, a0, run.end, lane, ex);  // L1 hits now
#pragma unroll
    for (int r = 0; r < kRoundsInFlight; ++r) {
      const int a = a0 + 32 * r + lane;
      const unsigned peers = __match_any_sync(0xffffffffu, ex[r]);
      const int rank = __popc(peers & lanes_below);
      if (ex[r] >= 0) {
        const int32_t place = mine[ex[r]] + rank;
        position[a] = place;
        if (row_token != nullptr) row_token[place] = a / top_k;
      }
      __syncwarp();
      if (ex[r] >= 0 && rank == 0) mine[ex[r]] += __popc(peers);
      __syncwarp();
    }
  }
}

__global__ void __launch_bounds__(kClusterThreads)
    permute_in_cluster(const int32_t* __restrict__ expert, int routed, int experts, int top_k,
                       int tile_rows, int n_tiles, int32_t* __restrict__ counts,
                       int32_t* __restrict__ offsets, int32_t* __restrict__ tile_prefix,
                       int32_t* __restrict__ position, int32_t* __restrict__ row_token) {
  __shared__ typename cub::BlockScan<int32_t, kClusterThreads>::TempStorage scratch;
  extern __shared__ int32_t table[];  // [warp][expert]: rows counted, then the warp's next place
  int32_t* cta_rows = table + kClusterWarps * experts;  // this CTA's rows of each expert
  const cg::cluster_group cluster = cg::this_cluster();
  const int cta = int(cluster.block_rank()), ctas = int(cluster.num_blocks());
  const int warp = int(threadIdx.x) / 32;
  const WarpRun run = warp_run(routed, cta * kClusterWarps + warp, ctas * kClusterWarps);
  int32_t* mine = table + warp * experts;

  count_run(expert, run, experts, mine);
  __syncthreads();
  for (int e = int(threadIdx.x); e < experts; e += kClusterThreads)
    cta_rows[e] = cta_rows_of(table, kClusterWarps, experts, e);
  cluster.sync();  // every CTA's counts written and visible to the cluster
  number_places<kClusterThreads>(
      [&](int r, int e) { return *cluster.map_shared_rank(cta_rows + e, r); },  // DSMEM loads
      cta, ctas, experts, routed, tile_rows, n_tiles, table, scratch, counts, offsets, tile_prefix);
  place_run(expert, run, top_k, mine, position, row_token);
  cluster.sync();  // no CTA frees its shared memory while another may still read it
}

// ---- The permutation inside a cooperative launch (moe_dispatch's fused_permute) ----------------
// permute_in_cluster is a launch of its own on 16 SMs while the GEMM's CTAs wait for it. Here the
// GEMM's own CTAs, all resident, run it first, with every thread, before their roles split: each
// CTA counts its runs and writes its rows per expert to cta_rows[cta][expert]; a grid barrier
// (kernels/grid_barrier.cuh); each CTA then reads every CTA's rows from L2 and numbers the places
// itself, so no second barrier is needed for the totals; each places its rows; a second barrier
// makes every place's token visible before any producer gathers a row. The GEMM then reads the
// outputs with plain loads: the barrier's acquire orders them after the other CTAs' writes (the
// non-coherent path, __ldg, would not be).
struct GridPermutation {
  const int32_t* expert;  // [routed]: each routed row's expert
  int routed, top_k;
  int32_t* cta_rows;            // [grid][experts]: each CTA's rows per expert
  int32_t* counts;              // [experts]
  int32_t* offsets;             // [experts + 1]
  int32_t* tile_prefix;         // [experts + 1]
  int32_t* position;            // [routed]
  int32_t* row_token;           // [routed]
  unsigned long long* barrier;  // kernels::GridBarrier's counter, zeroed once
};

// Every thread of every CTA calls it; `table` is kThreads / 32 * experts ints of shared memory.
template <int kThreads>
__device__ __forceinline__ void permute_in_grid(
    const GridPermutation& p, int experts, int tile_rows, int n_tiles, int32_t* table,
    typename cub::BlockScan<int32_t, kThreads>::TempStorage& scratch) {
  constexpr int kCtaWarps = kThreads / 32;
  kernels::GridBarrier barrier(p.barrier);
  const int cta = int(blockIdx.x), ctas = int(gridDim.x), warp = int(threadIdx.x) / 32;
  const WarpRun run = warp_run(p.routed, cta * kCtaWarps + warp, ctas * kCtaWarps);
  int32_t* mine = table + warp * experts;

  count_run(p.expert, run, experts, mine);
  __syncthreads();
  for (int e = int(threadIdx.x); e < experts; e += kThreads)
    p.cta_rows[int64_t{cta} * experts + e] = cta_rows_of(table, kCtaWarps, experts, e);
  barrier.sync();  // every CTA's rows in L2
  number_places<kThreads>([&](int r, int e) { return p.cta_rows[int64_t{r} * experts + e]; }, cta,
                          ctas, experts, p.routed, tile_rows, n_tiles, table, scratch, p.counts,
                          p.offsets, p.tile_prefix);
  place_run(p.expert, run, p.top_k, mine, p.position, p.row_token);
  barrier.sync();  // every place's token, and CTA 0's offsets and tile_prefix, in L2
}

// A warp per routed row: x[token] to its place.
__global__ void __launch_bounds__(32 * kWarps)
    scatter_rows(const bf16* __restrict__ x, const int32_t* __restrict__ position, int64_t routed,
                 int top_k, int64_t hidden, bf16* __restrict__ x_sorted) {
  const int64_t a = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32;
  if (a < routed) copy_row(x, a / top_k, x_sorted, position[a], hidden);
}

}  // namespace
}  // namespace ch15::moe

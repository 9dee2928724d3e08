// ch15/moe_permutation.cuh: moe_dispatch's kernels around the expert GEMMs: the device-side
// permutation of the routed rows into expert-major order (histogram, scan, stable placement, then
// a row copy or only a row index) and the combine that brings each token's expert outputs back,
// weighted. Plain CUDA (any architecture); the example says which side runs which.
//
// Routed row number a = token * top_k + j. Its place in the sorted buffers is position[a]:
// expert-major, and within an expert in routed order (as moe::plan_permutation on the host).
#pragma once

#include <cuda_bf16.h>

#include <cstdint>
#include <cub/block/block_scan.cuh>

#include "moe_dispatch_plan.hpp"

namespace ch15::moe {
namespace {  // each including file gets its own copy: kernels must not clash at link time

using bf16 = __nv_bfloat16;
constexpr int kWarps = 8;  // warps per block of the warp-per-item kernels here

// ---- Both sides: the combine (unpermute). A warp per token, 8 columns (16 bytes) a lane.
__global__ void __launch_bounds__(32 * kWarps)
    combine(const bf16* __restrict__ y_sorted, const int32_t* __restrict__ position,
            const float* __restrict__ weight, int64_t tokens, int top_k, int ffn,
            bf16* __restrict__ y) {
  const int64_t token = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32;
  if (token >= tokens) return;
  for (int c = 8 * (threadIdx.x % 32); c < ffn; c += 8 * 32) {
    float sum[8] = {};
    for (int j = 0; j < top_k; ++j) {
      const float g = weight[token * top_k + j];
      const uint4 v = *reinterpret_cast<const uint4*>(
          y_sorted + int64_t{position[token * top_k + j]} * ffn + c);
      const bf16* h = reinterpret_cast<const bf16*>(&v);
#pragma unroll
      for (int i = 0; i < 8; ++i) sum[i] += g * __bfloat162float(h[i]);
    }
    uint4 out;
    bf16* o = reinterpret_cast<bf16*>(&out);
#pragma unroll
    for (int i = 0; i < 8; ++i) o[i] = __float2bfloat16(sum[i]);
    *reinterpret_cast<uint4*>(y + token * ffn + c) = out;
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

// A warp per routed row: x[token] to its place.
__global__ void __launch_bounds__(32 * kWarps)
    scatter_rows(const bf16* __restrict__ x, const int32_t* __restrict__ position, int64_t routed,
                 int top_k, int64_t hidden, bf16* __restrict__ x_sorted) {
  const int64_t a = blockIdx.x * int64_t{kWarps} + threadIdx.x / 32;
  if (a < routed) copy_row(x, a / top_k, x_sorted, position[a], hidden);
}

}  // namespace
}  // namespace ch15::moe

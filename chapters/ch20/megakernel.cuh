// ch20/megakernel.cuh: the decoder layer's decode step as ONE persistent launch (ch20's
// "megakernel" rung), 1 to 8 tokens, sm_90 and later.
//
// Rung 6 runs the step as 6 kernels chained by programmatic launches: each kernel's first weight
// loads overlap the tail of the one ahead, but a kernel still ends, its last blocks draining on a
// few SMs, and the next one's blocks start from nothing. Here one grid of co-resident blocks (1 or
// 2 per SM) walks the same ops as phases, separated by grid barriers:
//   1. qkv       every block: rmsnorm(x) · norm1 into shared memory; the grid's warps share the
//                rows of W_qkv; epilogue RoPE, q packed, k and v appended (rung 6's QkvRopeAppend)
//   2. attention the (head, chunk of keys) items of flash decoding (kernels/decode_attention.cuh's
//                attend_split), over the blocks, the 4 query heads of a KV head on adjacent
//                blocks; the block that finishes a head's last chunk merges the head: a warp
//                folds the chunks' partials and the new key (no barrier: the counters below)
//   3. o         prologue the attention output; epilogue h = x + o
//   4. gate/up   prologue rmsnorm(h) · norm2; epilogue SwiGLU
//   5. down      prologue the SwiGLU output; epilogue y = h + down
// The products are kernels/streaming_gemv.cuh's, the prologues and epilogues rung 6's
// (ch20/layer_ops.cuh): this rung changes only what happens between them. Weights are inputs
// nothing in the step writes, so a warp issues the next projection's first slab (256 bytes a lane,
// the registers the product starts from) between arriving at a barrier and waiting at it, and the
// weight stream runs on while the barrier resolves; before the attention the blocks prefetch their
// first chunk's K and V rows into L2 the same way (the cache, too, is an input), and during it the
// next chunk's.
//
// The L2-ahead form (ch20's rung 7b, `L2Ahead::o_rest`): the attention phase reads the cache,
// mostly out of L2 once the chunks above are prefetched, and leaves HBM nearly idle for its length,
// while the o projection that follows streams W_o from HBM with only each row group's first slab
// issued ahead (load_first, while the barrier resolves). In this form every block, right after its
// first chunk's K and V prefetches, issues its share of the rest of W_o (every row past its first
// slab, slab by slab, so a partial budget covers what the warps read first: ch20/l2_ahead_plan.hpp)
// as L2 prefetches, as much as the L2 holds beside the cache: they go out behind the cache's, and
// the o phase then reads those bytes from L2. (At batch 1 and 2 a block has one attention item,
// so they must go out before it, not after.) The bytes the step moves from HBM are the same; only
// when they move changes.
//
// The group form (ch20's rung 7c, `Attention::group_mma`): the attention phase's items are (KV
// head, chunk) instead of (query head, chunk), and each runs ch20/group_attention_mma.cuh: the
// group's query heads from one read of each K and V row, the products on tensor cores; the block
// that completes a KV head's chunks merges its query heads, a warp each. Rung 7d
// (`Attention::group_mma_merge_at_once`) merges them with the whole block instead, every load the
// merge needs issued before any is waited on (merge_group_at_once). The other phases are rung 7's.
// Rung 7e is rung 7d with the down projection in groups of 2 rows (NarrowSlab), so that nearly
// every warp of the grid streams W_down.
//
// The chained launch (ch20's rung 7f, `Launch::chained`): steps run back to back, as a model's
// layers do, and between two cooperative launches the GPU idles: the last blocks drain, the next
// launch is processed, its blocks start and only then issue their first weights. Launched
// programmatically instead (kernels/pdl.cuh), a step lets the next one launch once every block
// has reached its down phase; the next step's blocks take SMs as this step's blocks exit, issue
// their first W_qkv slab (a weight: nothing upstream writes it) and wait there
// (griddepcontrol.wait) until this step has completed and its writes are visible. Everything else,
// the grid barrier's first read included, comes after that wait. The driver does not overlap a
// cooperative launch with the kernel ahead (measured: the two attributes together ran as the
// cooperative launch alone), so this launch drops the cooperative attribute and with it the
// launch's residency check: the grid is still what the occupancy calculator says fits, every block
// is resident on a GPU this process has to itself, and a grid that is not (another process's
// kernels holding SMs) traps at its first barrier instead of hanging. In an ordinary launch the
// wait and the allow are no-ops, so the cooperative rungs run the same kernel.
//
// The grid barrier is kernels/grid_barrier.cuh's: one 64-bit arrival counter in global memory that
// only grows, a release add to arrive and an acquire spin to wait. It is correct only if every
// block is resident at once: the host sizes the grid from
// cudaOccupancyMaxActiveBlocksPerMultiprocessor and launches it cooperatively (the launch fails,
// rather than hangs, if the grid cannot be co-resident; the chained launch above trades that check
// away), and a GPU where no block fits is SKIPPED.
// A barrier that waits longer than kernels::kGridBarrierTimeoutNs traps: a bug fails the run
// instead of hanging it.
//
// The merge of a (sequence, query head) needs only that head's chunks, not the whole attention
// phase, so it waits on a counter of its own instead of a grid barrier (merge_counts, one per
// head, zero at every launch's start). A block that finishes a chunk of head bh (attend_split has
// written its partial) synchronizes, so every thread's share of the partial precedes what follows,
// and warp 0's lane 0 adds 1 to the head's counter with kernels/flags.cuh's fetch_add_acq_rel: the
// release half publishes the block's partial (cumulative over the block's threads through the
// __syncthreads), the acquire half makes visible the partials of every block that counted in
// before (their increments are one chain of atomics on the counter). The lane that reads splits - 1
// holds the head's last chunk: every partial is written and visible to it, then through
// __syncwarp to its warp, which merges the head (merge_pair) while the block's other warps go on
// to its next chunk. Exactly one block reads splits - 1, so each head is merged once. q and the
// new key and value that the merge also reads were written before the barrier after qkv. That
// lane, the counter's last user in the launch (every chunk has counted in), stores 0 to it: the
// next launch starts after this one ends, so it finds every counter at zero again (as it finds the
// grid barrier's arrival count at a multiple of the grid). The grid barrier after the attention,
// which the o projection needs (each row reads every head's output), orders the merges' stores of
// the output before it.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <bench/bench.hpp>
#include <bench/stats.hpp>
#include <cstdint>
#include <kernels/flags.cuh>
#include <kernels/grid_barrier.cuh>
#include <kernels/occupancy.cuh>
#include <kernels/online_softmax.cuh>
#include <kernels/pdl.cuh>
#include <kernels/vector_access.cuh>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "group_attention_mma.cuh"
#include "l2_ahead_plan.hpp"
#include "layer_ops.cuh"

namespace ch20::mega {

constexpr int kThreads = gemv::kThreads, kWarps = gemv::kWarps;
static_assert(kThreads == decode::kThreads, "the attention items and the products share a block");
constexpr int kMaxBlocksPerSm = 2;  // as rung 6's GEMVs: 16 warps, 128 KB of weights in flight
// K and V rows of a chunk prefetched into L2 ahead of its item: 256 KB of a KV head's chunk. At
// batch 1 that is every chunk whole (512 keys): the first chunks, prefetched while the barrier
// after qkv resolves, are the whole 17 MB cache, a third of the H100's L2. At batch 8 (chunks of
// 2048 keys, about 4 items a block) the next item's first quarter.
constexpr int64_t kPrefetchKeys = 512;

// The step's inputs and outputs (as DecoderLayer holds them).
struct Io {
  const bf16 *x, *norm1, *norm2, *w_qkv, *w_o, *w_gate_up, *w_down, *k_cache, *v_cache;
  bf16 *y, *k_new, *v_new;
};

// Everything a launch reads: the step's buffers, the activations passed between phases through
// global memory (a phase's output is spread over every block, and the next phase's blocks each
// need all of it), and the sizes.
struct Step {
  Io io;
  bf16 *q, *attn, *h, *act;  // [tokens][hidden] x 3, [tokens][ffn]
  float *part_ml, *part_o;   // the attention chunks' partials, as decode::finish_pass writes them
  unsigned long long* barrier;  // arrivals since the buffer was zeroed: a multiple of the grid
  uint32_t* merge_counts;    // [tokens][q_heads]: chunks of the head finished; 0 between launches
  int tokens, q_heads, kv_heads;
  int64_t group, hidden, qkv_dim, ffn, past, chunk;
  int splits;
  int64_t o_rest_lines;  // 128-byte lines of W_o past each row's first slab to prefetch; 0: none
  uint64_t* stamps;      // [blocks][kStamps] or null: see stamp() below
};

// ---- the grid barrier (kernels/grid_barrier.cuh), in two halves so that loads can go out between
// them: the first weight slab of the next phase is issued between arrive() and wait().
using kernels::global_ns;
using kernels::GridBarrier;

// ---- where a launch's time goes: phase stamps ---------------------------------------------------
// Only for DecoderMegakernel::phase_times (untimed, after the samples): with p.stamps set, thread 0
// of every block writes the global timer at each phase's start (after the barrier ahead releases
// it; the launch's start for qkv) and end (its last thread done, before it arrives), slots 2 x
// phase and 2 x phase + 1. A timed launch has p.stamps null and pays two uniform branches a phase.
constexpr int kPhases = 5, kStamps = 2 * kPhases;
constexpr const char* kPhaseNames[kPhases] = {"qkv", "attention", "o", "gate_up", "down"};
__device__ __forceinline__ void stamp(const Step& p, int slot) {
  if (p.stamps == nullptr) return;
  __syncthreads();  // the phase's end is its last thread's
  if (threadIdx.x == 0) p.stamps[int64_t{blockIdx.x} * kStamps + slot] = global_ns();
}

// ---- the phases --------------------------------------------------------------------------------
using Slab = uint4[gemv::kRowsPerWarp][gemv::kVectorsPerRow];
// The down projection's slab in narrow groups (rung 7e): 2 rows a warp, 8 loads a row, the same
// 256 bytes a lane. W_down's 4096 rows then make 2048 groups, so 2048 of the grid's 2112 warps
// stream it (1024 in groups of 4), each in half as many dependent round trips.
constexpr int kNarrowRows = 2;
using NarrowSlab = uint4[kNarrowRows][gemv::kRowsPerWarp * gemv::kVectorsPerRow / kNarrowRows];

// A projection: the prologue into shared memory, then the warps' groups; w holds the slab of group
// `first` (issued before the barrier ahead resolved).
template <int kTokens, class Op, class W>
__device__ __forceinline__ void project(const bf16* weight, int64_t k, int64_t groups, const Op& op,
                                        const Step& p, uint4* act, int64_t first, W& w) {
  gemv::fill_activations<kTokens>(op, act, p.tokens, k);
  __syncthreads();
  gemv::stream_groups<kTokens>(weight, k, groups, p.tokens, op, act, first,
                               int64_t{gridDim.x} * kWarps, w);
}

// The first slab of the warp's first group of the next projection, or zeros for a warp with no
// group there: written on both paths, so the previous phase's slab is dead across the phases
// between (a conditional load would keep it live through the attention: 188 registers).
template <class Op, int kR, int kV>
__device__ __forceinline__ void load_first(const bf16* weight, int64_t k, int64_t groups,
                                           const Op& op, int64_t first, uint4 (&w)[kR][kV]) {
  if (first < groups) {
    gemv::load_slab(weight, k, op, first, 0, w);
    return;
  }
#pragma unroll
  for (int slot = 0; slot < kR; ++slot)
#pragma unroll
    for (int u = 0; u < kV; ++u) w[slot][u] = make_uint4(0, 0, 0, 0);
}

// The registers the down projection streams in: the kernel's Slab, or in narrow groups a
// NarrowSlab of its own.
template <bool kNarrowDown>
__device__ __forceinline__ auto& down_slab(Slab& w, NarrowSlab& narrow) {
  if constexpr (kNarrowDown)
    return narrow;
  else
    return w;
}

// How the attention phase runs (the header comment): a block per (query head, chunk) on the FMA
// pipes (rung 7), or per (KV head, chunk) on tensor cores (rung 7c), the completing block's warps
// merging the group a head each (merge_pair) or the whole block at once (rung 7d,
// merge_group_at_once).
enum class Attention { per_head, group_mma, group_mma_merge_at_once };
constexpr bool per_kv_head(Attention a) { return a != Attention::per_head; }

// The attention's items. Per head: item = (kv pair x splits + split) x group + g, query head kv
// pair x group + g; the group's query heads read the same chunk of K and V: consecutive items,
// adjacent blocks, at the same time, so HBM serves the chunk once. Group: item = kv pair x splits
// + split.
template <Attention kAttention>
__device__ __forceinline__ int64_t attention_items(const Step& p) {
  const int64_t per_group = int64_t{p.tokens} * p.kv_heads * p.splits;
  return per_kv_head(kAttention) ? per_group : per_group * p.group;
}

// The first kPrefetchKeys K and V rows of an item's chunk into L2, by the block (per head, for the
// first head of the group only: its siblings read the same rows).
template <Attention kAttention>
__device__ __forceinline__ void prefetch_chunk(const Step& p, int64_t item) {
  const int64_t per_chunk = per_kv_head(kAttention) ? 1 : p.group;
  if (item >= attention_items<kAttention>(p) || item % per_chunk != 0) return;
  const int64_t kv_split = item / per_chunk, begin = kv_split % p.splits * p.chunk;
  const int64_t keys = min(min(p.chunk, p.past - begin), int64_t{kPrefetchKeys});
  const int64_t row0 = (kv_split / p.splits * p.past + begin) * kHeadDim;
  constexpr int kLine = 128 / sizeof(bf16);  // elements per 128-byte line
  for (int64_t i = threadIdx.x; i < keys * kHeadDim / kLine; i += kThreads) {
    kernels::prefetch_l2(p.io.k_cache + row0 + i * kLine);
    kernels::prefetch_l2(p.io.v_cache + row0 + i * kLine);
  }
}

// The first p.o_rest_lines of W_o's lines past each row's first slab (ch20/l2_ahead_plan.hpp's
// order), into L2, the grid's threads sharing them; none in rung 7's plan.
static_assert(l2_ahead::kSlabElements ==
                  int64_t{gemv::kVectorsPerRow} * 32 * kernels::kBf16PerVector,
              "the plan's slab is load_slab's first pass");
__device__ __forceinline__ void prefetch_o_rest(const Step& p) {
  for (int64_t i = int64_t{blockIdx.x} * kThreads + threadIdx.x; i < p.o_rest_lines;
       i += int64_t{gridDim.x} * kThreads)
    kernels::prefetch_l2(p.io.w_o + l2_ahead::line_offset(p.hidden, i));
}

// Counts one finished chunk into `count` (from one thread, acquire and release): true for the chunk
// that completes all `splits`, whose thread then sees every chunk's partials and resets the count
// for the next launch (no other chunk is left to count in).
__device__ __forceinline__ bool count_in(uint32_t* count, int splits) {
  const bool last =
      kernels::fetch_add_acq_rel<kernels::Scope::gpu>(count, 1) == uint32_t(splits - 1);
  if (last) *count = 0;
  return last;
}

// Counts the block's finished chunk of pair bh in (call after a __syncthreads that follows the
// chunk's partial, from every lane of one warp). True, on every lane, for the chunk that completes
// the pair: its partials, everyone's, are then visible to the warp, which merges them.
__device__ __forceinline__ bool completes_pair(const Step& p, int64_t bh) {
  bool last = false;
  if (threadIdx.x % 32 == 0) last = count_in(p.merge_counts + bh, p.splits);
  last = __shfl_sync(0xffffffffu, last, 0);
  __syncwarp();  // lane 0's acquire, before the other lanes read the partials
  return last;
}

// Query head bh's score against the new key (its KV head's row kv_row of k_new), on every lane of
// the warp (lane: dimensions 4 lane .. 4 lane + 3 of the dot product), in log2 units, as the
// attention keeps its scores (kernels/online_softmax.cuh).
__device__ __forceinline__ float new_key_score(const Step& p, int64_t bh, int64_t kv_row) {
  const int d = threadIdx.x % 32 * 4;
  const auto* q = reinterpret_cast<const __nv_bfloat162*>(p.q + bh * kHeadDim + d);
  const auto* k = reinterpret_cast<const __nv_bfloat162*>(p.io.k_new + kv_row + d);
  float q_k = 0;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float2 qf = __bfloat1622float2(q[i]), kf = __bfloat1622float2(k[i]);
    q_k += qf.x * kf.x + qf.y * kf.y;
  }
  return kernels::warp_reduce(q_k, kernels::Sum{}) * (kernels::kLog2e * rsqrtf(float(kHeadDim)));
}

// Pair bh's chunks merged with the new key, by one warp (lane: dimensions 4 lane .. 4 lane + 3).
__device__ __forceinline__ void merge_pair(const Step& p, int64_t bh) {
  const int d = threadIdx.x % 32 * 4;
  const int64_t kv_row = bh / p.group * kHeadDim;
  const auto* v = reinterpret_cast<const __nv_bfloat162*>(p.io.v_new + kv_row + d);
  float o_new[4];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float2 vf = __bfloat1622float2(v[i]);
    o_new[2 * i] = vf.x, o_new[2 * i + 1] = vf.y;
  }
  const float score = new_key_score(p, bh, kv_row);
  float m = kernels::kEmptyMax, l = 0, o[4] = {0, 0, 0, 0};
  for (int split = 0; split < p.splits; ++split) {
    const int64_t slot = bh * p.splits + split;
    const float4 part = *reinterpret_cast<const float4*>(p.part_o + slot * kHeadDim + d);
    const float o_split[4] = {part.x, part.y, part.z, part.w};
    kernels::merge_softmax_parts(m, l, o, p.part_ml[2 * slot], p.part_ml[2 * slot + 1], o_split);
  }
  kernels::merge_softmax_parts(m, l, o, score, 1.0f, o_new);
  auto* out = reinterpret_cast<__nv_bfloat162*>(p.attn + bh * kHeadDim + d);
  out[0] = __floats2bfloat162_rn(o[0] / l, o[1] / l);
  out[1] = __floats2bfloat162_rn(o[2] / l, o[3] / l);
}

// KV pair `pair`'s first query head (the group form's counter and merge).
__device__ __forceinline__ int64_t first_head(const Step& p, int64_t pair) {
  return group_mma::first_query_head(pair, p.q_heads, p.kv_heads, p.group);
}

// Counts the block's finished chunk of KV pair `pair` in (call after a __syncthreads that follows
// the chunk's partials, from every thread): true, on every thread, for the chunk that completes
// the pair (one counter a group: its first query head's). As completes_pair, with the block's
// barrier carrying thread 0's acquire to the warps that then merge the group's heads, one each
// (merge_pair). (A merge of the group by the whole block, every split's loads at once, measured no
// faster on an H200: README, "Rung 7c".)
__device__ __forceinline__ bool completes_group(const Step& p, int64_t pair) {
  __shared__ bool last;
  if (threadIdx.x == 0) last = count_in(p.merge_counts + first_head(p, pair), p.splits);
  __syncthreads();
  return last;
}

// Pair `pair`'s group merged by the whole completing block (call where completes_group said so,
// from every thread), each warp half a query head's dimensions, two a lane, with every load the
// merge needs issued at once: the lane's split's (m, l), the first 32 splits' partial o, q and the
// new key and value. merge_pair walks the splits one after another, each step waiting on its own
// loads from L2 (at batch 1 the longest link of rung 7c's attention phase: README, "Rung 7c");
// this waits on one round trip, then merges in registers (each split's weight a shuffle from its
// lane).
__device__ __forceinline__ void merge_group_at_once(const Step& p, int64_t pair) {
  constexpr int kAtOnce = 32;  // the splits whose o is loaded up front (beyond: one at a time)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, splits = p.splits;
  const int64_t kv_row = pair * kHeadDim;  // k_new and v_new: [token][kv_heads][128]
  for (int job = warp; job < 2 * p.group; job += kWarps) {
    const int64_t bh = first_head(p, pair) + job / 2;
    const int d = job % 2 * (kHeadDim / 2) + 2 * lane;  // the lane's two output dimensions
    const float* part_o = p.part_o + bh * splits * kHeadDim + d;
    const auto* part_ml = reinterpret_cast<const float2*>(p.part_ml) + bh * splits;  // (m, l)
    float2 o[kAtOnce];
#pragma unroll
    for (int j = 0; j < kAtOnce; ++j)
      o[j] = j < splits ? *reinterpret_cast<const float2*>(part_o + int64_t{j} * kHeadDim)
                        : make_float2(0.f, 0.f);
    const float2 ml = lane < splits ? part_ml[lane] : make_float2(kernels::kEmptyMax, 0.f);
    const float2 v =
        __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(p.io.v_new + kv_row + d));
    const float score = new_key_score(p, bh, kv_row);
    // The largest score, then the weights 2^(m_s - top) and their sum, a lane a split.
    float top = fmaxf(score, ml.x);
    for (int s = lane + 32; s < splits; s += 32) top = fmaxf(top, part_ml[s].x);
    top = kernels::warp_reduce(top, kernels::Max{});
    const float weight = kernels::exp2_ftz(ml.x - top), new_weight = kernels::exp2_ftz(score - top);
    float sum = weight * ml.y;
    for (int s = lane + 32; s < splits; s += 32)
      sum += kernels::exp2_ftz(part_ml[s].x - top) * part_ml[s].y;
    sum = kernels::warp_reduce(sum, kernels::Sum{}) + new_weight;
    float2 acc = make_float2(new_weight * v.x, new_weight * v.y);
#pragma unroll
    for (int j = 0; j < kAtOnce; ++j) {  // past `splits`, o is zero
      const float w = __shfl_sync(0xffffffffu, weight, j);
      acc.x += w * o[j].x, acc.y += w * o[j].y;
    }
    for (int s = kAtOnce; s < splits; ++s) {
      const float w = kernels::exp2_ftz(part_ml[s].x - top);
      const float2 os = *reinterpret_cast<const float2*>(part_o + int64_t{s} * kHeadDim);
      acc.x += w * os.x, acc.y += w * os.y;
    }
    *reinterpret_cast<__nv_bfloat162*>(p.attn + bh * kHeadDim + d) =
        __floats2bfloat162_rn(acc.x / sum, acc.y / sum);
  }
}

// At 1 and 2 tokens rung 6's GEMVs need under 128 registers, so 2 blocks fit an SM; at 4 and 8 one.
template <int kTokens, Attention kAttention, bool kNarrowDown = false>
__global__ void __launch_bounds__(kThreads, kTokens <= 2 ? kMaxBlocksPerSm : 1)
    decoder_layer(Step p) {
  extern __shared__ uint4 smem[];  // the projections' activations, or the attention's SplitSmem
  const int warp = threadIdx.x / 32;
  // Warps numbered across the blocks first: a projection with fewer row groups than the grid has
  // warps (qkv at batch 1: 1536 groups) spreads them over every SM, not over the first blocks.
  const int64_t first = int64_t{warp} * gridDim.x + blockIdx.x;
  const QkvRopeAppend qkv{p.io.x,     p.io.norm1, p.q,        p.io.k_new,
                          p.io.v_new, p.q_heads,  p.kv_heads, p.past};
  constexpr int kDownRows = kNarrowDown ? kNarrowRows : gemv::kRowsPerWarp;
  const ResidualProjection<> o{p.attn, p.io.x, p.h, p.hidden};
  const ResidualProjection<kDownRows> down{p.act, p.h, p.io.y, p.hidden};
  const GateUpSwiglu gate_up{p.h, p.io.norm2, p.act, p.ffn};
  const int64_t qkv_groups = p.qkv_dim / gemv::kRowsPerWarp,
                o_groups = p.hidden / gemv::kRowsPerWarp, gate_up_groups = p.ffn / 2,
                down_groups = p.hidden / kDownRows;
  Slab w;
  NarrowSlab narrow;  // rung 7e's down slab; unused otherwise
  auto& w_down = down_slab<kNarrowDown>(w, narrow);

  // Chained (rung 7f), the first W_qkv slab goes out while the step ahead finishes; nothing that
  // step writes (x is a layer's output in a model; the counters; the activations) is read before
  // the wait. Launched the ordinary way, the wait returns at once.
  load_first(p.io.w_qkv, p.hidden, qkv_groups, qkv, first, w);
  kernels::pdl::wait_for_prerequisite();
  GridBarrier barrier(p.barrier);

  // 1. qkv.
  stamp(p, 0);
  project<kTokens>(p.io.w_qkv, p.hidden, qkv_groups, qkv, p, smem, first, w);
  stamp(p, 1);
  barrier.arrive();
  prefetch_chunk<kAttention>(p, blockIdx.x);
  prefetch_o_rest(p);  // rung 7b: behind the cache's lines, for the o phase
  barrier.wait();
  stamp(p, 2);

  // 2. attention over the cache, into the partials; the last chunk of a head to finish merges the
  // head's partials and the new key.
  if constexpr (per_kv_head(kAttention)) {
    const group_mma::Args args{p.q,     p.io.k_cache, p.io.v_cache, p.part_ml, p.part_o,  p.past,
                               p.chunk, p.splits,     int(p.group), p.q_heads, p.kv_heads};
    for (int64_t item = blockIdx.x; item < attention_items<kAttention>(p); item += gridDim.x) {
      prefetch_chunk<kAttention>(p, item + gridDim.x);
      const int64_t pair = item / p.splits;
      group_mma::attend(args, pair, int(item % p.splits), reinterpret_cast<float*>(smem));
      __syncthreads();  // every thread's share of the partials, before thread 0 counts them in
      if (!completes_group(p, pair)) continue;
      if constexpr (kAttention == Attention::group_mma_merge_at_once)
        merge_group_at_once(p, pair);
      else if (warp < p.group)
        merge_pair(p, first_head(p, pair) + warp);
    }
  } else {
    const decode::Args args{p.q, nullptr, p.part_ml, p.part_o, 1, 0, p.chunk, p.splits};
    const GqaCache cache{p.io.k_cache, p.io.v_cache, p.past, p.group};
    auto& split_smem = *reinterpret_cast<decode::SplitSmem<1>*>(smem);
    for (int64_t item = blockIdx.x; item < attention_items<kAttention>(p); item += gridDim.x) {
      prefetch_chunk<kAttention>(p, item + gridDim.x);  // the block's next chunk, meanwhile
      const int64_t kv_split = item / p.group, bh = kv_split / p.splits * p.group + item % p.group;
      decode::attend_split<1>(args, cache, bh, int(kv_split % p.splits), split_smem);
      __syncthreads();  // every thread's share of the partial, before warp 0 counts it in
      if (warp == 0 && completes_pair(p, bh)) merge_pair(p, bh);
    }
  }
  stamp(p, 3);
  barrier.arrive();  // the attention output, every head merged
  load_first(p.io.w_o, p.hidden, o_groups, o, first, w);  // held to phase 3
  barrier.wait();
  stamp(p, 4);

  // 3. o: h = x + attn · W_oᵀ.
  project<kTokens>(p.io.w_o, p.hidden, o_groups, o, p, smem, first, w);
  stamp(p, 5);
  barrier.arrive();
  load_first(p.io.w_gate_up, p.hidden, gate_up_groups, gate_up, first, w);
  barrier.wait();
  stamp(p, 6);

  // 4. gate/up with SwiGLU.
  project<kTokens>(p.io.w_gate_up, p.hidden, gate_up_groups, gate_up, p, smem, first, w);
  stamp(p, 7);
  barrier.arrive();
  load_first(p.io.w_down, p.ffn, down_groups, down, first, w_down);
  barrier.wait();
  kernels::pdl::allow_dependents();  // chained: the next step may launch, its blocks taking SMs
                                     // as this step's exit (it waits for this one to complete)
  stamp(p, 8);

  // 5. down: y = h + act · W_downᵀ. The launch's end is the last barrier.
  project<kTokens>(p.io.w_down, p.ffn, down_groups, down, p, smem, first, w_down);
  stamp(p, 9);
}

// ---- the host side: planned untimed, one cooperative launch a step --------------------------
// What the attention phase prefetches into L2 besides the cache: nothing (rung 7), or the rest of
// W_o (rung 7b, the header's L2-ahead form).
enum class L2Ahead { none, o_rest };

// How a step is launched: cooperatively (rungs 7-7e), or programmatically after the step ahead
// (rung 7f, the header's chained launch).
enum class Launch { cooperative, chained };

// The KV cache the attention phase reads, in bytes.
inline int64_t cache_bytes(const LayerDims& dims) {
  return dims.batch * dims.kv_heads * dims.past * kHeadDim * 2 * int64_t{sizeof(bf16)};
}

// The kernel for `tokens` tokens (rounded up to 1, 2, 4 or 8).
template <Attention kAttention, bool kNarrowDown = false>
void (*kernel_of(int tokens))(Step) {
  switch (gemv::padded_tokens(tokens)) {
    case 1:
      return decoder_layer<1, kAttention, kNarrowDown>;
    case 2:
      return decoder_layer<2, kAttention, kNarrowDown>;
    case 4:
      return decoder_layer<4, kAttention, kNarrowDown>;
    default:
      return decoder_layer<8, kAttention, kNarrowDown>;
  }
}

class DecoderMegakernel {
 public:
  // narrow_down (rung 7e): rung 7d's attention, the down projection in narrow groups; chained
  // (rung 7f): launched programmatically after the step ahead (the header comment).
  DecoderMegakernel(const LayerDims& dims, cudaStream_t s, L2Ahead ahead = L2Ahead::none,
                    Attention attention = Attention::per_head, bool narrow_down = false,
                    Launch launch = Launch::cooperative)
      : launch_(launch),
        q_(dims.batch * dims.hidden),
        attn_(q_.size()),
        h_(q_.size()),
        act_(dims.batch * dims.ffn),
        barrier_(1),
        merge_counts_(dims.batch * dims.q_heads) {
    Step& p = step_;
    p.tokens = int(dims.batch), p.q_heads = int(dims.q_heads), p.kv_heads = int(dims.kv_heads);
    p.group = dims.group, p.hidden = dims.hidden, p.qkv_dim = dims.qkv_dim;
    p.ffn = dims.ffn, p.past = dims.past;
    if (ahead == L2Ahead::o_rest) {
      if (!l2_ahead::whole_slabs(dims.hidden))
        throw bench::Unsupported("megakernel L2-ahead: W_o's rows are not whole slabs of " +
                                 std::to_string(l2_ahead::kSlabElements) + " columns");
      p.o_rest_lines =
          l2_ahead::lines_that_fit(dims.hidden, cache_bytes(dims), kernels::l2_cache_bytes());
      if (p.o_rest_lines == 0 && l2_ahead::rest_lines(dims.hidden) > 0)
        throw bench::Unsupported("megakernel L2-ahead: the cache the attention reads (" +
                                 std::to_string(dims.batch) +
                                 " sequences) leaves no room in this GPU's L2 for W_o: rung 7");
    }
    if (dims.batch < 1 || dims.batch > gemv::kMaxTokens)
      throw bench::Unsupported("megakernel: 1 to 8 tokens (" + std::to_string(dims.batch) +
                               " asked); beyond, the FMAs and not the bytes set the time");
    if (p.ffn % 8 != 0 || dims.q_heads % dims.kv_heads != 0)
      throw std::invalid_argument("megakernel: the MLP width a multiple of 8, whole GQA groups");
    if (!kernels::device_attribute(cudaDevAttrCooperativeLaunch))
      throw bench::Unsupported("megakernel: this GPU has no cooperative launch");
    const bool group_mma = per_kv_head(attention);
    if (group_mma && dims.group > group_mma::kMaxGroup)
      throw bench::Unsupported("megakernel, group attention: " + std::to_string(dims.group) +
                               " query heads a KV head; the MMA's N holds " +
                               std::to_string(group_mma::kMaxGroup));
    if (narrow_down &&
        (attention != Attention::group_mma_merge_at_once || dims.hidden % kNarrowRows != 0))
      throw std::invalid_argument("megakernel: narrow down groups are rung 7d's, on even rows");
    kernel_ = narrow_down ? kernel_of<Attention::group_mma_merge_at_once, true>(p.tokens)
              : attention == Attention::group_mma_merge_at_once
                  ? kernel_of<Attention::group_mma_merge_at_once>(p.tokens)
              : group_mma ? kernel_of<Attention::group_mma>(p.tokens)
                          : kernel_of<Attention::per_head>(p.tokens);
    // Shared memory: the widest prologue (down's: tokens x ffn) or the attention's.
    smem_ =
        std::max(size_t(gemv::padded_tokens(p.tokens)) * std::max(p.hidden, p.ffn) * sizeof(bf16),
                 group_mma ? group_mma::smem_bytes(int(dims.group)) : sizeof(decode::SplitSmem<1>));
    cudaFuncAttributes attributes = {};
    BENCH_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel_));
    if (attributes.sharedSizeBytes + smem_ >
        size_t(kernels::device_attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin)))
      throw bench::Unsupported("megakernel: " + std::to_string(smem_) +
                               " bytes of activations exceed this GPU's shared memory per block");
    // The opt-in is the kernel's, shared by every plan of the same padded token count: only ever
    // raised, as kernels/streaming_gemv.cuh's (a smaller plan made later must not break a larger).
    if (int(smem_) > attributes.maxDynamicSharedSizeBytes)
      BENCH_CUDA_CHECK(
          cudaFuncSetAttribute(kernel_, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem_)));
    // The grid barrier needs every block resident at once: the grid is what fits.
    const int per_sm = kernels::blocks_per_sm(kernel_, kThreads, smem_);
    if (per_sm < 1)
      throw bench::Unsupported("megakernel: no block of " + std::to_string(kThreads) +
                               " threads with " + std::to_string(smem_) +
                               " bytes of shared memory fits an SM, so the grid cannot be "
                               "co-resident");
    grid_ = unsigned(kernels::sm_count() * std::min(per_sm, kMaxBlocksPerSm));
    // Attention items: about one per block (pairs x splits: query heads, or KV heads in the group
    // form), chunks of at least 256 keys (128, a CTA step, in the group form), and at least 2
    // splits (decode::finish_pass writes partials only then; the merge reads partials).
    const int64_t pairs = dims.batch * dims.q_heads;
    const int64_t item_pairs = group_mma ? dims.batch * dims.kv_heads : pairs;
    const int64_t least_keys = group_mma ? group_mma::kCtaStepKeys : 256;
    const int64_t wanted =
        std::clamp<int64_t>(grid_ / item_pairs, 2, std::max<int64_t>(2, p.past / least_keys));
    p.chunk = group_mma ? decode::chunk_of_steps(p.past, wanted, group_mma::kCtaStepKeys)
                        : decode::chunk_for(p.past, int(wanted), 1);
    p.splits = int((p.past + p.chunk - 1) / p.chunk);  // rounding the chunk up may leave fewer
    if (p.splits < 2)
      throw std::invalid_argument("megakernel: the cache is too short for two splits");
    part_ml_ = bench::DeviceBuffer<float>(pairs * p.splits * 2);
    part_o_ = bench::DeviceBuffer<float>(pairs * p.splits * kHeadDim);
    p.q = q_.data(), p.attn = attn_.data(), p.h = h_.data(), p.act = act_.data();
    p.part_ml = part_ml_.data(), p.part_o = part_o_.data(), p.barrier = barrier_.data();
    p.merge_counts = merge_counts_.data();
    // The barrier starts at zero arrivals (each launch leaves a multiple of the grid) and the
    // merge counters at zero chunks (each launch leaves them so); the activations zeroed once
    // (compute-sanitizer's initcheck: every later read is of a value some phase wrote).
    BENCH_CUDA_CHECK(cudaMemsetAsync(barrier_.data(), 0, barrier_.bytes(), s));
    BENCH_CUDA_CHECK(cudaMemsetAsync(merge_counts_.data(), 0, merge_counts_.bytes(), s));
    for (bench::DeviceBuffer<bf16>* b : {&q_, &attn_, &h_, &act_})
      BENCH_CUDA_CHECK(cudaMemsetAsync(b->data(), 0, b->bytes(), s));
    BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
  }

  void operator()(const Io& io, cudaStream_t s, uint64_t* stamps = nullptr) const {
    Step step = step_;
    step.io = io;
    step.stamps = stamps;
    if (launch_ == Launch::chained)
      kernels::pdl::launch(kernel_, dim3(grid_), dim3(kThreads), smem_, s, step);
    else
      BENCH_CUDA_CHECK(kernels::launch_cooperative(kernel_, grid_, kThreads, smem_, s, step));
  }

  // Where a launch's time goes (untimed): `launches` stamped launches back to back, then for each
  // the span of each phase (its first block's start to its last block's end) and of each barrier
  // (the phase's last block's end to the next phase's first block's start), their medians over
  // the launches in µs, as metrics phase_us_<phase> and barrier_us_<phase it ends>; also
  // stamp_step_ns, the smallest step between two different stamps (the global timer's
  // resolution as this GPU runs it: a span is good to about that much), and stamps_out_of_order,
  // the blocks whose stamps do not rise slot by slot (0 unless the stamps are misplaced). Spans
  // are differences of the 64-bit integers, taken before any conversion: a double holds a raw
  // stamp (~1.8e18 ns) only to 256 ns.
  std::vector<std::pair<std::string, double>> phase_times(const Io& io, cudaStream_t s,
                                                          int launches = 21) const {
    bench::DeviceBuffer<uint64_t> stamps(int64_t{grid_} * kStamps * launches);
    for (int i = 0; i < launches; ++i) (*this)(io, s, stamps.data() + int64_t{i} * grid_ * kStamps);
    BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
    std::vector<uint64_t> t(size_t(stamps.size()));
    BENCH_CUDA_CHECK(cudaMemcpy(t.data(), stamps.data(), stamps.bytes(), cudaMemcpyDeviceToHost));
    std::vector<std::vector<double>> spans(2 * kPhases - 1);  // phase 0, barrier 0, phase 1, ...
    uint64_t step_ns = UINT64_MAX;
    int64_t out_of_order = 0;
    auto span_us = [](uint64_t from, uint64_t to) { return double(int64_t(to - from)) / 1e3; };
    for (int i = 0; i < launches; ++i) {
      const uint64_t* launch = t.data() + int64_t{i} * grid_ * kStamps;
      uint64_t first[kStamps], last[kStamps];
      for (int slot = 0; slot < kStamps; ++slot) first[slot] = UINT64_MAX, last[slot] = 0;
      for (unsigned b = 0; b < grid_; ++b) {
        for (int slot = 0; slot + 1 < kStamps; ++slot)
          if (launch[b * kStamps + slot + 1] < launch[b * kStamps + slot]) {
            ++out_of_order;
            break;
          }
        for (int slot = 0; slot < kStamps; ++slot) {
          const uint64_t at = launch[b * kStamps + slot], block0 = launch[slot];
          first[slot] = std::min(first[slot], at);
          last[slot] = std::max(last[slot], at);
          if (at != block0) step_ns = std::min(step_ns, at > block0 ? at - block0 : block0 - at);
        }
      }
      for (int ph = 0; ph < kPhases; ++ph) {
        spans[2 * ph].push_back(span_us(first[2 * ph], last[2 * ph + 1]));
        if (ph + 1 < kPhases)
          spans[2 * ph + 1].push_back(span_us(last[2 * ph + 1], first[2 * ph + 2]));
      }
    }
    std::vector<std::pair<std::string, double>> out;
    for (int ph = 0; ph < kPhases; ++ph) {
      out.emplace_back(std::string("phase_us_") + kPhaseNames[ph],
                       bench::stats::median(spans[2 * ph]));
      if (ph + 1 < kPhases)
        out.emplace_back(std::string("barrier_us_") + kPhaseNames[ph],
                         bench::stats::median(spans[2 * ph + 1]));
    }
    out.emplace_back("stamp_step_ns", step_ns == UINT64_MAX ? 0.0 : double(step_ns));
    out.emplace_back("stamps_out_of_order", double(out_of_order));
    return out;
  }

  unsigned grid() const { return grid_; }
  int splits() const { return step_.splits; }
  int64_t o_rest_lines() const { return step_.o_rest_lines; }
  // The per-head merge counters, [tokens][q_heads]: all zero between launches (the tests check).
  const bench::DeviceBuffer<uint32_t>& merge_counts() const { return merge_counts_; }

 private:
  Launch launch_;
  bench::DeviceBuffer<bf16> q_, attn_, h_, act_;
  bench::DeviceBuffer<float> part_ml_, part_o_;
  bench::DeviceBuffer<unsigned long long> barrier_;
  bench::DeviceBuffer<uint32_t> merge_counts_;
  Step step_ = {};
  void (*kernel_)(Step) = nullptr;
  size_t smem_ = 0;
  unsigned grid_ = 0;
};

}  // namespace ch20::mega

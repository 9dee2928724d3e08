// kernels/reference_attention.cuh: plain, trusted attention out = softmax(q k^T / sqrt(d)) v with
// any key mask, on the GPU (an example's .device_reference at its timing size) and on the CPU in
// double (its .reference at the verification size). Head dimension kDim: 128 unless named (ch16's
// d64 twins call reference_attention<64>).
//
// Layout, per (batch, head) pair bh: q and out [bh][n_q][kDim], k and v [bh][n_k][kDim], BF16;
// on the GPU k and v 16-byte aligned (cudaMalloc gives 256; callers offset them by whole rows).
// `visible(qi, kj)` says whether query qi sees key kj (host and device callable); every query
// must see at least one key.
//
// Why it is trusted (the rows, split and tiled forms; the mma form's argument is at its entry
// below): no tensor cores, no approximate math. Every score is a sequential FP32 FMA
// chain over the head dimension (dimension 0 first) times 1/sqrt(d); softmax is the online form
// (running max m and sum l a query, rescaled by the accurate expf(m_old - m_new) whenever the max
// grows); p = expf(s - m) with the accurate expf; P V accumulates in FP32; the output is acc / l
// rounded once to BF16. A key a query does not see contributes nothing (its p is exactly 0, and a
// tile in which a query sees no key leaves that query's m, l and acc untouched). Every sum is in a
// fixed order (no atomics), so a result does not depend on timing. tests/gpu/
// reference_attention_test.cu holds the GPU forms to the CPU reference in double below.
//
// Four GPU forms, picked by the wrapper from n_q, n_k, bh and the head dim (each serves every
// mask; the mma form head dims 64 and 128, the others any multiple of 32):
//  - rows (decode, short prompts: n_q < 64): one CTA per (8 consecutive queries, bh), a thread per
//    output dimension. Keys go in tiles of kDim: the tile's K rows, then its V rows, are copied
//    into shared memory with 16-byte loads and serve the CTA's queries. For each query: thread t
//    scores key j0 + t, the tile's max and sum go through group_reduce's order over the block, and
//    each output dimension accumulates p * v over the tile's keys in order. A CTA with fewer
//    queries (a decode step's 1) skips the absent ones' arithmetic.
//  - split (decode over long contexts: the rows form's case where its grid, query groups x bh,
//    is short of 132 SMs x 16 warps and the keys span several tiles): the rows form cut along the
//    keys. Each (8 queries, bh)'s keys go in chunks of whole tiles, one CTA a chunk, which runs
//    the rows form's loop over its chunk's tiles (the same tiles, the same order, the same code:
//    the rows kernel with kPartials) and stores its m, l and FP32 acc unnormalised; a query that
//    sees no key of the chunk stores (-inf, 0, 0), and a CTA whose queries see none of it only
//    walks the masks. A second kernel, a CTA per (query, bh) and a thread per output dimension,
//    merges the chunks in chunk order: M = max m_c, then l = sum l_c expf(m_c - M) and acc = sum
//    acc_c expf(m_c - M), each one FP32 FMA chain over c, chunks with m_c = -inf skipped (they
//    contribute nothing); out = acc / l rounded once to BF16. Still no tensor cores, accurate
//    expf, FP32 throughout, a fixed order: the partials live in scratch (no atomics), and the
//    chunk depends only on (n_q, n_k, bh), not on the GPU, so the bits at a shape do too. With
//    one chunk it is the rows form bit for bit (the merge multiplies by expf(0) = 1 and adds to
//    -0); with more, the same sums regrouped, held to the CPU reference in double as the tiled
//    form is.
//    The chunk rule (reference_split): the fewest whole tiles a chunk for which query groups x bh
//    x chunks reaches 132 x 16 warps' worth of CTAs (528 at d128, 4 an SM; 1056 at d64), that is
//    chunk tiles = ceil(tiles x query groups x bh / 528), at least 1. ch16/paged_attention calls
//    it a sequence at a time (32 heads, 1 query, 1141-32616 keys): 9 chunks of 1 tile up to 16
//    of 16 tiles, 288-512 CTAs; ch15's document decodes (8 heads, 4 queries, ~7000 keys): 55
//    chunks of 1 tile, 440 CTAs.
//    Why faster: a rows-form CTA is latency-bound (4 warps, one tile's K and then V loaded,
//    reduced and consumed between barriers), and at decode there are as few of them as (sequence,
//    head) pairs in a call (ch16: 32 on 132 SMs, each walking up to 255 tiles alone). The split
//    form runs the same CTA work 9-16 times as wide, 4 resident an SM (99 registers, 43 KiB of
//    shared memory at d128), so a call takes about the longest chunk's time (at most 16 tiles at
//    ch16's shapes) instead of the longest pair's; the merge reads chunks x (kDim + 2) floats a
//    query. Not yet measured on a GPU (tests/gpu/reference_attention_test.cu's
//    DISABLED_TimesRowsAndSplitAtDecode times both at ch16's batch-32 decode shapes).
//  - tiled (prefill: n_q >= 64, q and out 16-byte aligned): the register tiling of a classic
//    SGEMM. A CTA of 128 threads serves 64 queries of one bh; keys go in tiles of 64. Q^T (once),
//    the tile's K^T and its V sit in shared memory as FP32, P^T too. Thread t owns query rows
//    4 (t / 8) .. +3 and columns {4 (t % 8) + 32 j + u}: for S = Q K^T a 4 x 8 micro-tile of
//    (queries x keys), for O += P V a 4 x kDim / 8 micro-tile of (queries x output dims), so the
//    rows whose max and sum a thread takes part in are the rows of its own O accumulators. Per
//    dimension of S it reads 4 queries and 8 keys (3 16-byte shared loads) for 32 FMAs; per key
//    of P V, 4 p and kDim / 8 values of v for kDim / 2 FMAs. A row's max and sum over the tile
//    are the thread's 8 values in order, then an XOR butterfly over the row's 8 lanes (every
//    lane receives the same bits). A tile that no query of the CTA sees is skipped.
//    Why faster: a rows-form thread holds 8 accumulators (one key or one output dimension for 8
//    queries), so it does 3-4 FMAs per shared load, converts BF16 in its inner loops and meets 6
//    block barriers a tile; the tiled form does ~10 FMAs (S) and ~13 (P V, d128) per 16-byte
//    shared load on FP32 operands, the ratio an SGEMM needs to approach the FP32 FMA rate, and
//    meets 3 barriers a tile (ch16's README has the measured ratio at its shapes). By a count
//    of the loop bodies the FMAs are ~84% of the issued instructions (the rest: the loads, the
//    32 expf and the 32 visible() calls a thread makes per tile); the shared-memory pipe is about a
//    third busy if a warp's 16-byte load is one wavefront (each covers at most 128 distinct bytes,
//    no two in one bank); with 2 warps a scheduler the barriers and the unoverlapped tile loads
//    cost the rest. Occupancy: 2 CTAs (8 warps) an SM at both head dims: at d128 by shared memory
//    (112 KiB a CTA) and registers, at d64 (64 KiB) by registers. ptxas (sm_90a,
//    --ptxas-options=-v): no spills; at d128 243-255 registers (255 with every key visible or
//    causal, 247 with ch18's block mask read from memory, 243 with a window mask), at d64 163-179.
//    The S loop is unrolled by 4 and P V's not at all: the other choices spilled at d64, where
//    ptxas held the count to 168. The wrapper now takes the mma form for prefill at d64 and d128;
//    the tiled form stays the fallback at other head dims and the mma form's oracle in the tests.
//  - mma (prefill: n_q >= 64, kDim 64 or 128, q and out 16-byte aligned, k and v as always): the
//    tiled form's loop on tensor cores, mma.sync m16n8k16 with BF16 operands and FP32
//    accumulation (kernels/mma_bf16.cuh). A CTA of 4 warps serves 64 queries of one bh, 16 rows
//    a warp, its Q held as A fragments in registers (read once from global memory); keys go in
//    tiles of 64, K and V copied into shared memory with plain 16-byte loads (rows padded by 16
//    bytes, so ldmatrix meets no bank conflict) and read with ldmatrix (V transposed). Per tile a
//    warp computes S (16 x 64) = Q K^T, then the online softmax row by row (the thread's 16
//    values of a row in order, then an XOR butterfly over the quad's 4 lanes, which hands every
//    lane the same bits), then O (16 x kDim) += P V. A tile no query of the CTA sees is skipped.
//    Why it stays trustworthy although the kernels under test use the same instructions:
//     * S: a product of two BF16 values (8-bit significands) has at most 16 significant bits, so
//       it is exact in FP32; the tensor core adds the products and the accumulator at FP32
//       precision (measurements of earlier tensor cores found it truncates rather than rounds
//       within an instruction: an error of the order of FP32's unit roundoff a step, 2^16 times
//       below BF16's). S is therefore the dot product to FP32-accumulation accuracy, like the
//       tiled form's FMA chain (only the order of the sums differs; the hardware's order inside
//       an mma is fixed, so the bits are too). Scores are then scaled by 1/sqrt(d) as there.
//     * P V: p = expf(s - m) with the accurate expf (no __expf, no exp2 tricks) is FP32; an MMA
//       takes BF16, and bf16(p) alone would round p to 8 bits, the very rounding a flash kernel
//       under test makes, so the reference could hide that kernel's error. Instead p is split
//       into hi = bf16(p) and lo = bf16(p - hi) (p - hi is exact in FP32), and two MMAs
//       accumulate hi V + lo V into the same FP32 accumulators: |p - hi| <= 2^-8 p and lo's
//       rounding adds <= 2^-8 |p - hi|, so p is carried to ~16 significant bits (relative error
//       <= 2^-16, against BF16's 2^-8 and FP32's 2^-24; a lo below BF16's normal range, p <
//       ~2^-118, may flush to 0, an absolute error below 2^-126), and each product with a BF16 v
//       is again exact. Only the V side is BF16, which is what the inputs are.
//     * The softmax bookkeeping is the tiled form's, in FP32: running max m and sum l a query
//       row, acc rescaled by expf(m_old - m_new) when the max grows, l summed from the unsplit
//       FP32 p values (not from hi + lo), out = acc / l rounded once to BF16.
//     * Masks through the same visible(qi, kj): a key a query does not see gets p = 0 exactly,
//       so hi = lo = 0 and it adds 0 (its V row is read, zero past n_k, finite otherwise); a tile
//       in which a row sees no key leaves that row's m, l and acc untouched. No atomics, one
//       fixed order: the result does not depend on timing.
//    tests/gpu/reference_attention_test.cu holds it to the CPU reference in double with the tiled
//    form's bounds, and to the tiled form itself at a mid-size shape.
//    Why faster: the FP32 FMA rate caps the tiled form; here S costs kDim / 16 x 8 MMAs a warp and
//    tile and P V 2 x 4 x kDim / 8 (the hi + lo split doubles P V's tensor work, still a small
//    share of the tensor cores' rate), and the expf and visible() calls (32 a thread a tile) stay
//    the FP32 work they were. Measured: several times the tiled form's rate at ch16's shapes
//    (DISABLED_TimesMmaForm times both, ch16's README has the table). Occupancy: static shared
//    memory 34 KiB a CTA at d128, 18 KiB at d64. ptxas (sm_90a, -v): no spills; at d128 228-234
//    registers (every key visible, causal, ch15's and ch17's masks; 217 with ch18's block mask):
//    2 CTAs (8 warps) an SM; at d64 165-167 (3 CTAs). Most of it is live state: Q's fragments
//    (kDim / 4 registers), O's accumulators (kDim / 2) and S's (32).
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <bench/bench.hpp>
#include <cmath>
#include <cstdint>
#include <kernels/bf16_pack.cuh>
#include <kernels/group_reduce.cuh>
#include <kernels/mma_bf16.cuh>
#include <span>
#include <stdexcept>
#include <vector>

namespace kernels {

inline constexpr int kRefHeadDim = 128;

namespace detail {

// Queries a CTA serves: K and V cross from L2 once per 8 queries, and ch16's b1 s4096 (32 heads)
// still makes 16384 CTAs. A CTA with fewer queries (a decode step's 1) skips the absent ones'
// arithmetic, so decode pays nothing for the other 7.
inline constexpr int kRefQueriesPerBlock = 8;

// group_reduce<kThreads> of each of kCount values, every thread of the block receiving them: the
// same butterfly within each warp and the same fold of the warps' partials in warp order as one
// group_reduce call a value (so bit-identical results), with two barriers for all kCount.
template <int kThreads, int kCount, class Op>
__device__ __forceinline__ void group_reduce_each(float (&v)[kCount], Op op) {
  static_assert(kThreads % 32 == 0 && kThreads <= 1024, "a warp or a whole block");
  constexpr int kWarps = kThreads / 32;
#pragma unroll
  for (int i = 0; i < kCount; ++i) v[i] = warp_reduce(v[i], op);
  if constexpr (kWarps > 1) {
    __shared__ float warp_partials[kCount][kWarps];
    __syncthreads();  // a previous call's readers are done with the slots
    if (threadIdx.x % 32 == 0) {
#pragma unroll
      for (int i = 0; i < kCount; ++i) warp_partials[i][threadIdx.x / 32] = v[i];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kCount; ++i) {
      v[i] = warp_partials[i][0];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) v[i] = op(v[i], warp_partials[i][w]);
    }
  }
}

// A tile of kDim rows of kDim BF16 values in shared memory. Rows padded by 16 bytes: thread t
// reading 16 bytes of row t (the scores) then meets no bank conflict.
template <int kDim>
using RefTile = __nv_bfloat16[kDim][kDim + 8];

// Rows j0 .. j0 + kDim - 1 of `rows` ([n_k][kDim]) into `tile`, consecutive threads on
// consecutive 16-byte pieces; rows past n_k are zero.
template <int kDim>
__device__ __forceinline__ void load_ref_tile(RefTile<kDim>& tile, const __nv_bfloat16* rows,
                                              int64_t j0, int64_t n_k) {
  constexpr int kPieces = kDim / 8;
  for (int idx = threadIdx.x; idx < kDim * kPieces; idx += kDim) {
    const int r = idx / kPieces, c = idx % kPieces;
    uint4 piece = make_uint4(0, 0, 0, 0);
    if (j0 + r < n_k) piece = *reinterpret_cast<const uint4*>(rows + (j0 + r) * kDim + c * 8);
    *reinterpret_cast<uint4*>(&tile[r][c * 8]) = piece;
  }
}

// The split form's partials of chunk c for query row r = bh * n_q + qi, `splits` chunks a row:
// ml[(r * splits + c) * 2 + {0, 1}] = (m, l), o[(r * splits + c) * kDim + e] = acc of dimension e
// (unnormalised). A query that sees no key of the chunk leaves (-inf, 0, 0 ...).
struct RefPartials {
  float* ml;
  float* o;
  int64_t splits;
};

// The rows form; with kPartials, the split form's first kernel: CTA (x, bh, c) runs the same loop
// over the keys of chunk c alone (chunk_keys a multiple of kDim, so its tiles are the rows form's
// tiles j0 = c * chunk_keys + i * kDim) and stores m, l and acc instead of the output. Without it
// chunk_keys is unused and blockIdx.z is 0: the code is the rows form's, unchanged.
// (kDim, 1): with the thread count alone ptxas held the d64 form to 64 registers, and it spilled.
template <int kDim, bool kPartials, class Visible>
__global__ void __launch_bounds__(kDim, 1)
    reference_attention(const __nv_bfloat16* __restrict__ q, const __nv_bfloat16* __restrict__ k,
                        const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ out,
                        int64_t n_q, int64_t n_k, Visible visible, int64_t chunk_keys,
                        RefPartials partials) {
  constexpr int d = kDim, kQ = kRefQueriesPerBlock;
  static_assert(d % 32 == 0, "whole warps, whole 16-byte pieces");
  const int64_t q0 = int64_t(blockIdx.x) * kQ, bh = blockIdx.y;
  // This CTA's keys: all of them, or chunk blockIdx.z's (whole tiles, the last one ragged at n_k
  // as the rows form's last tile is, so every bound below stays n_k).
  const int64_t j_begin = kPartials ? int64_t(blockIdx.z) * chunk_keys : 0;
  const int64_t j_end = kPartials && n_k - j_begin > chunk_keys ? j_begin + chunk_keys : n_k;
  const int queries = int(n_q - q0 < kQ ? n_q - q0 : kQ);  // this CTA's, 1 .. kQ
  const int t = threadIdx.x;
  __shared__ alignas(16) RefTile<d> kv_tile;  // the tile's K rows, then its V rows
  __shared__ alignas(16) float q_rows[kQ][d];
  __shared__ alignas(16) float p_tile[d][kQ];  // [key in tile][query]
#pragma unroll
  for (int i = 0; i < kQ; ++i)
    q_rows[i][t] = i < queries ? __bfloat162float(q[(bh * n_q + q0 + i) * d + t]) : 0.0f;
  const __nv_bfloat16* k_bh = k + bh * n_k * d;
  const __nv_bfloat16* v_bh = v + bh * n_k * d;
  const float scale = 1.0f / sqrtf(float(d));
  float m[kQ], l[kQ], acc[kQ];
#pragma unroll
  for (int i = 0; i < kQ; ++i) m[i] = -INFINITY, l[i] = 0.0f, acc[i] = 0.0f;
  for (int64_t j0 = j_begin; j0 < j_end; j0 += d) {
    const int64_t j = j0 + t;
    unsigned sees = 0;  // bit i: query q0 + i sees key j
#pragma unroll
    for (int i = 0; i < kQ; ++i)
      if (i < queries && j < n_k && visible(q0 + i, j)) sees |= 1u << i;
    // Also the barrier that frees the previous tile's V and p_tile (at the first tile: publishes
    // q_rows).
    if (!__syncthreads_or(sees != 0)) continue;  // no query of this CTA sees a key of the tile
    load_ref_tile<d>(kv_tile, k_bh, j0, n_k);
    __syncthreads();

    float s[kQ];
#pragma unroll
    for (int i = 0; i < kQ; ++i) s[i] = 0.0f;
    for (int e0 = 0; e0 < d; e0 += 8) {
      alignas(16) __nv_bfloat16 k8[8];  // key j's dimensions e0 .. e0 + 7
      *reinterpret_cast<uint4*>(k8) = *reinterpret_cast<const uint4*>(&kv_tile[t][e0]);
#pragma unroll
      for (int i = 0; i < kQ; ++i) {
        if (i >= queries) continue;
        const float4* q4 = reinterpret_cast<const float4*>(&q_rows[i][e0]);  // two 16-byte loads
        const float4 lo = q4[0], hi = q4[1];
        const float q8[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
        for (int u = 0; u < 8; ++u) s[i] = fmaf(q8[u], __bfloat162float(k8[u]), s[i]);
      }
    }
#pragma unroll
    for (int i = 0; i < kQ; ++i) s[i] = (sees >> i & 1u) ? s[i] * scale : -INFINITY;

    float tile_max[kQ], p[kQ], c[kQ];
#pragma unroll
    for (int i = 0; i < kQ; ++i) tile_max[i] = s[i];
    group_reduce_each<d>(tile_max, Max{});  // its first barrier: every thread is done with K
    unsigned live = 0;  // bit i: query q0 + i sees a key of this tile (the same in every thread)
#pragma unroll
    for (int i = 0; i < kQ; ++i) {
      p[i] = 0.0f, c[i] = 1.0f;
      if (tile_max[i] != -INFINITY) {
        live |= 1u << i;
        const float m_new = fmaxf(m[i], tile_max[i]);
        p[i] = s[i] == -INFINITY ? 0.0f : expf(s[i] - m_new);
        c[i] = expf(m[i] - m_new);
        m[i] = m_new;
      }
      p_tile[t][i] = p[i];
    }
    group_reduce_each<d>(p, Sum{});  // now the tile's sums; its barriers publish p_tile
#pragma unroll
    for (int i = 0; i < kQ; ++i)
      if (live >> i & 1u) l[i] = fmaf(l[i], c[i], p[i]), acc[i] *= c[i];

    load_ref_tile<d>(kv_tile, v_bh, j0, n_k);
    __syncthreads();
    const int keys = int(n_k - j0 < d ? n_k - j0 : d);
    for (int e = 0; e < keys; ++e) {
      const float v_e = __bfloat162float(kv_tile[e][t]);
      float p_e[kQ];  // key e's p for every query: read whole (two 16-byte loads), used if live
#pragma unroll
      for (int i = 0; i < kQ; ++i) p_e[i] = p_tile[e][i];
#pragma unroll
      for (int i = 0; i < kQ; ++i)
        if (live >> i & 1u) acc[i] = fmaf(p_e[i], v_e, acc[i]);
    }
  }
  if constexpr (kPartials) {
    // m and l are the same in every thread (group_reduce_each hands each thread the block's
    // values); thread t holds dimension t of acc.
#pragma unroll
    for (int i = 0; i < kQ; ++i) {
      if (i >= queries) continue;
      const int64_t slot = (bh * n_q + q0 + i) * partials.splits + blockIdx.z;
      partials.o[slot * d + t] = acc[i];
      if (t == 0) partials.ml[slot * 2] = m[i], partials.ml[slot * 2 + 1] = l[i];
    }
  } else {
#pragma unroll
    for (int i = 0; i < kQ; ++i)
      if (i < queries) out[(bh * n_q + q0 + i) * d + t] = __float2bfloat16(acc[i] / l[i]);
  }
}

// The split form's second kernel: CTA (qi, bh), thread t = output dimension t, folds the chunks'
// partials of one query in chunk order with the log-sum-exp merge: M = the largest chunk max, then
// l = sum l_c expf(m_c - M) and acc = sum acc_c expf(m_c - M), each a sequential FP32 FMA chain
// over c = 0, 1, ...; out = acc / l rounded once to BF16. A chunk the query sees no key of (m_c =
// -inf, l_c = 0) is skipped, so it contributes nothing. The chains start at -0, the exact additive
// identity (fmaf(x, 1, -0) is x for every x, -0 too): with one chunk, expf(0) = 1 makes l and acc
// the rows form's bits, so the two forms then agree bitwise (the test checks it).
template <int kDim>
__global__ void __launch_bounds__(kDim)
    merge_reference_partials(const float* __restrict__ ml, const float* __restrict__ o,
                             __nv_bfloat16* __restrict__ out, int64_t n_q, int64_t splits) {
  const int64_t row = int64_t(blockIdx.y) * n_q + blockIdx.x;  // bh * n_q + qi
  const int t = threadIdx.x;
  const float* row_ml = ml + row * splits * 2;
  const float* row_o = o + row * splits * kDim;
  float m = -INFINITY;
  for (int64_t c = 0; c < splits; ++c) m = fmaxf(m, row_ml[c * 2]);
  float l = -0.0f, acc = -0.0f;
  for (int64_t c = 0; c < splits; ++c) {
    const float m_c = row_ml[c * 2];
    if (m_c == -INFINITY) continue;
    const float w = expf(m_c - m);
    l = fmaf(row_ml[c * 2 + 1], w, l);
    acc = fmaf(row_o[c * kDim + t], w, acc);
  }
  out[row * kDim + t] = __float2bfloat16(acc / l);
}
// ---- The tiled form (the header comment). ----
inline constexpr int kTiledQueries = 64;   // queries a CTA: 16 row groups of 4
inline constexpr int kTiledKeys = 64;      // keys a tile
inline constexpr int kTiledThreads = 128;  // 16 row groups x 8 column groups

// Shared memory of one CTA, FP32 so the inner loops convert nothing. Column layouts ([dim][query],
// [dim][key], [key][query]) let a thread read its 4 queries or 4 consecutive columns as one
// 16-byte load; the 8 column groups of a warp read 8 consecutive 16-byte pieces of one row and
// its 4 row groups the same piece (a broadcast), so no load meets a bank conflict.
template <int kDim>
struct TiledSmem {
  float q_t[kDim][kTiledQueries];        // Q^T of the CTA's queries (zero past n_q)
  float k_t[kDim][kTiledKeys];           // K^T of the tile (zero past n_k)
  float v[kTiledKeys][kDim];             // V of the tile (zero past n_k: 0 * garbage is not 0)
  float p_t[kTiledKeys][kTiledQueries];  // P^T of the tile
};

// Rows r0 .. r0 + kRows - 1 of `rows` ([n][kDim] BF16, 16-byte aligned), transposed into
// dst[kDim][kRows] as FP32; rows at or past n are zero. Consecutive threads take consecutive rows
// of one 8-dimension piece, so the scalar shared stores of a warp hit 32 different banks; every
// thread's loads are issued before its stores.
template <int kDim, int kRows>
__device__ __forceinline__ void load_transposed(float (&dst)[kDim][kRows],
                                                const __nv_bfloat16* rows, int64_t r0, int64_t n) {
  constexpr int kPieces = kRows * kDim / 8, kEach = kPieces / kTiledThreads;
  static_assert(kPieces % kTiledThreads == 0 && kTiledThreads % kRows == 0, "whole passes");
  uint4 piece[kEach];
#pragma unroll
  for (int i = 0; i < kEach; ++i) {
    const int idx = int(threadIdx.x) + i * kTiledThreads, r = idx % kRows, c = idx / kRows;
    piece[i] = make_uint4(0, 0, 0, 0);
    if (r0 + r < n) piece[i] = *reinterpret_cast<const uint4*>(rows + (r0 + r) * kDim + c * 8);
  }
#pragma unroll
  for (int i = 0; i < kEach; ++i) {
    const int idx = int(threadIdx.x) + i * kTiledThreads, r = idx % kRows, c = idx / kRows;
    const __nv_bfloat16* h = reinterpret_cast<const __nv_bfloat16*>(&piece[i]);
#pragma unroll
    for (int u = 0; u < 8; ++u) dst[c * 8 + u][r] = __bfloat162float(h[u]);
  }
}

// The 16-byte pieces of rows r0 .. r0 + kRows - 1 of `rows` ([n][kDim] BF16, 16-byte aligned)
// that thread t loads, consecutive threads on consecutive pieces (coalesced): piece i is
// idx = t + 128 i, row idx / (kDim / 8), columns 8 (idx % (kDim / 8)) .. + 7; rows past n zero.
// Both the tiled and the mma form's tiles come through it (each has 128 threads).
template <int kDim, int kRows>
struct RowPieces {
  static constexpr int kPerRow = kDim / 8, kEach = kRows * kPerRow / kTiledThreads;
  static_assert(kRows * kPerRow % kTiledThreads == 0, "whole passes");
  uint4 piece[kEach];
  __device__ __forceinline__ RowPieces(const __nv_bfloat16* rows, int64_t r0, int64_t n) {
#pragma unroll
    for (int i = 0; i < kEach; ++i) {
      const int r = row(i), c = col(i);
      piece[i] = make_uint4(0, 0, 0, 0);
      if (r0 + r < n) piece[i] = *reinterpret_cast<const uint4*>(rows + (r0 + r) * kDim + c);
    }
  }
  static __device__ __forceinline__ int row(int i) {
    return (int(threadIdx.x) + i * kTiledThreads) / kPerRow;
  }
  static __device__ __forceinline__ int col(int i) {
    return (int(threadIdx.x) + i * kTiledThreads) % kPerRow * 8;
  }
};

// Rows r0 .. r0 + kRows - 1 of `rows` into dst[kRows][kDim] as FP32, rows past n zero.
template <int kDim, int kRows>
__device__ __forceinline__ void load_rows(float (&dst)[kRows][kDim], const __nv_bfloat16* rows,
                                          int64_t r0, int64_t n) {
  const RowPieces<kDim, kRows> in(rows, r0, n);  // every load before the first store
#pragma unroll
  for (int i = 0; i < in.kEach; ++i) {
    const int r = in.row(i), c = in.col(i);
    const __nv_bfloat16* h = reinterpret_cast<const __nv_bfloat16*>(&in.piece[i]);
    float f[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) f[u] = __bfloat162float(h[u]);
    *reinterpret_cast<float4*>(&dst[r][c]) = make_float4(f[0], f[1], f[2], f[3]);
    *reinterpret_cast<float4*>(&dst[r][c + 4]) = make_float4(f[4], f[5], f[6], f[7]);
  }
}

// One row's online-softmax step over a tile, for the tiled and the mma form: the row's scores
// (scaled; -inf where the query does not see the key) are kCount in each of kLanes consecutive
// lanes (a power of 2), x the thread's. The row's max and sum: the thread's values in order, then
// an XOR butterfly over the lanes (every lane receives the same bits). x becomes p = expf(x -
// m_new) (0 for -inf), m and l move on; returns the factor c = expf(m_old - m_new) for the row's
// acc. A row that sees no key of the tile keeps m and l (c = 1, every p 0).
template <int kLanes, int kCount>
__device__ __forceinline__ float online_softmax_step(float (&x)[kCount], float& m, float& l) {
  float row_max = -INFINITY;
#pragma unroll
  for (int i = 0; i < kCount; ++i) row_max = fmaxf(row_max, x[i]);
#pragma unroll
  for (int mask = 1; mask < kLanes; mask *= 2)
    row_max = fmaxf(row_max, __shfl_xor_sync(0xffffffffu, row_max, mask));
  const bool live = row_max != -INFINITY;
  const float m_new = live ? fmaxf(m, row_max) : m;
  float row_sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kCount; ++i) {
    x[i] = x[i] == -INFINITY ? 0.0f : expf(x[i] - m_new);  // now p
    row_sum += x[i];
  }
#pragma unroll
  for (int mask = 1; mask < kLanes; mask *= 2)
    row_sum += __shfl_xor_sync(0xffffffffu, row_sum, mask);
  const float c = live ? expf(m - m_new) : 1.0f;  // expf(-inf) = 0 at a row's first live tile
  l = fmaf(l, c, row_sum);
  m = m_new;
  return c;
}

// One step of a thread's micro-tile, both for S = Q K^T (over a dimension) and O += P V (over a
// key): acc[i][x] = fmaf(a[i], b[32 (x / 4) + x % 4], acc[i][x]) for its 4 rows and kCols columns,
// a from 1 and b from kCols / 4 16-byte shared loads.
template <int kCols>
__device__ __forceinline__ void outer_product_step(float (&acc)[4][kCols], const float* a,
                                                   const float* b) {
  const float4 a4 = *reinterpret_cast<const float4*>(a);
  const float av[4] = {a4.x, a4.y, a4.z, a4.w};
  float bv[kCols];
#pragma unroll
  for (int j = 0; j < kCols / 4; ++j) {
    const float4 b4 = *reinterpret_cast<const float4*>(b + 32 * j);
    bv[4 * j] = b4.x, bv[4 * j + 1] = b4.y, bv[4 * j + 2] = b4.z, bv[4 * j + 3] = b4.w;
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int x = 0; x < kCols; ++x) acc[i][x] = fmaf(av[i], bv[x], acc[i][x]);
}

// Grid (ceil(n_q / 64), bh), 128 threads, sizeof(TiledSmem<kDim>) bytes of dynamic shared memory.
template <int kDim, class Visible>
__global__ void __launch_bounds__(kTiledThreads)
    reference_attention_tiled(const __nv_bfloat16* __restrict__ q,
                              const __nv_bfloat16* __restrict__ k,
                              const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ out,
                              int64_t n_q, int64_t n_k, Visible visible) {
  constexpr int d = kDim, kBQ = kTiledQueries, kBK = kTiledKeys;
  constexpr int kR = 4;        // query rows a thread
  constexpr int kS = kBK / 8;  // keys a thread in S: 4 (t % 8) + 32 j + u, j < kBK / 32
  constexpr int kO = d / 8;    // output dims a thread: 4 (t % 8) + 32 j + u, j < d / 32
  static_assert(d % 32 == 0 && kBK % 32 == 0 && kBQ == 16 * kR, "whole 16-byte column pieces");
  extern __shared__ float4 tiled_smem[];
  TiledSmem<d>& sm = *reinterpret_cast<TiledSmem<d>*>(tiled_smem);
  const int64_t q0 = int64_t(blockIdx.x) * kBQ, bh = blockIdx.y;
  const int t = threadIdx.x, row0 = kR * (t / 8), col0 = 4 * (t % 8);
  const __nv_bfloat16* k_bh = k + bh * n_k * d;
  const __nv_bfloat16* v_bh = v + bh * n_k * d;
  const float scale = 1.0f / sqrtf(float(d));
  load_transposed<d, kBQ>(sm.q_t, q + bh * n_q * d, q0, n_q);  // published by the first barrier

  float m[kR], l[kR], acc[kR][kO];
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    m[i] = -INFINITY, l[i] = 0.0f;
#pragma unroll
    for (int x = 0; x < kO; ++x) acc[i][x] = 0.0f;
  }
  for (int64_t j0 = 0; j0 < n_k; j0 += kBK) {
    unsigned sees = 0;  // bit i * kS + x: query q0 + row0 + i sees the thread's key x of the tile
#pragma unroll
    for (int i = 0; i < kR; ++i)
#pragma unroll
      for (int x = 0; x < kS; ++x) {
        const int64_t qi = q0 + row0 + i, kj = j0 + col0 + 32 * (x / 4) + x % 4;
        if (qi < n_q && kj < n_k && visible(qi, kj)) sees |= 1u << (i * kS + x);
      }
    // Also the barrier after which the previous tile's K^T, V and P^T may be overwritten.
    if (!__syncthreads_or(sees != 0)) continue;  // no query of this CTA sees a key of the tile
    load_transposed<d, kBK>(sm.k_t, k_bh, j0, n_k);
    load_rows<d, kBK>(sm.v, v_bh, j0, n_k);
    __syncthreads();

    // S: a 4 x 8 micro-tile, each score a sequential FMA chain over the dimensions.
    float s[kR][kS];
#pragma unroll
    for (int i = 0; i < kR; ++i)
#pragma unroll
      for (int x = 0; x < kS; ++x) s[i][x] = 0.0f;
#pragma unroll 4
    for (int e = 0; e < d; ++e) outer_product_step(s, &sm.q_t[e][row0], &sm.k_t[e][col0]);

    // Online softmax, a row at a time: the row's 64 scores are 8 in each of 8 consecutive lanes.
    float c[kR];
#pragma unroll
    for (int i = 0; i < kR; ++i) {
#pragma unroll
      for (int x = 0; x < kS; ++x)
        s[i][x] = (sees >> (i * kS + x) & 1u) ? s[i][x] * scale : -INFINITY;
      c[i] = online_softmax_step<8>(s[i], m[i], l[i]);
    }
#pragma unroll
    for (int x = 0; x < kS; ++x)
      *reinterpret_cast<float4*>(&sm.p_t[col0 + 32 * (x / 4) + x % 4][row0]) =
          make_float4(s[0][x], s[1][x], s[2][x], s[3][x]);
#pragma unroll
    for (int i = 0; i < kR; ++i)
#pragma unroll
      for (int x = 0; x < kO; ++x) acc[i][x] *= c[i];
    __syncthreads();  // P^T published

    // O += P V: a 4 x kDim / 8 micro-tile, keys in order (absent keys: p = 0, v = 0).
#pragma unroll 1
    for (int kk = 0; kk < kBK; ++kk) outer_product_step(acc, &sm.p_t[kk][row0], &sm.v[kk][col0]);
  }
#pragma unroll
  for (int i = 0; i < kR; ++i) {
    const int64_t qi = q0 + row0 + i;
    if (qi >= n_q) continue;
#pragma unroll
    for (int j = 0; j < kO / 4; ++j) {
      __nv_bfloat162* o2 =
          reinterpret_cast<__nv_bfloat162*>(out + (bh * n_q + qi) * d + col0 + 32 * j);
      o2[0] = __floats2bfloat162_rn(acc[i][4 * j] / l[i], acc[i][4 * j + 1] / l[i]);
      o2[1] = __floats2bfloat162_rn(acc[i][4 * j + 2] / l[i], acc[i][4 * j + 3] / l[i]);
    }
  }
}

// The launches, also called directly by tests/gpu/reference_attention_test.cu.
template <int kDim, class Visible>
void launch_reference_attention_rows(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                     const __nv_bfloat16* v, __nv_bfloat16* out, int64_t bh,
                                     int64_t n_q, int64_t n_k, Visible visible,
                                     cudaStream_t stream) {
  constexpr int kQ = kRefQueriesPerBlock;
  reference_attention<kDim, false>
      <<<dim3(unsigned((n_q + kQ - 1) / kQ), unsigned(bh)), kDim, 0, stream>>>(
          q, k, v, out, n_q, n_k, visible, n_k, RefPartials{});
  BENCH_CHECK_LAUNCH();
}
// q, k, v and out 16-byte aligned.
template <int kDim, class Visible>
void launch_reference_attention_tiled(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                      const __nv_bfloat16* v, __nv_bfloat16* out, int64_t bh,
                                      int64_t n_q, int64_t n_k, Visible visible,
                                      cudaStream_t stream) {
  constexpr int bytes = int(sizeof(TiledSmem<kDim>));
  auto* kernel = reference_attention_tiled<kDim, Visible>;
  // Every call (a host-side attribute write, negligible next to the kernel): the current device
  // may differ from the last call's. The full carveout lets 2 CTAs of 112 KiB share an SM.
  BENCH_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  BENCH_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                        int(cudaSharedmemCarveoutMaxShared)));
  kernel<<<dim3(unsigned((n_q + kTiledQueries - 1) / kTiledQueries), unsigned(bh)), kTiledThreads,
           bytes, stream>>>(q, k, v, out, n_q, n_k, visible);
  BENCH_CHECK_LAUNCH();
}

// ---- The mma form (the header comment). ----
inline constexpr int kMmaQueries = 64;   // queries a CTA: 4 warps of 16 rows
inline constexpr int kMmaKeys = 64;      // keys a tile
inline constexpr int kMmaThreads = 128;  // 4 warps

// A tile of kMmaKeys rows of kDim BF16 values. Rows padded by 16 bytes: the 8 row addresses of
// an ldmatrix then fall in 8 different groups of 4 banks (row stride kDim / 2 + 4 words).
template <int kDim>
using MmaTile = __nv_bfloat16[kMmaKeys][kDim + 8];

// Rows r0 .. r0 + kMmaKeys - 1 of `rows` ([n][kDim] BF16, 16-byte aligned) into `tile`, rows at or
// past n zero (a zero V row times p = 0 is 0; garbage could be NaN), as the tiled form's load_rows
// but kept in BF16.
template <int kDim>
__device__ __forceinline__ void load_mma_tile(MmaTile<kDim>& tile, const __nv_bfloat16* rows,
                                              int64_t r0, int64_t n) {
  static_assert(kMmaThreads == kTiledThreads, "RowPieces' thread count");
  const RowPieces<kDim, kMmaKeys> in(rows, r0, n);  // every load before the first store
#pragma unroll
  for (int i = 0; i < in.kEach; ++i)
    *reinterpret_cast<uint4*>(&tile[in.row(i)][in.col(i)]) = in.piece[i];
}

// Grid (ceil(n_q / 64), bh), 128 threads, static shared memory (K and V tiles: 18 KiB at d64,
// 34 KiB at d128). Warp w serves queries q0 + 16 w .. + 15; lane (g = lane / 4, t = lane % 4)
// holds, per 8-column n-tile, rows g and g + 8 at columns 2t, 2t + 1 (kernels/mma_bf16.cuh).
template <int kDim, class Visible>
__global__ void __launch_bounds__(kMmaThreads)
    reference_attention_mma(const __nv_bfloat16* __restrict__ q,
                            const __nv_bfloat16* __restrict__ k,
                            const __nv_bfloat16* __restrict__ v, __nv_bfloat16* __restrict__ out,
                            int64_t n_q, int64_t n_k, Visible visible) {
  constexpr int d = kDim, kBK = kMmaKeys;
  constexpr int kDimSteps = d / 16;    // k-steps of S = Q K^T
  constexpr int kKeyTiles = kBK / 8;   // n-tiles of S (8 keys each)
  constexpr int kKeySteps = kBK / 16;  // k-steps of O += P V
  constexpr int kDimTiles = d / 8;     // n-tiles of O (8 output dims each)
  static_assert(d % 32 == 0 && kBK % 16 == 0 && kMmaQueries == 16 * (kMmaThreads / 32),
                "whole ldmatrix pairs, 16 rows a warp");
  __shared__ alignas(16) MmaTile<d> k_tile;
  __shared__ alignas(16) MmaTile<d> v_tile;
  const int64_t bh = blockIdx.y;
  const int lane = int(threadIdx.x) % 32, g = lane / 4, t = lane % 4;
  // The thread's two query rows: r = 0 is row g of the warp's 16, r = 1 row g + 8.
  const int64_t row0 = int64_t(blockIdx.x) * kMmaQueries + 16 * (int(threadIdx.x) / 32) + g;
  const int64_t qi[2] = {row0, row0 + 8};
  const __nv_bfloat16* k_bh = k + bh * n_k * d;
  const __nv_bfloat16* v_bh = v + bh * n_k * d;
  const float scale = 1.0f / sqrtf(float(d));

  // The warp's Q as A fragments, read once from global memory (rows past n_q zero): step kk's
  // a0 (row g, dims 16 kk + 2t, + 1), a1 (g + 8, the same), a2 (g, 16 kk + 8 + 2t ..), a3 (g + 8).
  uint32_t q_frag[kDimSteps][4];
#pragma unroll
  for (int kk = 0; kk < kDimSteps; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int64_t row = qi[i % 2];
      q_frag[kk][i] = row < n_q ? *reinterpret_cast<const uint32_t*>(q + (bh * n_q + row) * d +
                                                                     16 * kk + 8 * (i / 2) + 2 * t)
                                : 0u;
    }

  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float acc[kDimTiles][4];
#pragma unroll
  for (int nt = 0; nt < kDimTiles; ++nt)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[nt][i] = 0.0f;

  for (int64_t j0 = 0; j0 < n_k; j0 += kBK) {
    // Bit 2 nt + u + 16 r: query qi[r] sees key j0 + 8 nt + 2 t + u (element 2 r + u of n-tile nt).
    uint32_t sees = 0;
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int64_t row = qi[i / 2], kj = j0 + 8 * nt + 2 * t + i % 2;
        if (row < n_q && kj < n_k && visible(row, kj))
          sees |= 1u << (2 * nt + i % 2 + 16 * (i / 2));
      }
    // Also the barrier after which the previous tile's K and V may be overwritten.
    if (!__syncthreads_or(sees != 0)) continue;  // no query of this CTA sees a key of the tile
    load_mma_tile<d>(k_tile, k_bh, j0, n_k);
    load_mma_tile<d>(v_tile, v_bh, j0, n_k);
    __syncthreads();

    // S = Q K^T: per n-tile (8 keys), FP32 accumulation over the dimensions, 16 at a time. One
    // ldmatrix.x4 gives the B fragments of two k-steps: matrix i holds keys 8 nt .. + 7 at
    // dimensions 16 kk + 8 i .. + 7, whose (row g, cols 2t, 2t+1) is b0 / b1 of step kk + i / 2.
    float s[kKeyTiles][4];
#pragma unroll
    for (int nt = 0; nt < kKeyTiles; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) s[nt][i] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kDimSteps; kk += 2) {
        uint32_t b[4];
        ldmatrix_x4(b, static_cast<uint32_t>(__cvta_generic_to_shared(
                           &k_tile[8 * nt + lane % 8][16 * kk + 8 * (lane / 8)])));
        mma_bf16_m16n8k16(s[nt], q_frag[kk], b[0], b[1]);
        mma_bf16_m16n8k16(s[nt], q_frag[kk + 1], b[2], b[3]);
      }
    }

    // Online softmax, a row at a time: the row's 64 scores are 16 in each of the quad's 4 lanes
    // (gathered into row[] in key order and back: registers, no copies once unrolled).
    float c[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float row[2 * kKeyTiles];
#pragma unroll
      for (int x = 0; x < 2 * kKeyTiles; ++x)  // n-tile x / 2, key 2t + x % 2
        row[x] = (sees >> (x + 16 * r) & 1u) ? s[x / 2][2 * r + x % 2] * scale : -INFINITY;
      c[r] = online_softmax_step<4>(row, m[r], l[r]);  // now p, FP32
#pragma unroll
      for (int x = 0; x < 2 * kKeyTiles; ++x) s[x / 2][2 * r + x % 2] = row[x];
    }
#pragma unroll
    for (int nt = 0; nt < kDimTiles; ++nt) {
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[nt][i] *= c[i / 2];
    }

    // O += P V over the tile's keys, 16 at a time. The S fragments of n-tiles 2 kk and 2 kk + 1
    // are the A fragment of step kk; P goes in twice, hi = bf16(p) then lo = bf16(p - hi) (an
    // exact difference), each times the same V fragments into the same FP32 accumulators. One
    // ldmatrix.x4.trans gives the B fragments of two n-tiles: matrix i holds keys 16 kk + 8 (i % 2)
    // .. + 7 at dimensions 16 np + 8 (i / 2) .. + 7, transposed: b0 (i even) or b1 (i odd) of
    // n-tile 2 np + i / 2.
#pragma unroll
    for (int kk = 0; kk < kKeySteps; ++kk) {
      uint32_t p_hi[4], p_lo[4];
      // a0 (row g, keys 2t, 2t + 1), a1 (g + 8, 2t ..), a2 (g, 2t + 8 ..), a3 (g + 8, 2t + 8 ..).
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float x = s[2 * kk + i / 2][2 * (i % 2)], y = s[2 * kk + i / 2][2 * (i % 2) + 1];
        p_hi[i] = pack_bf16x2(x, y);  // x in the low half, rounded to nearest
        p_lo[i] = pack_bf16x2(x - __uint_as_float(p_hi[i] << 16),
                              y - __uint_as_float(p_hi[i] & 0xffff0000u));
      }
#pragma unroll
      for (int np = 0; np < kDimTiles / 2; ++np) {
        uint32_t b[4];
        ldmatrix_x4_trans(
            b, static_cast<uint32_t>(__cvta_generic_to_shared(
                   &v_tile[16 * kk + lane % 8 + 8 * (lane / 8 % 2)][16 * np + 8 * (lane / 16)])));
        mma_bf16_m16n8k16(acc[2 * np], p_hi, b[0], b[1]);
        mma_bf16_m16n8k16(acc[2 * np], p_lo, b[0], b[1]);
        mma_bf16_m16n8k16(acc[2 * np + 1], p_hi, b[2], b[3]);
        mma_bf16_m16n8k16(acc[2 * np + 1], p_lo, b[2], b[3]);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (qi[r] >= n_q) continue;
    __nv_bfloat16* o = out + (bh * n_q + qi[r]) * d + 2 * t;
#pragma unroll
    for (int nt = 0; nt < kDimTiles; ++nt)
      *reinterpret_cast<uint32_t*>(o + 8 * nt) =
          pack_bf16x2(acc[nt][2 * r] / l[r], acc[nt][2 * r + 1] / l[r]);
  }
}

// q, k, v and out 16-byte aligned; kDim 64 or 128 (reference_form's conditions).
template <int kDim, class Visible>
void launch_reference_attention_mma(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                    const __nv_bfloat16* v, __nv_bfloat16* out, int64_t bh,
                                    int64_t n_q, int64_t n_k, Visible visible,
                                    cudaStream_t stream) {
  static_assert(kDim == 64 || kDim == 128, "the mma form serves head dims 64 and 128");
  reference_attention_mma<kDim>
      <<<dim3(unsigned((n_q + kMmaQueries - 1) / kMmaQueries), unsigned(bh)), kMmaThreads, 0,
         stream>>>(q, k, v, out, n_q, n_k, visible);
  BENCH_CHECK_LAUNCH();
}
}  // namespace detail

// Device memory for the split form's partials, reused from call to call: a caller that calls the
// wrapper in a loop (a sequence or a request at a time) passes one, so only a call that needs
// more than every call before it allocates. Use it from one stream at a time, and keep it alive
// until that stream has finished the calls that used it.
class ReferenceAttentionScratch {
 public:
  float* reserve(int64_t floats, cudaStream_t stream) {
    if (floats > buffer_.size()) {
      // The stream's earlier kernels may still read or write the old buffer.
      BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
      buffer_ = bench::DeviceBuffer<float>();  // free the old one before the larger one is taken
      buffer_ = bench::DeviceBuffer<float>(floats);
    }
    return buffer_.data();
  }
  bool allocated() const { return buffer_.data() != nullptr; }

 private:
  bench::DeviceBuffer<float> buffer_;
};

namespace detail {

// The split form's grid target: 132 SMs (an H100's, an H200's) x 16 warps, i.e. 4 CTAs an SM at
// d128 (4 warps each), 8 at d64. A fixed number, not the current GPU's SM count: the chunk sets
// the order of the merge's sums, so a reference's bits at a shape stay the same on every GPU.
inline constexpr int64_t kRefSplitWarps = 132 * 16;

// Chunks of whole tiles, as few as fill the target: the rows form's CTA count (query groups x
// bh) times the tiles of the keys, over the target, rounded up; then as many chunks as that takes
// (the last one may be shorter). splits == 1: the rows form's own grid already fills the target
// (or the keys are one tile), and the wrapper takes the rows form.
struct RefSplit {
  int64_t chunk_keys, splits;
};
template <int kDim>
RefSplit reference_split(int64_t bh, int64_t n_q, int64_t n_k) {
  constexpr int64_t kCtas = kRefSplitWarps / (kDim / 32), kQ = kRefQueriesPerBlock;
  const int64_t tiles = (n_k + kDim - 1) / kDim, ctas = (n_q + kQ - 1) / kQ * bh;
  const int64_t chunk_tiles = std::max<int64_t>(1, (tiles * ctas + kCtas - 1) / kCtas);
  return {chunk_tiles * kDim, (tiles + chunk_tiles - 1) / chunk_tiles};
}

// The wrapper's choice (below), apart so that tests can see it. (The wrapper has already refused
// a k or v off the 16-byte grid.)
enum class RefForm { rows, split, tiled, mma };
template <int kDim>
RefForm reference_form(const void* q, const void* out, int64_t bh, int64_t n_q, int64_t n_k) {
  static_assert(kMmaQueries == kTiledQueries, "one prefill threshold");
  if (n_q >= kTiledQueries &&
      (reinterpret_cast<uintptr_t>(q) | reinterpret_cast<uintptr_t>(out)) % 16 == 0)
    return kDim == 64 || kDim == 128 ? RefForm::mma : RefForm::tiled;
  return reference_split<kDim>(bh, n_q, n_k).splits > 1 ? RefForm::split : RefForm::rows;
}

// The split form with chunks of chunk_keys (a positive multiple of kDim): the rows kernel with
// partials over grid (query groups, bh, chunks), then the merge over (n_q, bh).
template <int kDim, class Visible>
void launch_reference_attention_split(const __nv_bfloat16* q, const __nv_bfloat16* k,
                                      const __nv_bfloat16* v, __nv_bfloat16* out, int64_t bh,
                                      int64_t n_q, int64_t n_k, Visible visible,
                                      int64_t chunk_keys, ReferenceAttentionScratch& scratch,
                                      cudaStream_t stream) {
  if (chunk_keys <= 0 || chunk_keys % kDim != 0)
    throw std::invalid_argument("reference_attention: chunks of whole tiles of keys");
  constexpr int kQ = kRefQueriesPerBlock;
  const int64_t splits = (n_k + chunk_keys - 1) / chunk_keys, rows = bh * n_q;
  float* ml = scratch.reserve(rows * splits * (2 + kDim), stream);
  const RefPartials partials{ml, ml + rows * splits * 2, splits};
  reference_attention<kDim, true>
      <<<dim3(unsigned((n_q + kQ - 1) / kQ), unsigned(bh), unsigned(splits)), kDim, 0, stream>>>(
          q, k, v, nullptr, n_q, n_k, visible, chunk_keys, partials);
  BENCH_CHECK_LAUNCH();
  merge_reference_partials<kDim><<<dim3(unsigned(n_q), unsigned(bh)), kDim, 0, stream>>>(
      partials.ml, partials.o, out, n_q, splits);
  BENCH_CHECK_LAUNCH();
}
}  // namespace detail

// The mma form from a whole CTA of queries up (prefill) at head dims 64 and 128, the tiled form
// there at other head dims; below that (decode, where either would compute 64 query rows for 1)
// and for a q or out off the 16-byte grid, the split form
// where the rows form's grid is short of the target and the keys span several tiles, else the
// rows form. The split form's partials go to `scratch`.
template <int kDim = kRefHeadDim, class Visible>
void reference_attention(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                         __nv_bfloat16* out, int64_t bh, int64_t n_q, int64_t n_k, Visible visible,
                         cudaStream_t stream, ReferenceAttentionScratch& scratch) {
  if ((reinterpret_cast<uintptr_t>(k) | reinterpret_cast<uintptr_t>(v)) % 16 != 0)
    throw std::invalid_argument("reference_attention: k and v must be 16-byte aligned");
  switch (detail::reference_form<kDim>(q, out, bh, n_q, n_k)) {
    case detail::RefForm::mma:
      if constexpr (kDim == 64 || kDim == 128)
        detail::launch_reference_attention_mma<kDim>(q, k, v, out, bh, n_q, n_k, visible, stream);
      break;
    case detail::RefForm::tiled:
      detail::launch_reference_attention_tiled<kDim>(q, k, v, out, bh, n_q, n_k, visible, stream);
      break;
    case detail::RefForm::split:
      detail::launch_reference_attention_split<kDim>(
          q, k, v, out, bh, n_q, n_k, visible,
          detail::reference_split<kDim>(bh, n_q, n_k).chunk_keys, scratch, stream);
      break;
    case detail::RefForm::rows:
      detail::launch_reference_attention_rows<kDim>(q, k, v, out, bh, n_q, n_k, visible, stream);
      break;
  }
}

// The same with scratch of its own: where it takes the split form, the call waits for the stream
// before it frees the partials (a caller in a loop passes a ReferenceAttentionScratch instead).
template <int kDim = kRefHeadDim, class Visible>
void reference_attention(const __nv_bfloat16* q, const __nv_bfloat16* k, const __nv_bfloat16* v,
                         __nv_bfloat16* out, int64_t bh, int64_t n_q, int64_t n_k, Visible visible,
                         cudaStream_t stream) {
  ReferenceAttentionScratch scratch;
  reference_attention<kDim>(q, k, v, out, bh, n_q, n_k, visible, stream, scratch);
  if (scratch.allocated()) BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
}

// The same in double from the BF16 inputs, into `out` [bh][n_q][kDim]. K and V may also be given
// as doubles (a cache dequantised on the host: ch19's FP8 KV cache).
inline double to_double(__nv_bfloat16 x) { return double(__bfloat162float(x)); }
inline double to_double(double x) { return x; }
template <int kDim = kRefHeadDim, class KvValue, class Visible>
void reference_attention(std::span<const __nv_bfloat16> q, std::span<const KvValue> k,
                         std::span<const KvValue> v, std::span<double> out, int64_t bh, int64_t n_q,
                         int64_t n_k, Visible visible) {
  constexpr int d = kDim;
  std::vector<double> s(static_cast<std::size_t>(n_k));
  for (int64_t b = 0; b < bh; ++b)
    for (int64_t i = 0; i < n_q; ++i) {
      const __nv_bfloat16* qr = q.data() + (b * n_q + i) * d;
      double m = -INFINITY;
      for (int64_t j = 0; j < n_k; ++j) {
        s[j] = -INFINITY;
        if (!visible(i, j)) continue;
        const KvValue* kr = k.data() + (b * n_k + j) * d;
        double dot = 0;
        for (int e = 0; e < d; ++e) dot += to_double(qr[e]) * to_double(kr[e]);
        s[j] = dot / std::sqrt(double(d));
        m = std::fmax(m, s[j]);
      }
      double l = 0;
      double* o = out.data() + (b * n_q + i) * d;
      for (int e = 0; e < d; ++e) o[e] = 0;
      for (int64_t j = 0; j < n_k; ++j) {
        if (s[j] == -INFINITY) continue;
        const double p = std::exp(s[j] - m);
        l += p;
        const KvValue* vr = v.data() + (b * n_k + j) * d;
        for (int e = 0; e < d; ++e) o[e] += p * to_double(vr[e]);
      }
      for (int e = 0; e < d; ++e) o[e] /= l;
    }
}

}  // namespace kernels

// kernels/decode_attention_mma.cuh: grouped-query decode attention on tensor cores. The same work
// and the same outputs as kernels/decode_attention.cuh's attention<4> without the draft mask (one
// CTA per (KV head pair, chunk of keys), serving the 4 query heads that share the KV head from one
// read of each K and V row), with the arithmetic moved from the FP32 pipes to mma.sync.
//
// Why: with 4 queries a key, the FMA kernel spends ~20 FP32 instructions, 4 shuffles and an
// exponential a lane for each (query, key) pair, a half-warp computing the same exponential 16
// times, and it reads the cache well under the read ceiling where it is ch20's largest op (its
// README, "Batch 32", has the figures; that its issue rather than its bytes sets its time is an
// estimate from instruction counts). Here a warp's 16 keys are one m16n8k16 step: S = Q K^T is
// 16 MMAs (8 k-steps of 16 dimensions, two 8-key tiles), P V another 16 (16 tiles of 8
// dimensions), with the 4 queries as rows 0-3 of the 16-row A operand (rows 4-15 zero: three
// quarters of the MMA is padding, which the tensor cores can afford). ch19's kv_tensor_core makes
// the same move for an E4M3 cache, keys as the MMA's rows and fragments loaded from global
// memory; here the cache is BF16 and goes through shared memory.
//
// Layout (what attention<4, ContiguousKv, false> reads and writes): q [pair][4][128] BF16 (the 4
// query heads of KV pair `pair`, contiguous), K and V [pair][n_k][128] BF16; the partials (m, l,
// o) of query qi in slot (pair x 4 + qi) x splits + split, m in log2 units (scores scaled by
// log2(e) / sqrt(128)), l = sum of 2^(s - m), o = sum of 2^(s - m) v: decode::merge_splits and
// ch20's merge_with_new_key read them unchanged. With one split the CTA writes o / l to out,
// having folded in a key of the pair's own (NewKey, below) if it is given one.
//
// One CTA: 4 warps, keys [split x chunk, +chunk) of its pair in stages of 64 (16 a warp), a
// 3-stage ring in shared memory (the cp.async form's K and V rows padded to 272 bytes, so that
// ldmatrix's 8 row addresses fall in 8 different bank groups; the TMA form's below), 2 CTAs an SM:
// up to 4 stages (128 KB) of the cache in flight an SM while the other stages are consumed. K
// fragments come from ldmatrix (B of Q K^T is K row-major), V's from ldmatrix.trans; P goes from
// the S accumulators straight into an A fragment (kernels/mma_bf16.cuh). Keys past the chunk or the
// pair's end are masked to -inf in S; the cp.async form zero-fills them in shared memory (no NaN
// bits reach P V), the TMA form those past the pair's end (below).
// Launched programmatically (ch20's rung 6d form), a CTA issues its first stages of K and V before
// waiting for the kernel that writes q: the cache is not written by any kernel of the step.
//
// The TMA form (attention<true>, launch's default): one thread fills a stage with four bulk tensor
// copies (K and V, each as two 64-dimension halves of 64 keys) completing on the stage's mbarrier,
// instead of 2048 16-byte cp.async issued by all 128 threads, so the warps spend no issue slots on
// addresses and the copy engine keeps the stage's 32 KB in flight. The halves land in the 128-byte
// swizzle (16-byte chunk c of row r at chunk c ^ (r % 8)), which spreads ldmatrix's 8 row
// addresses over the banks as the cp.async form's padding does. Keys past the chunk are the next
// chunk's rows (masked to -inf in S, so P is 0 there); past a pair's last key the copy engine
// fills zeros (a map of one plane a pair), as the cp.async form does. Why: under ncu the
// cp.async form read the cache well under the read ceiling with most cycles having no warp ready
// (ch20's README, "Batch 32", has both forms' profiles).
#pragma once

#include <cuda_bf16.h>

#include <bench/bench.hpp>
#include <cstdint>
#include <kernels/async_copy.cuh>
#include <kernels/bf16_pack.cuh>
#include <kernels/decode_attention.cuh>
#include <kernels/group_reduce.cuh>
#include <kernels/mma_bf16.cuh>
#include <kernels/occupancy.cuh>
#include <kernels/online_softmax.cuh>
#include <kernels/pdl.cuh>
#include <kernels/tma.cuh>
#include <stdexcept>

namespace kernels::decode::mma {

constexpr int kGroup = 4;  // queries of a pair: rows 0-3 of the MMA
constexpr int kCtaWarps = 4, kCtaThreads = 32 * kCtaWarps;  // not decode::kThreads (256)
constexpr int kKeysPerWarp = 16;                   // one k-step of P V, two 8-key tiles of S
constexpr int kStageKeys = kCtaWarps * kKeysPerWarp;  // 64
constexpr int kStages = 3;
constexpr int kRowPitch = kHeadDim + 8;                   // BF16 a shared row: 272 bytes
constexpr int kChunksPerRow = kHeadDim / kBf16PerVector;  // 16-byte copies a row: 16
constexpr int kDimTiles = kHeadDim / 8;                   // 8-dimension tiles of O: 16

// Any chunk length works (a short last stage is masked); a multiple of this wastes no stage.
constexpr int kKeysPerStep = kStageKeys;

struct alignas(16) Ring {
  bf16 k[kStages][kStageKeys][kRowPitch];
  bf16 v[kStages][kStageKeys][kRowPitch];
};
struct Merge {  // the warps' (m, l, o) of each query, for the CTA's merge (reuses the ring)
  float o[kCtaWarps][kGroup][kHeadDim];
  float ml[kCtaWarps][kGroup][2];
  float new_score[kGroup];  // each query's score against the NewKey, log2 units
};
static_assert(kCtaWarps == kGroup, "a warp scores one query against the new key");

// One more key a pair, outside the cache: rows [pair][128] of K and V (ch20's step appends its
// token's K and V there). With one split the CTA has every cached key's part in hand, so it folds
// this key in as one more part (score, weight 1, its V row), the step that would otherwise take a
// merge kernel of its own; with several splits the caller's merge adds it. Null: no such key.
struct NewKey {
  const bf16* k = nullptr;
  const bf16* v = nullptr;
};
union Smem {
  Ring ring;
  Merge merge;
};
constexpr size_t kSmemBytes = sizeof(Smem);

// The TMA form's ring: [stage][half][key][64 dimensions], each half a 64 x 128-byte box in the
// 128-byte swizzle, 1024-byte aligned (the swizzle repeats every 8 rows); the stages' barriers
// outside the union, so the merge never overwrites a live mbarrier.
constexpr int kHalfDims = 64;
struct alignas(1024) TmaRing {
  bf16 k[kStages][2][kStageKeys][kHalfDims];
  bf16 v[kStages][2][kStageKeys][kHalfDims];
};
struct TmaSmem {
  union {
    TmaRing ring;
    Merge merge;
  };
  uint64_t full[kStages];
};
constexpr uint32_t kStageBytes = 2 * 2 * kStageKeys * kHalfDims * sizeof(bf16);  // K and V: 32 KB
constexpr size_t kTmaSmemBytes = sizeof(TmaSmem) + 1024;  // + the slack tma::aligned_1024 takes

// Shared-memory address of dimensions [dim, dim + 8) of row `row` of one operand's stage.
template <bool kTma>
__device__ __forceinline__ uint32_t row_chunk(const bf16* stage, int row, int dim) {
  if constexpr (kTma) {
    const int half = dim / kHalfDims, chunk = (dim % kHalfDims) / kBf16PerVector;
    return cp_async::smem_addr(stage + (half * kStageKeys + row) * kHalfDims +
                               (chunk ^ (row % 8)) * kBf16PerVector);
  } else {
    return cp_async::smem_addr(stage + row * kRowPitch + dim);
  }
}

template <bool kTma>
__global__ void __launch_bounds__(kCtaThreads, 2)
    attention(Args a, ContiguousKv kv, NewKey fresh, const __grid_constant__ CUtensorMap map_k,
              const __grid_constant__ CUtensorMap map_v) {
  extern __shared__ uint4 smem_words[];
  Smem& smem = *reinterpret_cast<Smem*>(smem_words);
  TmaSmem& tsm = tma::aligned_1024<TmaSmem>(reinterpret_cast<uint8_t*>(smem_words));
  Merge& merge = kTma ? tsm.merge : smem.merge;
  const int64_t pair = blockIdx.y;
  const int split = int(blockIdx.x);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t begin = split * a.chunk, end = min(begin + a.chunk, kv.n_k);
  if (begin >= end) return;  // a chunk past the pair's keys: merge_splits skips it
  const int stages = int((end - begin + kStageKeys - 1) / kStageKeys);
  const bf16* k_rows = kv.k + pair * kv.n_k * kHeadDim;
  const bf16* v_rows = kv.v + pair * kv.n_k * kHeadDim;

  if constexpr (kTma) {
    if (threadIdx.x == 0) {
      for (int s = 0; s < kStages; ++s) tma::mbarrier_init(&tsm.full[s], 1);
      tma::fence_barrier_init();
    }
    __syncthreads();
  }
  // Stage `slot` <- keys [at, at + 64): 64 rows of K and of V. TMA: four boxes from one thread,
  // completing on the stage's barrier. cp.async: 16 copies of 16 bytes a row, 16 a thread,
  // consecutive threads on consecutive bytes; absent keys zero-filled from key `begin`.
  auto load_stage = [&](int slot, int64_t at) {
    if constexpr (kTma) {
      if (threadIdx.x == 0) {
        uint64_t* full = &tsm.full[slot];
        tma::arrive_expect_tx(full, kStageBytes);
        for (int half = 0; half < 2; ++half) {
          tma::load_3d(&tsm.ring.k[slot][half][0][0], &map_k, half * kHalfDims, int(at), int(pair),
                       full);
          tma::load_3d(&tsm.ring.v[slot][half][0][0], &map_v, half * kHalfDims, int(at), int(pair),
                       full);
        }
      }
    } else {
#pragma unroll 4
      for (int i = threadIdx.x; i < kStageKeys * kChunksPerRow; i += kCtaThreads) {
        const int key = i / kChunksPerRow, c = i % kChunksPerRow;
        const bool present = at + key < end;
        const int64_t row = present ? at + key : begin;
        cp_async::copy16(&smem.ring.k[slot][key][c * kBf16PerVector],
                         k_rows + row * kHeadDim + c * kBf16PerVector, present ? 16 : 0);
        cp_async::copy16(&smem.ring.v[slot][key][c * kBf16PerVector],
                         v_rows + row * kHeadDim + c * kBf16PerVector, present ? 16 : 0);
      }
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < stages) load_stage(s, begin + int64_t{s} * kStageKeys);
    if constexpr (!kTma) cp_async::commit();
  }

  // q as A fragments of the 8 k-steps: row g < 4 is query g, rows 4-15 zero. Read after the wait
  // (the kernel ahead writes q when launched programmatically).
  pdl::wait_for_prerequisite();
  uint32_t qa[kHeadDim / 16][4];
  {
    const bf16* q_row = a.q + ((pair * a.n_q + a.q_first) + (g < kGroup ? g : 0)) * kHeadDim;
#pragma unroll
    for (int ks = 0; ks < kHeadDim / 16; ++ks) {
      const auto* q32 = reinterpret_cast<const uint32_t*>(q_row + ks * 16 + 2 * t);
      qa[ks][0] = g < kGroup ? q32[0] : 0u;
      qa[ks][1] = 0u;
      qa[ks][2] = g < kGroup ? q32[4] : 0u;  // 8 BF16 further
      qa[ks][3] = 0u;
    }
  }
  const float scale = kLog2e * rsqrtf(float(kHeadDim));  // scores in log2 units

  // Each thread: rows g (i = 0) and g + 8 (i = 1) of S and O; m and l per row (l summed over the
  // quad at the end), o[n] = O's 8-dimension tile n: {row g: 2t, 2t+1; row g+8: 2t, 2t+1}.
  float m[2] = {kEmptyMax, kEmptyMax}, l[2] = {0.0f, 0.0f}, o[kDimTiles][4];
#pragma unroll
  for (int n = 0; n < kDimTiles; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  // ldmatrix row addresses: lane supplies row (lane % 8) of matrix (lane / 8).
  const int mat = lane / 8, mat_row = lane % 8;

  for (int it = 0; it < stages; ++it) {
    const int slot = it % kStages;
    if constexpr (kTma)
      tma::wait_parity(&tsm.full[slot], uint32_t(it / kStages) & 1u);
    else
      cp_async::wait<kStages - 2>();
    __syncthreads();  // stage `it` landed for every thread; stage it - 1's slot is free
    if (it + kStages - 1 < stages)
      load_stage((it + kStages - 1) % kStages, begin + int64_t{it + kStages - 1} * kStageKeys);
    if constexpr (!kTma) cp_async::commit();
    const int64_t key0 = begin + int64_t{it} * kStageKeys + warp * kKeysPerWarp;

    // S = Q K^T over the warp's 16 keys: matrices (keys 0-7 | 8-15) x (dimensions +0 | +8).
    float s[2][4] = {};
    const bf16* k_stage = kTma ? &tsm.ring.k[slot][0][0][0] : &smem.ring.k[slot][0][0];
    const int k_row = warp * kKeysPerWarp + (mat / 2) * 8 + mat_row;
#pragma unroll
    for (int ks = 0; ks < kHeadDim / 16; ++ks) {
      uint32_t b[4];
      ldmatrix_x4(b, row_chunk<kTma>(k_stage, k_row, ks * 16 + (mat % 2) * 8));
      mma_bf16_m16n8k16(s[0], qa[ks], b[0], b[1]);
      mma_bf16_m16n8k16(s[1], qa[ks], b[2], b[3]);
    }
    // Scale, mask absent keys, and the online softmax of rows g and g + 8.
    float row_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool present = key0 + nt * 8 + 2 * t + (e % 2) < end;
        s[nt][e] = present ? s[nt][e] * scale : -INFINITY;
        row_max[e / 2] = fmaxf(row_max[e / 2], s[nt][e]);
      }
    float correction[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      row_max[i] = fmaxf(row_max[i], __shfl_xor_sync(0xffffffffu, row_max[i], 1));
      row_max[i] = fmaxf(row_max[i], __shfl_xor_sync(0xffffffffu, row_max[i], 2));
      const float m_new = fmaxf(m[i], row_max[i]);  // kEmptyMax at worst: never -inf
      correction[i] = exp2_ftz(m[i] - m_new);
      m[i] = m_new;
      l[i] *= correction[i];
    }
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] *= correction[e / 2];
    float p[2][4];
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        p[nt][e] = exp2_ftz(s[nt][e] - m[e / 2]);  // 0 for a masked key
        l[e / 2] += p[nt][e];
      }
    // P (16 x 16 keys) as the A fragment of P V: the two S tiles' accumulators, packed.
    const uint32_t pa[4] = {pack_bf16x2(p[0][0], p[0][1]), pack_bf16x2(p[0][2], p[0][3]),
                            pack_bf16x2(p[1][0], p[1][1]), pack_bf16x2(p[1][2], p[1][3])};
    // O += P V: V's 16 rows (k = key) as B, by ldmatrix.trans, two 8-dimension tiles at a time:
    // matrices (keys 0-7 | 8-15) x (dimensions +0 | +8).
    const bf16* v_stage = kTma ? &tsm.ring.v[slot][0][0][0] : &smem.ring.v[slot][0][0];
    const int v_row = warp * kKeysPerWarp + (mat % 2) * 8 + mat_row;
#pragma unroll
    for (int j = 0; j < kDimTiles / 2; ++j) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, row_chunk<kTma>(v_stage, v_row, j * 16 + (mat / 2) * 8));
      mma_bf16_m16n8k16(o[2 * j], pa, b[0], b[1]);
      mma_bf16_m16n8k16(o[2 * j + 1], pa, b[2], b[3]);
    }
  }
  if constexpr (!kTma) cp_async::wait<0>();
  __syncthreads();  // every warp is done with the ring: its bytes become the merge slots

  // Each warp's (m, l, o) of queries 0-3 (rows g < 4, half 0 of each thread's rows), then the
  // warps merged, a thread per (query, dimension) item.
  l[0] += __shfl_xor_sync(0xffffffffu, l[0], 1);  // row g only: rows g + 8 are padding
  l[0] += __shfl_xor_sync(0xffffffffu, l[0], 2);
  if (g < kGroup) {
#pragma unroll
    for (int n = 0; n < kDimTiles; ++n) {
      merge.o[warp][g][n * 8 + 2 * t] = o[n][0];
      merge.o[warp][g][n * 8 + 2 * t + 1] = o[n][1];
    }
    if (t == 0) merge.ml[warp][g][0] = m[0], merge.ml[warp][g][1] = l[0];
  }
  const bool fold_new_key = a.splits == 1 && fresh.k != nullptr;  // the same for the whole CTA
  if (fold_new_key) {  // warp w: query w's score against the new key, as the cache's are scaled
    const bf16* q_row = a.q + ((pair * a.n_q + a.q_first) + warp) * kHeadDim;
    float dot = 0.0f;
#pragma unroll
    for (int d = lane; d < kHeadDim; d += 32)
      dot += __bfloat162float(q_row[d]) * __bfloat162float(fresh.k[pair * kHeadDim + d]);
    dot = warp_reduce(dot, Sum{});
    if (lane == 0) merge.new_score[warp] = dot * scale;
  }
  __syncthreads();
  for (int item = threadIdx.x; item < kGroup * kHeadDim; item += kCtaThreads) {
    const int qi = item / kHeadDim, d = item % kHeadDim;
    float mm = merge.ml[0][qi][0], ll = merge.ml[0][qi][1], oo[1] = {merge.o[0][qi][d]};
#pragma unroll
    for (int w = 1; w < kCtaWarps; ++w) {
      const float ow[1] = {merge.o[w][qi][d]};
      merge_softmax_parts(mm, ll, oo, merge.ml[w][qi][0], merge.ml[w][qi][1], ow);
    }
    if (a.splits == 1) {
      if (fold_new_key) {
        const float o_new[1] = {__bfloat162float(fresh.v[pair * kHeadDim + d])};
        merge_softmax_parts(mm, ll, oo, merge.new_score[qi], 1.0f, o_new);
      }
      a.out[((pair * a.n_q + a.q_first) + qi) * kHeadDim + d] = __float2bfloat16(oo[0] / ll);
    } else {
      const int64_t slot = (pair * kGroup + qi) * a.splits + split;
      a.part_o[slot * kHeadDim + d] = oo[0];
      if (d == 0) a.part_ml[2 * slot] = mm, a.part_ml[2 * slot + 1] = ll;
    }
  }
}

// A form of the kernel and the dynamic shared memory it takes: filled by TMA (launch's default)
// or by cp.async.
struct KernelForm {
  void (*kernel)(Args, ContiguousKv, NewKey, CUtensorMap, CUtensorMap);
  size_t smem_bytes;
};
inline KernelForm kernel_form(bool by_tma) {
  return by_tma ? KernelForm{attention<true>, kTmaSmemBytes}
                : KernelForm{attention<false>, kSmemBytes};
}

// Before the first launch or occupancy query on each device: the ring is more than the 48 KB a
// kernel may take without asking, and the full carveout lets 2 CTAs of it share an SM. The
// attributes are per device, so they are set once for each device a process uses, the first time
// (a graphed rung's first call is its setup, outside the capture).
inline void allow_shared_memory() {
  constexpr int kMaxDevices = 64;
  static bool set[kMaxDevices] = {};
  int device = 0;
  BENCH_CUDA_CHECK(cudaGetDevice(&device));
  if (device < kMaxDevices && set[device]) return;
  for (const KernelForm form : {kernel_form(true), kernel_form(false)}) {
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(form.kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(form.smem_bytes)));
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(form.kernel,
                                          cudaFuncAttributePreferredSharedMemoryCarveout,
                                          int(cudaSharedmemCarveoutMaxShared)));
  }
  if (device < kMaxDevices) set[device] = true;
}

// CTAs of `attention` resident on one SM (2 on Hopper: registers and shared memory allow it).
inline int blocks_per_sm(bool by_tma = true) {
  allow_shared_memory();
  const KernelForm form = kernel_form(by_tma);
  return kernels::blocks_per_sm(form.kernel, kCtaThreads, form.smem_bytes);
}

// The TMA form's view of K or V: `pairs` planes of n_k keys of 128 BF16, in boxes of 64 keys x 64
// dimensions of one pair, 128-byte swizzle; keys past a pair's end are out of bounds and read as
// zeros, as the cp.async form fills them. Encoded on the host for each launch (no device work; a
// graph keeps the map it was captured with, as it keeps every other argument).
inline CUtensorMap cache_map(const bf16* rows, int64_t pairs, int64_t n_k) {
  return tma::make_map_3d(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, sizeof(bf16), rows, uint64_t(pairs),
                          uint64_t(n_k) * kHeadDim, uint64_t(n_k), kHeadDim, kStageKeys, kHalfDims,
                          CU_TENSOR_MAP_SWIZZLE_128B);
}

// Enqueues the pass over `pairs` KV pairs (grid: splits x pairs), the ordinary way or
// programmatically (kernels/pdl.cuh), by TMA (the default) or by cp.async. Requires n_q == 4
// queries a pair, from q_first 0; decode::merge_splits, or the caller's own merge, combines the
// partials when splits > 1. A NewKey is folded in by the kernel, so it needs one split.
// Programmatically, the CTAs read K and V before the kernel ahead has finished: nothing still
// running ahead of it on the stream may write the cache (ch20's step writes the new key and value
// to rows of their own), only q.
inline void launch(const Args& a, const ContiguousKv& kv, int64_t pairs, cudaStream_t stream,
                   bool programmatic = false, bool by_tma = true, NewKey fresh = {}) {
  if (a.n_q != kGroup || a.q_first != 0 || a.chunk < 1)
    throw std::invalid_argument(
        "decode::mma::launch: 4 queries a pair from query 0, chunks of keys");
  if ((fresh.k != nullptr) != (fresh.v != nullptr) || (fresh.k != nullptr && a.splits != 1))
    throw std::invalid_argument(
        "decode::mma::launch: a new key needs both its K and V rows, and one split");
  if (a.splits == 1 ? a.out == nullptr : (a.part_ml == nullptr || a.part_o == nullptr))
    throw std::invalid_argument(
        "decode::mma::launch: one split writes out, several the partials: a buffer is null");
  allow_shared_memory();
  const dim3 grid(unsigned(a.splits), unsigned(pairs));
  const CUtensorMap map_k = by_tma ? cache_map(kv.k, pairs, kv.n_k) : CUtensorMap{};
  const CUtensorMap map_v = by_tma ? cache_map(kv.v, pairs, kv.n_k) : CUtensorMap{};
  const KernelForm form = kernel_form(by_tma);
  if (programmatic) {
    pdl::launch(form.kernel, grid, dim3(kCtaThreads), form.smem_bytes, stream, a, kv, fresh, map_k,
                map_v);
    return;
  }
  form.kernel<<<grid, kCtaThreads, form.smem_bytes, stream>>>(a, kv, fresh, map_k, map_v);
  BENCH_CHECK_LAUNCH();
}

}  // namespace kernels::decode::mma

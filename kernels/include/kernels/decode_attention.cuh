// kernels/decode_attention.cuh: split-KV decode attention for a few query tokens per (sequence,
// head), with the K/V addressing as a policy: ch18's flash_decoding and speculative_verify read a
// contiguous cache (ContiguousKv), ch16's paged_attention reads pages through a block table
// (PagedKv) and, on its baseline side, a packed variable-length cache (its own policy).
//
// Layout, per (sequence, head) pair bh: q and out [bh][n_q][128], BF16. Where pair bh's keys live
// is the policy's: kv.k and kv.v are the K and V bases, and kv.pair(bh) gives the pair's key count
// n_k and row(first), the row (of 128 BF16) of key `first` from those bases; the keys after it
// follow at one row each up to the end of a page. (The bases stay kernel parameters: a pair's own
// base pointer, loaded, cost the paged kernel 7 more registers.) A warp asks once per step for its
// 2 x kKeys keys (8 or 4), which start at a multiple of their count, so a page of any multiple of 8
// keys holds them all. Query qi (0..n_q-1) sees keys j < n_k - (n_q - 1 - qi): the last query sees
// the whole cache, each earlier draft token one key fewer (a causal mask inside the draft, whose
// K/V rows are the last n_q of the cache). A launch computes kQueries of those queries, from
// q_first. Without the draft mask (kDraftMask = false: grouped-query attention, where the n_q
// queries of a pair are the query heads that share one KV head, ch19's kv_quantization) every query
// sees all n_k. Rows are BF16 unless the policy says `using Rows = E4m3Rows`: FP8 E4M3 codes, 8
// bytes a lane, with the policy's scales(bh) = {K dequant, V dequant} for the pair. The K scale is
// folded into the pre-scaled q and the V scale into o at the end, so the loop pays only the
// conversion.
//
// One CTA: one bh and one chunk of keys (split s of `splits`), 256 threads = 8 warps. A half-warp
// holds one key: lane l % 16 loads its 8 of the 128 dimensions of K and of V as one 16-byte
// streaming load each (kernels/vector_access.cuh), so a warp reads 2 keys per load instruction, and
// kKeysPerLane keys' K and V loads are all issued before the first is used (bytes in flight; with
// several queries, a step ahead). The score is 8 FMAs per lane and a 4-step butterfly over the
// 16 lanes; each half-warp keeps its own online-softmax state (kernels/online_softmax.cuh) for
// every query: m, l and its 8 dimensions of o.
// At the end the two halves, then the 8 warps (through shared memory) merge; with one split the CTA
// writes o / l, else the partial (m, l, o) for merge_splits, the log-sum-exp combine. Keys per
// split (`chunk`) are the same for every pair; a CTA whose chunk starts past its pair's last key
// (a short sequence among long ones) exits at once, and merge_splits folds only the chunks that
// hold keys.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include <bench/bench.hpp>
#include <cstdint>
#include <kernels/bf16_pack.cuh>
#include <kernels/fp8_quantize.cuh>
#include <kernels/online_softmax.cuh>
#include <kernels/pdl.cuh>
#include <kernels/vector_access.cuh>

namespace kernels::decode {

using bf16 = __nv_bfloat16;
constexpr int kHeadDim = 128;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kLanesPerKey = kHeadDim / kBf16PerVector;  // 16: a half-warp per key, 16 uint4 a row
// Keys one lane has in flight: 4 (K and V: 128 bytes) for one query; 2 for 8 queries, whose 64
// accumulators per lane leave fewer registers for loads. Registers (ptxas, sm_90a, CUDA 13.0): 63
// for one query over a contiguous cache (4 CTAs of 256 per SM), 73 through a block table and 80
// over ch16's packed cache (3 CTAs: a launch bound of 4 CTAs makes even the contiguous one spill);
// 175 for eight, with the next step's loads in flight too (1 CTA per SM: 8 warps, up to 32 KB in
// flight per SM; capping it at 128 for 2 CTAs spills ~200 bytes a thread).
constexpr int keys_per_lane(int queries) { return queries == 1 ? 4 : 2; }
constexpr int keys_per_warp_step(int queries) { return 2 * keys_per_lane(queries); }
constexpr int keys_per_cta_step(int queries) { return kWarps * keys_per_warp_step(queries); }

struct Args {
  const bf16* q;      // [bh][n_q][128]
  bf16* out;          // [bh][n_q][128], when splits == 1
  float* part_ml;     // [bh][kQueries][splits][2] (m, l), when splits > 1
  float* part_o;      // [bh][kQueries][splits][128]
  int64_t n_q;        // queries per bh in q/out
  int q_first;        // the first of this launch's kQueries queries
  int64_t chunk;      // keys per split, a multiple of keys_per_cta_step
  int splits;
};

// How a policy's rows are stored. A lane holds 8 of a key's 128 dimensions: 16 bytes of BF16 or
// 8 bytes of E4M3 (a half-warp reads a whole row either way: 256 or 128 bytes).
struct Bf16Rows {
  using Raw = uint4;
  static constexpr bool kScaled = false;
  __device__ static void unpack(Raw raw, float (&out)[8]) { unpack_bf16x8(raw, out); }
};
struct E4m3Rows {
  using Raw = uint2;
  static constexpr bool kScaled = true;
  // cvt.rn.f16x2.e4m3x2 (exact: every E4M3 value is an FP16 value), then FP16 -> FP32 (exact).
  __device__ static void unpack(Raw raw, float (&out)[8]) {
    const unsigned words[2] = {raw.x, raw.y};
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const __half2 pair(
            __nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(words[i] >> (16 * h)), __NV_E4M3));
        const float2 f = __half22float2(pair);
        out[4 * i + 2 * h] = f.x, out[4 * i + 2 * h + 1] = f.y;
      }
  }
};
template <class Kv>
struct RowsOf {
  using type = Bf16Rows;
};
template <class Kv>
requires requires { typename Kv::Rows; }
struct RowsOf<Kv> {
  using type = typename Kv::Rows;
};

// The keys of one pair as the kernel sees them (what a policy's pair(bh) returns).
template <class RowOf>
struct PairKeys {
  int64_t n_k;  // keys cached for this pair
  RowOf row;    // row(first): the row of key `first` in the policy's k and v
};

// Rows from `first` of a pair whose keys are consecutive rows from row 0 = `start`.
struct RowsFrom {
  int64_t start;
  __device__ int64_t operator()(int64_t first) const { return start + first; }
};

// Pair bh's keys are rows [bh][n_k][128] of k and v: key j is row bh x n_k + j.
struct ContiguousKv {
  const bf16* k;  // [bh][n_k][128]
  const bf16* v;
  int64_t n_k;
  __device__ PairKeys<RowsFrom> pair(int64_t bh) const { return {n_k, {bh * n_k}}; }
};

// The same layout as ContiguousKv in FP8 E4M3 codes, with one scale per pair for K and one for V
// (k_scales[bh].dequant, v_scales[bh].dequant: value = code x dequant), as
// kernels::quantize_e4m3_per_group writes them with one group per pair.
struct ContiguousE4m3Kv {
  using Rows = E4m3Rows;
  const __nv_fp8_e4m3* k;  // [bh][n_k][128]
  const __nv_fp8_e4m3* v;
  const Fp8Scales* k_scales;  // [bh]
  const Fp8Scales* v_scales;
  int64_t n_k;
  __device__ PairKeys<RowsFrom> pair(int64_t bh) const { return {n_k, {bh * n_k}}; }
  __device__ float2 scales(int64_t bh) const {
    return {k_scales[bh].dequant, v_scales[bh].dequant};
  }
};

// A paged cache: K and V pools of pages [page][heads][kPageSize][128] (each head's kPageSize rows
// of a page contiguous), a block table [sequence][max_pages] giving the page that holds positions
// [i x kPageSize, (i + 1) x kPageSize) of a sequence, and each sequence's length. Pair bh is
// (sequence bh / heads, head bh % heads); its key j is row (page x heads + head) x kPageSize +
// j % kPageSize of the pool, page = block_table[sequence][j / kPageSize]: one table read per warp
// step (the table is small and read by every head's CTAs: L1/L2 hits).
template <int kPageSize>
struct PagedKv {
  static_assert(kPageSize % keys_per_warp_step(1) == 0, "a warp step's keys must lie in one page");
  const bf16* k;            // pool [page][heads][kPageSize][128]
  const bf16* v;
  const int* block_table;   // [sequence][max_pages]
  const int* lengths;       // [sequence]
  int heads, max_pages;
  struct PageRow {
    const int* pages;   // this sequence's row of the block table
    int64_t page_rows;  // rows per page: heads x kPageSize
    int64_t head_row;   // this head's first row in a page: head x kPageSize
    __device__ int64_t operator()(int64_t first) const {
      return __ldg(pages + first / kPageSize) * page_rows + head_row + first % kPageSize;
    }
  };
  __device__ PairKeys<PageRow> pair(int64_t bh) const {
    const int64_t seq = bh / heads;
    return {__ldg(lengths + seq), {block_table + seq * max_pages, int64_t{heads} * kPageSize, bh % heads * int64_t{kPageSize}}};
  }
};

// The CTA's warps' softmax states merged, row by row (every thread calls it, after the block
// synchronized behind their writes): o_s [kWarps][rows][kHeadDim] and ml_s [kWarps][rows][2] (m,
// l) in shared memory; each (row, dimension)'s merged state goes to store(row, d, m, l, o).
template <class Store>
__device__ __forceinline__ void merge_warps(const float* o_s, const float* ml_s, int rows,
                                            Store&& store) {
  for (int i = threadIdx.x; i < rows * kHeadDim; i += kThreads) {
    const int row = i / kHeadDim, d = i % kHeadDim;
    float mm = ml_s[2 * row], ll = ml_s[2 * row + 1], oo[1] = {o_s[row * kHeadDim + d]};
#pragma unroll
    for (int w = 1; w < kWarps; ++w) {
      const int at = w * rows + row;
      const float ow[1] = {o_s[at * kHeadDim + d]};
      merge_softmax_parts(mm, ll, oo, ml_s[2 * at], ml_s[2 * at + 1], ow);
    }
    store(row, d, mm, ll, oo[0]);
  }
}

// The end of a CTA's pass, when every lane holds (m, l, o) of each query over its half-warp's keys
// (o: its 8 dimensions). Merge the two half-warps, then the warps through shared memory; with
// one split write o / l, else the partial (m, l, o) for merge_splits. With scaled (E4M3) rows, o
// is multiplied by V's dequant scale first (o is linear in V).
template <int kQueries, bool kScaled, class Kv>
__device__ __forceinline__ void finish_pass(const Args& a, const Kv& kv, int64_t bh, int split,
                                            float (&m)[kQueries], float (&l)[kQueries],
                                            float (&o)[kQueries][8],
                                            float (&o_s)[kWarps][kQueries][kHeadDim],
                                            float (&ml_s)[kWarps][kQueries][2]) {
  const int warp = threadIdx.x / 32, half = threadIdx.x % 32 / kLanesPerKey,
            part = threadIdx.x % kLanesPerKey;
#pragma unroll
  for (int qi = 0; qi < kQueries; ++qi) {
    float o2[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) o2[e] = __shfl_xor_sync(0xffffffffu, o[qi][e], kLanesPerKey);
    const float m2 = __shfl_xor_sync(0xffffffffu, m[qi], kLanesPerKey);
    const float l2 = __shfl_xor_sync(0xffffffffu, l[qi], kLanesPerKey);
    merge_softmax_parts(m[qi], l[qi], o[qi], m2, l2, o2);
    if (half == 0) {
#pragma unroll
      for (int e = 0; e < 8; ++e) o_s[warp][qi][part * 8 + e] = o[qi][e];
      if (part == 0) ml_s[warp][qi][0] = m[qi], ml_s[warp][qi][1] = l[qi];
    }
  }
  __syncthreads();
  merge_warps(&o_s[0][0][0], &ml_s[0][0][0], kQueries,
              [&](int qi, int d, float mm, float ll, float oo) {
                const int64_t row = bh * a.n_q + a.q_first + qi;  // output row; partial slot below
                if constexpr (kScaled)
                  oo *= kv.scales(bh).y;  // V's dequant scale (o is linear in V)
                if (a.splits == 1) {
                  a.out[row * kHeadDim + d] = __float2bfloat16(oo / ll);
                } else {
                  const int64_t slot = (bh * kQueries + qi) * a.splits + split;
                  a.part_o[slot * kHeadDim + d] = oo;
                  if (d == 0) a.part_ml[2 * slot] = mm, a.part_ml[2 * slot + 1] = ll;
                }
              });
}

// A CTA's shared memory: q, prescaled, and finish_pass's merge slots.
template <int kQueries>
struct SplitSmem {
  alignas(16) float q[kQueries][kHeadDim];
  float o[kWarps][kQueries][kHeadDim];
  float ml[kWarps][kQueries][2];
};

// One CTA's work, split `split` of pair bh, as a device function so that a persistent kernel (ch20's
// megakernel) can run several (bh, split) items in turn, with smem in its own shared memory. Every
// thread of the block calls it (it synchronizes the block); consecutive calls may share smem.
template <int kQueries, class Kv, bool kDraftMask = true>
__device__ __forceinline__ void attend_split(const Args& a, const Kv& kv, int64_t bh, int split,
                                             SplitSmem<kQueries>& smem) {
  using Rows = typename RowsOf<Kv>::type;
  using Raw = typename Rows::Raw;
  constexpr int kKeys = keys_per_lane(kQueries);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int half = lane / kLanesPerKey, part = lane % kLanesPerKey;  // which key, which 8 dimensions
  auto& q_s = smem.q;
  const auto keys = kv.pair(bh);

  // Query qi sees keys [0, last0 + qi) (all n_k without the draft mask); this CTA reads keys
  // [begin, end), end covering the last query.
  const int64_t begin = split * a.chunk;
  const int64_t last0 = kDraftMask ? keys.n_k - (a.n_q - 1 - a.q_first) : keys.n_k;
  const int last_step = kDraftMask ? 1 : 0;  // query qi's limit: last0 + qi x last_step
  const int64_t end = min(begin + a.chunk, last0 + (kQueries - 1) * last_step);
  if (begin >= end) return;  // a chunk past this pair's keys (the whole CTA): merge_splits skips it
  // q in shared memory, prescaled so scores come out in log2 units (kernels/online_softmax.cuh).
  float scale = kLog2e / sqrtf(float(kHeadDim));
  if constexpr (Rows::kScaled) scale *= kv.scales(bh).x;  // K's dequant scale
  // Launched programmatically (ch20's rung 6, kernels/pdl.cuh), the CTA waits here for the kernel
  // that wrote q; launched the ordinary way, this is a no-op. (So the policy's pair() and scales()
  // must read only what no kernel ahead writes.)
  pdl::wait_for_prerequisite();
  for (int i = threadIdx.x; i < kQueries * kHeadDim; i += kThreads)
    q_s[i / kHeadDim][i % kHeadDim] = __bfloat162float(a.q[(bh * a.n_q + a.q_first) * kHeadDim + i]) * scale;
  __syncthreads();

  const auto* k_rows = reinterpret_cast<const Raw*>(kv.k) + part;
  const auto* v_rows = reinterpret_cast<const Raw*>(kv.v) + part;
  float m[kQueries], l[kQueries], o[kQueries][8];
#pragma unroll
  for (int qi = 0; qi < kQueries; ++qi) {
    m[qi] = kEmptyMax, l[qi] = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) o[qi][e] = 0.0f;
  }

  // A step's K and V loads, kKeys keys per half-warp, 2 x kKeys x sizeof(Raw) bytes a lane. Key at
  // + i lies at row row0 + i (i < 2 x kKeys: one page).
  auto load_step = [&](int64_t at, Raw(&k_raw)[kKeys], Raw(&v_raw)[kKeys]) {
    const int64_t row0 = keys.row(at);
#pragma unroll
    for (int u = 0; u < kKeys; ++u) {
      k_raw[u] = v_raw[u] = Raw{};  // absent keys: zeros, never NaN bits (p * v must be 0)
      if (at + 2 * u + half < end) {
        k_raw[u] = load_stream(k_rows + (row0 + 2 * u + half) * kLanesPerKey);
        v_raw[u] = load_stream(v_rows + (row0 + 2 * u + half) * kLanesPerKey);
      }
    }
  };
  // With several queries the next step's loads are issued before this step's math: with one CTA
  // per SM each warp must keep its own bytes in flight, and the loads' addresses (the policy's
  // bases and key count, which ptxas re-reads from the parameter bank each step, LDC then IMAD,
  // rather than hold in registers) no longer delay them. Without it the 8-query kernel was slower
  // at ch18's verify shape (ch18's README). With one query, 4 CTAs per SM already cover the
  // latency, and 32 more registers a thread would halve them.
  constexpr bool kPrefetch = kQueries > 1;
  const int64_t first = begin + warp * keys_per_warp_step(kQueries);
  Raw k_next[kKeys], v_next[kKeys];
  if (kPrefetch && first < end) load_step(first, k_next, v_next);
  for (int64_t step = first; step < end; step += keys_per_cta_step(kQueries)) {
    Raw k_raw[kKeys], v_raw[kKeys];
    if constexpr (kPrefetch) {
#pragma unroll
      for (int u = 0; u < kKeys; ++u) k_raw[u] = k_next[u], v_raw[u] = v_next[u];
      if (step + keys_per_cta_step(kQueries) < end) load_step(step + keys_per_cta_step(kQueries), k_next, v_next);
    } else {
      load_step(step, k_raw, v_raw);
    }
    // Each key's K and V widened once, for all the queries (E4M3's conversions are inline asm,
    // which the compiler does not merge across the query loop as it does BF16's shifts).
    float kf[kKeys][8], vf[kKeys][8];
#pragma unroll
    for (int u = 0; u < kKeys; ++u) Rows::unpack(k_raw[u], kf[u]), Rows::unpack(v_raw[u], vf[u]);
#pragma unroll
    for (int qi = 0; qi < kQueries; ++qi) {
      float qf[8], s[kKeys], m_new = m[qi];
#pragma unroll
      for (int e = 0; e < 8; ++e) qf[e] = q_s[qi][part * 8 + e];  // two LDS.128
#pragma unroll
      for (int u = 0; u < kKeys; ++u) {
        float dot = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) dot = fmaf(qf[e], kf[u][e], dot);
#pragma unroll
        for (int mask = kLanesPerKey / 2; mask > 0; mask /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, mask);
        s[u] = step + 2 * u + half < min(end, last0 + qi * last_step) ? dot : -INFINITY;
        m_new = fmaxf(m_new, s[u]);
      }
      const float c = exp2_ftz(m[qi] - m_new);
      l[qi] *= c;
#pragma unroll
      for (int e = 0; e < 8; ++e) o[qi][e] *= c;
#pragma unroll
      for (int u = 0; u < kKeys; ++u) {
        const float p = exp2_ftz(s[u] - m_new);  // 0 for a masked or absent key
        l[qi] += p;
#pragma unroll
        for (int e = 0; e < 8; ++e)
          o[qi][e] = fmaf(p, vf[u][e], o[qi][e]);  // p = 0 where v_raw is unset
      }
      m[qi] = m_new;
    }
  }

  finish_pass<kQueries, Rows::kScaled>(a, kv, bh, split, m, l, o, smem.o, smem.ml);
}

template <int kQueries, class Kv, bool kDraftMask = true>
__global__ void __launch_bounds__(kThreads) attention(Args a, Kv kv) {
  __shared__ SplitSmem<kQueries> smem;
  attend_split<kQueries, Kv, kDraftMask>(a, kv, blockIdx.y, int(blockIdx.x), smem);
}

// The log-sum-exp combine: one CTA of 128 threads (one per dimension) per (bh, query), over the
// chunks that hold keys of that query's pair (those whose CTAs wrote a partial).
template <int kQueries, class Kv, bool kDraftMask = true>
__global__ void __launch_bounds__(kHeadDim) merge_splits(Args a, Kv kv) {
  const int64_t bh = blockIdx.y;
  const int qi = blockIdx.x, d = threadIdx.x;
  const int64_t slot0 = (bh * kQueries + qi) * a.splits;
  const int64_t covered =  // the CTAs' end
      kDraftMask ? kv.pair(bh).n_k - (a.n_q - 1 - a.q_first) + kQueries - 1 : kv.pair(bh).n_k;
  float m = kEmptyMax, l = 0.0f, o[1] = {0.0f};
  for (int s = 0; s < a.splits && s * a.chunk < covered; ++s) {
    const float os[1] = {a.part_o[(slot0 + s) * kHeadDim + d]};
    merge_softmax_parts(m, l, o, a.part_ml[2 * (slot0 + s)], a.part_ml[2 * (slot0 + s) + 1], os);
  }
  a.out[(bh * a.n_q + a.q_first + qi) * kHeadDim + d] = __float2bfloat16(o[0] / l);
}

// Enqueues one decode pass of kQueries queries (from q_first) over `splits` chunks of the keys
// (splits > 1: part_ml and part_o must hold bh x kQueries x splits partials).
template <int kQueries, class Kv, bool kDraftMask = true>
void launch(Args a, Kv kv, int64_t bh, cudaStream_t stream) {
  attention<kQueries, Kv, kDraftMask>
      <<<dim3(unsigned(a.splits), unsigned(bh)), kThreads, 0, stream>>>(a, kv);
  BENCH_CHECK_LAUNCH();
  if (a.splits > 1) {
    merge_splits<kQueries, Kv, kDraftMask>
        <<<dim3(unsigned(kQueries), unsigned(bh)), kHeadDim, 0, stream>>>(a, kv);
    BENCH_CHECK_LAUNCH();
  }
}

// Keys per split for `splits` splits of n_k keys, rounded up to a whole number of `step` keys.
inline int64_t chunk_of_steps(int64_t n_k, int64_t splits, int64_t step) {
  const int64_t per = (n_k + splits - 1) / splits;
  return (per + step - 1) / step * step;
}

// Keys per split for `splits` splits of n_k keys: a whole number of CTA steps (splits = 1: all
// keys in one chunk).
inline int64_t chunk_for(int64_t n_k, int splits, int queries) {
  return chunk_of_steps(n_k, splits, keys_per_cta_step(queries));
}

}  // namespace kernels::decode

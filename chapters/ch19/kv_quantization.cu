// ch19/kv_quantization: a decode step reads the whole KV cache for a handful of query tokens, so
// its time is the cache's bytes over HBM's bandwidth. Stored as FP8 E4M3 with a scale per
// (sequence, KV head), the cache is half the bytes; but at half the bytes the loop's instructions
// (widening, 4 queries' dot products, their reductions, the online softmax) come close to the
// read's time, so halving the time takes fewer instructions a key too.
//
// The work: grouped-query decode, out = softmax(q K^T / sqrt(128)) V for one token of 8 sequences,
// 32 query heads over 8 KV heads (4 query heads share each KV head), head_dim 128, kv_len keys
// (the axis; 32768 by default: 1 GiB of BF16 K and V). Pair bh = (sequence, KV head) holds 4
// queries, which see all its keys.
// The KV cache is quantised when it is written (here: after every refill of the inputs, untimed,
// as an inference engine quantises each new token's K and V once): per pair, K and V each get
// kernels::e4m3_scales(amax) (kernels/fp8_e4m3.hpp) and E4M3 codes
// (kernels::quantize_e4m3_per_group).
//
// The ladder (every rung: a CTA of 8 warps per (pair, chunk of keys), a half-warp per key and 8
// dimensions a lane, the 4 queries sharing each K and V load, splits chosen from the rung's own
// occupancy so the grid is one full wave, then the log-sum-exp merge):
//   1. baseline "bf16_split_kv": ch18's split-KV flash decoding (kernels/decode_attention.cuh,
//      without its draft mask) over the BF16 cache, 16 bytes a lane a key;
//   2. step "fp8_split_kv": the same kernel over the E4M3 cache: 8 bytes a lane a key, widened in
//      registers (cvt.rn.f16x2.e4m3x2, then FP16 -> FP32, both exact); K's scale folded into q
//      once per CTA and V's into o at the end, so the loop does no extra multiply;
//   3. step "fp8_query_scatter": the same loads and end (decode::finish_pass), with the
//      loop's instructions cut: each query's 16-lane sum is a reduce-scatter (4 shuffles and adds
//      a key, not 16 of each), the online softmax runs once a key on each lane, not 4 times, and
//      o is rescaled only when a running max grew; and each warp's rows are prefetched into L2 a
//      few steps ahead, since half-size loads hold half the bytes in flight (query_scatter_pass).
//   4. optimized "fp8_tensor_core" (the fastest rung measured, README): q.k and p.v as
//      mma.sync m16n8k16 on FP16 operands, 16 keys a warp at a time: the E4M3 codes widened two
//      at a time by cvt.rn.f16x2.e4m3x2 straight into the fragments, both dequant scales
//      applied after the products (kv_tensor_core.cuh). ~14 PTX instructions a key for a warp
//      (not counting moves), against ~87-93 on the rungs above.
// Bytes counted: the smallest form of the work, the FP8 cache (1 byte a value) plus q, the output
// and the scales; held to the HBM read ceiling. The baseline moves twice the cache bytes, so its
// percent of ceiling reads half of its real bandwidth. Target: optimized <= 0.55x the baseline.
//
// Accuracy (tolerance relative L2 6e-2, both sides against the exact attention over the BF16
// cache, in double): E4M3 keeps 3 mantissa bits, a relative rounding of rms ~0.026 per value
// (fp8_e4m3.hpp). V's error passes to the output as is; K's moves each score by
// q.dK / sqrt(128), rms ~0.026 x |q| |k| / sqrt(128) = ~0.015 sigma_q with k ~ U(-1, 1), and p by
// as much relative. q ~ N(0, 2) puts the scores' spread at ~1.2: a softmax neither flat nor
// one-hot. A double-precision model of this rounding (same distributions, 1000 keys) gave 0.038
// and 0.037 relative L2 for the FP8 side (two seeds); BF16 output rounding alone gives the baseline
// ~0.002. A missing or wrong scale is off by orders of magnitude. The shared kernel's FP8 path
// and fp8_tensor_core's pass against attention over their own dequantised cache:
// tests/gpu/decode_attention_e4m3_test.cu (3e-3).
//
//   ./bench compare --chapter ch19 --example kv_quantization
//   ./bench compare --chapter ch19 --example kv_quantization --sweep   # kv_len 8192 too
#include <algorithm>
#include <kernels/decode_attention.cuh>
#include <kernels/fp8_quantize.cuh>
#include <kernels/occupancy.cuh>
#include <kernels/reference_attention.cuh>
#include <vector>

#include "kv_tensor_core.cuh"

namespace {

namespace decode = kernels::decode;
using decode::bf16;
using decode::kHeadDim;
using fp8 = __nv_fp8_e4m3;
constexpr int64_t kKvHeads = 8;
constexpr int kQueryHeadsPerKv = 4;  // 32 query heads over 8 KV heads
constexpr int64_t kMinKeysPerSplit = 256;
constexpr int kQuantizeBlocksPerGroup = 16;  // setup only: 64 pairs x 16 CTAs fill the GPU
// query_scatter_pass's L2 prefetch distance: 4 CTA steps (32 keys each) ahead, ~3 us of a CTA's
// reading at the HBM rate; 256 CTAs x 4 x 8 KB = 8 MB of L2 in flight, well inside its 50 MB.
constexpr int kPrefetchSteps = 4;

struct GqaDecode {
  int64_t batch, n_k, pairs;
  bench::DeviceSpan<const bf16> q, k, v;
  bench::DeviceSpan<bf16> out;
  bench::DeviceBuffer<fp8> k8, v8;  // the FP8 cache, written by inputs_filled
  bench::DeviceBuffer<kernels::Fp8Scales> k_scales, v_scales;  // one per pair
  explicit GqaDecode(bench::Setup& s)
      : batch(s.size("batch", 8, 2)),
        // 1000 keys to verify: not a whole number of steps or chunks.
        n_k(s.size("kv_len", s.axis("kv_len"), 1000)),
        pairs(batch * kKvHeads),
        q(s.input<bf16>("q", pairs * kQueryHeadsPerKv * kHeadDim, bench::normal(0, 2))),
        k(s.input<bf16>("k", pairs * n_k * kHeadDim, bench::uniform(-1, 1))),
        v(s.input<bf16>("v", pairs * n_k * kHeadDim, bench::uniform(-1, 1))),
        out(s.output<bf16>("out", pairs * kQueryHeadsPerKv * kHeadDim)),
        k8(pairs * n_k * kHeadDim),
        v8(pairs * n_k * kHeadDim),
        k_scales(pairs),
        v_scales(pairs) {
    const double fp8_cache = 2.0 * pairs * n_k * kHeadDim;
    s.bytes(fp8_cache + 2.0 * 2 * q.size() + 2.0 * 4 * pairs, bench::ceiling::hbm_read);
    // q.k and p.v: 2 FMAs per key, query and dimension.
    s.flops(4.0 * pairs * kQueryHeadsPerKv * n_k * kHeadDim);
  }
  // The cache is quantised whenever its BF16 source changes (every refill of the inputs, untimed).
  void inputs_filled(cudaStream_t stream) {
    kernels::quantize_e4m3_per_group(k.data(), k8.data(), n_k * kHeadDim, int(pairs),
                                     k_scales.data(), kQuantizeBlocksPerGroup, stream);
    kernels::quantize_e4m3_per_group(v.data(), v8.data(), n_k * kHeadDim, int(pairs),
                                     v_scales.data(), kQuantizeBlocksPerGroup, stream);
  }
  decode::ContiguousKv bf16_cache() const { return {k.data(), v.data(), n_k}; }
  decode::ContiguousE4m3Kv fp8_cache() const {
    return {k8.data(), v8.data(), k_scales.data(), v_scales.data(), n_k};
  }
};

// The query-scatter pass (a step since the tensor-core pass measured faster): the shared kernel's
// loop over the E4M3 cache with its instruction count cut (same CTA shape, chunking, loads and end:
// decode::finish_pass). A half-warp holds a key and each lane 8 of its dimensions, so each of the 4
// queries' scores is a sum over 16 lanes; the shared kernel reduces all 4 on every lane (4 x 4
// shuffles and adds a key) and runs the online softmax 4 times a key. Here lane `part` of a half-
// warp computes its partial dots in the order d[j] = q_(j ^ mine) . k, mine = part / 4, so two
// exchanges halve the set of sums a lane carries (xor 8: keep d0, d1 and add the partner's d2, d3,
// which are the same two queries; xor 4: keep e0, add the partner's e1), and two more finish the
// sum: 4 shuffles and 4 adds a key, after which the lane holds the score of query `mine` only, and
// runs the softmax for it alone. p of query j then comes from a lane with mine = j (4 shuffles a
// key, for p.v). And o is rescaled only when a max grew somewhere in the warp (rare after the first
// keys; exact, since the factor is otherwise 1), rather than every step. An E4M3 load carries half
// the bytes of a BF16 one, so the registers that hold a step ahead in flight (2 KB a warp over
// BF16) hold half as many bytes: 16 warps an SM keep ~16 KB in flight, under what HBM's latency
// asks for (~3 TB/s x ~1 us over 132 SMs: ~23 KB). So the rung also prefetches the rows
// kPrefetchSteps steps ahead into L2 (prefetch.global.L2, which holds no register): the loads then
// wait on L2, not HBM.
template <class Kv>
__global__ void __launch_bounds__(decode::kThreads) query_scatter_pass(decode::Args a, Kv kv) {
  constexpr int kQ = kQueryHeadsPerKv, kKeys = decode::keys_per_lane(kQ),
                kLanes = decode::kLanesPerKey, kWarpKeys = decode::keys_per_warp_step(kQ);
  using Rows = typename decode::RowsOf<Kv>::type;
  using Raw = typename Rows::Raw;
  const int64_t bh = blockIdx.y;
  const int split = blockIdx.x, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int half = lane / kLanes, part = lane % kLanes, mine = part / 4;
  const int owner = lane & kLanes;  // lane (owner | j << 2) holds query j's score and softmax state
  __shared__ alignas(16) float q_s[kQ][kHeadDim];
  __shared__ float o_s[decode::kWarps][kQ][kHeadDim];  // finish_pass's
  __shared__ float ml_s[decode::kWarps][kQ][2];
  const int64_t begin = split * a.chunk, end = min(begin + a.chunk, kv.n_k);
  if (begin >= end) return;
  float scale = kernels::kLog2e / sqrtf(float(kHeadDim));
  if constexpr (Rows::kScaled) scale *= kv.scales(bh).x;
  for (int i = threadIdx.x; i < kQ * kHeadDim; i += decode::kThreads)
    q_s[i / kHeadDim][i % kHeadDim] = __bfloat162float(a.q[bh * kQ * kHeadDim + i]) * scale;
  __syncthreads();

  const auto* k_rows = reinterpret_cast<const Raw*>(kv.k) + part;
  const auto* v_rows = reinterpret_cast<const Raw*>(kv.v) + part;
  auto load_step = [&](int64_t at, Raw(&k_raw)[kKeys], Raw(&v_raw)[kKeys]) {
    const int64_t row0 = kv.pair(bh).row(at);
#pragma unroll
    for (int u = 0; u < kKeys; ++u) {
      k_raw[u] = v_raw[u] = Raw{};
      if (at + 2 * u + half < end) {
        k_raw[u] = kernels::load_stream(k_rows + (row0 + 2 * u + half) * kLanes);
        v_raw[u] = kernels::load_stream(v_rows + (row0 + 2 * u + half) * kLanes);
      }
    }
  };
  float m = kernels::kEmptyMax, l = 0.0f, o[kQ][8] = {};  // m, l: query `mine`'s; o: all 4 queries'
  const int64_t first = begin + warp * decode::keys_per_warp_step(kQ);
  Raw k_next[kKeys], v_next[kKeys];
  if (first < end) load_step(first, k_next, v_next);
  for (int64_t step = first; step < end; step += decode::keys_per_cta_step(kQ)) {
    Raw k_raw[kKeys], v_raw[kKeys];
#pragma unroll
    for (int u = 0; u < kKeys; ++u) k_raw[u] = k_next[u], v_raw[u] = v_next[u];
    if (step + decode::keys_per_cta_step(kQ) < end)
      load_step(step + decode::keys_per_cta_step(kQ), k_next, v_next);
    // Lanes 0-3 touch the K rows and lanes 4-7 the V rows of this warp's step kPrefetchSteps
    // ahead into L2: one instruction, no registers held.
    if (const int64_t ahead =
            step + kPrefetchSteps * decode::keys_per_cta_step(kQ) + lane % kWarpKeys;
        lane < 2 * kWarpKeys && ahead < end)
      kernels::prefetch_l2((lane < kWarpKeys ? kv.k : kv.v) + kv.pair(bh).row(ahead) * kHeadDim);
    float s[kKeys], m_new = m;
#pragma unroll
    for (int u = 0; u < kKeys; ++u) {
      float kf[8], d[kQ];
      Rows::unpack(k_raw[u], kf);
#pragma unroll
      for (int j = 0; j < kQ; ++j) {
        const float* qrow = &q_s[j ^ mine][part * 8];
        d[j] = 0.0f;
#pragma unroll
        for (int e = 0; e < 8; ++e) d[j] = fmaf(qrow[e], kf[e], d[j]);
      }
      const float e0 = d[0] + __shfl_xor_sync(0xffffffffu, d[2], 8);  // query mine
      const float e1 = d[1] + __shfl_xor_sync(0xffffffffu, d[3], 8);  // query mine ^ 1
      float score = e0 + __shfl_xor_sync(0xffffffffu, e1, 4);         // query mine, over 4 lanes
      score += __shfl_xor_sync(0xffffffffu, score, 2);
      score += __shfl_xor_sync(0xffffffffu, score, 1);  // over all 16
      s[u] = step + 2 * u + half < end ? score : -INFINITY;
      m_new = fmaxf(m_new, s[u]);
    }
    if (__any_sync(0xffffffffu, m_new > m)) {  // warp-uniform: every lane rescales or none does
      const float c = kernels::exp2_ftz(m - m_new);
      l *= c;
#pragma unroll
      for (int j = 0; j < kQ; ++j) {
        const float cj = __shfl_sync(0xffffffffu, c, owner | j << 2);
#pragma unroll
        for (int e = 0; e < 8; ++e) o[j][e] *= cj;
      }
      m = m_new;
    }
#pragma unroll
    for (int u = 0; u < kKeys; ++u) {
      const float p = kernels::exp2_ftz(s[u] - m);  // 0 for an absent key
      l += p;
      float vf[8];
      Rows::unpack(v_raw[u], vf);
#pragma unroll
      for (int j = 0; j < kQ; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, owner | j << 2);
#pragma unroll
        for (int e = 0; e < 8; ++e) o[j][e] = fmaf(pj, vf[e], o[j][e]);
      }
    }
  }
  float m_all[kQ], l_all[kQ];  // every query's state on every lane, as finish_pass takes it
#pragma unroll
  for (int j = 0; j < kQ; ++j)
    m_all[j] = __shfl_sync(0xffffffffu, m, owner | j << 2),
    l_all[j] = __shfl_sync(0xffffffffu, l, owner | j << 2);
  decode::finish_pass<kQ, Rows::kScaled>(a, kv, bh, split, m_all, l_all, o, o_s, ml_s);
}

// Untimed: the split count from the pass's occupancy and the shape (one full wave, at least 256
// keys a chunk), and the partials' scratch. Timed: the pass over the cache `kCache` returns, then
// the log-sum-exp merge of the splits.
template <class Kv, Kv (GqaDecode::*kCache)() const, void (*kPass)(decode::Args, Kv)>
struct SplitKv {
  int splits;
  int64_t chunk;
  bench::DeviceBuffer<float> part_ml, part_o;
  SplitKv(const GqaDecode& w, cudaStream_t) {
    const int64_t wave =
        int64_t{kernels::sm_count()} * kernels::blocks_per_sm(kPass, decode::kThreads);
    const int64_t wanted =
        std::clamp<int64_t>(wave / w.pairs, 1, std::max<int64_t>(1, w.n_k / kMinKeysPerSplit));
    chunk = decode::chunk_for(w.n_k, int(wanted), kQueryHeadsPerKv);
    splits = int((w.n_k + chunk - 1) /
                 chunk);  // rounding the chunk up can leave fewer, never an empty one
    part_ml = bench::DeviceBuffer<float>(w.pairs * kQueryHeadsPerKv * splits * 2);
    part_o = bench::DeviceBuffer<float>(w.pairs * kQueryHeadsPerKv * splits * kHeadDim);
  }
  void operator()(const GqaDecode& w, cudaStream_t stream) {
    const decode::Args a{w.q.data(), w.out.data(), part_ml.data(), part_o.data(), kQueryHeadsPerKv,
                         0,          chunk,        splits};
    kPass<<<dim3(unsigned(splits), unsigned(w.pairs)), decode::kThreads, 0, stream>>>(
        a, (w.*kCache)());
    BENCH_CHECK_LAUNCH();
    if (splits > 1) {
      decode::merge_splits<kQueryHeadsPerKv, Kv, false>
          <<<dim3(unsigned(kQueryHeadsPerKv), unsigned(w.pairs)), kHeadDim, 0, stream>>>(
              a, (w.*kCache)());
      BENCH_CHECK_LAUNCH();
    }
  }
  std::vector<bench::Metric> metrics() const { return {{"splits", double(splits)}}; }
};
using Bf16 = decode::ContiguousKv;
using E4m3 = decode::ContiguousE4m3Kv;
using Bf16SplitKv =
    SplitKv<Bf16, &GqaDecode::bf16_cache, decode::attention<kQueryHeadsPerKv, Bf16, false>>;
using Fp8SplitKv =
    SplitKv<E4m3, &GqaDecode::fp8_cache, decode::attention<kQueryHeadsPerKv, E4m3, false>>;
using Fp8QueryScatter = SplitKv<E4m3, &GqaDecode::fp8_cache, query_scatter_pass<E4m3>>;
using Fp8TensorCore =
    SplitKv<E4m3, &GqaDecode::fp8_cache, ch19::kv_tensor_core::pass<kQueryHeadsPerKv, E4m3>>;

struct AllKeys {
  __host__ __device__ bool operator()(int64_t, int64_t) const { return true; }
};
void reference(const GqaDecode& w, bench::HostData& h) {
  kernels::reference_attention(h.input<bf16>("q"), h.input<bf16>("k"), h.input<bf16>("v"),
                               h.expected("out"), w.pairs, kQueryHeadsPerKv, w.n_k, AllKeys{});
}
void device_reference(const GqaDecode& w, cudaStream_t stream) {
  kernels::reference_attention(w.q.data(), w.k.data(), w.v.data(), w.out.data(), w.pairs,
                               kQueryHeadsPerKv, w.n_k, AllKeys{}, stream);
}

BENCH_EXAMPLE(ch19, kv_quantization, GqaDecode)
    .int_axis("kv_len", {8192, 32768}, /*defaults=*/{32768})
    .stateful<Bf16SplitKv>(bench::Role::baseline, "bf16_split_kv")
    .stateful<Fp8SplitKv>(bench::Role::step, "fp8_split_kv")
    .stateful<Fp8QueryScatter>(bench::Role::step, "fp8_query_scatter")
    .stateful<Fp8TensorCore>(bench::Role::optimized, "fp8_tensor_core")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(6e-2));

}  // namespace

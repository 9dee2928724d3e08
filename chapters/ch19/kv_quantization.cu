// ch19/kv_quantization: a decode step reads the whole KV cache for a handful of query tokens, so
// its time is the cache's bytes over HBM's bandwidth. Stored as FP8 E4M3 with a scale per
// (sequence, KV head), the cache is half the bytes, and the same split-KV kernel, converting
// each value to FP32 in registers, takes about half the time.
//
// The work: grouped-query decode, out = softmax(q K^T / sqrt(128)) V for one token of 8 sequences,
// 32 query heads over 8 KV heads (4 query heads share each KV head), head_dim 128, kv_len keys
// (the axis; 32768 by default: 1 GiB of BF16 K and V). Pair bh = (sequence, KV head) holds 4
// queries, which see all its keys.
// The KV cache is quantised when it is written (here: after every refill of the inputs, untimed,
// as an inference engine quantises each new token's K and V once): per pair, K and V each get
// kernels::e4m3_scales(amax) (kernels/fp8_e4m3.hpp) and E4M3 codes (kernels::quantize_e4m3_per_group).
//
// What changes from baseline to optimized (the same kernel, kernels/decode_attention.cuh, without
// its draft mask: 4 queries per pair, each K and V row loaded once for all 4):
//   1. baseline "bf16_split_kv": ch18's split-KV flash decoding over the BF16 cache: a lane loads 8
//      dimensions of a key as 16 bytes, splits chosen so the grid is one full wave;
//   2. optimized "fp8_split_kv": the same over the E4M3 cache: a lane loads the same 8 dimensions
//      as 8 bytes and widens them (cvt.rn.f16x2.e4m3x2, then FP16 -> FP32, both exact); the K
//      scale is folded into q once per CTA and the V scale into o at the end, so the loop does no
//      extra multiply. Same split rule, from its own occupancy.
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
// and 0.037 relative L2 for the FP8 side (two seeds); BF16 output rounding alone gives the baseline ~0.002.
// A missing or wrong scale is off by orders of magnitude. The FP8 side against attention over its
// own dequantised cache: tests/gpu/kv_quantization_test.cu (relative L2 3e-3).
//
//   ./bench compare --chapter ch19 --example kv_quantization
//   ./bench compare --chapter ch19 --example kv_quantization --sweep   # kv_len 8192 too
#include <kernels/decode_attention.cuh>
#include <kernels/fp8_quantize.cuh>
#include <kernels/occupancy.cuh>
#include <kernels/reference_attention.cuh>

#include <algorithm>
#include <vector>

namespace {

namespace decode = kernels::decode;
using decode::bf16;
using decode::kHeadDim;
using fp8 = __nv_fp8_e4m3;
constexpr int64_t kKvHeads = 8;
constexpr int kQueryHeadsPerKv = 4;  // 32 query heads over 8 KV heads
constexpr int64_t kMinKeysPerSplit = 256;
constexpr int kQuantizeBlocksPerGroup = 16;  // setup only: 64 pairs x 16 CTAs fill the GPU

struct GqaDecode {
  int64_t batch, n_k, pairs;
  bench::DeviceSpan<const bf16> q, k, v;
  bench::DeviceSpan<bf16> out;
  bench::DeviceBuffer<fp8> k8, v8;                      // the FP8 cache, written by inputs_filled
  bench::DeviceBuffer<kernels::Fp8Scales> k_scales, v_scales;  // one per pair
  explicit GqaDecode(bench::Setup& s)
      : batch(s.size("batch", 8, 2)),
        n_k(s.size("kv_len", s.axis("kv_len"), 1000)),  // 1000: not a whole number of steps or chunks
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
    s.flops(4.0 * pairs * kQueryHeadsPerKv * n_k * kHeadDim);  // q.k and p v: 2 FMAs per key, query, dimension
  }
  // The cache is quantised whenever its BF16 source changes (every refill of the inputs, untimed).
  void inputs_filled(cudaStream_t stream) {
    kernels::quantize_e4m3_per_group(k.data(), k8.data(), n_k * kHeadDim, int(pairs), k_scales.data(),
                                     kQuantizeBlocksPerGroup, stream);
    kernels::quantize_e4m3_per_group(v.data(), v8.data(), n_k * kHeadDim, int(pairs), v_scales.data(),
                                     kQuantizeBlocksPerGroup, stream);
  }
  decode::ContiguousKv bf16_cache() const { return {k.data(), v.data(), n_k}; }
  decode::ContiguousE4m3Kv fp8_cache() const { return {k8.data(), v8.data(), k_scales.data(), v_scales.data(), n_k}; }
};

// Untimed: the split count from the kernel's occupancy and the shape, and the partials' scratch.
// Timed: the split-KV pass and its merge, over the cache `kCache` returns.
template <class Kv, Kv (GqaDecode::*kCache)() const>
struct SplitKv {
  int splits;
  int64_t chunk;
  bench::DeviceBuffer<float> part_ml, part_o;
  SplitKv(const GqaDecode& w, cudaStream_t) {
    const int per_sm = kernels::blocks_per_sm(decode::attention<kQueryHeadsPerKv, Kv, false>, decode::kThreads);
    const int64_t wave = int64_t{kernels::sm_count()} * per_sm;
    const int64_t wanted = std::clamp<int64_t>(wave / w.pairs, 1, std::max<int64_t>(1, w.n_k / kMinKeysPerSplit));
    chunk = decode::chunk_for(w.n_k, int(wanted), kQueryHeadsPerKv);
    splits = int((w.n_k + chunk - 1) / chunk);  // rounding the chunk up can leave fewer, never an empty one
    part_ml = bench::DeviceBuffer<float>(w.pairs * kQueryHeadsPerKv * splits * 2);
    part_o = bench::DeviceBuffer<float>(w.pairs * kQueryHeadsPerKv * splits * kHeadDim);
  }
  void operator()(const GqaDecode& w, cudaStream_t stream) {
    const decode::Args a{w.q.data(), w.out.data(), part_ml.data(), part_o.data(), kQueryHeadsPerKv, 0, chunk, splits};
    decode::launch<kQueryHeadsPerKv, Kv, /*kDraftMask=*/false>(a, (w.*kCache)(), w.pairs, stream);
  }
  std::vector<bench::Metric> metrics() const { return {{"splits", double(splits)}}; }
};
using Bf16SplitKv = SplitKv<decode::ContiguousKv, &GqaDecode::bf16_cache>;
using Fp8SplitKv = SplitKv<decode::ContiguousE4m3Kv, &GqaDecode::fp8_cache>;

struct AllKeys {
  __host__ __device__ bool operator()(int64_t, int64_t) const { return true; }
};
void reference(const GqaDecode& w, bench::HostData& h) {
  kernels::reference_attention(h.input<bf16>("q"), h.input<bf16>("k"), h.input<bf16>("v"), h.expected("out"), w.pairs,
                               kQueryHeadsPerKv, w.n_k, AllKeys{});
}
void device_reference(const GqaDecode& w, cudaStream_t stream) {
  kernels::reference_attention(w.q.data(), w.k.data(), w.v.data(), w.out.data(), w.pairs, kQueryHeadsPerKv, w.n_k,
                               AllKeys{}, stream);
}

BENCH_EXAMPLE(ch19, kv_quantization, GqaDecode)
    .int_axis("kv_len", {8192, 32768}, /*defaults=*/{32768})
    .stateful<Bf16SplitKv>(bench::Role::baseline, "bf16_split_kv")
    .stateful<Fp8SplitKv>(bench::Role::optimized, "fp8_split_kv")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(6e-2));

}  // namespace

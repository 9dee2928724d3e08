// ch19/kv_prefetch_overlap: a CTA that streams the KV cache through shared memory either waits
// for each block's copy before computing on it, or keeps the next block's copy in flight while it
// computes on the current one. When the SM has nothing else to run, the first pays a memory
// round trip per block on top of the compute; the second pays only the longer of the two.
//
// The work: decode attention, one query token per (sequence, head), batch 1, 32 heads, head_dim
// 128, kv_len cached keys (the axis) in BF16, a CTA of 8 warps per head and no split: 32 CTAs on
// a 132-SM GPU, one per SM, the shape where a CTA's own overlap is all there is (ch18's split-KV
// is the other cure: more CTAs, each still waiting on its own loads). Keys go through shared
// memory in blocks of 32 (16 KB of K and V), copied by cp.async (kernels/async_copy.cuh: 4
// 16-byte copies a thread), then each warp takes 4 keys of the block, a half-warp per key, as in
// kernels/decode_attention.cuh (online softmax per half-warp, then decode::finish_pass).
//
// What changes from baseline to optimized (one kernel, the stage count a template parameter):
//   1. baseline "load_then_compute" (1 stage): copy block b, wait for it, compute on it, repeat:
//      the SM's loads and math take turns;
//   2. optimized "double_buffered" (2 stages, 32 KB): block b + 1's copy is issued before block
//      b's compute, so one block's round trip hides behind the other's math; the wait is for
//      the older group only (cp.async.wait_group 1).
// Where it pays: while a CTA is alone on its SM (batch x heads CTAs well under the SM count) and
// the context is long enough to amortise the pipeline's first block (the axis: 2048 keys are 64
// blocks, 65536 are 2048). Where it does not: once several CTAs share each SM (larger batches, or
// split-KV as in ch18 and kv_quantization), another CTA's math already covers each one's loads,
// and the second stage only costs shared memory (README).
// Bytes: K and V read once, q read, out written, held to the HBM read ceiling (a small fraction of
// it at 32 CTAs, by design). Tolerance: relative L2 3e-3, as ch18's flash_decoding (BF16 output
// rounding ~2e-3; FP32 scores, statistics and accumulators).
//
//   ./bench compare --chapter ch19 --example kv_prefetch_overlap
#include <kernels/async_copy.cuh>
#include <kernels/decode_attention.cuh>
#include <kernels/reference_attention.cuh>

namespace {

namespace decode = kernels::decode;
using decode::bf16;
using decode::kHeadDim;
constexpr int64_t kHeads = 32;
constexpr int kBlockKeys = 32;                                       // keys a stage holds
constexpr int kKeysPerHalfWarp = kBlockKeys / (2 * decode::kWarps);  // 2
constexpr int kChunksPerRow = kHeadDim * 2 / 16;  // 16-byte copies a 256-byte row
constexpr int kCopiesPerThread = 2 * kBlockKeys * kChunksPerRow / decode::kThreads;  // 4
static_assert(kCopiesPerThread * decode::kThreads == 2 * kBlockKeys * kChunksPerRow, "whole rows");

struct Decode {
  int64_t batch, n_k, pairs;
  bench::DeviceSpan<const bf16> q, k, v;
  bench::DeviceSpan<bf16> out;
  explicit Decode(bench::Setup& s)
      : batch(s.size("batch", 1, 1)),
        // 1000 keys to verify: the last block partly empty.
        n_k(s.size("kv_len", s.axis("kv_len"), 1000)),
        pairs(batch * kHeads),
        q(s.input<bf16>("q", pairs * kHeadDim, bench::normal(0, 4))),
        k(s.input<bf16>("k", pairs * n_k * kHeadDim, bench::uniform(-1, 1))),
        v(s.input<bf16>("v", pairs * n_k * kHeadDim, bench::uniform(-1, 1))),
        out(s.output<bf16>("out", pairs * kHeadDim)) {
    s.bytes(2.0 * pairs * n_k * kHeadDim * sizeof(bf16) + 2.0 * pairs * kHeadDim * sizeof(bf16),
            bench::ceiling::hbm_read);
    s.flops(4.0 * pairs * n_k * kHeadDim);
  }
};

template <int kStages>
__global__ void __launch_bounds__(decode::kThreads)
    staged_decode(decode::Args a, decode::ContiguousKv kv) {
  namespace cp = kernels::cp_async;
  const int64_t bh = blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int half = lane / decode::kLanesPerKey, part = lane % decode::kLanesPerKey;
  __shared__ alignas(16) bf16 kv_s[kStages][2][kBlockKeys][kHeadDim];  // [stage][K, V][key][dim]
  __shared__ alignas(16) float q_s[kHeadDim];
  __shared__ float o_s[decode::kWarps][1][kHeadDim];  // finish_pass's
  __shared__ float ml_s[decode::kWarps][1][2];
  const int64_t blocks = (kv.n_k + kBlockKeys - 1) / kBlockKeys;
  const bf16* pair_k = kv.k + bh * kv.n_k * kHeadDim;
  const bf16* pair_v = kv.v + bh * kv.n_k * kHeadDim;

  // Queues block b's K and V rows into stage b % kStages, one commit group; keys past n_k are
  // zero-filled from an in-bounds source (row 0).
  auto issue = [&](int64_t b) {
    const int stage = int(b % kStages);
#pragma unroll
    for (int i = 0; i < kCopiesPerThread; ++i) {
      const int c = threadIdx.x + i * decode::kThreads;
      const int which = c / (kBlockKeys * kChunksPerRow), key = c / kChunksPerRow % kBlockKeys;
      const int chunk = c % kChunksPerRow;
      const int64_t j = b * kBlockKeys + key;
      const bf16* row = (which == 0 ? pair_k : pair_v) + (j < kv.n_k ? j : 0) * kHeadDim;
      cp::copy16(&kv_s[stage][which][key][chunk * 8], row + chunk * 8, j < kv.n_k ? 16 : 0);
    }
    cp::commit();
  };

  const float scale = kernels::kLog2e / sqrtf(float(kHeadDim));
  if (threadIdx.x < kHeadDim)
    q_s[threadIdx.x] = __bfloat162float(a.q[bh * kHeadDim + threadIdx.x]) * scale;
  for (int b = 0; b < kStages - 1 && b < blocks; ++b) issue(b);  // the prologue: kStages - 1 blocks
  float m[1] = {kernels::kEmptyMax}, l[1] = {0.0f}, o[1][8] = {};
  for (int64_t b = 0; b < blocks; ++b) {
    if (b + kStages - 1 < blocks)
      issue(b + kStages - 1);
    else
      cp::commit();  // an empty group, so that the wait below always means "block b is here"
    cp::wait<kStages - 1>();
    __syncthreads();  // every thread's copies of block b (and, at b = 0, q_s) visible
    const int stage = int(b % kStages);
    float qf[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) qf[e] = q_s[part * 8 + e];
#pragma unroll
    for (int u = 0; u < kKeysPerHalfWarp; ++u) {
      const int key = (warp * kKeysPerHalfWarp + u) * 2 + half;
      float kf[8], vf[8];
      kernels::unpack_bf16x8(*reinterpret_cast<const uint4*>(&kv_s[stage][0][key][part * 8]), kf);
      kernels::unpack_bf16x8(*reinterpret_cast<const uint4*>(&kv_s[stage][1][key][part * 8]), vf);
      float dot = 0.0f;
#pragma unroll
      for (int e = 0; e < 8; ++e) dot = fmaf(qf[e], kf[e], dot);
#pragma unroll
      for (int mask = decode::kLanesPerKey / 2; mask > 0; mask /= 2)
        dot += __shfl_xor_sync(0xffffffffu, dot, mask);
      const float s = b * kBlockKeys + key < kv.n_k ? dot : -INFINITY;
      const float m_new = fmaxf(m[0], s), c = kernels::exp2_ftz(m[0] - m_new);
      const float p = kernels::exp2_ftz(s - m_new);  // 0 for a key past n_k (zero-filled V)
      l[0] = l[0] * c + p;
#pragma unroll
      for (int e = 0; e < 8; ++e) o[0][e] = fmaf(p, vf[e], o[0][e] * c);
      m[0] = m_new;
    }
    __syncthreads();  // block b's stage read by all before a later issue overwrites it
  }
  decode::finish_pass<1, false>(a, kv, bh, 0, m, l, o, o_s, ml_s);
}

template <int kStages>
void launch_staged(const Decode& w, cudaStream_t stream) {
  const decode::Args a{w.q.data(), w.out.data(), nullptr, nullptr, 1, 0, w.n_k, 1};
  staged_decode<kStages><<<unsigned(w.pairs), decode::kThreads, 0, stream>>>(
      a, decode::ContiguousKv{w.k.data(), w.v.data(), w.n_k});
  BENCH_CHECK_LAUNCH();
}

struct AllKeys {
  __host__ __device__ bool operator()(int64_t, int64_t) const { return true; }
};
void reference(const Decode& w, bench::HostData& h) {
  kernels::reference_attention(h.input<bf16>("q"), h.input<bf16>("k"), h.input<bf16>("v"),
                               h.expected("out"), w.pairs, 1, w.n_k, AllKeys{});
}
void device_reference(const Decode& w, cudaStream_t stream) {
  kernels::reference_attention(w.q.data(), w.k.data(), w.v.data(), w.out.data(), w.pairs, 1, w.n_k,
                               AllKeys{}, stream);
}

BENCH_EXAMPLE(ch19, kv_prefetch_overlap, Decode)
    .int_axis("kv_len", {2048, 16384, 65536}, /*defaults=*/{16384, 65536})
    .baseline("load_then_compute", launch_staged<1>)
    .optimized("double_buffered", launch_staged<2>)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(3e-3));

}  // namespace

// ch18/speculative_verify: verifying k draft tokens one decode step at a time reads the KV cache
// k times; one pass with all k queries shares every K and V load among them, and on the tensor
// cores the k queries cost no more per byte than one, so the k tokens cost one read of the cache.
//
// The work: a speculative-decoding verification of k = 8 draft tokens for 16 sequences x 32 heads,
// head_dim 128, 4096 cached keys per sequence. The drafts' own K/V rows are the last 8 rows of the
// cache (4104 keys), and draft token i attends to the 4096 keys plus drafts 0..i (causal inside the
// draft). Outputs: 8 attention outputs per (sequence, head). 1.08 GB of K and V: 21x the L2.
// The hardware: a decode step is a stream of K and V with 2 FMAs per key and dimension, far below
// what the SM can compute per byte; re-reading the cache for each draft token pays HBM k times.
// With k queries the work per byte is k times larger: 16 FMAs per key and dimension at k = 8,
// more than CUDA cores keep up with at HBM rate, while one mma.sync does 16 x 8 x 16 of them.
//
// The ladder, each rung one launch pattern over the same inputs:
//   1. baseline "step_by_step": k launches of the single-query kernel (kernels/decode_attention.cuh),
//      launch i computing draft token i over keys [0, 4097 + i): 8 full reads of the cache
//      (8.6 GB);
//   2. step "one_pass": one launch of the 8-query CUDA-core kernel (kernels/decode_attention.cuh): each
//      lane loads its 16 bytes of a key's K and V once and uses them for all 8 queries (8 dot
//      products, 8 online-softmax updates), masking key j for query i when j >= 4097 + i. One read
//      of the cache, but ~4 instructions per byte and 175 registers (one CTA of 8 warps per SM,
//      the next step's loads issued before this step's math): measured well under the read
//      ceiling, not memory-bound, and slower than PyTorch SDPA with the draft mask (README);
//   3. optimized "mma_pass": the same single read on the tensor cores (verify_mma.cuh): per 16
//      keys S^T = K Q^T and O^T += V^T P^T are 8 + 8 mma.sync m16n8k16 with N = the 8 queries,
//      P handed between them in registers by movmatrix.trans; K and V stream through a 3-stage
//      cp.async ring of 64-key tiles (2 CTAs per SM, up to 128 KB in flight per SM), the causal
//      mask and the online softmax per query column in FP32; keys split across CTAs when the pairs
//      do not fill the GPU (metric "splits": 1 at the timing size), merged by log-sum-exp.
// Scores, statistics and accumulators are FP32 on every rung; mma_pass alone rounds P to BF16 for
// its second product (as FlashAttention does), which the tolerance below covers.
// Expected: mma_pass near the read ceiling (~85-95%: ~360-400 us on the H100, ~240-270 us on the
// H200), 1.8-2.6x over one_pass and 7-8x over the baseline. Measured, the estimate held, and
// mma_pass is faster than SDPA with the draft mask (README).
// sm_90a, 128 registers, no spills; the fragment indexing
// (ldmatrix, ldmatrix.trans, movmatrix, mma) also checked by a CPU emulation of the layouts.
// Metric "tokens_per_s": batch x k / the median of the variant's own event-timed launches (the
// last 32), the verification throughput of a serving step.
// Bytes: K and V once, q read, out written (the one-pass minimum; the baseline moves 8x this,
// which is the point). Held to the HBM read ceiling. Flops: only the unmasked q.k and p v.
// Tolerance: relative L2 3e-3, as ch18/flash_decoding: BF16 output rounding (<= 2^-9 relative,
// RMS ~1.1e-3) plus FP32 sums of ~4100 terms (~1e-6); mma_pass adds P in BF16: each weight off
// by <= 2^-9 of itself (RMS ~1.1e-3, the largest, p = 1, exact), independent across keys, so
// ~1.1e-3 RMS of the output: ~1.6e-3 in all, an estimate rather than a bound (errors all of one
// sign would reach 3.9e-3; with v of random sign they do not line up).
//
//   ./bench compare --chapter ch18 --example speculative_verify
#include "verify_mma.cuh"

#include <kernels/decode_attention.cuh>
#include <kernels/occupancy.cuh>
#include <kernels/reference_attention.cuh>

#include <algorithm>
#include <array>
#include <vector>

namespace {

namespace decode = kernels::decode;
using decode::bf16;
using decode::kHeadDim;
constexpr int kDraft = 8;  // draft tokens verified per sequence

struct Verify {
  int64_t batch, heads, cached, n_k, pairs;
  bench::DeviceSpan<const bf16> q, k, v;
  bench::DeviceSpan<bf16> out;
  explicit Verify(bench::Setup& s)
      : batch(s.size("batch", 16, 2)),
        heads(s.size("heads", 32, 32)),
        cached(s.size("kv_len", 4096, 999)),  // 999 + 8 = 1007 keys: odd, not a whole number of steps
        n_k(cached + kDraft),
        pairs(batch * heads),
        q(s.input<bf16>("q", pairs * kDraft * kHeadDim, bench::normal(0, 4))),  // peaked softmax
        k(s.input<bf16>("k", pairs * n_k * kHeadDim, bench::uniform(-1, 1))),
        v(s.input<bf16>("v", pairs * n_k * kHeadDim, bench::uniform(-1, 1))),
        out(s.output<bf16>("out", pairs * kDraft * kHeadDim)) {
    s.param("draft_tokens", kDraft);
    s.bytes(2.0 * pairs * n_k * kHeadDim * sizeof(bf16) + 2.0 * pairs * kDraft * kHeadDim * sizeof(bf16),
            bench::ceiling::hbm_read);
    // Query i sees cached + 1 + i keys; 4 flops per key and dimension (q.k and p v).
    s.flops(4.0 * pairs * kHeadDim * (kDraft * (cached + 1) + kDraft * (kDraft - 1) / 2));
  }
  decode::Args args() const {
    const int64_t whole = decode::chunk_for(n_k, 1, 1);  // one split; also whole 8-query steps
    return {q.data(), out.data(), nullptr, nullptr, kDraft, 0, whole, 1};
  }
  decode::ContiguousKv kv() const { return {k.data(), v.data(), n_k}; }
};

// 1. step_by_step: kDraft single-query launches, launch i for draft token i.
struct StepByStep {
  StepByStep(const Verify&, cudaStream_t) {}
  void operator()(const Verify& w, cudaStream_t stream) const {
    decode::Args a = w.args();
    for (int i = 0; i < kDraft; ++i) {
      a.q_first = i;  // one query: sees keys [0, n_k - (kDraft - 1 - i))
      decode::launch<1>(a, w.kv(), w.pairs, stream);
    }
  }
};
// 2. one_pass: one launch of the 8-query CUDA-core kernel.
struct OnePass {
  OnePass(const Verify&, cudaStream_t) {}
  void operator()(const Verify& w, cudaStream_t stream) const {
    decode::launch<kDraft>(w.args(), w.kv(), w.pairs, stream);
  }
};
// 3. mma_pass: the tensor-core kernel (verify_mma.cuh). Untimed: the shared-memory opt-in, the
// split count and the partials' scratch. Splits s (1..16, >= 4 tiles each) minimise the waves per
// unit of work, ceil(pairs s / resident CTAs) / s, the smallest s on a tie: 1 at the timing size
// (512 pairs, 264 resident CTAs on an H100: 2 waves whatever s), 3 at the verification size (64
// pairs, 1007 keys: chunks of 384, 384, 239), so the check also covers a partial chunk and
// merge_splits.
struct MmaPass {
  int splits = 1;
  int64_t chunk;
  bench::DeviceBuffer<float> part_ml, part_o;
  MmaPass(const Verify& w, cudaStream_t) {
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(ch18::verify_mma_attention,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          ch18::kMmaSmemBytes));
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(ch18::verify_mma_attention,
                                          cudaFuncAttributePreferredSharedMemoryCarveout,
                                          int(cudaSharedmemCarveoutMaxShared)));
    const int64_t resident =
        int64_t{kernels::sm_count()} *
        std::max(1, kernels::blocks_per_sm(ch18::verify_mma_attention, ch18::kMmaThreads,
                                           ch18::kMmaSmemBytes));
    const int64_t max_splits = std::clamp<int64_t>(w.n_k / (4 * ch18::kMmaTileKeys), 1, 16);
    double best = 1e30;
    for (int64_t s = 1; s <= max_splits; ++s) {
      const double waves_per_work = double((w.pairs * s + resident - 1) / resident) / double(s);
      if (waves_per_work < best - 1e-9) best = waves_per_work, splits = int(s);
    }
    const int64_t per = (w.n_k + splits - 1) / splits;
    // Whole tiles a chunk; rounding the chunk up can leave fewer splits, never an empty one.
    chunk = (per + ch18::kMmaTileKeys - 1) / ch18::kMmaTileKeys * ch18::kMmaTileKeys;
    splits = int((w.n_k + chunk - 1) / chunk);
    if (splits > 1) {
      part_ml = bench::DeviceBuffer<float>(w.pairs * kDraft * splits * 2);
      part_o = bench::DeviceBuffer<float>(w.pairs * kDraft * splits * kHeadDim);
    }
  }
  void operator()(const Verify& w, cudaStream_t stream) const {
    decode::Args a = w.args();
    a.part_ml = part_ml.data(), a.part_o = part_o.data(), a.chunk = chunk, a.splits = splits;
    ch18::verify_mma_attention<<<dim3(unsigned(splits), unsigned(w.pairs)), ch18::kMmaThreads,
                                 ch18::kMmaSmemBytes, stream>>>(a, w.kv());
    BENCH_CHECK_LAUNCH();
    if (splits > 1) {  // the log-sum-exp combine of kernels/decode_attention.cuh, same partial layout
      decode::merge_splits<kDraft, decode::ContiguousKv>
          <<<dim3(unsigned(kDraft), unsigned(w.pairs)), kHeadDim, 0, stream>>>(a, w.kv());
      BENCH_CHECK_LAUNCH();
    }
  }
  std::vector<bench::Metric> metrics() const { return {{"splits", double(splits)}}; }
};

// A variant that also reports tokens/s from CUDA events around its own launches (the last 32).
template <class Pass>
struct TokensPerSecond {
  static constexpr int kKept = 32;
  Pass pass;
  std::array<cudaEvent_t, kKept> start{}, stop{};
  int calls = 0;
  double tokens;
  TokensPerSecond(const Verify& w, cudaStream_t stream)
      : pass(w, stream), tokens(double(w.batch) * kDraft) {
    for (int i = 0; i < kKept; ++i) {
      BENCH_CUDA_CHECK(cudaEventCreate(&start[i]));
      BENCH_CUDA_CHECK(cudaEventCreate(&stop[i]));
    }
  }
  TokensPerSecond(const TokensPerSecond&) = delete;
  TokensPerSecond& operator=(const TokensPerSecond&) = delete;
  ~TokensPerSecond() {
    for (int i = 0; i < kKept; ++i) cudaEventDestroy(start[i]), cudaEventDestroy(stop[i]);  // no check: a destructor
  }
  void operator()(const Verify& w, cudaStream_t stream) {
    const int slot = calls++ % kKept;
    BENCH_CUDA_CHECK(cudaEventRecord(start[slot], stream));
    pass(w, stream);
    BENCH_CUDA_CHECK(cudaEventRecord(stop[slot], stream));
  }
  std::vector<bench::Metric> metrics() {
    std::vector<double> seconds;
    for (int i = 0; i < std::min(calls, kKept); ++i) {
      float ms = 0;
      BENCH_CUDA_CHECK(cudaEventSynchronize(stop[i]));
      BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start[i], stop[i]));
      seconds.push_back(ms * 1e-3);
    }
    std::vector<bench::Metric> out;
    if constexpr (requires(const Pass& p) { p.metrics(); }) out = pass.metrics();
    if (seconds.empty()) return out;
    std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
    out.push_back({"tokens_per_s", tokens / seconds[seconds.size() / 2]});
    return out;
  }
};

// Draft token qi (of kDraft) sees the cache and drafts 0..qi: keys j < n_k - (kDraft - 1 - qi).
struct CausalDraft {
  int64_t n_k;
  __host__ __device__ bool operator()(int64_t qi, int64_t j) const { return j < n_k - (kDraft - 1 - qi); }
};
void reference(const Verify& w, bench::HostData& h) {
  kernels::reference_attention(h.input<bf16>("q"), h.input<bf16>("k"), h.input<bf16>("v"), h.expected("out"), w.pairs,
                               kDraft, w.n_k, CausalDraft{w.n_k});
}
void device_reference(const Verify& w, cudaStream_t stream) {
  kernels::reference_attention(w.q.data(), w.k.data(), w.v.data(), w.out.data(), w.pairs, kDraft, w.n_k,
                               CausalDraft{w.n_k}, stream);
}

BENCH_EXAMPLE(ch18, speculative_verify, Verify)
    .stateful<TokensPerSecond<StepByStep>>(bench::Role::baseline, "step_by_step")
    .stateful<TokensPerSecond<OnePass>>(bench::Role::step, "one_pass")
    .stateful<TokensPerSecond<MmaPass>>(bench::Role::optimized, "mma_pass")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(3e-3));

}  // namespace

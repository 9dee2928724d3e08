// ch16/flash_attention: attention written as three library calls writes and re-reads a score
// matrix seq/head_dim times larger than Q, K and V together; fused into one kernel with an online
// softmax, the scores never leave registers and attention becomes tensor-core bound.
//
// The work: prefill attention forward, out = softmax(Q K^T / sqrt(d)) V, BF16 in and out, layout
// [batch][heads][seq][d], 32 heads; the axes b (batch: 1, 2, 4), s (seq: 2048, 4096, 8192),
// d (head_dim: 64, 128) and causal. A default run takes six points: d128 non-causal and causal at
// b4 s4096 and b1 s8192, and d64 non-causal and causal at b4 s4096; --sweep all 36. The kernels
// are templated on d and causal (the tiles below hold at both; see each kernel's file), so the
// workload holds the Attention<d, causal> the point selects (AnyAttention) and each rung is
// compiled for the shapes it has (Dispatched).
// The hardware: per (batch, head), S = Q K^T is seq x seq x d and O = P V the same: 4 x d flops
// per score, on the BF16 tensor cores (~990 TFLOP/s dense on an H100). At d64 a score costs half
// the tensor work and the same softmax work, so exp and max weigh twice as much. The score matrix
// is 4096^2 x 4 bytes = 64 MiB per head, 8.6 GB per call at b4 h32 s4096: far past the 50 MB L2.
// The variants (same inputs, same output, same arithmetic per kept score):
//   1. baseline "materialised": what a framework's math path does. cuBLAS batched GEMM writes
//      S = Q K^T (FP32: BF16 scores would be off by up to 2^-9 x |s|, ~1% in p at |s| ~ 5, past
//      the tolerance), a row-softmax kernel reads S and writes P (BF16, normalised, the masked
//      part of a causal row written as zeros), and a second batched GEMM computes O = P V. Per
//      call that is 8.6 GB + 4.3 GB written and read back through HBM at b4 h32 s4096. Causal
//      changes nothing for the GEMMs: they compute the full square and the softmax zeroes half.
//   2. step "fa2_mma_sync": FlashAttention-2 (kernels/flash_attention_mma.cuh, shared with
//      ch18): a CTA per 128 queries and head walks 64-key tiles of K and V through a cp.async
//      ring, S and the online softmax in registers, P V on mma.sync m16n8k16. Causal: a block
//      walks only the key tiles at or below its last query (the rest are fully masked) and masks
//      scores only by key <= query; blocks are launched longest first (the last query block
//      walks 64 tiles, the first 2) across a group of heads whose K and V fit in half the L2, so
//      the short ones fill the tail (launch_order.hpp; every fused rung launches so). d64 keeps
//      the 64-key tiles (ch18's Walk counts them; S stays 32 registers a thread, O halves to 32).
//   3. step "wgmma_ws" (sm_90a; kernels/flash_attention_wgmma.cuh, shared with ch18): the Hopper
//      form. A producer warpgroup's one thread loads Q once and 128-key K and V tiles by TMA into a
//      2-stage ring; two consumer warpgroups (64 query rows each) compute S = Q K^T by wgmma from
//      shared memory, the online softmax in registers, and O += P V by wgmma with P straight from
//      registers: no ldmatrix, no cp.async address arithmetic, and 64 x 128 x 16 per instruction
//      instead of 16 x 8 x 16 (P V 64 x 64 x 16 at d64; the tiles stay 128 queries x 128 keys).
//      Each consumer waits for each GEMM before its softmax: the tensor cores idle through every
//      softmax the other consumer does not happen to cover.
//   4. step "wgmma_pingpong": FlashAttention-3's two overlaps on the same kernel. Within a
//      consumer, S of tile t and P V of tile t - 1 are issued together and tile t's softmax runs
//      while P V is on the tensor cores; between consumers, named barriers make them take turns
//      issuing GEMMs, so one's softmax lines up with the other's GEMMs. The rungs below build on
//      it.
//   5. optimized at d64 only, "wgmma_pingpong_192": three consumer warpgroups, 192-query blocks
//      (FlashAttention-3's shape at head dim 64). At d64 a tile's exponentials take the SFU
//      about as long as its two GEMMs take the tensor cores, so two warpgroups taking turns leave
//      gaps in both; a third keeps one GEMM queued while the other two do softmax. 160 registers
//      a consumer (the 64 K pool shared four ways) hold d64's accumulators, not d128's. Causal,
//      each consumer masks only the tile that holds its own diagonal: a 192-row block's diagonal
//      spans two 128-key tiles, a consumer's 64 rows one (step "wgmma_pingpong_192_block_mask"
//      masks both in every consumer, as the two-consumer kernels' blocks do: README, "d64 causal
//      beside non-causal").
//   6. optimized non-causal at d128, "wgmma_persistent": the ping-pong kernel
//      persistent, one CTA an SM walking the launch order at a fixed stride, the next block's Q
//      and first K and V loaded while the consumers finish P V and store O (fw::persistent).
//      Non-causal blocks are equal, so a fixed stride loses nothing to balance; causal and d64
//      stay on the plain grid (README: "A persistent kernel").
//   7. step "wgmma_overlap" (every shape; issue 46): the ping-pong kernel with S one tile ahead
//      within each consumer (fw::Schedule::overlap, two S register sets): a turn issues P V of
//      tile t - 1, waits for it, and issues S of tile t + 1, and tile t's softmax, O's rescale and
//      P's packing run while that S is on the tensor cores (ping-pong runs tile t's softmax under
//      P V of tile t - 1 instead, with O's rescale and P's packing after it). On the launch of
//      the rung it builds on: persistent at non-causal d128 (compare with wgmma_persistent), the
//      plain grid elsewhere (compare with wgmma_pingpong). A step: slower than the rung below
//      it at every point measured (README: "Where its time goes").
//   8. step "wgmma_overlap_early_turn" (every shape; issue 46): wgmma_overlap with the turn
//      passed right after P V of tile t - 1 is issued, before the warpgroup waits for it
//      (fw::Schedule::overlap_early_turn), so the other consumer queues its P V behind it instead
//      of the tensor cores draining through that wait; S of tile t + 1 is issued outside the
//      turn. The same launches as wgmma_overlap (compare with it). A step: faster than
//      wgmma_overlap, level with the persistent rung at non-causal d128, behind ping-pong
//      elsewhere (README).
//   9. step "wgmma_chained" (causal d128; issue 46): the ping-pong kernel
//      persistent for causal blocks (kernels/flash_attention_wgmma_chain.cuh). A host plan deals
//      the causal launch order to one CTA an SM as a plain grid's hardware would (longest first
//      within each L2 group), and each CTA's blocks run as one stream of tiles: the turn that
//      issues P V of a block's last tile issues S of the next block's first tile (from a second
//      Q buffer), and the finished O is stored under the other consumer's GEMMs. A causal block
//      averages 16.5 tiles at s4096, so the per-block edges this removes weigh twice as much as
//      non-causal (README: "Causal: where the time goes").
//  10. optimized at causal d128, "wgmma_chained_diagonal" (issue 46): wgmma_chained
//      with the diagonal as the causal geometry has it: a 128-row block starts where a 128-key
//      tile does, so only its last tile holds masked scores, and of that tile consumer 0 (rows
//      0-63) sees only keys 0-63. The other tiles run no mask code; on the diagonal each consumer
//      tests only the half of the tile its rows meet the diagonal in (a compare of a constant with
//      the row and a select a score, where the general mask also tests keys against seq and
//      branches), and consumer 0 skips the quarter of the tile that is all masked for it: no
//      exponentials, S by m64n64k16 and P V over 4 of 8 k16 steps, in loops of their own per
//      consumer (a wgmma in a branch on the warpgroup is serialised). Its plan is evened out
//      (ch16::balanced_schedule: list scheduling leaves the busiest CTA up to a block past an even
//      split, and the chained CTAs all wait for the busiest) and hands the kernel (head, qb)
//      packed, so a block change does no division. Compare with wgmma_chained.
// Flops: those attention needs, 4 x d per visible score (4 x 64 for the twins): seq^2 per head
// non-causal, seq (seq + 1) / 2 causal, against the BF16 tensor ceiling. Metric
// "computed_flops_ratio": the tensor-core flops a variant actually executes over the declared
// ones (materialised causal ~2: it computes every score; fused causal ~1.03 at s4096: whole
// diagonal tiles; the same at d64, whose tiles are the same).
// Bytes: Q, K, V read once and O written once (the fused kernel's traffic; the baseline's S and
// P are its own cost, not the work's).
// Tolerance: relative L2 5e-3 (as ch18: P and the output each rounded to BF16, ~1.1e-3 rms each).
// Verification: batch 2 x 3 heads x 333 tokens (a ragged last query block of 77 rows; ragged last
// key tiles of 13 keys for fa2, 77 for the wgmma rungs; 3 tiles: the ring wraps) against the CPU
// reference in double; at the timing size against kernels/reference_attention.cuh on the GPU
// (reference_attention<64> for the twins).
//
//   ./bench compare --chapter ch16 --example flash_attention --axis b=4 --axis s=4096
//   ./bench compare --chapter ch16 --example flash_attention --axis d=64
//   ./bench compare --chapter ch16 --example flash_attention --sweep --axis d=128 --axis causal=1
#include <bench/bench.hpp>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <kernels/cublas_check.hpp>
#include <kernels/flash_attention_mma.cuh>
#include <kernels/flash_attention_wgmma.cuh>
#include <kernels/flash_attention_wgmma_chain.cuh>
#include <kernels/group_reduce.cuh>
#include <kernels/occupancy.cuh>
#include <kernels/online_softmax.cuh>
#include <kernels/reference_attention.cuh>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "launch_order.hpp"


namespace {

using bf16 = __nv_bfloat16;
constexpr int kSoftmaxThreads = 256;
// row_softmax keeps a score row in default (48 KiB) shared memory.
constexpr int64_t kMaxSoftmaxRow = 48 * 1024 / sizeof(float);

// The problem at one head_dim and masking, which the kernels are compiled for; batch and seq are
// the point's (the axes b and s).
template <int kD, bool kCausal>
struct Attention {
  static constexpr int head_dim = kD;
  static constexpr bool causal = kCausal;
  int64_t batch, heads, seq, bh;
  bench::DeviceSpan<const bf16> q, k, v;
  bench::DeviceSpan<bf16> out;
  double declared_flops;
  explicit Attention(bench::Setup& s)
      : batch(s.size("batch", s.axis("b"), 2)),
        heads(s.size("heads", 32, 3)),
        seq(s.size("seq", s.axis("s"), 333)),
        bh(batch * heads),
        q(s.input<bf16>("q", bh * seq * kD, bench::normal(0, 4))),  // a peaked softmax
        k(s.input<bf16>("k", bh * seq * kD, bench::uniform(-1, 1))),
        v(s.input<bf16>("v", bh * seq * kD, bench::uniform(-1, 1))),
        out(s.output<bf16>("out", bh * seq * kD)),
        declared_flops(4.0 * kD * double(bh) * visible_scores(seq)) {
    s.param("causal", kCausal);
    // q, k, v read once; out written once.
    s.bytes(4.0 * double(bh) * double(seq) * kD * sizeof(bf16));
    s.flops(declared_flops, bench::ceiling::bf16);
  }
  static double visible_scores(int64_t n) {
    return kCausal ? 0.5 * double(n) * double(n + 1) : double(n) * double(n);
  }
};

// ---- Baseline: S = Q K^T (cuBLAS), softmax (below), O = P V (cuBLAS) --------------------------

// One CTA per score row: the row's visible scores (log2 domain, scaled by the GEMM) into shared
// memory, its max and sum by block reduction, then P = 2^(s - max) / sum as BF16, zeros past the
// last visible key (causal), so that P V can be a plain dense GEMM.
template <bool kCausal>
__global__ void __launch_bounds__(kSoftmaxThreads)
    row_softmax(const float* __restrict__ s, bf16* __restrict__ p, int64_t seq) {
  extern __shared__ float row[];
  const int64_t qi = blockIdx.x, offset = (int64_t{blockIdx.y} * seq + qi) * seq;
  const int64_t visible = kCausal ? qi + 1 : seq;
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < visible; j += kSoftmaxThreads)
    m = fmaxf(m, row[j] = s[offset + j]);
  // (Each thread rereads only the row[j] it stored: no barrier is needed for row[].)
  m = kernels::group_reduce<kSoftmaxThreads>(m, kernels::Max{});
  float l = 0.0f;
  for (int64_t j = threadIdx.x; j < visible; j += kSoftmaxThreads)
    l += row[j] = kernels::exp2_ftz(row[j] - m);
  const float inv = 1.0f / kernels::group_reduce<kSoftmaxThreads>(l, kernels::Sum{});
  for (int64_t j = threadIdx.x; j < seq; j += kSoftmaxThreads)
    p[offset + j] = __float2bfloat16(j < visible ? row[j] * inv : 0.0f);
}

template <class W>
class Materialised {
 public:
  Materialised(const W& w, cudaStream_t)
      : scores_((fits(w), w.bh * w.seq * w.seq)),
        probs_(w.bh * w.seq * w.seq),
        workspace_(kWorkspaceBytes),
        computed_ratio_(4.0 * W::head_dim * double(w.bh) * double(w.seq) * double(w.seq) /
                        w.declared_flops) {
    if (w.seq > kMaxSoftmaxRow)
      throw bench::Unsupported("row_softmax keeps a row of at most 12288 scores");
    kernels::check_cublas(cublasCreate(&handle_), "cublasCreate");
    kernels::check_cublas(cublasSetWorkspace(handle_, workspace_.data(), kWorkspaceBytes),
                          "cublasSetWorkspace");
  }
  // S (FP32) and P (BF16) take 6 bytes a score: at b4 s8192 that is 52 GB, more than a sweep point
  // can count on; such a point is SKIPPED for this side, with the reason.
  static void fits(const W& w) {
    size_t free = 0, total = 0;
    BENCH_CUDA_CHECK(cudaMemGetInfo(&free, &total));
    const double need = 6.0 * double(w.bh) * double(w.seq) * double(w.seq);
    if (need > 0.8 * double(free))
      throw bench::Unsupported("the materialised S and P need " + std::to_string(int(need / 1e9)) + " GB");
  }
  Materialised(const Materialised&) = delete;
  Materialised& operator=(const Materialised&) = delete;
  ~Materialised() { cublasDestroy(handle_); }

  // cuBLAS is column-major: a row-major [rows][cols] matrix is its transpose there, so
  // S^T = K Q^T gives row-major S, and O^T = V^T P^T gives row-major O.
  void operator()(const W& w, cudaStream_t stream) const {
    kernels::check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
    const int n = int(w.seq), d = W::head_dim;
    const long long qkv_stride = w.seq * d, score_stride = w.seq * w.seq;
    const float scale = kernels::kLog2e / std::sqrt(float(d)), one = 1.0f, zero = 0.0f;
    kernels::check_cublas(
        cublasGemmStridedBatchedEx(handle_, CUBLAS_OP_T, CUBLAS_OP_N, n, n, d, &scale, w.k.data(),
                                   CUDA_R_16BF, d, qkv_stride, w.q.data(), CUDA_R_16BF, d,
                                   qkv_stride, &zero, scores_.data(), CUDA_R_32F, n, score_stride,
                                   int(w.bh), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx(S = Q K^T)");
    row_softmax<W::causal>
        <<<dim3(unsigned(w.seq), unsigned(w.bh)), kSoftmaxThreads, w.seq * sizeof(float), stream>>>(
            scores_.data(), probs_.data(), w.seq);
    BENCH_CHECK_LAUNCH();
    kernels::check_cublas(
        cublasGemmStridedBatchedEx(handle_, CUBLAS_OP_N, CUBLAS_OP_N, d, n, n, &one, w.v.data(),
                                   CUDA_R_16BF, d, qkv_stride, probs_.data(), CUDA_R_16BF, n,
                                   score_stride, &zero, w.out.data(), CUDA_R_16BF, d, qkv_stride,
                                   int(w.bh), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx(O = P V)");
  }
  // Both GEMMs compute every score, whatever the mask.
  std::vector<bench::Metric> metrics() const { return {{"computed_flops_ratio", computed_ratio_}}; }

 private:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;
  bench::DeviceBuffer<float> scores_;
  bench::DeviceBuffer<bf16> probs_;
  bench::DeviceBuffer<std::byte> workspace_;
  double computed_ratio_;
  cublasHandle_t handle_ = nullptr;
};

// ---- Step: FlashAttention-2 on mma.sync (kernels/flash_attention_mma.cuh) ----------------------

// Every key tile (non-causal), or the tiles at or below the block's last query (causal), in tiles
// of kTileKeys: one walk for both fused kernels, with the members each one's Walk contract asks
// for (kernels/flash_attention_mma.cuh: 64-key tiles, first_key and masked; the wgmma kernel:
// 128-key tiles, key_tile and masks, only the last tile holding masked scores).
// A block holds kQueryRows queries; causal, the tiles past its first query hold masked scores.
// kPerConsumer (the 192-row kernel, `wgmma_pingpong_192`): it also says which tiles hold masked
// scores for one consumer's 64 rows, whose diagonal is one tile of the block's two.
template <bool kCausal, int kTileKeys, int kQueryRows = kernels::kFlashQueryRows,
          bool kPerConsumer = false>
struct DenseOrCausalWalk {
  int64_t seq;
  int qb;
  __host__ __device__ int tiles() const {
    const int all = int((seq + kTileKeys - 1) / kTileKeys);
    return kCausal ? std::min(all, ((qb + 1) * kQueryRows + kTileKeys - 1) / kTileKeys) : all;
  }
  __device__ int64_t first_key(int t) const { return int64_t{t} * kTileKeys; }
  __device__ bool masked(int) const { return false; }
  __device__ int key_tile(int t) const { return t; }
  __device__ bool masks(int t) const {
    return t == tiles() - 1 || (kCausal && (t + 1) * kTileKeys > qb * kQueryRows + 1);
  }
  // The same for the rows from first_row (a consumer's 64 of the block's): tile t holds a key
  // past one of them, or is the last tile (keys past seq).
  __device__ bool masks(int t, int first_row) const requires kPerConsumer {
    return t == tiles() - 1 || (kCausal && (t + 1) * kTileKeys > first_row + 1);
  }
  __host__ __device__ int tiles_for(int64_t last_row) const {
    return kCausal ? std::min(tiles(), int(last_row / kTileKeys) + 1) : tiles();
  }
  __device__ bool visible(int64_t row, int64_t key) const { return !kCausal || key <= row; }
};
template <bool kCausal>
using Fa2Walk = DenseOrCausalWalk<kCausal, kernels::kFlashKeyTile>;

template <int kD, bool kCausal>
__global__ void __launch_bounds__(kernels::kFlashThreads)
    fa2_mma_sync(const bf16* q, const bf16* k, const bf16* v, bf16* out, int64_t seq,
                 ch16::LaunchOrder order) {
  const auto [h, qb] = order.at(int(blockIdx.x));
  const int64_t head = h * seq * kD;
  kernels::flash_attention_block<kD>(q + head, k + head, v + head, out + head, seq, qb,
                                     Fa2Walk<kCausal>{seq, qb});
}

// Causal grids run heads in groups whose K and V fit in half the L2 (the other half for Q, O and
// what the previous group leaves), longest block first across a group; non-causal ones head by
// head (launch_order.hpp says why).
template <class W>
ch16::LaunchOrder launch_order(const W& w, int blocks) {
  if (!W::causal) return ch16::LaunchOrder::head_major(blocks, int(w.bh));
  const int64_t kv_bytes = 2 * w.seq * W::head_dim * int64_t{sizeof(bf16)};
  return ch16::LaunchOrder::causal(blocks, int(w.bh), kv_bytes, kernels::l2_cache_bytes() / 2);
}

// Untimed: the shared-memory opt-in (96 KiB; 48 KiB at d64) and the tile count the kernel will
// execute.
template <class W>
class Fa2MmaSync {
  static constexpr int kD = W::head_dim;
  using Smem = kernels::FlashSmemD<kD>;

 public:
  Fa2MmaSync(const W& w, cudaStream_t)
      : order_(launch_order(
            w, int((w.seq + kernels::kFlashQueryRows - 1) / kernels::kFlashQueryRows))) {
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(fa2_mma_sync<kD, W::causal>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(sizeof(Smem))));
    double tiles = 0;  // every tile is 128 rows x 64 keys, 4 x d flops a score
    for (int qb = 0; qb < order_.blocks; ++qb) tiles += Fa2Walk<W::causal>{w.seq, qb}.tiles();
    computed_ratio_ = tiles * double(w.bh) * kernels::kFlashQueryRows * kernels::kFlashKeyTile *
                      4.0 * kD / w.declared_flops;
  }
  void operator()(const W& w, cudaStream_t stream) const {
    fa2_mma_sync<kD, W::causal><<<order_.ctas(), kernels::kFlashThreads, sizeof(Smem), stream>>>(
        w.q.data(), w.k.data(), w.v.data(), w.out.data(), w.seq, order_);
    BENCH_CHECK_LAUNCH();
  }
  std::vector<bench::Metric> metrics() const { return {{"computed_flops_ratio", computed_ratio_}}; }

 private:
  ch16::LaunchOrder order_;  // its `blocks`: query blocks a head
  double computed_ratio_ = 0;
};

// ---- Optimized: TMA producer, two wgmma consumer warpgroups (kernels/flash_attention_wgmma.cuh) -

namespace fw = kernels::flash_wgmma;

template <bool kCausal, int kConsumers, bool kPerConsumer = false>
using WgmmaWalk = DenseOrCausalWalk<kCausal, fw::kKeys, fw::Team<kConsumers>::kRows, kPerConsumer>;

template <int kD, bool kCausal, fw::Schedule kSchedule, int kConsumers, bool kPerConsumer = false>
__global__ void __launch_bounds__(fw::Team<kConsumers>::kThreads, 1)
    wgmma_ws(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
             const __grid_constant__ CUtensorMap map_v, bf16* __restrict__ out, int64_t seq,
             ch16::LaunchOrder order) {
#if BENCH_SM90A_DEVICE
  const auto [head, qb] = order.at(int(blockIdx.x));
  fw::block<kD, kConsumers, kSchedule>(map_q, map_k, map_v, out + head * seq * kD, seq,
                                       int(head * seq), qb,
                                       WgmmaWalk<kCausal, kConsumers, kPerConsumer>{seq, qb});
#endif
}

// The persistent form (fw::persistent), non-causal only: one CTA an SM walking the launch order
// at a fixed stride (equal blocks, so nothing to balance), the next block's Q and first K and V
// loaded while the consumers finish P V and store O; the ping-pong schedule, two consumers.
// (LocateBlock<true>: the same for wgmma_chained's causal blocks.)
template <bool kCausal>
struct LocateBlock {
  ch16::LaunchOrder order;
  int64_t seq;
  struct Block {
    int head, qb;
    WgmmaWalk<kCausal, 2> walk;
  };
  __device__ Block operator()(int item) const {
    const auto [head, qb] = order.at(item);
    return {head, qb, {seq, qb}};
  }
};
// wgmma_chained_diagonal's plan entries: (head, query block) packed by the host
// (ch16::PackedBlock), so a block change in the chained stream does no division.
struct LocatePacked {
  int64_t seq;
  __device__ LocateBlock<true>::Block operator()(int item) const {
    const auto [head, qb] = ch16::PackedBlock::unpack(item);
    return {head, qb, {seq, qb}};
  }
};

template <int kD, fw::Schedule kSchedule>
__global__ void __launch_bounds__(fw::Team<2>::kThreads, 1)
    wgmma_persistent(const __grid_constant__ CUtensorMap map_q,
                     const __grid_constant__ CUtensorMap map_k,
                     const __grid_constant__ CUtensorMap map_v, bf16* __restrict__ out,
                     int64_t seq, ch16::LaunchOrder order) {
#if BENCH_SM90A_DEVICE
  fw::persistent<kD, 2, kSchedule>(map_q, map_k, map_v, out, seq, order.ctas(),
                                   LocateBlock<false>{order, seq});
#endif
}

// The chained form (fw::chained), causal: one CTA an SM running the blocks a host plan deals it
// (ch16::list_schedule: the causal launch order dealt as a plain grid's hardware would; entries
// are launch-order indices), its blocks one stream of tiles for the ping-pong consumers.
// kDiagonal (wgmma_chained_diagonal): only each block's last tile masked, split by consumer, and
// the plan ch16::balanced_schedule's with packed (head, qb) entries (`order` unused).
template <int kD, bool kDiagonal>
__global__ void __launch_bounds__(fw::Team<2>::kThreads, 1)
    wgmma_chained(const __grid_constant__ CUtensorMap map_q,
                  const __grid_constant__ CUtensorMap map_k,
                  const __grid_constant__ CUtensorMap map_v, bf16* __restrict__ out, int64_t seq,
                  ch16::LaunchOrder order, const int* __restrict__ plan) {
#if BENCH_SM90A_DEVICE
  if constexpr (kDiagonal)
    fw::chained<kD, true>(map_q, map_k, map_v, out, seq, plan, LocatePacked{seq});
  else
    fw::chained<kD, false>(map_q, map_k, map_v, out, seq, plan, LocateBlock<true>{order, seq});
#endif
}

// The tensor-core flops the wgmma kernels execute over the declared ones: each consumer's tiles
// (64 rows x 128 keys) of every query block.
template <int kConsumers, class W>
double wgmma_computed_ratio(const W& w, int blocks) {
  double tiles = 0;
  for (int qb = 0; qb < blocks; ++qb)
    for (int c = 0; c < kConsumers; ++c)
      tiles += fw::consumer_tiles<kConsumers>(WgmmaWalk<W::causal, kConsumers>{w.seq, qb}, qb, c,
                                              w.seq);
  return tiles * double(w.bh) * fw::kConsumerRows * fw::kKeys * 4.0 * W::head_dim /
         w.declared_flops;
}

// kConsumers = 2: 128-query blocks; 3: 192-query blocks (a third consumer warpgroup).
// kPersistent: the persistent kernel (non-causal, two consumers, a schedule with turns).
template <class W, fw::Schedule kSchedule, int kConsumers = 2, bool kPersistent = false,
          bool kPerConsumer = false>
class WgmmaWs {
  static_assert(!kPersistent || (!W::causal && kConsumers == 2 &&
                                 kSchedule != fw::Schedule::serial),
                "the persistent kernel walks equal (non-causal) blocks, 2 consumers taking turns");
  static constexpr int kD = W::head_dim;
  static constexpr int kRows = fw::Team<kConsumers>::kRows;
  static constexpr size_t kSmemBytes = fw::kSmemBytes<kD, kConsumers>;

 public:
  // Untimed: the shared-memory opt-in (162 KiB; 82 KiB at d64, 90 KiB with 3 consumers) and the
  // three tensor maps (fixed buffers).
  WgmmaWs(const W& w, cudaStream_t)
      : map_q_(fw::query_map<kD>(w.q.data(), w.bh * w.seq)),
        map_k_(fw::tile_map<kD>(w.k.data(), w.bh * w.seq)),
        map_v_(fw::tile_map<kD>(w.v.data(), w.bh * w.seq)),
        order_(launch_order(w, int((w.seq + kRows - 1) / kRows))) {
    if constexpr (kPersistent) {
      BENCH_CUDA_CHECK(cudaFuncSetAttribute(wgmma_persistent<kD, kSchedule>,
                                            cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            int(kSmemBytes)));
      // A CTA an SM; at least two blocks a CTA where there are fewer than twice the SMs (the
      // verification size: so it and `bench sanitize` run the hand-over from block to block).
      grid_ = std::min(kernels::sm_count(), (order_.ctas() + 1) / 2);
    } else {
      BENCH_CUDA_CHECK(
          cudaFuncSetAttribute(wgmma_ws<kD, W::causal, kSchedule, kConsumers, kPerConsumer>,
                               cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes)));
      grid_ = order_.ctas();
    }
    computed_ratio_ = wgmma_computed_ratio<kConsumers>(w, order_.blocks);
  }
  void operator()(const W& w, cudaStream_t stream) const {
    if constexpr (kPersistent)
      wgmma_persistent<kD, kSchedule>
          <<<grid_, fw::Team<kConsumers>::kThreads, kSmemBytes, stream>>>(
              map_q_, map_k_, map_v_, w.out.data(), w.seq, order_);
    else
      wgmma_ws<kD, W::causal, kSchedule, kConsumers, kPerConsumer>
          <<<grid_, fw::Team<kConsumers>::kThreads, kSmemBytes, stream>>>(
              map_q_, map_k_, map_v_, w.out.data(), w.seq, order_);
    BENCH_CHECK_LAUNCH();
  }
  std::vector<bench::Metric> metrics() const { return {{"computed_flops_ratio", computed_ratio_}}; }

 private:
  CUtensorMap map_q_, map_k_, map_v_;
  ch16::LaunchOrder order_;  // its `blocks`: query blocks a head
  int grid_ = 0;
  double computed_ratio_ = 0;
};

// wgmma_chained (causal d128): fw::chained with its plan, one CTA an SM. Untimed: the opt-in
// (193 KiB: a second Q buffer), the tensor maps and the plan, built on the host and copied once.
// kDiagonal: wgmma_chained_diagonal, the same with the diagonal's mask and work split by consumer.
template <class W, bool kDiagonal>
class ChainedForm {
  static_assert(W::causal, "the plan balances unequal (causal) blocks");
  static constexpr int kD = W::head_dim;

 public:
  ChainedForm(const W& w, cudaStream_t)
      : map_q_(fw::query_map<kD>(w.q.data(), w.bh * w.seq)),
        map_k_(fw::tile_map<kD>(w.k.data(), w.bh * w.seq)),
        map_v_(fw::tile_map<kD>(w.v.data(), w.bh * w.seq)),
        order_(launch_order(w, int((w.seq + fw::kKeys - 1) / fw::kKeys))),
        // A CTA an SM; at least four blocks a CTA where there are fewer than four times the SMs
        // (the verification size: so it and `bench sanitize` run the hand-over between blocks
        // and the reuse of both Q buffers).
        grid_(std::min(kernels::sm_count(), (order_.ctas() + 3) / 4)),
        computed_ratio_(computed_ratio(w, order_.blocks)) {
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(wgmma_chained<kD, kDiagonal>,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(fw::kChainSmemBytes<kD>)));
    const int64_t seq = w.seq;
    std::vector<int> plan;
    if constexpr (kDiagonal) {
      // Evened out (ch16::balanced_schedule), by a chained block's cost: its key tiles plus half
      // a tile for the block change (README: "Causal: where the time goes"); its entries packed
      // (head, qb) for LocatePacked.
      if (!ch16::PackedBlock::fits(order_))
        throw bench::Unsupported("wgmma_chained_diagonal packs (head, qb) into an int");
      plan = ch16::balanced_schedule(order_, grid_, [seq](int qb) {
        return WgmmaWalk<true, 2>{seq, qb}.tiles() + 0.5;
      });
      for (size_t e = size_t(grid_) + 1; e < plan.size(); ++e)
        plan[e] = ch16::PackedBlock::pack(order_.at(plan[e]));
    } else {
      plan = ch16::list_schedule(order_, grid_, [seq](int qb) {
        return WgmmaWalk<true, 2>{seq, qb}.tiles() + 1.0;  // the launch-order model's cost
      });
    }
    plan_ = bench::DeviceBuffer<int>(int64_t(plan.size()));
    BENCH_CUDA_CHECK(
        cudaMemcpy(plan_.data(), plan.data(), plan_.bytes(), cudaMemcpyHostToDevice));
  }
  void operator()(const W& w, cudaStream_t stream) const {
    wgmma_chained<kD, kDiagonal><<<grid_, fw::Team<2>::kThreads, fw::kChainSmemBytes<kD>, stream>>>(
        map_q_, map_k_, map_v_, w.out.data(), w.seq, order_, plan_.data());
    BENCH_CHECK_LAUNCH();
  }
  std::vector<bench::Metric> metrics() const { return {{"computed_flops_ratio", computed_ratio_}}; }

 private:
  // kDiagonal: on each block's diagonal consumer 0 skips half of its P V (a quarter of its tile's
  // flops) and, but in a one-tile block, half of its S (another quarter; fw::chained).
  static double computed_ratio(const W& w, int blocks) {
    double ratio = wgmma_computed_ratio<2>(w, blocks);
    if constexpr (kDiagonal) {
      double skipped = 0;  // consumer tiles
      for (int qb = 0; qb < blocks; ++qb)
        skipped += 0.25 + (WgmmaWalk<true, 2>{w.seq, qb}.tiles() > 1 ? 0.25 : 0.0);
      ratio -= skipped * double(w.bh) * fw::kConsumerRows * fw::kKeys * 4.0 * kD / w.declared_flops;
    }
    return ratio;
  }
  CUtensorMap map_q_, map_k_, map_v_;
  ch16::LaunchOrder order_;  // its `blocks`: query blocks a head
  int grid_;
  double computed_ratio_;
  bench::DeviceBuffer<int> plan_;
};
template <class W>
using Chained = ChainedForm<W, false>;
template <class W>
using ChainedDiagonal = ChainedForm<W, true>;

// ---- References and registration --------------------------------------------------------------

template <bool kCausal>
struct CausalMask {
  __host__ __device__ bool operator()(int64_t qi, int64_t kj) const { return !kCausal || kj <= qi; }
};

// The example's workload: the Attention the point's d and causal select, built from the Setup.
using A128 = Attention<128, false>;
using A128Causal = Attention<128, true>;
using A64 = Attention<64, false>;
using A64Causal = Attention<64, true>;
struct AnyAttention {
  using Shape = std::variant<A128, A128Causal, A64, A64Causal>;
  Shape shape;
  explicit AnyAttention(bench::Setup& s) : shape(make(s)) {}
  static Shape make(bench::Setup& s) {
    const bool causal = s.axis("causal") == 1;
    if (s.axis("d") == 64) return causal ? Shape(std::in_place_type<A64Causal>, s) : Shape(std::in_place_type<A64>, s);
    return causal ? Shape(std::in_place_type<A128Causal>, s) : Shape(std::in_place_type<A128>, s);
  }
};

// A variant V<W> for whichever of the workloads `Ws` the point built (the others are never
// compiled for V: the persistent kernel exists only non-causal at d128).
template <template <class> class V, class... Ws>
class Dispatched {
 public:
  Dispatched(const AnyAttention& a, cudaStream_t stream) {
    (make<Ws>(a, stream) || ...);
    if (!state_) throw bench::Unsupported("no such rung at this head_dim and masking");
  }
  void operator()(const AnyAttention& a, cudaStream_t stream) { run_(state_.get(), a, stream); }
  std::vector<bench::Metric> metrics() const { return metrics_(state_.get()); }

 private:
  template <class W>
  bool make(const AnyAttention& a, cudaStream_t stream) {
    const W* w = std::get_if<W>(&a.shape);
    if (w == nullptr) return false;
    state_ = std::make_shared<V<W>>(*w, stream);
    run_ = [](void* v, const AnyAttention& any, cudaStream_t s) { (*static_cast<V<W>*>(v))(std::get<W>(any.shape), s); };
    metrics_ = [](const void* v) { return static_cast<const V<W>*>(v)->metrics(); };
    return true;
  }
  std::shared_ptr<void> state_;
  void (*run_)(void*, const AnyAttention&, cudaStream_t) = nullptr;
  std::vector<bench::Metric> (*metrics_)(const void*) = nullptr;
};
template <template <class> class V>
using OnEveryShape = Dispatched<V, A128, A128Causal, A64, A64Causal>;
template <class W>
using Serial = WgmmaWs<W, fw::Schedule::serial>;
template <class W>
using Pingpong = WgmmaWs<W, fw::Schedule::pingpong>;
template <class W>
using Persistent = WgmmaWs<W, fw::Schedule::pingpong, 2, true>;
template <class W>
using Pingpong192 = WgmmaWs<W, fw::Schedule::pingpong, 3, false, true>;
template <class W>
using Pingpong192BlockMask = WgmmaWs<W, fw::Schedule::pingpong, 3>;
// The overlap schedule on the launch each shape's ping-pong rung uses: persistent at non-causal
// d128 (over wgmma_persistent), the plain grid elsewhere (over wgmma_pingpong).
template <class W>
using Overlap = WgmmaWs<W, fw::Schedule::overlap, 2, !W::causal && W::head_dim == 128>;
// The same with the turn passed before the wait for P V (compare with wgmma_overlap).
template <class W>
using OverlapEarlyTurn =
    WgmmaWs<W, fw::Schedule::overlap_early_turn, 2, !W::causal && W::head_dim == 128>;

void reference(const AnyAttention& a, bench::HostData& h) {
  std::visit(
      [&](const auto& w) {
        using W = std::decay_t<decltype(w)>;
        kernels::reference_attention<W::head_dim>(h.input<bf16>("q"), h.input<bf16>("k"), h.input<bf16>("v"),
                                                  h.expected("out"), w.bh, w.seq, w.seq, CausalMask<W::causal>{});
      },
      a.shape);
}
void device_reference(const AnyAttention& a, cudaStream_t stream) {
  std::visit(
      [&](const auto& w) {
        using W = std::decay_t<decltype(w)>;
        kernels::reference_attention<W::head_dim>(w.q.data(), w.k.data(), w.v.data(), w.out.data(), w.bh, w.seq,
                                                  w.seq, CausalMask<W::causal>{}, stream);
      },
      a.shape);
}

// Which rung is the optimized one depends on the shape (the header's list): the chained kernel
// with the diagonal split by consumer at causal d128, the persistent ping-pong non-causal at
// d128, three consumers at d64.
bool causal_d128(const bench::Point& p) { return p.axis("d") == 128 && p.axis("causal") == 1; }
bool plain_d128(const bench::Point& p) { return p.axis("d") == 128 && p.axis("causal") == 0; }
bool d64(const bench::Point& p) { return p.axis("d") == 64; }
bool d64_causal(const bench::Point& p) { return p.axis("d") == 64 && p.axis("causal") == 1; }

BENCH_EXAMPLE(ch16, flash_attention, AnyAttention)
    .int_axis("b", {1, 2, 4})
    .int_axis("s", {2048, 4096, 8192})
    .int_axis("d", {64, 128})
    .bool_axis("causal")
    // The shapes measured before the axes (each was an example of its own): README.
    .default_points({"b:4/s:4096/d:128/causal:0", "b:4/s:4096/d:128/causal:1",
                     "b:1/s:8192/d:128/causal:0", "b:1/s:8192/d:128/causal:1",
                     "b:4/s:4096/d:64/causal:0", "b:4/s:4096/d:64/causal:1"})
    .stateful<OnEveryShape<Materialised>>(bench::Role::baseline, "materialised")
    .stateful<OnEveryShape<Fa2MmaSync>>(bench::Role::step, "fa2_mma_sync")
    .stateful<OnEveryShape<Serial>>(bench::Role::step, "wgmma_ws", {.arch_specific = 90})
    .stateful<OnEveryShape<Pingpong>>(bench::Role::step, "wgmma_pingpong", {.arch_specific = 90})
    .stateful<Dispatched<Persistent, A128>>(bench::Role::optimized, "wgmma_persistent",
                                            {.arch_specific = 90})
    .variant_where(plain_d128)
    .stateful<Dispatched<Pingpong192, A64, A64Causal>>(bench::Role::optimized, "wgmma_pingpong_192",
                                                       {.arch_specific = 90})
    .variant_where(d64)
    // A step: rung 5 with every consumer masking the block's two diagonal tiles (README: "d64
    // causal beside non-causal").
    .stateful<Dispatched<Pingpong192BlockMask, A64Causal>>(bench::Role::step,
                                                           "wgmma_pingpong_192_block_mask",
                                                           {.arch_specific = 90})
    .variant_where(d64_causal)
    // A step: the rung wgmma_chained_diagonal builds on (README: "The ladder").
    .stateful<Dispatched<Chained, A128Causal>>(bench::Role::step, "wgmma_chained",
                                               {.arch_specific = 90})
    .variant_where(causal_d128)
    .stateful<Dispatched<ChainedDiagonal, A128Causal>>(bench::Role::optimized,
                                                       "wgmma_chained_diagonal",
                                                       {.arch_specific = 90})
    .variant_where(causal_d128)
    .stateful<OnEveryShape<Overlap>>(bench::Role::step, "wgmma_overlap", {.arch_specific = 90})
    .stateful<OnEveryShape<OverlapEarlyTurn>>(bench::Role::step, "wgmma_overlap_early_turn",
                                              {.arch_specific = 90})
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(5e-3))
    .mode(bench::Mode::sustained);

}  // namespace

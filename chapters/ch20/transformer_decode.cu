// ch20/transformer_decode: the end-to-end case. One Llama-3-8B-shaped decoder layer's decode step
// (hidden 4096, 32 query heads over 8 KV heads of 128, SwiGLU MLP 14336, RMSNorm, RoPE, a KV cache
// of 4096 tokens per sequence plus the new one; ch20/decoder_layer.cuh has the layer), from plain
// kernels to a step that streams its bytes near the memory limit. Each rung is a variant, so the
// report shows what each change bought.
//
// At batch 1 the step must read 436 MB of weights and 17 MB of cache (453 MB, the cost model) and
// computes almost nothing on them: a matrix-vector product per weight. The read ceiling is the
// target, and every rung removes something that keeps the step from it:
//   1. baseline "fp32_unfused_synced": one plain kernel per op (16 of them), FP32 activations and
//      sums, and the host waiting on the stream after each (a debugging loop's shape); the
//      GEMMs are a warp per output, attention is scores, softmax and values as three kernels.
//   2. step "bf16_cublaslt": BF16 activations, the five GEMMs through cuBLASLt (the fastest of its
//      heuristic's candidates per shape, picked untimed), no host syncs: the GPU runs the queue.
//   3. step "flash_attention": attention as ch18's split-KV flash decoding
//      (kernels/decode_attention.cuh) over the cache, a CTA per (head, chunk of keys), GQA through
//      the cache policy: query head h reads KV head h / 4, the same rows its 3 siblings read, so
//      HBM serves them once and L2 the rest. The append (and q packed the way the kernel reads
//      it) is one kernel right before it; the new key is folded in by the split merge.
//   4. step "fused_ops": RoPE in the append kernel (no separate pass over qkv), residual add +
//      RMSNorm as one kernel, gate and up as one GEMM of 2 x 14336 rows, SwiGLU as one kernel:
//      11 launches instead of 15.
//   5. step "cuda_graph": rung 4 captured once (untimed) and replayed as one graph launch: no
//      host submission between the kernels, only the graph's node-to-node gap.
//   6. step "streaming_gemv": the projections as our own weight-streaming GEMVs
//      (kernels/streaming_gemv.cuh: 16-byte loads, 256 bytes a lane in flight, the tokens'
//      activations in shared memory), each with the elementwise work around it in its prologue
//      (RMSNorm) or epilogue (RoPE and the append, the residual adds, SwiGLU): 6 kernels, graphed,
//      each launched programmatically (kernels/pdl.cuh), so it starts while the one ahead
//      drains and its first weight loads need not wait. Up to 8 tokens; past 8 (batch 16, 32)
//      this rung runs rung 4's step in a graph (cuBLASLt: beyond 8 tokens the FMAs would set the
//      time).
//   6b. step "streaming_mma": rung 6's step, its 6 kernels' hooks unchanged, with the products on
//      tensor cores (kernels/streaming_mma.cuh: the same 16-byte weight stream as the A operand of
//      mma.sync m16n8k16, 8 tokens an MMA, FP32 sums), 1 to 32 tokens. Each projection's
//      prologue runs as a kernel of its own ahead of the product, a block per token (the
//      activations go to a global buffer: 32 tokens x 14336 do not fit shared memory): 10
//      kernels, graphed, all launched programmatically. The lesson: at 8 tokens and more the FP32
//      GEMV's FMAs, not its bytes, set its time; MMAs take the arithmetic off the critical path.
//   5b. step "cuda_graph_kv_once": rung 5's graph with the attention as a CTA per (KV head, chunk)
//      serving the group's 4 query heads from one load of each K and V row (decode::attention<4>
//      without the draft mask, ch19's bf16_split_kv kernel), not a CTA per query head whose 4
//      siblings each load the rows (L2 serving 3 of the 4): a quarter of the L2-to-SM bytes and of
//      the rows widened, and the next step's rows in flight during the math. Same partials, same
//      merge with the new key. Rung 8 reports it as 5.5.
//   6c. step "streaming_mma_kv_once": rung 6b's graph with that attention (rung 8: 6.75).
//   5c. step "cuda_graph_attention_mma" and 6d. step "streaming_mma_attention_mma": rungs 5b and
//      6c with that attention's arithmetic on tensor cores (kernels/decode_attention_mma.cuh: the
//      group's 4 queries as rows of mma.sync m16n8k16, K and V through a cp.async ring in shared
//      memory), to take the FMA kernel's instructions off the attention's time where it is the
//      step's largest op (batch 8 up; that its issue sets its time there is an estimate from
//      instruction counts). Rung 8 reports them as 5.75 and 6.875.
//   7. step "megakernel": the same ops as rung 6 as phases of ONE persistent cooperative launch
//      (ch20/megakernel.cuh), grid barriers between them; each warp issues the next projection's
//      first weights between arriving at a barrier and waiting at it, so the weight stream does not
//      stop at an op boundary. Up to 8 tokens (batch 16 and 32: SKIPPED).
//   7b. step "megakernel_l2_ahead": rung 7 with W_o's rows past their first slab prefetched into
//      L2 during the attention phase, which leaves HBM nearly idle (ch20/megakernel.cuh's
//      L2-ahead form), as much as fits beside the cache: the o phase reads them from L2. Only
//      batch 1 and 2 leave the room (from batch 4: SKIPPED). Kept for what it teaches: it ran
//      slower than rung 7 (the README's "Rung 7b"), so rung 8 does not consider it.
//   7c. step "megakernel_attention_mma": rung 7 with the attention phase per (KV head, chunk), the
//      group's query heads from one read of each K and V row, on mma.sync with the fragments
//      loaded from global memory (ch20/group_attention_mma.cuh): rung 7's phase spent most of its
//      time issuing the 4 heads' FMAs, not waiting for the cache. Rung 8 reports it as 7.25.
//   7d. step "megakernel_merge_at_once": rung 7c with the group's heads merged by the whole
//      completing block, every split's partial loaded at once (ch20/megakernel.cuh's
//      merge_group_at_once): rung 7c's merge walks the splits one round trip to L2 after another.
//      Rung 8 reports it as 7.3.
//   7e. step "megakernel_narrow_down": rung 7d with the down projection in groups of 2 rows, 8
//      loads a row (ch20/megakernel.cuh's NarrowSlab): in groups of 4 half the grid's warps have
//      none of W_down's 1024 groups. Rung 8 reports it as 7.4.
//   7f. step "megakernel_chained": rung 7e launched programmatically after the step ahead (the
//      chained launch of ch20/megakernel.cuh): back to back, as a model's layers run, each step's
//      first weights go out while the step ahead drains, instead of after a launch gap. Rung 8
//      reports it as 7.5.
//   8. optimized "autotuned": no single rung of 5-7 is fastest at every batch (the README's
//      table), so this rung builds each of them that supports the batch (rung 5's graph, rung
//      6's where it is not rung 5's, rung 6b's, 5b's, 5c's, 6c's and 6d's, rungs 7, 7c, 7d, 7e and
//      7f up to 8 tokens) at setup, times them on the workload's own inputs and keeps the fastest
//      (ch20/fastest_plan.cuh): autotuning, as cuBLASLt's candidates are picked. A timed call is
//      one launch of the kept plan; the report's chosen_rung says which (6b as 6.5).
//
// Where the time goes: the graphed rungs (5, 5b, 5c, 6, 6b, 6c, 6d, and 8 when it keeps one) list
// their step as ops, and after the timed samples time each op on its own, uncaptured
// (ch20/op_breakdown.hpp): op_us_<op>, op_gbps_<op> for the weight and cache streams, and
// op_us_sum to hold against the row's time. Rung 7's ops are phases of one launch: its metrics
// are the phases' and the grid barriers' spans from stamped launches (phase_us_*, barrier_us_*).
//
// Verification: y and the appended K / V rows against an FP64 CPU layer at a small size of the
// same structure (batch 3, 8 / 2 heads, MLP 2744, 1000 cached keys). At the timing size the
// device reference is rung 1's kernels without the syncs: plain code that shares nothing with
// rungs 2-8 (cuBLASLt, flash decoding, the fused kernels, the GEMVs, the MMAs), itself checked
// against the CPU layer in every run. Tolerance: relative L2 1e-2. Each output passes through a few
// BF16 roundings (2^-9 relative each: qkv, the attention output, h, the MLP activations) on its
// way, ~3e-3 in all. Timed hot: a decode step follows the previous one back to back, and its 453 MB
// are 9x L2.
//
//   ./bench compare --chapter ch20 --example transformer_decode            # batch 1 and 8
//   ./bench compare --chapter ch20 --example transformer_decode --sweep    # and 2, 4, 16, 32
#include <kernels/cublaslt_gemm.hpp>
#include <kernels/cuda_graph.hpp>
#include <kernels/decode_attention.cuh>
#include <kernels/decode_attention_mma.cuh>
#include <kernels/occupancy.cuh>
#include <kernels/pdl.cuh>
#include <kernels/streaming_gemv.cuh>
#include <kernels/streaming_mma.cuh>
#include <memory>
#include <stdexcept>
#include <vector>

#include "decoder_layer.cuh"
#include "fastest_plan.cuh"
#include "layer_ops.cuh"
#include "megakernel.cuh"
#include "op_breakdown.hpp"

namespace {

using namespace ch20;

// ---- GEMMs: out [rows][n] = in [rows][k] · weight [n][k]ᵀ -------------------------------------
// Rung 1: the plain kernel.
struct PlainLinear {
  template <class A>
  void operator()(const A* in, const bf16* weight, A* out, int64_t rows, int64_t n, int64_t k,
                  cudaStream_t s) const {
    linear<A><<<unsigned((n + kWarps - 1) / kWarps), kThreads, 0, s>>>(in, weight, out, int(rows),
                                                                       int(n), int(k));
    BENCH_CHECK_LAUNCH();
  }
};

// Rungs 2-5: one cuBLASLt plan per (n, k) shape, made and tuned untimed. In the suite's TN layout
// (kernels/cublaslt_gemm.hpp) the weight is A (n x k, row-major), the activations B (k x rows).
class CublasltLinear {
 public:
  struct Shape {
    int64_t n, k;
  };
  CublasltLinear(int64_t rows, std::vector<Shape> shapes, cudaStream_t s) : rows_(rows) {
    for (const Shape& shape : shapes) {
      auto& plan = plans_.emplace_back(
          shape, std::make_unique<kernels::LtGemm>(shape.n, rows, shape.k, kernels::LtGemmTypes{}));
      bench::DeviceBuffer<bf16> d(shape.n * rows);
      plan.second->pick_fastest(d.data(), s);
    }
  }
  void operator()(const bf16* in, const bf16* weight, bf16* out, int64_t rows, int64_t n, int64_t k,
                  cudaStream_t s) const {
    for (const auto& [shape, gemm] : plans_)
      if (shape.n == n && shape.k == k && rows == rows_) return gemm->run(weight, in, out, s);
    throw std::logic_error("CublasltLinear: no plan for this shape");
  }

 private:
  int64_t rows_;
  std::vector<std::pair<Shape, std::unique_ptr<kernels::LtGemm>>> plans_;
};

// ---- rungs 1 and 2: one kernel per op ----------------------------------------------------------
template <class A>
struct UnfusedActivations {
  bench::DeviceBuffer<A> xn, qkv, attn, o, h, hn, gate, up, down;
  bench::DeviceBuffer<float> probs;
  UnfusedActivations(const DecoderLayer& w, cudaStream_t s)
      : xn(w.batch * w.hidden),
        qkv(w.batch * w.qkv_dim),
        attn(w.batch * w.hidden),
        o(w.batch * w.hidden),
        h(w.batch * w.hidden),
        hn(w.batch * w.hidden),
        gate(w.batch * w.ffn),
        up(w.batch * w.ffn),
        down(w.batch * w.hidden),
        probs(w.batch * w.q_heads * (w.past + 1)) {
    // compute-sanitizer's initcheck does not see cuBLAS's BF16 stores on Hopper
    // (ch16/decode_graphs): zeroed once, untimed, on the step's stream, so every later read is of a
    // value some kernel wrote.
    for (bench::DeviceBuffer<A>* b : {&xn, &qkv, &attn, &o, &h, &hn, &gate, &up, &down})
      BENCH_CUDA_CHECK(cudaMemsetAsync(b->data(), 0, b->bytes(), s));
  }
};

// What the host does after each op of the unfused step: rung 1 waits for it, rung 2 does not.
struct HostWait {
  void operator()(cudaStream_t s) const { BENCH_CUDA_CHECK(cudaStreamSynchronize(s)); }
};
struct NoWait {
  void operator()(cudaStream_t) const {}
};

// The step, op by op; after_op(stream) runs after each launch.
template <class A, class Linear, class AfterOp>
void unfused_step(const DecoderLayer& w, const UnfusedActivations<A>& a, const Linear& linear_op,
                  AfterOp after_op, cudaStream_t s) {
  const int64_t rows = w.batch, hidden = w.hidden, pairs = w.batch * w.q_heads;
  auto op = [&](auto&& launch) {
    launch();
    BENCH_CHECK_LAUNCH();
    after_op(s);
  };
  op([&] {
    rmsnorm<<<unsigned(rows), kThreads, 0, s>>>(w.x.data(), w.norm1.data(), a.xn.data(),
                                                int(hidden));
  });
  op([&] { linear_op(a.xn.data(), w.w_qkv.data(), a.qkv.data(), rows, w.qkv_dim, hidden, s); });
  op([&] {
    rope_in_place<<<unsigned(rows), kThreads, 0, s>>>(a.qkv.data(), int(w.q_heads + w.kv_heads),
                                                      w.qkv_dim, w.past);
  });
  op([&] {
    append_kv<<<unsigned(rows), kThreads, 0, s>>>(a.qkv.data(), w.k_new.data(), w.v_new.data(),
                                                  int(w.q_heads), int(w.kv_heads), w.qkv_dim);
  });
  op([&] {
    const dim3 grid(unsigned((w.past + 1 + kWarps - 1) / kWarps), unsigned(pairs));
    attention_scores<<<grid, kThreads, 0, s>>>(a.qkv.data(), w.k_cache.data(), w.k_new.data(),
                                               a.probs.data(), int(w.q_heads), int(w.group),
                                               w.qkv_dim, w.past);
  });
  op([&] { softmax_rows<<<unsigned(pairs), kThreads, 0, s>>>(a.probs.data(), w.past + 1); });
  op([&] {
    attention_values<<<unsigned(pairs), kHeadDim, 0, s>>>(
        a.probs.data(), w.v_cache.data(), w.v_new.data(), a.attn.data(), int(w.group), w.past);
  });
  op([&] { linear_op(a.attn.data(), w.w_o.data(), a.o.data(), rows, hidden, hidden, s); });
  op([&] {
    add<<<blocks_for(rows * hidden), kThreads, 0, s>>>(w.x.data(), a.o.data(), a.h.data(),
                                                       rows * hidden);
  });
  op([&] {
    rmsnorm<<<unsigned(rows), kThreads, 0, s>>>(a.h.data(), w.norm2.data(), a.hn.data(),
                                                int(hidden));
  });
  op([&] { linear_op(a.hn.data(), w.w_gate_up.data(), a.gate.data(), rows, w.ffn, hidden, s); });
  op([&] {
    linear_op(a.hn.data(), w.w_gate_up.data() + w.ffn * hidden, a.up.data(), rows, w.ffn, hidden,
              s);
  });
  op([&] {
    silu_in_place<<<blocks_for(rows * w.ffn), kThreads, 0, s>>>(a.gate.data(), rows * w.ffn);
  });
  op([&] {
    multiply<<<blocks_for(rows * w.ffn), kThreads, 0, s>>>(a.gate.data(), a.up.data(),
                                                           a.gate.data(), rows * w.ffn);
  });
  op([&] { linear_op(a.gate.data(), w.w_down.data(), a.down.data(), rows, hidden, w.ffn, s); });
  op([&] {
    add<<<blocks_for(rows * hidden), kThreads, 0, s>>>(a.h.data(), a.down.data(), w.y.data(),
                                                       rows * hidden);
  });
}

struct Fp32UnfusedSynced {
  UnfusedActivations<float> act;
  Fp32UnfusedSynced(const DecoderLayer& w, cudaStream_t s) : act(w, s) {}
  void operator()(const DecoderLayer& w, cudaStream_t s) {
    unfused_step(w, act, PlainLinear{}, HostWait{}, s);
  }
};

std::vector<CublasltLinear::Shape> unfused_shapes(const DecoderLayer& w) {
  return {{w.qkv_dim, w.hidden}, {w.hidden, w.hidden}, {w.ffn, w.hidden}, {w.hidden, w.ffn}};
}

struct Bf16Cublaslt {
  UnfusedActivations<bf16> act;
  CublasltLinear linear_op;
  Bf16Cublaslt(const DecoderLayer& w, cudaStream_t s)
      : act(w, s), linear_op(w.batch, unfused_shapes(w), s) {}
  void operator()(const DecoderLayer& w, cudaStream_t s) {
    unfused_step(w, act, linear_op, NoWait{}, s);
  }
};

// ---- rung 3: flash decoding over the cache, the new key in the merge ---------------------------
// Packs q as [sequence][head][128] (the layout the attention kernel reads) and appends the new k
// and v rows; with kRope (rung 4) it applies RoPE to q and k on the way, so qkv is read once.
// A sequence's row is spread over pack_grid()'s blocks (blockIdx.y), one (head, pair) item a
// thread: one block a row left each thread ten dependent loads and stores in a row, and the
// kernel took as long at batch 1 as at 32 (latency, not bytes).
template <bool kRope>
__global__ void __launch_bounds__(kThreads)
    pack_q_append_kv(const bf16* qkv, bf16* q, bf16* k_new, bf16* v_new, int q_heads, int kv_heads,
                     int64_t qkv_dim, int64_t pos) {
  const bf16* row = qkv + blockIdx.x * qkv_dim;
  constexpr int kHalf = kHeadDim / 2;
  // A thread keeps its dimension pair i = threadIdx.x % 64 across the heads it visits (the stride
  // is a multiple of 64), so its cos and sin (a powf and a sincosf) are computed once, not per
  // head.
  static_assert(kThreads % kHalf == 0, "a thread's pair i must not change across its heads");
  float c = 1.0f, s = 0.0f;
  if constexpr (kRope) rope_cos_sin(pos, int(threadIdx.x) % kHalf, c, s);
  const int first = int(blockIdx.y) * kThreads + int(threadIdx.x),
            stride = kThreads * int(gridDim.y);
  for (int t = first; t < (q_heads + kv_heads) * kHalf; t += stride) {
    const int head = t / kHalf, i = t % kHalf;
    const bf16* in = row + head * kHeadDim + i;
    bf16* out = head < q_heads
                    ? q + (int64_t{blockIdx.x} * q_heads + head) * kHeadDim + i
                    : k_new + (int64_t{blockIdx.x} * kv_heads + head - q_heads) * kHeadDim + i;
    if constexpr (kRope) {
      const float x1 = __bfloat162float(in[0]), x2 = __bfloat162float(in[kHalf]);
      out[0] = __float2bfloat16(x1 * c - x2 * s);
      out[kHalf] = __float2bfloat16(x2 * c + x1 * s);
    } else {
      out[0] = in[0], out[kHalf] = in[kHalf];
    }
  }
  const bf16* v = row + (q_heads + kv_heads) * kHeadDim;
  for (int t = first; t < kv_heads * kHeadDim; t += stride)
    v_new[int64_t{blockIdx.x} * kv_heads * kHeadDim + t] = v[t];
}
// pack_q_append_kv's grid: a block a sequence and slice, each thread one item.
inline dim3 pack_grid(const DecoderLayer& w) {
  const int64_t items = (w.q_heads + w.kv_heads) * (kHeadDim / 2);
  return {unsigned(w.batch), unsigned((items + kThreads - 1) / kThreads)};
}

// The split merge with the new key: pair bh's partials (m, l, o) over the cached keys, then the
// appended key as one more part (m = its score, l = 1, o = its v row). One CTA per bh, a thread
// per dimension; scores in log2 units, as the attention kernel keeps them
// (kernels/online_softmax.cuh). Rung 6 launches it programmatically (kernels/pdl.cuh): it is
// resident when the attention ends, and the o projection behind it may start once every CTA is
// past the wait (the projection reads attn after its own).
__global__ void __launch_bounds__(kHeadDim)
    merge_with_new_key(decode::Args a, const bf16* k_new, const bf16* v_new, bf16* attn,
                       int64_t group) {
  const int64_t bh = blockIdx.x, kv_row = (bh / group) * kHeadDim;
  const int d = threadIdx.x;
  kernels::pdl::wait_for_prerequisite();
  kernels::pdl::allow_dependents();
  const float q_k = __bfloat162float(a.q[bh * kHeadDim + d]) * __bfloat162float(k_new[kv_row + d]);
  const float score = kernels::group_reduce<kHeadDim>(q_k, kernels::Sum{}) *
                      (kernels::kLog2e * rsqrtf(float(kHeadDim)));
  float m = kernels::kEmptyMax, l = 0, o[1] = {0};
  for (int split = 0; split < a.splits; ++split) {
    const int64_t slot = bh * a.splits + split;
    const float o_split[1] = {a.part_o[slot * kHeadDim + d]};
    kernels::merge_softmax_parts(m, l, o, a.part_ml[2 * slot], a.part_ml[2 * slot + 1], o_split);
  }
  const float o_new[1] = {__bfloat162float(v_new[kv_row + d])};
  kernels::merge_softmax_parts(m, l, o, score, 1.0f, o_new);
  attn[bh * kHeadDim + d] = __float2bfloat16(o[0] / l);
}

// How the attention reads the cache. per_query_head (rungs 3-6b, as recorded): a CTA per (query
// head, chunk), decode::attention<1>, so the 4 query heads of a KV head each load its K and V rows
// and L2 serves 3 of the 4 reads. per_kv_head (rungs 5b and 6c): a CTA per (KV head, chunk) that
// serves all 4 of its query heads from one load of each row, decode::attention<4> without the
// draft mask (ch19's bf16_split_kv kernel): the README's "Batch 32" section has the arithmetic.
// per_kv_head_mma (rungs 5c and 6d): the same CTA per (KV head, chunk) and the same partials, its
// arithmetic on tensor cores (kernels/decode_attention_mma.cuh).
enum class KvRead { per_query_head, per_kv_head, per_kv_head_mma };

// Activations of rungs 3-6 (BF16), and the attention's split partials.
struct FusedActivations {
  static constexpr int kQueryHeadsPerKv = 4;    // per_kv_head's kernel serves exactly this group
  using PerKvHeadCache = decode::ContiguousKv;  // pair = (sequence, KV head): rows of k_cache
  bench::DeviceBuffer<bf16> xn, qkv, q, attn, o, h, hn, gate_up, act, down;
  bench::DeviceBuffer<float> part_ml, part_o;
  KvRead kv_read;
  int splits;
  int64_t chunk;
  // Splits per pair as ch18's split_kv picks them: one full wave of CTAs (SMs x resident CTAs per
  // SM / pairs), chunks of at least 256 keys; and at least 2 for the FMA kernels, so that they
  // always write partials and the merge can add the new key. The MMA kernel may take 1 (batch 32
  // on the H100 and the H200: 256 KV pairs against a wave of 264 CTAs): it then folds the new key
  // in itself and no merge runs. A pair is a query head per_query_head, a KV head otherwise (a
  // quarter as many pairs, and fewer resident CTAs an SM: the FMA kernel's registers, the MMA
  // kernel's shared-memory ring).
  static int64_t least_splits(KvRead kv_read) { return kv_read == KvRead::per_kv_head_mma ? 1 : 2; }
  static int64_t splits_wanted(const DecoderLayer& w, KvRead kv_read) {
    const bool per_kv = kv_read != KvRead::per_query_head;
    void (*const fma_per_kv)(decode::Args, PerKvHeadCache) =
        decode::attention<kQueryHeadsPerKv, PerKvHeadCache, false>;
    const int per_sm =
        kv_read == KvRead::per_kv_head_mma ? decode::mma::blocks_per_sm()
        : per_kv                           ? kernels::blocks_per_sm(fma_per_kv, decode::kThreads)
                 : kernels::blocks_per_sm(decode::attention<1, GqaCache>, decode::kThreads);
    const int64_t wave = int64_t{kernels::sm_count()} * per_sm,
                  pairs = w.batch * (per_kv ? w.kv_heads : w.q_heads),
                  least = least_splits(kv_read);
    return std::clamp<int64_t>(wave / pairs, least, std::max<int64_t>(least, w.past / 256));
  }
  FusedActivations(const DecoderLayer& w, cudaStream_t s, KvRead kv_read_ = KvRead::per_query_head)
      : xn(w.batch * w.hidden),
        qkv(w.batch * w.qkv_dim),
        q(w.batch * w.hidden),
        attn(w.batch * w.hidden),
        o(w.batch * w.hidden),
        h(w.batch * w.hidden),
        hn(w.batch * w.hidden),
        gate_up(w.batch * 2 * w.ffn),
        act(w.batch * w.ffn),
        down(w.batch * w.hidden),
        kv_read(kv_read_),
        chunk(chunk_for(w, kv_read_)) {
    if (kv_read != KvRead::per_query_head && w.group != kQueryHeadsPerKv)
      throw bench::Unsupported("the per-KV-head attention serves groups of 4 query heads");
    splits = int((w.past + chunk - 1) /
                 chunk);  // rounding the chunk up can leave fewer, never an empty one
    if (splits < least_splits(kv_read))
      throw std::invalid_argument("transformer_decode: the cache is too short for two splits");
    // The partials, [query head pair][split] either way: per_kv_head's CTA writes query qi of KV
    // pair p to slot ((p x 4 + qi) x splits + split), and p x 4 + qi is the query pair
    // (sequence x q_heads + head), since query head h reads KV head h / 4.
    part_ml = bench::DeviceBuffer<float>(w.batch * w.q_heads * splits * 2);
    part_o = bench::DeviceBuffer<float>(w.batch * w.q_heads * splits * kHeadDim);
    for (bench::DeviceBuffer<bf16>* b :
         {&xn, &qkv, &q, &attn, &o, &h, &hn, &gate_up, &act, &down})  // initcheck: above
      BENCH_CUDA_CHECK(cudaMemsetAsync(b->data(), 0, b->bytes(), s));
  }
  // Keys per split: whole steps of the kernel that reads them (a CTA step of the FMA kernels, a
  // 64-key stage of the MMA one).
  static int64_t chunk_for(const DecoderLayer& w, KvRead kv_read) {
    const int64_t splits = splits_wanted(w, kv_read);
    if (kv_read == KvRead::per_kv_head_mma)
      return decode::chunk_of_steps(w.past, splits, decode::mma::kKeysPerStep);
    return decode::chunk_for(w.past, int(splits),
                             kv_read == KvRead::per_kv_head ? kQueryHeadsPerKv : 1);
  }
  // Flash decoding over the cache into the partials, then the merge with the new key; on rung 6
  // both launched programmatically (kernels/pdl.cuh: each waits for the kernel ahead inside).
  // per_kv_head reads q, packed [sequence][head][128], as [KV pair][4][128]: the same bytes. With
  // one split (per_kv_head_mma only) the kernel writes attn itself, the new key folded in.
  void attention(const DecoderLayer& w, cudaStream_t s, bool programmatic = false) const {
    const int64_t pairs = w.batch * w.q_heads;
    if (kv_read != KvRead::per_query_head) {
      const bool one_split = splits == 1;
      const decode::Args args{q.data(),
                              one_split ? attn.data() : nullptr,
                              part_ml.data(),
                              part_o.data(),
                              kQueryHeadsPerKv,
                              0,
                              chunk,
                              splits};
      const PerKvHeadCache cache{w.k_cache.data(), w.v_cache.data(), w.past};
      if (kv_read == KvRead::per_kv_head)
        return attention_and_merge(decode::attention<kQueryHeadsPerKv, PerKvHeadCache, false>,
                                   dim3{unsigned(splits), unsigned(w.batch * w.kv_heads)}, args,
                                   cache, pairs, w, s, programmatic);
      const decode::mma::NewKey fresh =
          one_split ? decode::mma::NewKey{w.k_new.data(), w.v_new.data()} : decode::mma::NewKey{};
      decode::mma::launch(args, cache, w.batch * w.kv_heads, s, programmatic, /*by_tma=*/true,
                          fresh);
      if (!one_split) merge(args, pairs, w, s, programmatic);
      return;
    }
    const decode::Args args{q.data(), nullptr, part_ml.data(), part_o.data(), 1, 0, chunk, splits};
    const GqaCache cache{w.k_cache.data(), w.v_cache.data(), w.past, w.group};
    attention_and_merge(decode::attention<1, GqaCache>, dim3{unsigned(splits), unsigned(pairs)},
                        args, cache, pairs, w, s, programmatic);
  }

 private:
  template <class Kv>
  void attention_and_merge(void (*kernel)(decode::Args, Kv), dim3 grid, const decode::Args& args,
                           const Kv& cache, int64_t pairs, const DecoderLayer& w, cudaStream_t s,
                           bool programmatic) const {
    if (programmatic) {
      kernels::pdl::launch(kernel, grid, dim3(decode::kThreads), 0, s, args, cache);
    } else {
      kernel<<<grid, decode::kThreads, 0, s>>>(args, cache);
      BENCH_CHECK_LAUNCH();
    }
    merge(args, pairs, w, s, programmatic);
  }
  void merge(const decode::Args& args, int64_t pairs, const DecoderLayer& w, cudaStream_t s,
             bool programmatic) const {
    if (programmatic) {
      kernels::pdl::launch(merge_with_new_key, dim3(unsigned(pairs)), dim3(kHeadDim), 0, s, args,
                           w.k_new.data(), w.v_new.data(), attn.data(), w.group);
      return;
    }
    merge_with_new_key<<<unsigned(pairs), kHeadDim, 0, s>>>(args, w.k_new.data(), w.v_new.data(),
                                                            attn.data(), w.group);
    BENCH_CHECK_LAUNCH();
  }
};

struct FlashAttention {
  FusedActivations a;
  CublasltLinear linear_op;
  FlashAttention(const DecoderLayer& w, cudaStream_t s)
      : a(w, s), linear_op(w.batch, unfused_shapes(w), s) {}
  void operator()(const DecoderLayer& w, cudaStream_t s) {
    const int64_t rows = w.batch, hidden = w.hidden, n = rows * hidden;
    rmsnorm<<<unsigned(rows), kThreads, 0, s>>>(w.x.data(), w.norm1.data(), a.xn.data(),
                                                int(hidden));
    BENCH_CHECK_LAUNCH();
    linear_op(a.xn.data(), w.w_qkv.data(), a.qkv.data(), rows, w.qkv_dim, hidden, s);
    rope_in_place<<<unsigned(rows), kThreads, 0, s>>>(a.qkv.data(), int(w.q_heads + w.kv_heads),
                                                      w.qkv_dim, w.past);
    BENCH_CHECK_LAUNCH();
    pack_q_append_kv<false>
        <<<pack_grid(w), kThreads, 0, s>>>(a.qkv.data(), a.q.data(), w.k_new.data(), w.v_new.data(),
                                           int(w.q_heads), int(w.kv_heads), w.qkv_dim, w.past);
    BENCH_CHECK_LAUNCH();
    a.attention(w, s);
    linear_op(a.attn.data(), w.w_o.data(), a.o.data(), rows, hidden, hidden, s);
    add<<<blocks_for(n), kThreads, 0, s>>>(w.x.data(), a.o.data(), a.h.data(), n);
    BENCH_CHECK_LAUNCH();
    rmsnorm<<<unsigned(rows), kThreads, 0, s>>>(a.h.data(), w.norm2.data(), a.hn.data(),
                                                int(hidden));
    BENCH_CHECK_LAUNCH();
    bf16* gate = a.gate_up.data();
    bf16* up = gate + rows * w.ffn;
    linear_op(a.hn.data(), w.w_gate_up.data(), gate, rows, w.ffn, hidden, s);
    linear_op(a.hn.data(), w.w_gate_up.data() + w.ffn * hidden, up, rows, w.ffn, hidden, s);
    silu_in_place<<<blocks_for(rows * w.ffn), kThreads, 0, s>>>(gate, rows * w.ffn);
    BENCH_CHECK_LAUNCH();
    multiply<<<blocks_for(rows * w.ffn), kThreads, 0, s>>>(gate, up, a.act.data(), rows * w.ffn);
    BENCH_CHECK_LAUNCH();
    linear_op(a.act.data(), w.w_down.data(), a.down.data(), rows, hidden, w.ffn, s);
    add<<<blocks_for(n), kThreads, 0, s>>>(a.h.data(), a.down.data(), w.y.data(), n);
    BENCH_CHECK_LAUNCH();
  }
};

// ---- rung 4: fused elementwise ops -------------------------------------------------------------
// Rung 4's elementwise kernels move 16 bytes (8 BF16) an access (kernels/bf16_pack.cuh), so a
// thread of a row's block has 2 loads of a 4096-wide row to wait for, not 16 one after another:
// each op is a few KB a row, and its time is that chain of latencies plus its launch (the scalar
// forms, which rungs 1-3 keep, take longer: ch20's README, 'Kernel timelines', has the
// elementwise kernels' times of rungs 3 and 4). Rows are whole 16-byte vectors: hidden and the MLP
// width multiples of 8 (FusedOps checks).

// xn = rmsnorm(x) · gain, one block per row (layer_ops.cuh's row form, which rung 6's prologues
// use).
static_assert(kThreads == gemv::kThreads, "fill_rmsnorm_row strides by the GEMV block's threads");
__global__ void __launch_bounds__(kThreads)
    rmsnorm_rows(const bf16* in, const bf16* gain, bf16* out, int64_t hidden) {
  fill_rmsnorm_row(in, gain, out + int64_t{blockIdx.x} * hidden, int(blockIdx.x), hidden);
}

// v = a + b, 8 BF16 values each, summed in FP32: the residual adds of rung 4.
__device__ __forceinline__ void sum_bf16x8(uint4 a, uint4 b, float (&v)[kernels::kBf16PerVector]) {
  float w[kernels::kBf16PerVector];
  kernels::unpack_bf16x8(a, v);
  kernels::unpack_bf16x8(b, w);
#pragma unroll
  for (int e = 0; e < kernels::kBf16PerVector; ++e) v[e] += w[e];
}

// h = a + b and hn = rmsnorm(h) · gain in one kernel, one block per row: the second loop re-reads
// a and b (cache hits: 8 KB a row) instead of a second kernel reading h back. hn comes from the
// FP32 sum, as from h before it was rounded.
__global__ void __launch_bounds__(kThreads)
    add_rmsnorm(const bf16* a, const bf16* b, const bf16* gain, bf16* h, bf16* hn, int64_t hidden) {
  const int64_t row = int64_t{blockIdx.x} * hidden / kernels::kBf16PerVector,
                vectors = hidden / kernels::kBf16PerVector;
  const auto *a8 = reinterpret_cast<const uint4*>(a) + row,
             *b8 = reinterpret_cast<const uint4*>(b) + row,
             *gain8 = reinterpret_cast<const uint4*>(gain);
  float sq = 0;
  for (int64_t i = threadIdx.x; i < vectors; i += kThreads) {
    float v[kernels::kBf16PerVector];
    sum_bf16x8(a8[i], b8[i], v);
    reinterpret_cast<uint4*>(h)[row + i] = kernels::pack_bf16x8(v);
#pragma unroll
    for (int e = 0; e < kernels::kBf16PerVector; ++e) sq += v[e] * v[e];
  }
  const float inv_rms =
      rsqrtf(kernels::group_reduce<kThreads>(sq, kernels::Sum{}) / float(hidden) + kEps);
  for (int64_t i = threadIdx.x; i < vectors; i += kThreads) {  // re-reads only its own vectors
    float v[kernels::kBf16PerVector], g[kernels::kBf16PerVector];
    sum_bf16x8(a8[i], b8[i], v);
    kernels::unpack_bf16x8(gain8[i], g);
#pragma unroll
    for (int e = 0; e < kernels::kBf16PerVector; ++e) v[e] *= inv_rms * g[e];
    reinterpret_cast<uint4*>(hn)[row + i] = kernels::pack_bf16x8(v);
  }
}

// act [r][c] = silu(gate_up [r][c]) · gate_up [r][ffn + c]: the gate/up GEMM's output read once,
// 8 columns a thread.
__global__ void swiglu(const bf16* gate_up, bf16* act, int64_t rows, int64_t ffn) {
  const int64_t per_row = ffn / kernels::kBf16PerVector;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * per_row;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = i / per_row, c = i % per_row;
    const auto* row = reinterpret_cast<const uint4*>(gate_up + r * 2 * ffn);
    float g[kernels::kBf16PerVector], u[kernels::kBf16PerVector];
    kernels::unpack_bf16x8(row[c], g);
    kernels::unpack_bf16x8(row[per_row + c], u);
#pragma unroll
    for (int e = 0; e < kernels::kBf16PerVector; ++e) g[e] = silu(g[e]) * u[e];
    reinterpret_cast<uint4*>(act)[i] = kernels::pack_bf16x8(g);
  }
}

// sum = a + b over n BF16 values (n a multiple of 8), 8 a thread: the last residual add.
__global__ void add_bf16x8(const bf16* a, const bf16* b, bf16* sum, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n / kernels::kBf16PerVector;
       i += int64_t{gridDim.x} * blockDim.x) {
    float x[kernels::kBf16PerVector];
    sum_bf16x8(reinterpret_cast<const uint4*>(a)[i], reinterpret_cast<const uint4*>(b)[i], x);
    reinterpret_cast<uint4*>(sum)[i] = kernels::pack_bf16x8(x);
  }
}

struct FusedOps {
  FusedActivations a;
  CublasltLinear linear_op;
  FusedOps(const DecoderLayer& w, cudaStream_t s, KvRead kv_read = KvRead::per_query_head)
      : a(w, s, kv_read),
        linear_op(
            w.batch,
            {{w.qkv_dim, w.hidden}, {w.hidden, w.hidden}, {2 * w.ffn, w.hidden}, {w.hidden, w.ffn}},
            s) {
    if (w.hidden % kernels::kBf16PerVector != 0 || w.ffn % kernels::kBf16PerVector != 0)
      throw std::invalid_argument("transformer_decode: rung 4's kernels need whole 16-byte rows");
  }
  // The step as its ops, in order, each with the bytes it streams (ch20/op_breakdown.hpp): a call
  // launches them; rung 5's metrics() times them one by one.
  template <class Op>
  void ops(const DecoderLayer& w, cudaStream_t s, Op&& op) const {
    const int64_t rows = w.batch, hidden = w.hidden, n = rows * hidden;
    op("norm1", 0, [&] {
      rmsnorm_rows<<<unsigned(rows), kThreads, 0, s>>>(w.x.data(), w.norm1.data(), a.xn.data(),
                                                       hidden);
      BENCH_CHECK_LAUNCH();
    });
    op("qkv", streamed_bytes(w.w_qkv),
       [&] { linear_op(a.xn.data(), w.w_qkv.data(), a.qkv.data(), rows, w.qkv_dim, hidden, s); });
    op("rope_append", 0, [&] {
      pack_q_append_kv<true><<<pack_grid(w), kThreads, 0, s>>>(
          a.qkv.data(), a.q.data(), w.k_new.data(), w.v_new.data(), int(w.q_heads), int(w.kv_heads),
          w.qkv_dim, w.past);
      BENCH_CHECK_LAUNCH();
    });
    op("attention", streamed_bytes(w.k_cache) + streamed_bytes(w.v_cache),
       [&] { a.attention(w, s); });
    op("o", streamed_bytes(w.w_o),
       [&] { linear_op(a.attn.data(), w.w_o.data(), a.o.data(), rows, hidden, hidden, s); });
    op("residual_norm2", 0, [&] {
      add_rmsnorm<<<unsigned(rows), kThreads, 0, s>>>(w.x.data(), a.o.data(), w.norm2.data(),
                                                      a.h.data(), a.hn.data(), hidden);
      BENCH_CHECK_LAUNCH();
    });
    op("gate_up", streamed_bytes(w.w_gate_up), [&] {
      linear_op(a.hn.data(), w.w_gate_up.data(), a.gate_up.data(), rows, 2 * w.ffn, hidden, s);
    });
    op("swiglu", 0, [&] {
      swiglu<<<blocks_for(rows * w.ffn / kernels::kBf16PerVector), kThreads, 0, s>>>(
          a.gate_up.data(), a.act.data(), rows, w.ffn);
      BENCH_CHECK_LAUNCH();
    });
    op("down", streamed_bytes(w.w_down),
       [&] { linear_op(a.act.data(), w.w_down.data(), a.down.data(), rows, hidden, w.ffn, s); });
    op("residual", 0, [&] {
      add_bf16x8<<<blocks_for(n / kernels::kBf16PerVector), kThreads, 0, s>>>(
          a.h.data(), a.down.data(), w.y.data(), n);
      BENCH_CHECK_LAUNCH();
    });
  }
  void operator()(const DecoderLayer& w, cudaStream_t s) const { ops(w, s, JustLaunch{}); }
};

// ---- rung 5: the step as one CUDA graph --------------------------------------------------------
// A step's launches recorded once from a private stream (untimed), instantiated and uploaded; a
// step is one cudaGraphLaunch. The buffers are the workload's, the same every sample. Rung 5
// graphs rung 4's step, rung 6 its own. After the timed samples, metrics() times the graph's
// launches op by op, uncaptured, on a stream of its own (ch20/op_breakdown.hpp): their sum beside
// the row's time is what the graph changes.
template <class Step>
struct Graphed {
  Step step;
  kernels::GraphExec exec;
  const DecoderLayer& layer;
  Graphed(const DecoderLayer& w, cudaStream_t s) : step(w, s), layer(w) {
    kernels::OwnedStream capture_stream;
    const kernels::Graph graph =
        kernels::capture(capture_stream.get(), [&](cudaStream_t cs) { step(w, cs); });
    exec.instantiate(graph.get());
    exec.upload(s);
  }
  void operator()(const DecoderLayer&, cudaStream_t s) const { exec.launch(s); }
  std::vector<bench::Metric> metrics() const {
    const kernels::OwnedStream breakdown_stream;
    return time_ops(step, layer, breakdown_stream.get());
  }
};

// ---- rung 6: the projections as weight-streaming GEMVs, chained by programmatic launches --------
// kernels/streaming_gemv.cuh streams each weight matrix with 16-byte loads, a warp per 4 rows, the
// tokens' activations in shared memory; what rung 4 ran as kernels of their own moves into its
// prologues and epilogues. The step is 6 kernels:
//   qkv GEMV      prologue rmsnorm(x) · norm1; epilogue RoPE, q packed, k and v appended
//   attention     flash decoding over the cache, then the merge with the new key (as rungs 3-5)
//   o GEMV        prologue the attention output; epilogue h = x + o
//   gate/up GEMV  prologue rmsnorm(h) · norm2; epilogue SwiGLU (a group holds 2 gate rows and
//                 their 2 up rows)
//   down GEMV     prologue the SwiGLU output; epilogue y = h + down
// Each GEMV is a programmatic launch (kernels/pdl.cuh): it starts while the kernel ahead drains,
// its first weight loads go out at once, and only its prologue waits. Beyond 8 tokens the FMAs,
// not the bytes, would set the GEMVs' time: there the step is rung 4's, cuBLASLt (README).
template <template <class> class Gemv>
struct GemvProjections {
  FusedActivations a;
  Gemv<QkvRopeAppend> qkv;
  Gemv<ResidualProjection<>> o, down;
  Gemv<GateUpSwiglu> gate_up;
  GemvProjections(const DecoderLayer& w, cudaStream_t s, KvRead kv_read = KvRead::per_query_head)
      : a(w, s, kv_read),
        qkv(int(w.batch), w.qkv_dim / gemv::kRowsPerWarp, w.hidden),
        o(int(w.batch), w.hidden / gemv::kRowsPerWarp, w.hidden),
        down(int(w.batch), w.hidden / gemv::kRowsPerWarp, w.ffn),
        gate_up(int(w.batch), w.ffn / 2, w.hidden) {
    if (w.ffn % 2 != 0) throw std::invalid_argument("transformer_decode: an odd MLP width");
  }
  // The step as its ops (as rung 4's): a projection is its product with the prologue and
  // epilogue around it, a kernel on rung 6, a fill kernel and the product on rung 6b.
  template <class Op>
  void ops(const DecoderLayer& w, cudaStream_t s, Op&& op) const {
    op("qkv", streamed_bytes(w.w_qkv), [&] {
      qkv(w.w_qkv.data(),
          {w.x.data(), w.norm1.data(), a.q.data(), w.k_new.data(), w.v_new.data(), int(w.q_heads),
           int(w.kv_heads), w.past},
          s);
    });
    op("attention", streamed_bytes(w.k_cache) + streamed_bytes(w.v_cache),
       [&] { a.attention(w, s, /*programmatic=*/true); });
    op("o", streamed_bytes(w.w_o), [&] {
      o(w.w_o.data(), {a.attn.data(), w.x.data(), a.h.data(), w.hidden}, s);
    });
    op("gate_up", streamed_bytes(w.w_gate_up), [&] {
      gate_up(w.w_gate_up.data(), {a.h.data(), w.norm2.data(), a.act.data(), w.ffn}, s);
    });
    op("down", streamed_bytes(w.w_down), [&] {
      down(w.w_down.data(), {a.act.data(), a.h.data(), w.y.data(), w.hidden}, s);
    });
  }
  void operator()(const DecoderLayer& w, cudaStream_t s) const { ops(w, s, JustLaunch{}); }
};

// Up to 8 tokens the GEMVs; beyond, rung 4's step (cuBLASLt's tensor-core GEMMs).
struct GemvStep {
  std::unique_ptr<GemvProjections<gemv::StreamingGemv>> narrow;
  std::unique_ptr<FusedOps> wide;
  GemvStep(const DecoderLayer& w, cudaStream_t s) {
    if (w.batch <= gemv::kMaxTokens)
      narrow = std::make_unique<GemvProjections<gemv::StreamingGemv>>(w, s);
    else
      wide = std::make_unique<FusedOps>(w, s);
  }
  template <class Op>
  void ops(const DecoderLayer& w, cudaStream_t s, Op&& op) const {
    if (narrow) return narrow->ops(w, s, op);
    wide->ops(w, s, op);
  }
  void operator()(const DecoderLayer& w, cudaStream_t s) const { ops(w, s, JustLaunch{}); }
};

// ---- rung 6b: rung 6's projections on tensor cores, at every batch --------------------------
// The same Op hooks and the same step as rung 6; each projection is a fill kernel (the prologue)
// and the MMA product with the epilogue, so 4 + 2 + 4 = 10 programmatic launches in the graph.
using MmaProjections = GemvProjections<gemv::StreamingMma>;

// ---- rungs 5b and 6c: rungs 5 and 6b with the attention reading each KV head once -------------
// The same step, op for op, but the attention is a CTA per (KV head, chunk) serving the group's 4
// query heads from one load of each K and V row (KvRead::per_kv_head): a quarter of the L2-to-SM
// traffic and of the rows widened, 2 CTAs an SM with the next step's loads in flight. Same
// partials, same merge with the new key. The README's "Batch 32" section: why, and what to read.
struct FusedOpsKvOnce : FusedOps {
  FusedOpsKvOnce(const DecoderLayer& w, cudaStream_t s) : FusedOps(w, s, KvRead::per_kv_head) {}
};
struct MmaProjectionsKvOnce : MmaProjections {
  MmaProjectionsKvOnce(const DecoderLayer& w, cudaStream_t s)
      : MmaProjections(w, s, KvRead::per_kv_head) {}
};

// ---- rungs 5c and 6d: rungs 5b and 6c with the attention's arithmetic on tensor cores ---------
// The same CTA per (KV head, chunk), the same bytes and partials; its 4 queries are rows of an
// mma.sync m16n8k16 (kernels/decode_attention_mma.cuh) instead of ~20 FP32 instructions, 4
// shuffles and an exponential a lane per (query, key): at batch 32 the FMA kernel is the step's
// largest op and reads the cache well under the ceiling (README, "Batch 32").
struct FusedOpsKvMma : FusedOps {
  FusedOpsKvMma(const DecoderLayer& w, cudaStream_t s) : FusedOps(w, s, KvRead::per_kv_head_mma) {}
};
struct MmaProjectionsKvMma : MmaProjections {
  MmaProjectionsKvMma(const DecoderLayer& w, cudaStream_t s)
      : MmaProjections(w, s, KvRead::per_kv_head_mma) {}
};

// ---- rung 7: the whole step as one persistent launch (ch20/megakernel.cuh) -------------------
// The same ops as rung 6 as phases of one cooperative grid, one or two blocks an SM, grid barriers
// between them; each warp's next weights go out while a barrier resolves. Up to 8 tokens, as rung
// 6 (batch 16 and 32: SKIPPED).
// Its ops are phases of one launch, so where the time goes is read from inside it: after the
// samples, metrics() runs stamped launches (ch20/megakernel.cuh's phase_times) on a stream of its
// own and reports each phase's and each barrier's span.
struct Megakernel {
  mega::DecoderMegakernel kernel;
  const DecoderLayer& layer;
  Megakernel(const DecoderLayer& w, cudaStream_t s, mega::L2Ahead ahead = mega::L2Ahead::none,
             mega::Attention attention = mega::Attention::per_head, bool narrow_down = false,
             mega::Launch launch = mega::Launch::cooperative)
      : kernel(w.dims(), s, ahead, attention, narrow_down, launch), layer(w) {}
  static mega::Io io(const DecoderLayer& w) {
    return {w.x.data(),       w.norm1.data(),     w.norm2.data(),  w.w_qkv.data(),
            w.w_o.data(),     w.w_gate_up.data(), w.w_down.data(), w.k_cache.data(),
            w.v_cache.data(), w.y.data(),         w.k_new.data(),  w.v_new.data()};
  }
  void operator()(const DecoderLayer& w, cudaStream_t s) const { kernel(io(w), s); }
  std::vector<bench::Metric> metrics() const {
    const kernels::OwnedStream stamped_stream;
    std::vector<bench::Metric> out;
    for (const auto& [name, value] : kernel.phase_times(io(layer), stamped_stream.get()))
      out.push_back({name, value});
    return out;
  }
};

// ---- rung 7b: rung 7 with the rest of W_o prefetched into L2 during the attention ----------
struct MegakernelL2Ahead : Megakernel {
  MegakernelL2Ahead(const DecoderLayer& w, cudaStream_t s)
      : Megakernel(w, s, mega::L2Ahead::o_rest) {}
  std::vector<bench::Metric> metrics() const {
    std::vector<bench::Metric> out = Megakernel::metrics();
    out.push_back({"o_l2_ahead_mb", double(kernel.o_rest_lines()) * 128 / 1e6});
    return out;
  }
};

// ---- rung 7c: rung 7 with the attention phase per KV head on tensor cores ------------------
// (ch20/group_attention_mma.cuh): a block per (KV head, chunk) serves the group's query heads from
// one read of each K and V row, mma.sync on fragments loaded from global memory.
struct MegakernelAttentionMma : Megakernel {
  MegakernelAttentionMma(const DecoderLayer& w, cudaStream_t s)
      : Megakernel(w, s, mega::L2Ahead::none, mega::Attention::group_mma) {}
};

// ---- rung 7d: rung 7c with the group merged by the whole block, every split's loads at once ----
struct MegakernelMergeAtOnce : Megakernel {
  MegakernelMergeAtOnce(const DecoderLayer& w, cudaStream_t s)
      : Megakernel(w, s, mega::L2Ahead::none, mega::Attention::group_mma_merge_at_once) {}
};

// ---- rung 7e: rung 7d with the down projection in groups of 2 rows (megakernel.cuh) -----------
struct MegakernelNarrowDown : Megakernel {
  MegakernelNarrowDown(const DecoderLayer& w, cudaStream_t s)
      : Megakernel(w, s, mega::L2Ahead::none, mega::Attention::group_mma_merge_at_once, true) {}
};

// ---- rung 7f: rung 7e launched programmatically after the step ahead (megakernel.cuh) ---------
struct MegakernelChained : Megakernel {
  MegakernelChained(const DecoderLayer& w, cudaStream_t s)
      : Megakernel(w, s, mega::L2Ahead::none, mega::Attention::group_mma_merge_at_once, true,
                   mega::Launch::chained) {}
};

// ---- rung 8: the fastest of rungs 5-7, 5b, 5c, 6c and 6d at this batch, picked at setup --------
// Every plan that supports the batch is built and timed on the step's own inputs
// (ch20/fastest_plan.cuh: best of 5 rounds of 10 back-to-back calls each, the candidates taking
// turns); the others are freed, and a timed call launches the kept one. Rung 6 is left out past 8
// tokens, where it is rung 5's step; rung 7 leaves itself out there (bench::Unsupported). At the
// verification size the inputs are filled only after a variant is prepared (w.fills is 0): there
// nothing is timed and rung 5's graph is kept; every candidate is verified as its own rung.
struct Autotuned {
  FastestPlan<DecoderLayer> plan;
  Autotuned(const DecoderLayer& w, cudaStream_t s) {
    plan.consider<Graphed<FusedOps>>("cuda_graph", 5, w, s);
    if (w.batch <= gemv::kMaxTokens)
      plan.consider<Graphed<GemvProjections<gemv::StreamingGemv>>>("streaming_gemv", 6, w, s);
    plan.consider<Graphed<MmaProjections>>("streaming_mma", 6.5, w, s);
    plan.consider<Graphed<FusedOpsKvOnce>>("cuda_graph_kv_once", 5.5, w, s);
    plan.consider<Graphed<MmaProjectionsKvOnce>>("streaming_mma_kv_once", 6.75, w, s);
    plan.consider<Graphed<FusedOpsKvMma>>("cuda_graph_attention_mma", 5.75, w, s);
    plan.consider<Graphed<MmaProjectionsKvMma>>("streaming_mma_attention_mma", 6.875, w, s);
    plan.consider<Megakernel>("megakernel", 7, w, s);
    plan.consider<MegakernelAttentionMma>("megakernel_attention_mma", 7.25, w, s);
    plan.consider<MegakernelMergeAtOnce>("megakernel_merge_at_once", 7.3, w, s);
    plan.consider<MegakernelNarrowDown>("megakernel_narrow_down", 7.4, w, s);
    plan.consider<MegakernelChained>("megakernel_chained", 7.5, w, s);
    plan.keep_fastest(s, /*time_them=*/w.fills > 0);
  }
  void operator()(const DecoderLayer&, cudaStream_t s) const { plan(s); }
  std::vector<bench::Metric> metrics() const { return plan.metrics(); }
};

void reference(const DecoderLayer& w, bench::HostData& h) { reference::layer(w, h); }

// Rung 1's kernels without the syncs: plain FP32 code sharing nothing with rungs 2-8. Its
// activations are allocated here and freed once the step is done.
void device_reference(const DecoderLayer& w, cudaStream_t s) {
  const UnfusedActivations<float> act(w, s);
  unfused_step(w, act, PlainLinear{}, NoWait{}, s);
  BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
}

BENCH_EXAMPLE(ch20, transformer_decode, DecoderLayer)
    .int_axis("batch", {1, 2, 4, 8, 16, 32}, /*defaults=*/{1, 8})
    .stateful<Fp32UnfusedSynced>(bench::Role::baseline, "fp32_unfused_synced",
                                 {.blocks_host = true})
    .stateful<Bf16Cublaslt>(bench::Role::step, "bf16_cublaslt")
    .stateful<FlashAttention>(bench::Role::step, "flash_attention")
    .stateful<FusedOps>(bench::Role::step, "fused_ops")
    .stateful<Graphed<FusedOps>>(bench::Role::step, "cuda_graph")
    .stateful<Graphed<FusedOpsKvOnce>>(bench::Role::step, "cuda_graph_kv_once")
    .stateful<Graphed<GemvStep>>(bench::Role::step, "streaming_gemv",
                                 {.min_compute_capability = 90})
    .stateful<Graphed<MmaProjections>>(bench::Role::step, "streaming_mma",
                                       {.min_compute_capability = 90})
    .stateful<Graphed<MmaProjectionsKvOnce>>(bench::Role::step, "streaming_mma_kv_once",
                                             {.min_compute_capability = 90})
    .stateful<Graphed<FusedOpsKvMma>>(bench::Role::step, "cuda_graph_attention_mma")
    .stateful<Graphed<MmaProjectionsKvMma>>(bench::Role::step, "streaming_mma_attention_mma",
                                            {.min_compute_capability = 90})
    .stateful<Megakernel>(bench::Role::step, "megakernel", {.min_compute_capability = 90})
    .stateful<MegakernelL2Ahead>(bench::Role::step, "megakernel_l2_ahead",
                                 {.min_compute_capability = 90})
    .stateful<MegakernelAttentionMma>(bench::Role::step, "megakernel_attention_mma",
                                      {.min_compute_capability = 90})
    .stateful<MegakernelMergeAtOnce>(bench::Role::step, "megakernel_merge_at_once",
                                     {.min_compute_capability = 90})
    .stateful<MegakernelNarrowDown>(bench::Role::step, "megakernel_narrow_down",
                                    {.min_compute_capability = 90})
    .stateful<MegakernelChained>(bench::Role::step, "megakernel_chained",
                                 {.min_compute_capability = 90})
    .stateful<Autotuned>(bench::Role::optimized, "autotuned", {.min_compute_capability = 90})
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(1e-2))
    .mode(bench::Mode::hot);

}  // namespace

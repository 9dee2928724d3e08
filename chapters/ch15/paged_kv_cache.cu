// ch15/paged_kv_cache: at a fixed KV memory budget, a paged cache serves more requests at once
// than one that reserves the model's maximum length per request, and the trace finishes sooner.
// The kernels are the same on both sides; the speedup comes from fitting more requests into each
// step, not from a faster kernel.
//
// The work (serving_engine.cuh): one replay of a seeded trace of 512 requests (prompts 16..527
// tokens, outputs 16..527, long-tailed) through a one-layer model (8 heads of 128, MLP 1024 ->
// 16384 -> 1024, BF16), continuous batching (a finished request's place is refilled at the next
// step), at most 256 requests a step, a KV pool of 32768 positions (128 MiB of K and V), a model
// context limit of 2048.
// What changes from baseline to optimized (the pool, the kernels and every launch argument but
// the block size are the same):
//   1. baseline "reserved_max_length": each admitted request takes a contiguous region of 2048
//      positions, enough for any request the model accepts (a contiguous region cannot grow
//      later): 16 regions fit, so at most 16 requests decode together, and most of each region is
//      never written (a request here needs 32..1054 positions);
//   2. optimized "paged_blocks": the same pool cut into 16-position blocks, and a block table per
//      request; a request takes the blocks its prompt plus max_tokens need (up to 15 positions
//      wasted, in its last block). Far more requests fit, up to the batch cap.
// A region of 2048 rows is one block of the paged layout, so both sides run the same attention
// kernel instantiation (one block-table read per 8 keys), the same write, GEMM and scatter
// kernels, per token the same work: the optimized side wins by needing fewer steps, each of which
// reads the MLP's 64 MiB of weights once and launches the same handful of kernels whatever its
// batch, and by giving attention more (request, head) pairs to spread over the SMs.
// Not modelled: allocating blocks on demand as a request grows and preempting when the pool runs
// dry (vLLM does both); reserving a request's whole max_tokens at admission needs neither.
// Metrics: tokens_per_s, latency_p50_ms / latency_p99_ms (every request arrives at time 0),
// largest_batch (the most requests that decoded in one step: what fitted), peak_kv_mib (KV
// allocated at the fullest step) against kv_budget_mib, steps, mean_batch.
// Verification: 13 requests (1..32 prompt and output tokens, partial blocks), 2 heads, MLP 96, a
// pool of 256 positions (4 reserved regions of 64, or 16 blocks), against an FP64 CPU reference
// computed from the sources (no cache, no schedule); at the timing size, against plain GPU
// kernels (kernels/reference_attention.cuh, reference_gemm.cuh). y: BF16's default relative L2
// (8e-3: the attention output and h are rounded to BF16 on the way, as the reference models);
// context (the keys each token was served with): exact.
//
//   ./bench compare --chapter ch15 --example paged_kv_cache
#include "serving_engine.cuh"

namespace {

using ch15::Batching;
using ch15::Policy;
using ch15::Serving;

constexpr int kPageRows = 16;  // vLLM's default block size

struct PagedKvTrace : Serving {
  explicit PagedKvTrace(bench::Setup& s)
      : Serving(s, /*timing=*/{.budget_rows = 32768, .max_batch = 256, .max_length = 2048},
                /*verifying=*/{.budget_rows = 256, .max_batch = 8, .max_length = 64}) {}
};

Policy policy(const Serving& w, int block_rows) {
  return {Batching::continuous, block_rows, w.limits.budget_rows, w.limits.max_batch,
          w.limits.max_length};
}

struct ReservedMaxLength : ch15::Replay {
  ReservedMaxLength(const PagedKvTrace& w, cudaStream_t stream)
      : Replay(w, stream, policy(w, w.limits.max_length)) {}
};

struct PagedBlocks : ch15::Replay {
  PagedBlocks(const PagedKvTrace& w, cudaStream_t stream)
      : Replay(w, stream, policy(w, kPageRows)) {}
};

BENCH_EXAMPLE(ch15, paged_kv_cache, PagedKvTrace)
    .stateful<ReservedMaxLength>(bench::Role::baseline, "reserved_max_length")
    .stateful<PagedBlocks>(bench::Role::optimized, "paged_blocks")
    .reference(ch15::reference)
    .device_reference(ch15::device_reference);

}  // namespace

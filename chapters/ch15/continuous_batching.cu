// ch15/continuous_batching: static batches wait for their longest request; iteration-level
// scheduling (Orca's, vLLM's) lets a finished request leave and a queued one join at every step.
//
// The work (serving_engine.cuh): one replay of a seeded trace of 512 requests (prompts 16..527
// tokens, outputs 16..527 with a long tail: mean 60) through a one-layer model (8 heads of 128,
// MLP 1024 -> 16384 -> 1024, BF16), a paged KV pool of 32768 positions (128 MiB; blocks of 16),
// at most 64 requests a step, on both sides.
// What changes from baseline to optimized (the same pool, kernels and per-token work):
//   1. baseline "static": a batch of up to 64 queued requests is admitted when the previous batch
//      has completely finished; it runs until its longest request ends, its finished requests'
//      places idle meanwhile (they are not computed: every step decodes only running requests);
//   2. optimized "continuous": at every step the queue's head joins as soon as there is a place and
//      the pool has its blocks.
// Every token costs the same on both sides; what differs is the number of steps. A step reads the
// MLP's 64 MiB of weights once and launches the same kernels whatever its batch, and a step of a
// few requests leaves attention too few (request, head) pairs to fill the SMs: static batching
// runs many such steps while it waits for each batch's tail. Target: >= 2x tokens/s (Orca and
// vLLM report 2-4x).
// Metrics: tokens_per_s, latency_p50_ms / latency_p99_ms (every request arrives at time 0, so a
// request's latency is when it completes: static batching's short requests wait for their
// batch's longest one before the next batch can start), steps, mean_batch, largest_batch,
// peak_kv_mib of kv_budget_mib.
// Verification: as ch15/paged_kv_cache (13 requests, batches of 4 when verifying: 4 static
// batches; FP64 CPU reference from the sources, GPU reference kernels at the timing size; y at
// BF16's default relative L2, context exact).
//
//   ./bench compare --chapter ch15 --example continuous_batching
#include "serving_engine.cuh"

namespace {

using ch15::Batching;
using ch15::Policy;
using ch15::Serving;

constexpr int kPageRows = 16;

struct BatchingTrace : Serving {
  explicit BatchingTrace(bench::Setup& s)
      : Serving(s, /*timing=*/{.budget_rows = 32768, .max_batch = 64, .max_length = 2048},
                /*verifying=*/{.budget_rows = 256, .max_batch = 4, .max_length = 64}) {}
};

Policy policy(const Serving& w, Batching batching) {
  return {batching, kPageRows, w.limits.budget_rows, w.limits.max_batch, w.limits.max_length};
}

struct StaticBatches : ch15::Replay {
  StaticBatches(const BatchingTrace& w, cudaStream_t stream)
      : Replay(w, stream, policy(w, Batching::static_batches)) {}
};

struct ContinuousBatches : ch15::Replay {
  ContinuousBatches(const BatchingTrace& w, cudaStream_t stream)
      : Replay(w, stream, policy(w, Batching::continuous)) {}
};

BENCH_EXAMPLE(ch15, continuous_batching, BatchingTrace)
    .stateful<StaticBatches>(bench::Role::baseline, "static")
    .stateful<ContinuousBatches>(bench::Role::optimized, "continuous")
    .reference(ch15::reference)
    .device_reference(ch15::device_reference);

}  // namespace

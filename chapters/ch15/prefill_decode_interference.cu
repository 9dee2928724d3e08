// ch15/prefill_decode_interference: a long prompt prefilled in one step makes every running
// request's next token wait behind it; chunked prefill (Sarathi-Serve's, vLLM's) caps the prompt
// tokens a step takes, so the decode steps stay short. The work is the same either way; what the
// lesson scores is the p99 latency of a decode step, a metric, not the replay's time.
//
// The work (serving_engine.cuh, extended with a prefill path): one replay of a seeded trace
// (serving_schedule.hpp, interference_trace) of 256 chat requests (prompts 16..527 tokens,
// outputs 16..527, mean 60) arriving one every 2 steps (some 18 decode at a time on average), and
// 16 documents (prompts 6144..8191 tokens, 4 output tokens) arriving every 32 steps among them; the
// chapter's one-layer model (8 heads of 128, MLP 1024 -> 16384 -> 1024, BF16), a paged KV pool of
// 32768 positions. A step:
//   1. write_kv: the step's prompt chunks' K/V rows and each decoding token's new row into the
//      pool; the decoding tokens' queries gathered;
//   2. prefill attention: causal FlashAttention-2 (kernels/flash_attention_mma.cuh) of the step's
//      128-query blocks of each chunk over the prompt's keys up to the query, longest blocks first;
//   3. decode attention: the engine's (paged, split-KV), one query per (request, head);
//   4. the MLP over the prompt rows and the decode rows together, two cuBLAS GEMMs: the decodes
//      ride on the prefill's GEMM (the weights are read once a step either way);
//   5. scatter: prompt rows to y_prompt, decode rows to y; a %globaltimer stamp ends the step.
// What changes from baseline to optimized (the kernels, the trace and every token's work are
// the same):
//   1. baseline "whole_prefill": every admitted prompt is prefilled whole at its first step, in
//      arrival order; a step that meets a document is as long as an 8k-token prefill (its causal
//      attention and 8k rows through the MLP), and the ~20 running chats' next tokens wait for it;
//   2. optimized "chunked_prefill": at most 2048 prompt tokens a step, in whole query blocks, in
//      arrival order: a document spreads over 3-4 steps, each with the decodes beside it.
// Why a token budget rather than a separate decode stream at a higher priority: stream priority
// only orders the CTAs waiting to start. A prefill's GEMM and attention fill every SM with
// long-running CTAs, so a decode kernel still waits for them to drain, and the graph's stream
// order must then be split into two streams whose interleaving the scheduler, not the schedule,
// decides. The budget bounds the work of every step by construction, the same on every GPU,
// and is what vLLM and Sarathi-Serve ship. Why 2048 and not 512: the prefill attention of a chunk
// is budget / 128 query blocks x 8 heads CTAs, each walking up to the whole prompt's keys; 512
// tokens make 32 CTAs on 132 SMs, and the replay would pay far more than the issue's 10% of
// throughput; 2048 make 128, one wave. (A smaller budget would want split-KV prefill attention.)
// Scored by: p99_decode_step_ms (lower is better): over every step that decodes, the time from
// the previous step's stamp to its own. Target: >= 2x lower p99 at <= 10% lower tokens_per_s.
// Metrics: p50_decode_step_ms, p99_decode_step_ms, max_decode_step_ms, tokens_per_s (prompt and
// output tokens over the replay), output_tokens_per_s, steps, prefill_steps, largest_step_prefill,
// and replay_ms (the stamps' span, held by the harness against its events: bench::timed_call_ms).
// Verification: y (each output token's layer output), y_prompt (each prompt token's), context
// and prompt_context (the keys each token was served with: exact, so a token served never, twice
// into a wrong row, or at the wrong length fails); 10 chats of 1..32 tokens and 2 documents of
// 200..399 prompt tokens, budget 128 (a document in several chunks), 2 heads, MLP 96, against an
// FP64 CPU reference from the sources (no cache, no schedule); plain GPU kernels at the timing
// size.
//
//   ./bench compare --chapter ch15 --example prefill_decode_interference
#include <kernels/flash_attention_mma.cuh>

#include "serving_engine.cuh"

namespace {

using ch15::bf16;
using ch15::DecodeEntry;
using ch15::EngineArgs;
using ch15::kHeadDim;
using ch15::kPieces;
using ch15::MixedPolicy;
using ch15::MixedSchedule;
using ch15::Prefill;
using ch15::PrefillChunk;
using ch15::Request;
using ch15::Serving;
using ch15::upload;

constexpr int kPageRows = 16;
constexpr int kQueryBlock = kernels::kFlashQueryRows;  // a chunk ends on one
constexpr int kWriteRows = 128;  // write_kv's rows per CTA: a long chunk is split for parallelism

struct InterferenceTrace : Serving {
  std::vector<int> arrival;                // the step each request arrives at
  int budget_tokens;                       // chunked prefill's prompt tokens per step
  bench::DeviceSpan<const bf16> q_prompt;  // [request][head][prompt position][128]
  bench::DeviceSpan<bf16> y_prompt;        // [prompt token][dim]
  bench::DeviceSpan<int> prompt_context;   // [prompt token]
  explicit InterferenceTrace(bench::Setup& s)
      : InterferenceTrace(s, ch15::interference_trace(s.verifying())) {}

 private:
  InterferenceTrace(bench::Setup& s, ch15::ArrivingTrace at)
      : Serving(s, std::move(at.trace),
                s.verifying() ? ch15::ServerLimits{2048, 16, 512}
                              : ch15::ServerLimits{32768, 256, 8448}),
        arrival(std::move(at.arrival)),
        budget_tokens(int(s.size("prefill_budget", 2048, kQueryBlock))),
        q_prompt(s.input<bf16>("q_prompt", trace.prompt_tokens * dim, bench::normal(0, 4))),
        y_prompt(s.output<bf16>("y_prompt", trace.prompt_tokens * dim)),
        prompt_context(s.output<int>("prompt_context", trace.prompt_tokens)) {
    // The decode side's cost, plus the prefill's: causal attention over the prompt (query i sees
    // i + 1 keys; the prompt's K/V sources are already counted, read once), the MLP on every
    // prompt row; q_prompt in, y_prompt and prompt_context out.
    double prompt_keys = 0;
    for (const Request& r : trace.requests) prompt_keys += 0.5 * r.prompt * (r.prompt + 1.0);
    s.bytes(decode_bytes() + 2 * double(trace.prompt_tokens) * row_bytes() +
            4.0 * trace.prompt_tokens);
    s.flops(decode_flops() + 4 * prompt_keys * dim + 4.0 * trace.prompt_tokens * dim * ffn,
            bench::ceiling::bf16);
  }
};

// ---- the prefill path --------------------------------------------------------------------------
// One CTA of the prefill attention: query block qb of a request's prompt, one head.
struct QueryBlock {
  int request, qb;
};
// One row of a step's MLP input that is a prompt token.
struct PromptRow {
  int request, position;
};

// Causal over the prompt: block qb walks the 64-key tiles up to its last query (and the prompt's
// end); a score is kept when its key is at or before its query.
struct PromptWalk {
  int64_t prompt;
  int qb;
  __device__ int tiles() const {
    constexpr int kKeys = kernels::kFlashKeyTile;
    return int(std::min<int64_t>((prompt + kKeys - 1) / kKeys,
                                 ((qb + 1) * int64_t{kQueryBlock} + kKeys - 1) / kKeys));
  }
  __device__ int64_t first_key(int t) const { return int64_t{t} * kernels::kFlashKeyTile; }
  __device__ bool masked(int) const { return false; }
  __device__ bool visible(int64_t row, int64_t key) const { return key <= row; }
};

struct PrefillArgs {
  const int *prompts, *outputs;
  const int64_t *kv_start, *prompt_start;
  const bf16 *q_prompt, *k_src, *v_src;
  bf16* prompt_attn;  // [request][head][prompt position][128], like q_prompt
  int heads;
};

// The prompt's K and V are read from the trace's sources, the rows write_kv copies into the pool:
// contiguous per (request, head), as the fused kernel walks them. (A real engine's chunk computes
// its K/V rows and attends over the earlier chunks' in the cache; the bytes are the same.)
static __global__ void __launch_bounds__(kernels::kFlashThreads)
    prefill_attention(PrefillArgs a, const QueryBlock* blocks) {
  const QueryBlock b = blocks[blockIdx.x];
  const int64_t head = blockIdx.y, prompt = a.prompts[b.request];
  const int64_t length = prompt + a.outputs[b.request];
  const int64_t q0 = (a.prompt_start[b.request] * a.heads + head * prompt) * kHeadDim;
  const int64_t kv0 = (a.kv_start[b.request] * a.heads + head * length) * kHeadDim;
  kernels::flash_attention_block(a.q_prompt + q0, a.k_src + kv0, a.v_src + kv0, a.prompt_attn + q0,
                                 prompt, b.qb, PromptWalk{prompt, b.qb});
}

// The step's prompt rows of the attention output into rows [0, n) of the MLP's input, [row][head x
// 128]; each prompt token's context (position + 1 keys) recorded as it is served.
static __global__ void __launch_bounds__(128)
    gather_prompt_rows(PrefillArgs a, const PromptRow* rows, uint4* step_attn,
                       int* prompt_context) {
  const PromptRow row = rows[blockIdx.x];
  const int64_t prompt = a.prompts[row.request], start = a.prompt_start[row.request];
  const auto* attn = reinterpret_cast<const uint4*>(a.prompt_attn);
  for (int c = threadIdx.x; c < a.heads * kPieces; c += blockDim.x) {
    const int head = c / kPieces, piece = c % kPieces;
    step_attn[int64_t{blockIdx.x} * a.heads * kPieces + c] =
        attn[((start * a.heads + head * prompt) + row.position) * kPieces + piece];
  }
  if (threadIdx.x == 0) prompt_context[start + row.position] = row.position + 1;
}

// Step part 5: row i of the step's y to its place (prompt rows first, then decode rows); CTA 0
// stamps the step's end (every earlier kernel of the step has finished when any CTA of this runs).
static __global__ void __launch_bounds__(128)
    scatter_rows(EngineArgs a, const int64_t* prompt_start, const PromptRow* rows, int n_prompt,
                 const DecodeEntry* entries, uint4* y_prompt, int64_t* end_stamp) {
  uint4* to;
  if (int(blockIdx.x) < n_prompt) {
    const PromptRow row = rows[blockIdx.x];
    to = y_prompt + (prompt_start[row.request] + row.position) * a.dim_pieces;
  } else {
    const DecodeEntry e = entries[blockIdx.x - n_prompt];
    to = a.y + (a.token_start[e.request] + e.t) * a.dim_pieces;
  }
  for (int c = threadIdx.x; c < a.dim_pieces; c += blockDim.x)
    to[c] = a.step_y[int64_t{blockIdx.x} * a.dim_pieces + c];
  if (blockIdx.x == 0 && threadIdx.x == 0) *end_stamp = ch15::globaltimer_ns();
}

// ---- the replay ---------------------------------------------------------------------------------
// The schedule flattened into what the step kernels read, step by step.
struct StepLists {
  std::vector<PrefillChunk> writes;  // the chunks cut into kWriteRows pieces
  std::vector<QueryBlock> blocks;    // longest walk first
  std::vector<PromptRow> rows;
  std::vector<int> write_begin{0}, block_begin{0}, row_begin{0};
  int max_rows = 0;  // prompt and decode rows of the fullest step

  explicit StepLists(const MixedSchedule& s) {
    for (int step = 0; step < s.steps(); ++step) {
      const size_t first_block = blocks.size();
      for (int i = s.chunk_begin[size_t(step)]; i < s.chunk_begin[size_t(step) + 1]; ++i) {
        const PrefillChunk c = s.chunks[size_t(i)];
        for (int r = c.first; r < c.first + c.count; r += kWriteRows)
          writes.push_back({c.request, r, std::min(kWriteRows, c.first + c.count - r)});
        for (int qb = c.first / kQueryBlock; qb * kQueryBlock < c.first + c.count; ++qb)
          blocks.push_back({c.request, qb});
        for (int p = c.first; p < c.first + c.count; ++p) rows.push_back({c.request, p});
      }
      std::stable_sort(blocks.begin() + int64_t(first_block), blocks.end(),
                       [](QueryBlock x, QueryBlock y) { return x.qb > y.qb; });
      write_begin.push_back(int(writes.size()));
      block_begin.push_back(int(blocks.size()));
      row_begin.push_back(int(rows.size()));
      max_rows = std::max(max_rows, s.prefill_tokens(step) + s.batch(step));
    }
  }
};

class MixedReplay {
 public:
  MixedReplay(const InterferenceTrace& w, cudaStream_t stream, Prefill prefill)
      : policy_{prefill,
                w.budget_tokens,
                kQueryBlock,
                kPageRows,
                w.limits.budget_rows,
                w.limits.max_batch,
                w.limits.max_length},
        schedule_(ch15::make_mixed_schedule({w.trace, w.arrival}, policy_)),
        lists_(schedule_),
        all_tokens_(w.trace.prompt_tokens + w.trace.tokens),
        output_tokens_(w.trace.tokens),
        writes_(upload(lists_.writes)),
        blocks_(upload(lists_.blocks)),
        rows_(upload(lists_.rows)),
        entries_(upload(schedule_.entries)),
        block_table_(upload(schedule_.block_table)),
        prompt_start_(upload(w.trace.prompt_start)),
        k_pool_(policy_.budget_rows * w.dim),
        v_pool_(policy_.budget_rows * w.dim),
        prompt_attn_(std::max<int64_t>(1, w.trace.prompt_tokens * w.dim)),
        step_q_(int64_t{policy_.max_batch} * w.dim),
        step_attn_(int64_t{lists_.max_rows} * w.dim),
        step_h_(int64_t{lists_.max_rows} * w.ffn),
        step_y_(int64_t{lists_.max_rows} * w.dim),
        max_splits_(int((policy_.max_length + ch15::kChunkKeys - 1) / ch15::kChunkKeys)),
        part_ml_(int64_t{policy_.max_batch} * w.heads * max_splits_ * 2),
        part_o_(int64_t{policy_.max_batch} * w.heads * max_splits_ * kHeadDim),
        stamps_(schedule_.steps() + 1) {
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(prefill_attention,
                                          cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(sizeof(kernels::FlashSmemD<kHeadDim>))));
    ch15::poison_gemm_outputs(step_h_, step_y_, stream);
    ch15::capture_replay(exec_, gemm_, stream, [&](cudaStream_t s) { enqueue(w, s); });
  }

  void operator()(const InterferenceTrace&, cudaStream_t stream) const { exec_.launch(stream); }

  // Read after every timed sample (the example is scored by p99_decode_step_ms): the stamps the
  // replay just wrote. A step's latency is its stamp less the previous step's (the replay's start
  // for the first): what a running request waits for its next token.
  std::vector<bench::Metric> metrics() const {
    BENCH_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<int64_t> stamps(size_t(stamps_.size()));
    BENCH_CUDA_CHECK(
        cudaMemcpy(stamps.data(), stamps_.data(), stamps_.bytes(), cudaMemcpyDeviceToHost));
    std::vector<double> decode_ms;
    int prefill_steps = 0, largest_prefill = 0;
    for (int step = 0; step < schedule_.steps(); ++step) {
      if (schedule_.batch(step) > 0)
        decode_ms.push_back(1e-6 * double(stamps[size_t(step) + 1] - stamps[size_t(step)]));
      prefill_steps += schedule_.prefill_tokens(step) > 0;
      largest_prefill = std::max(largest_prefill, schedule_.prefill_tokens(step));
    }
    const double replay_s = 1e-9 * double(stamps.back() - stamps[0]);
    // The stamps' clock against the harness's events: the replay's stamped span is the call.
    return {bench::timed_call_ms("replay_ms", 1e3 * replay_s),
            {"p99_decode_step_ms", ch15::percentile(decode_ms, 0.99)},
            {"p50_decode_step_ms", ch15::percentile(decode_ms, 0.5)},
            {"max_decode_step_ms", *std::max_element(decode_ms.begin(), decode_ms.end())},
            {"tokens_per_s", double(all_tokens_) / replay_s},
            {"output_tokens_per_s", double(output_tokens_) / replay_s},
            {"steps", double(schedule_.steps())},
            {"prefill_steps", double(prefill_steps)},
            {"largest_step_prefill", double(largest_prefill)}};
  }

 private:
  void enqueue(const InterferenceTrace& w, cudaStream_t s) {
    gemm_.set_stream(s);
    const EngineArgs a =
        ch15::engine_args(w, k_pool_.data(), v_pool_.data(), step_q_.data(), step_y_.data(),
                          block_table_.data(), schedule_.max_blocks, policy_.block_rows);
    const PrefillArgs p{w.prompts.data(),     w.outputs.data(),    w.kv_start.data(),
                        prompt_start_.data(), w.q_prompt.data(),   w.k_src.data(),
                        w.v_src.data(),       prompt_attn_.data(), int(w.heads)};
    ch15::stamp<<<1, 1, 0, s>>>(stamps_.data());
    BENCH_CHECK_LAUNCH();
    for (int step = 0; step < schedule_.steps(); ++step) {
      const size_t at = size_t(step);
      const int w0 = lists_.write_begin[at], n_writes = lists_.write_begin[at + 1] - w0;
      const int b0 = lists_.block_begin[at], n_blocks = lists_.block_begin[at + 1] - b0;
      const int r0 = lists_.row_begin[at], n_prompt = lists_.row_begin[at + 1] - r0;
      const int e0 = schedule_.entry_begin[at], batch = schedule_.batch(step);
      const DecodeEntry* entries = entries_.data() + e0;
      ch15::write_kv<<<dim3(unsigned(n_writes + batch), unsigned(w.heads)), ch15::kThreads, 0, s>>>(
          a, writes_.data() + w0, n_writes, entries);
      BENCH_CHECK_LAUNCH();
      if (n_blocks > 0) {
        prefill_attention<<<dim3(unsigned(n_blocks), unsigned(w.heads)), kernels::kFlashThreads,
                            sizeof(kernels::FlashSmemD<kHeadDim>), s>>>(p, blocks_.data() + b0);
        BENCH_CHECK_LAUNCH();
        gather_prompt_rows<<<unsigned(n_prompt), 128, 0, s>>>(
            p, rows_.data() + r0, reinterpret_cast<uint4*>(step_attn_.data()),
            w.prompt_context.data());
        BENCH_CHECK_LAUNCH();
      }
      if (batch > 0) {
        const ch15::StepKv kv{k_pool_.data(),       v_pool_.data(),      entries,
                              w.prompts.data(),     block_table_.data(), int(w.heads),
                              schedule_.max_blocks, policy_.block_rows};
        ch15::step_attention(w, {schedule_.entries.data() + e0, size_t(batch)}, kv, step_q_.data(),
                             step_attn_.data() + int64_t{n_prompt} * w.dim, part_ml_.data(),
                             part_o_.data(), s);
      }
      const int rows = n_prompt + batch;
      ch15::step_mlp(w, gemm_, step_attn_.data(), step_h_.data(), step_y_.data(), rows, s);
      scatter_rows<<<unsigned(rows), 128, 0, s>>>(
          a, prompt_start_.data(), rows_.data() + r0, n_prompt, entries,
          reinterpret_cast<uint4*>(w.y_prompt.data()), stamps_.data() + step + 1);
      BENCH_CHECK_LAUNCH();
    }
  }

  MixedPolicy policy_;
  MixedSchedule schedule_;
  StepLists lists_;
  int64_t all_tokens_, output_tokens_;
  bench::DeviceBuffer<PrefillChunk> writes_;
  bench::DeviceBuffer<QueryBlock> blocks_;
  bench::DeviceBuffer<PromptRow> rows_;
  bench::DeviceBuffer<DecodeEntry> entries_;
  bench::DeviceBuffer<int> block_table_;
  bench::DeviceBuffer<int64_t> prompt_start_;
  bench::DeviceBuffer<bf16> k_pool_, v_pool_, prompt_attn_, step_q_, step_attn_, step_h_, step_y_;
  int max_splits_;
  bench::DeviceBuffer<float> part_ml_, part_o_;
  bench::DeviceBuffer<int64_t> stamps_;
  ch15::StepGemm gemm_;
  kernels::GraphExec exec_;
};

struct WholePrefill : MixedReplay {
  WholePrefill(const InterferenceTrace& w, cudaStream_t s) : MixedReplay(w, s, Prefill::whole) {}
};

struct ChunkedPrefill : MixedReplay {
  ChunkedPrefill(const InterferenceTrace& w, cudaStream_t s)
      : MixedReplay(w, s, Prefill::chunked) {}
};

// ---- what correct means ---------------------------------------------------------------------
struct SeesEarlier {  // prompt query i sees keys 0 .. i
  __host__ __device__ bool operator()(int64_t qi, int64_t kj) const { return kj <= qi; }
};

// The decode tokens as the other examples' reference; each prompt token the same way: causal
// attention over the prompt's sources in double, then the layer's rest.
void reference(const InterferenceTrace& w, bench::HostData& h) {
  ch15::reference(w, h);
  const auto q = h.input<bf16>("q_prompt"), k = h.input<bf16>("k_src"), v = h.input<bf16>("v_src");
  const auto y = h.expected("y_prompt"), context = h.expected("prompt_context");
  std::vector<double> a_hm;
  for (size_t r = 0; r < w.trace.requests.size(); ++r) {
    const Request req = w.trace.requests[r];
    const int64_t p0 = w.trace.prompt_start[r], row0 = w.trace.kv_start[r];
    a_hm.assign(size_t(w.heads * req.prompt * kHeadDim), 0.0);
    kernels::reference_attention(q.subspan(size_t(p0 * w.dim), size_t(req.prompt * w.dim)),
                                 k.subspan(size_t(row0 * w.dim), size_t(req.length() * w.dim)),
                                 v.subspan(size_t(row0 * w.dim), size_t(req.length() * w.dim)),
                                 std::span<double>(a_hm), w.heads, req.prompt, req.length(),
                                 SeesEarlier{});
    for (int i = 0; i < req.prompt; ++i) {
      ch15::reference_layer_row(w, h, a_hm, req.prompt, i,
                                y.subspan(size_t((p0 + i) * w.dim), size_t(w.dim)));
      context[size_t(p0 + i)] = i + 1;
    }
  }
}

void device_reference(const InterferenceTrace& w, cudaStream_t stream) {
  ch15::device_reference(w, stream);
  const int64_t rows = w.trace.prompt_tokens;
  bench::DeviceBuffer<bf16> a_hm(rows * w.dim), a(rows * w.dim), hid(rows * w.ffn);
  kernels::ReferenceAttentionScratch scratch;  // the split form's partials, for every request
  for (size_t r = 0; r < w.trace.requests.size(); ++r) {
    const Request req = w.trace.requests[r];
    const int64_t tok = w.trace.prompt_start[r] * w.dim, row = w.trace.kv_start[r] * w.dim;
    kernels::reference_attention(w.q_prompt.data() + tok, w.k_src.data() + row,
                                 w.v_src.data() + row, a_hm.data() + tok, w.heads, req.prompt,
                                 req.length(), SeesEarlier{}, stream, scratch);
    ch15::heads_to_rows<<<dim3(unsigned(req.prompt), unsigned(w.heads)), kHeadDim, 0, stream>>>(
        a_hm.data() + tok, a.data() + tok, w.heads, req.prompt);
    BENCH_CHECK_LAUNCH();
  }
  ch15::device_reference_mlp(w, a.data(), hid.data(), w.y_prompt.data(), rows, stream);
  std::vector<int> context;
  for (const Request& req : w.trace.requests)
    for (int i = 0; i < req.prompt; ++i) context.push_back(i + 1);
  BENCH_CUDA_CHECK(cudaMemcpyAsync(w.prompt_context.data(), context.data(),
                                   context.size() * sizeof(int), cudaMemcpyHostToDevice, stream));
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));  // before the scratch and the host vector go
}

BENCH_EXAMPLE(ch15, prefill_decode_interference, InterferenceTrace)
    .scored_by("p99_decode_step_ms", bench::Better::lower)
    .stateful<WholePrefill>(bench::Role::baseline, "whole_prefill")
    .stateful<ChunkedPrefill>(bench::Role::optimized, "chunked_prefill")
    .reference(reference)
    .device_reference(device_reference);

}  // namespace

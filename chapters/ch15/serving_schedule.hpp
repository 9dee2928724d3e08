// ch15/serving_schedule.hpp: the host side of the chapter's small serving engine: a seeded
// request trace, the KV block allocator, and the scheduler that decides, step by step, which
// requests decode. Host-only and header-only, so tests/unit/serving_schedule_test.cpp checks the
// counts exactly without a GPU.
//
// The engine's step (serving_engine.cuh runs it): requests admitted at this step get their prompt
// written into the KV cache, then every running request decodes one token, then those that have
// produced their last token leave and give their KV blocks back. Every request's output length is
// part of the trace (a request stops at its max_tokens; no sampled end-of-sequence token), so the
// whole schedule is known before the first step: the engine computes it once, untimed, and the
// GPU replays it. A real server decides each step on the host while the GPU runs the previous one;
// precomputing it keeps host time out of the comparison of two policies.
//
// Two knobs, each the lesson of one example:
//   - the KV allocation (paged_kv_cache): a block is `block_rows` positions of every head. A
//     request reserving a contiguous region for the model's maximum length is one block of
//     max_length rows; a paged cache hands out blocks of 16 rows, as many as the request's prompt
//     plus max_tokens need. The pool is the same number of rows either way (the KV budget).
//   - the batching (continuous_batching): static admits only when the running batch is empty (it
//     waits for its longest request); continuous admits whenever a request fits, at every step.
// Admission is first come, first served: the queue's head is admitted when the batch has room
// (max_batch) and the pool has its blocks; otherwise nobody behind it jumps the queue.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace ch15 {

struct Request {
  int prompt = 0;  // tokens already known: written to the cache at admission
  int output = 0;  // tokens to decode, one per step (>= 1)
  int length() const { return prompt + output; }
};

// A request trace and where each request's rows live in the engine's inputs: its K/V source rows
// start at kv_start (in positions, before the head dimension), its query and output tokens at
// token_start, its prompt tokens (prefill_decode_interference's prefill queries and outputs) at
// prompt_start.
struct Trace {
  std::vector<Request> requests;
  std::vector<int64_t> kv_start, token_start, prompt_start;
  int64_t kv_rows = 0, tokens = 0, prompt_tokens = 0;
  int longest = 0;  // the longest request's prompt + output
  void add(const Request& r) {
    kv_start.push_back(kv_rows);
    token_start.push_back(tokens);
    prompt_start.push_back(prompt_tokens);
    kv_rows += r.length();
    tokens += r.output;
    prompt_tokens += r.prompt;
    longest = std::max(longest, r.length());
    requests.push_back(r);
  }
};

// Lengths drawn as lo + uniform(0, span << k) with k geometric (P(k) = 2^-(k+1), k <= max_k,
// the rest of the mass on max_k): mostly short, a long tail up to lo + (span << max_k) - 1.
// Integer arithmetic on std::mt19937_64's raw output, whose sequence the C++ standard fixes, so
// the trace is the same with any compiler and library.
struct LengthShape {
  int lo, span, max_k;
  int draw(std::mt19937_64& rng) const {
    const int k = std::countr_zero(rng() | (uint64_t{1} << max_k));
    return lo + int(rng() % (uint64_t(span) << k));
  }
  int max() const { return lo + (span << max_k) - 1; }
};

inline Trace make_trace(int requests, uint64_t seed, LengthShape prompt, LengthShape output) {
  Trace t;
  std::mt19937_64 rng(seed);
  for (int i = 0; i < requests; ++i) {
    Request r;
    r.prompt = prompt.draw(rng);  // sequenced: the prompt's draws come first
    r.output = output.draw(rng);
    t.add(r);
  }
  return t;
}

// The chapter's trace (seed 15): 512 requests, prompts 16..527 tokens, outputs 16..527 (mean 60,
// a long tail) at the timing size; 13 requests of 1..32 prompt and 1..32 output tokens (partial
// blocks, one-token requests) when verifying.
constexpr uint64_t kTraceSeed = 15;
inline Trace serving_trace(bool verifying) {
  return verifying ? make_trace(13, kTraceSeed, {1, 16, 1}, {1, 8, 2})
                   : make_trace(512, kTraceSeed, {16, 64, 3}, {16, 32, 4});
}

// A pool of equal blocks handed out from a free list, last freed first out (deterministic).
class BlockPool {
 public:
  explicit BlockPool(int blocks) {
    for (int b = blocks - 1; b >= 0; --b) free_.push_back(b);
  }
  int free_blocks() const { return int(free_.size()); }
  // `count` blocks, or none (an empty vector) when fewer are free.
  std::vector<int> allocate(int count) {
    if (count > free_blocks()) return {};
    std::vector<int> blocks(free_.end() - count, free_.end());
    free_.resize(free_.size() - count);
    std::reverse(blocks.begin(), blocks.end());
    return blocks;
  }
  void release(const std::vector<int>& blocks) {
    for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) free_.push_back(*b);
  }

 private:
  std::vector<int> free_;
};

enum class Batching { static_batches, continuous };

struct Policy {
  Batching batching = Batching::continuous;
  int block_rows = 16;      // positions per KV block: 16 (paged) or max_length (reserved)
  int64_t budget_rows = 0;  // KV positions the pool holds (every head's rows of a position)
  int max_batch = 0;        // requests decoding together at most
  int max_length = 0;       // the model's context limit: no request may be longer
  // Blocks a request holds from admission to its last token: its whole length, rounded up.
  int blocks_for(const Request& r) const { return (r.length() + block_rows - 1) / block_rows; }
  int max_blocks_per_request() const { return (max_length + block_rows - 1) / block_rows; }
};

struct DecodeEntry {
  int request;  // which request
  int t;        // which of its output tokens (0 .. output - 1): attends over prompt + t + 1 keys
};

// What the engine replays. Steps are flattened: step s admits admitted[admit_begin[s] ..
// admit_begin[s + 1]) and decodes entries[entry_begin[s] .. entry_begin[s + 1]).
struct Schedule {
  std::vector<int> admitted, admit_begin{0};
  std::vector<DecodeEntry> entries;
  std::vector<int> entry_begin{0};
  std::vector<int> block_table;  // [request][max_blocks_per_request], -1 past a request's blocks
  std::vector<int> finish_step;  // the step that decodes each request's last token
  int max_blocks = 0;            // block_table's row length
  int largest_batch = 0;         // the most requests that decoded in one step
  int64_t peak_rows_held = 0;    // the most KV positions allocated at once (blocks x block_rows)
  int steps() const { return int(entry_begin.size()) - 1; }
  int batch(int step) const { return entry_begin[step + 1] - entry_begin[step]; }
};

inline Schedule make_schedule(const Trace& trace, const Policy& p) {
  if (p.block_rows <= 0 || p.max_batch <= 0 || p.budget_rows < p.block_rows)
    throw std::invalid_argument(
        "ch15: a policy needs a block size, a batch and a budget of one block at least");
  const int n = int(trace.requests.size());
  Schedule s;
  s.max_blocks = p.max_blocks_per_request();
  s.block_table.assign(size_t(n) * s.max_blocks, -1);
  s.finish_step.assign(size_t(n), -1);
  for (const Request& r : trace.requests)
    if (r.output < 1 || r.prompt < 0 || r.length() > p.max_length ||
        p.blocks_for(r) > p.budget_rows / p.block_rows)
      throw std::invalid_argument(
          "ch15: a request is longer than the model's context or the KV budget");

  BlockPool pool(int(p.budget_rows / p.block_rows));
  std::vector<int> running, next_t(size_t(n), 0);
  int queue_head = 0, held_blocks = 0;
  while (queue_head < n || !running.empty()) {
    // Admission, first come first served.
    const bool may_admit = p.batching == Batching::continuous || running.empty();
    while (may_admit && queue_head < n && int(running.size()) < p.max_batch) {
      const Request& r = trace.requests[size_t(queue_head)];
      std::vector<int> blocks = pool.allocate(p.blocks_for(r));
      if (blocks.empty()) break;
      std::copy(blocks.begin(), blocks.end(),
                s.block_table.begin() + int64_t{queue_head} * s.max_blocks);
      held_blocks += int(blocks.size());
      s.admitted.push_back(queue_head);
      running.push_back(queue_head++);
    }
    s.admit_begin.push_back(int(s.admitted.size()));
    s.peak_rows_held = std::max(s.peak_rows_held, int64_t{held_blocks} * p.block_rows);
    // One token for every running request, then the finished ones leave.
    const int step = s.steps();
    for (int r : running) s.entries.push_back({r, next_t[size_t(r)]++});
    s.entry_begin.push_back(int(s.entries.size()));
    s.largest_batch = std::max(s.largest_batch, int(running.size()));
    std::vector<int> still;
    for (int r : running) {
      if (next_t[size_t(r)] < trace.requests[size_t(r)].output) {
        still.push_back(r);
        continue;
      }
      s.finish_step[size_t(r)] = step;
      const auto row = s.block_table.begin() + int64_t{r} * s.max_blocks;
      const std::vector<int> blocks(row, row + p.blocks_for(trace.requests[size_t(r)]));
      pool.release(blocks);
      held_blocks -= int(blocks.size());
    }
    running.swap(still);
  }
  return s;
}

// ---- prefill and decode in one step (prefill_decode_interference) --------------------------
// Here a request's prompt is not free: it is prefilled (causal attention over the prompt, the
// MLP on every prompt token) before the request decodes, and requests arrive while others decode.
// A step prefills some prompt tokens and decodes one token of every request whose prompt is done.
// The policy decides how much prefill a step takes:
//   - whole (arrival order): every admitted prompt is prefilled whole at the first step it can
//     be, so a step that meets a long document's prompt is as long as that prefill, and every
//     running request's next token waits behind it;
//   - chunked: at most `budget_tokens` prompt tokens a step, taken from the prompts in arrival
//     order, in whole query blocks (a chunk ends on a multiple of query_block unless it ends the
//     prompt), so a long prompt spreads over several steps and every step stays short.
// Either way every prompt token is prefilled exactly once and every output token decoded once:
// the same work, in steps of a different shape.

// Requests with the step at which each arrives (non-decreasing): the scheduler's clock counts
// steps, so both policies see a request arrive at the same point of the trace.
struct ArrivingTrace {
  Trace trace;
  std::vector<int> arrival;
  void add(const Request& r, int step) {
    if (!arrival.empty() && step < arrival.back())
      throw std::invalid_argument("ch15: arrivals must be in order");
    trace.add(r);
    arrival.push_back(step);
  }
};

// The chapter's interference trace (seed 15): chat requests (the ServingTrace shapes: prompts
// 16..527, outputs 16..527, mean 60) arriving one every 2 steps, so some 18 decode at a time on
// average, and 16 long documents (prompts 6144..8191 tokens, 4 output tokens) arriving every 32
// steps among them. When verifying: 10 chats of 1..32 tokens and 2 documents of 200..399 prompt
// tokens (several query blocks, a partial last one).
struct InterferenceShape {
  int chats, chat_every, docs, doc_first, doc_every, doc_output;
  LengthShape chat_prompt, chat_output, doc_prompt;
};
inline ArrivingTrace make_arriving_trace(const InterferenceShape& shape, uint64_t seed) {
  std::mt19937_64 rng(seed);
  struct Pending {
    Request r;
    int step;
  };
  std::vector<Pending> all;
  for (int i = 0; i < shape.chats; ++i) {
    Request r;
    r.prompt = shape.chat_prompt.draw(rng);
    r.output = shape.chat_output.draw(rng);
    all.push_back({r, i * shape.chat_every});
  }
  for (int i = 0; i < shape.docs; ++i)
    all.push_back(
        {{shape.doc_prompt.draw(rng), shape.doc_output}, shape.doc_first + i * shape.doc_every});
  // By arrival; at the same step, chats (drawn first) before documents.
  std::stable_sort(all.begin(), all.end(),
                   [](const Pending& a, const Pending& b) { return a.step < b.step; });
  ArrivingTrace t;
  for (const Pending& p : all) t.add(p.r, p.step);
  return t;
}
inline InterferenceShape interference_shape(bool verifying) {
  return verifying
             ? InterferenceShape{10, 2, 2, 3, 6, 2, {1, 16, 1}, {1, 8, 2}, {200, 200, 0}}
             : InterferenceShape{256, 2, 16, 32, 32, 4, {16, 64, 3}, {16, 32, 4}, {6144, 2048, 0}};
}
inline ArrivingTrace interference_trace(bool verifying) {
  return make_arriving_trace(interference_shape(verifying), kTraceSeed);
}

enum class Prefill { whole, chunked };

struct MixedPolicy {
  Prefill prefill = Prefill::chunked;
  int budget_tokens = 0;    // chunked: prompt tokens a step prefills at most
  int query_block = 128;    // the prefill attention's query rows per CTA: chunks end on them
  int block_rows = 16;      // KV positions per block
  int64_t budget_rows = 0;  // KV positions the pool holds
  int max_batch = 0;        // requests admitted (prefilling or decoding) at most
  int max_length = 0;       // the model's context limit
  int blocks_for(const Request& r) const { return (r.length() + block_rows - 1) / block_rows; }
};

struct PrefillChunk {
  int request;
  int first, count;  // prompt positions first .. first + count - 1
};

// Step s prefills chunks[chunk_begin[s] .. chunk_begin[s + 1]) and decodes entries[entry_begin[s]
// .. entry_begin[s + 1]). Steps with nothing to do (nobody has arrived yet) are not emitted.
struct MixedSchedule {
  std::vector<PrefillChunk> chunks;
  std::vector<int> chunk_begin{0};
  std::vector<DecodeEntry> entries;
  std::vector<int> entry_begin{0};
  std::vector<int> clock;        // the arrival clock at each step (steps skipped while idle)
  std::vector<int> block_table;  // [request][max_blocks]
  std::vector<int> admit_step, prefilled_step, finish_step;  // per request
  int max_blocks = 0;
  int64_t peak_rows_held = 0;
  int steps() const { return int(entry_begin.size()) - 1; }
  int batch(int step) const { return entry_begin[step + 1] - entry_begin[step]; }
  int prefill_tokens(int step) const {
    int n = 0;
    for (int i = chunk_begin[step]; i < chunk_begin[step + 1]; ++i) n += chunks[size_t(i)].count;
    return n;
  }
};

inline MixedSchedule make_mixed_schedule(const ArrivingTrace& at, const MixedPolicy& p) {
  const Trace& trace = at.trace;
  if (p.block_rows <= 0 || p.max_batch <= 0 || p.budget_rows < p.block_rows || p.query_block <= 0 ||
      (p.prefill == Prefill::chunked &&
       (p.budget_tokens < p.query_block || p.budget_tokens % p.query_block != 0)))
    throw std::invalid_argument(
        "ch15: a mixed policy needs a block size, a batch, a budget of one block at least and, "
        "chunked, a token budget of whole query blocks");
  const int n = int(trace.requests.size());
  MixedSchedule s;
  s.max_blocks = (p.max_length + p.block_rows - 1) / p.block_rows;
  s.block_table.assign(size_t(n) * s.max_blocks, -1);
  s.admit_step.assign(size_t(n), -1);
  s.prefilled_step.assign(size_t(n), -1);
  s.finish_step.assign(size_t(n), -1);
  for (const Request& r : trace.requests)
    if (r.output < 1 || r.prompt < 1 || r.length() > p.max_length ||
        p.blocks_for(r) > p.budget_rows / p.block_rows)
      throw std::invalid_argument(
          "ch15: a request is longer than the model's context or the KV budget");

  BlockPool pool(int(p.budget_rows / p.block_rows));
  std::vector<int> admitted;  // in arrival order: prefilling, then decoding
  std::vector<int> prefilled(size_t(n), 0), next_t(size_t(n), 0);
  int queue_head = 0, held_blocks = 0;
  for (int clock = 0; queue_head < n || !admitted.empty(); ++clock) {
    if (admitted.empty() && at.arrival[size_t(queue_head)] > clock)
      clock = at.arrival[size_t(queue_head)];  // idle until the next arrival
    const int step = s.steps();
    // Admission: arrived requests, first come first served, while the batch and the pool have
    // room.
    while (queue_head < n && at.arrival[size_t(queue_head)] <= clock &&
           int(admitted.size()) < p.max_batch) {
      std::vector<int> blocks = pool.allocate(p.blocks_for(trace.requests[size_t(queue_head)]));
      if (blocks.empty()) break;
      std::copy(blocks.begin(), blocks.end(),
                s.block_table.begin() + int64_t{queue_head} * s.max_blocks);
      held_blocks += int(blocks.size());
      s.admit_step[size_t(queue_head)] = step;
      admitted.push_back(queue_head++);
    }
    s.peak_rows_held = std::max(s.peak_rows_held, int64_t{held_blocks} * p.block_rows);
    // Prefill, in arrival order.
    int budget = p.prefill == Prefill::whole ? std::numeric_limits<int>::max() : p.budget_tokens;
    for (int r : admitted) {
      const int left = trace.requests[size_t(r)].prompt - prefilled[size_t(r)];
      if (left == 0) continue;
      int count = std::min(left, budget);
      if (count < left) count -= count % p.query_block;  // a partial chunk ends on a query block
      if (count == 0) break;  // the budget is spent: nobody behind jumps the queue
      s.chunks.push_back({r, prefilled[size_t(r)], count});
      prefilled[size_t(r)] += count;
      budget -= count;
      if (prefilled[size_t(r)] == trace.requests[size_t(r)].prompt)
        s.prefilled_step[size_t(r)] = step;
    }
    s.chunk_begin.push_back(int(s.chunks.size()));
    // Decode one token of every request whose prompt is in the cache (this step's last chunk
    // included: its K/V rows are written before the step's attention), then the finished leave.
    std::vector<int> still;
    for (int r : admitted) {
      const Request& req = trace.requests[size_t(r)];
      if (prefilled[size_t(r)] == req.prompt) s.entries.push_back({r, next_t[size_t(r)]++});
      if (next_t[size_t(r)] < req.output) {
        still.push_back(r);
        continue;
      }
      s.finish_step[size_t(r)] = step;
      const auto row = s.block_table.begin() + int64_t{r} * s.max_blocks;
      const std::vector<int> blocks(row, row + p.blocks_for(req));
      pool.release(blocks);
      held_blocks -= int(blocks.size());
    }
    s.entry_begin.push_back(int(s.entries.size()));
    s.clock.push_back(clock);
    admitted.swap(still);
  }
  return s;
}

// The value below which a fraction q of `values` lies (nearest rank; values need not be sorted).
inline double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = size_t(std::max(0.0, q * double(values.size()) - 1e-9));
  return values[std::min(rank, values.size() - 1)];
}

}  // namespace ch15

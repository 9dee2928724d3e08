// Tests the prefill-and-decode scheduler of chapters/ch15/serving_schedule.hpp
// (make_mixed_schedule, ch15/prefill_decode_interference's host side) without a GPU: whole or
// chunked, every prompt token is prefilled exactly once, in order, in chunks that end on query
// blocks and fit the step's token budget; every output token is decoded exactly once, one per step,
// from the step its prompt is done; nobody is admitted before arriving or out of turn; KV blocks
// are never shared. Small traces are checked step by step against schedules worked out by hand, and
// the chapter's two traces' counts are pinned.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "../../chapters/ch15/serving_schedule.hpp"

namespace {

using ch15::ArrivingTrace;
using ch15::MixedPolicy;
using ch15::MixedSchedule;
using ch15::Prefill;
using ch15::PrefillChunk;
using ch15::Request;

MixedPolicy policy(Prefill prefill, int budget_tokens) {
  return {prefill,
          budget_tokens,
          /*query_block=*/128,
          /*block_rows=*/16,
          /*budget_rows=*/1 << 20,
          /*max_batch=*/256,
          /*max_length=*/16384};
}

std::vector<int> prefill_tokens(const MixedSchedule& s) {
  std::vector<int> v;
  for (int step = 0; step < s.steps(); ++step) v.push_back(s.prefill_tokens(step));
  return v;
}
std::vector<int> batches(const MixedSchedule& s) {
  std::vector<int> v;
  for (int step = 0; step < s.steps(); ++step) v.push_back(s.batch(step));
  return v;
}
std::vector<std::tuple<int, int, int>> chunks(const MixedSchedule& s) {
  std::vector<std::tuple<int, int, int>> v;
  for (const PrefillChunk& c : s.chunks) v.emplace_back(c.request, c.first, c.count);
  return v;
}

void check_mixed(const ArrivingTrace& at, const MixedPolicy& p, const MixedSchedule& s) {
  const auto& reqs = at.trace.requests;
  const int n = int(reqs.size());
  ASSERT_EQ(int(s.clock.size()), s.steps());
  for (int step = 1; step < s.steps(); ++step)
    EXPECT_GT(s.clock[size_t(step)], s.clock[size_t(step) - 1]);
  // Admitted in arrival order, never before arriving.
  for (int r = 0; r < n; ++r) {
    ASSERT_GE(s.admit_step[size_t(r)], 0) << "request " << r << " never admitted";
    EXPECT_GE(s.clock[size_t(s.admit_step[size_t(r)])], at.arrival[size_t(r)]);
    if (r > 0) {
      EXPECT_GE(s.admit_step[size_t(r)], s.admit_step[size_t(r) - 1]);
    }
  }
  // Prefill: each request's chunks contiguous from 0 to its prompt, after admission; chunked, a
  // step within the budget and every chunk but a prompt's last a whole number of query blocks.
  std::vector<int> done(size_t(n), 0), last_chunk_step(size_t(n), -1);
  int64_t prefilled = 0;
  for (int step = 0; step < s.steps(); ++step) {
    int tokens = 0;
    for (int i = s.chunk_begin[size_t(step)]; i < s.chunk_begin[size_t(step) + 1]; ++i) {
      const PrefillChunk c = s.chunks[size_t(i)];
      EXPECT_EQ(c.first, done[size_t(c.request)]) << "a gap or a repeat in request " << c.request;
      EXPECT_GT(c.count, 0);
      EXPECT_GE(step, s.admit_step[size_t(c.request)]);
      EXPECT_EQ(c.first % p.query_block, 0) << "a chunk starting inside a query block";
      done[size_t(c.request)] += c.count;
      EXPECT_LE(done[size_t(c.request)], reqs[size_t(c.request)].prompt);
      if (done[size_t(c.request)] < reqs[size_t(c.request)].prompt) {
        EXPECT_EQ(c.count % p.query_block, 0);
      }
      last_chunk_step[size_t(c.request)] = step;
      tokens += c.count;
      prefilled += c.count;
    }
    EXPECT_EQ(tokens, s.prefill_tokens(step));
    if (p.prefill == Prefill::chunked) {
      EXPECT_LE(tokens, p.budget_tokens);
    }
    EXPECT_GT(tokens + s.batch(step), 0) << "an empty step";
  }
  EXPECT_EQ(prefilled, at.trace.prompt_tokens);
  for (int r = 0; r < n; ++r) {
    EXPECT_EQ(done[size_t(r)], reqs[size_t(r)].prompt);
    EXPECT_EQ(s.prefilled_step[size_t(r)], last_chunk_step[size_t(r)]);
    if (p.prefill == Prefill::whole) {
      EXPECT_EQ(s.prefilled_step[size_t(r)], s.admit_step[size_t(r)]);
    }
  }
  // Decode: token t of request r at step prefilled + t, each once; the last at finish_step.
  std::set<std::pair<int, int>> served;
  int64_t tokens = 0;
  for (int step = 0; step < s.steps(); ++step) {
    EXPECT_LE(s.batch(step), p.max_batch);
    for (int i = s.entry_begin[size_t(step)]; i < s.entry_begin[size_t(step) + 1]; ++i) {
      const auto e = s.entries[size_t(i)];
      EXPECT_TRUE(served.insert({e.request, e.t}).second) << "token served twice";
      EXPECT_EQ(step, s.prefilled_step[size_t(e.request)] + e.t);
      if (e.t == reqs[size_t(e.request)].output - 1) {
        EXPECT_EQ(s.finish_step[size_t(e.request)], step);
      }
      ++tokens;
    }
  }
  EXPECT_EQ(tokens, at.trace.tokens);
  // Live requests' blocks disjoint, within the pool.
  const int pool_blocks = int(p.budget_rows / p.block_rows);
  for (int step = 0; step < s.steps(); ++step) {
    std::set<int> live;
    for (int r = 0; r < n; ++r) {
      if (s.admit_step[size_t(r)] > step || s.finish_step[size_t(r)] < step) continue;
      for (int b = 0; b < p.blocks_for(reqs[size_t(r)]); ++b) {
        const int block = s.block_table[size_t(r) * s.max_blocks + size_t(b)];
        EXPECT_GE(block, 0);
        EXPECT_LT(block, pool_blocks);
        EXPECT_TRUE(live.insert(block).second) << "block " << block << " held twice";
      }
    }
  }
  EXPECT_LE(s.peak_rows_held, p.budget_rows);
}

ArrivingTrace two(Request a, int at_a, Request b, int at_b) {
  ArrivingTrace t;
  t.add(a, at_a);
  t.add(b, at_b);
  return t;
}

TEST(MixedSchedule, WholePrefillHoldsTheDecodesStep) {
  // A chat (prompt 2, 3 tokens) decoding when a 300-token prompt arrives at step 1.
  const ArrivingTrace t = two({2, 3}, 0, {300, 1}, 1);
  const MixedPolicy p = policy(Prefill::whole, 0);
  const MixedSchedule s = ch15::make_mixed_schedule(t, p);
  check_mixed(t, p, s);
  EXPECT_EQ(chunks(s), (std::vector<std::tuple<int, int, int>>{{0, 0, 2}, {1, 0, 300}}));
  EXPECT_EQ(prefill_tokens(s), (std::vector<int>{2, 300, 0}));
  EXPECT_EQ(batches(s), (std::vector<int>{1, 2, 1}));  // the chat's token 1 waits for 300 prefills
}

TEST(MixedSchedule, ChunkedPrefillSpreadsTheLongPrompt) {
  const ArrivingTrace t = two({2, 3}, 0, {300, 1}, 1);
  const MixedPolicy p = policy(Prefill::chunked, 128);
  const MixedSchedule s = ch15::make_mixed_schedule(t, p);
  check_mixed(t, p, s);
  EXPECT_EQ(chunks(s), (std::vector<std::tuple<int, int, int>>{
                           {0, 0, 2}, {1, 0, 128}, {1, 128, 128}, {1, 256, 44}}));
  EXPECT_EQ(prefill_tokens(s), (std::vector<int>{2, 128, 128, 44}));
  EXPECT_EQ(batches(s), (std::vector<int>{1, 1, 1, 1}));
  EXPECT_EQ(s.prefilled_step[1], 3);
  // A budget of two blocks: the prompt is done at step 2 and decodes there beside the chat.
  const MixedSchedule wider = ch15::make_mixed_schedule(t, policy(Prefill::chunked, 256));
  check_mixed(t, policy(Prefill::chunked, 256), wider);
  EXPECT_EQ(prefill_tokens(wider), (std::vector<int>{2, 256, 44}));
  EXPECT_EQ(batches(wider), (std::vector<int>{1, 1, 2}));
}

TEST(MixedSchedule, ABudgetLeftOverIsSpentInWholeQueryBlocks) {
  // Two prompts at step 0, budget 256: the first takes 100, the second the 128 of the 156 left
  // that make a whole block, then the rest at the next steps.
  const ArrivingTrace t = two({100, 1}, 0, {300, 1}, 0);
  const MixedPolicy p = policy(Prefill::chunked, 256);
  const MixedSchedule s = ch15::make_mixed_schedule(t, p);
  check_mixed(t, p, s);
  EXPECT_EQ(chunks(s),
            (std::vector<std::tuple<int, int, int>>{{0, 0, 100}, {1, 0, 128}, {1, 128, 172}}));
  EXPECT_EQ(batches(s), (std::vector<int>{1, 1}));
}

TEST(MixedSchedule, IdleStepsAreSkippedOnTheArrivalClock) {
  const ArrivingTrace t = two({5, 2}, 4, {5, 1}, 10);
  const MixedSchedule s = ch15::make_mixed_schedule(t, policy(Prefill::chunked, 128));
  check_mixed(t, policy(Prefill::chunked, 128), s);
  EXPECT_EQ(s.clock, (std::vector<int>{4, 5, 10}));
  EXPECT_EQ(batches(s), (std::vector<int>{1, 1, 1}));
}

TEST(MixedSchedule, RefusesABudgetOfPartialBlocks) {
  const ArrivingTrace t = two({5, 2}, 0, {5, 1}, 0);
  EXPECT_THROW(ch15::make_mixed_schedule(t, policy(Prefill::chunked, 200)), std::invalid_argument);
  EXPECT_THROW(ch15::make_mixed_schedule(t, policy(Prefill::chunked, 64)), std::invalid_argument);
  ArrivingTrace late;
  late.add({5, 1}, 3);
  EXPECT_THROW(late.add({5, 1}, 2), std::invalid_argument);
}

// The example's schedules (prefill_decode_interference.cu's limits: a pool of 32768 positions, 256
// requests, context 8448, budget 2048; verifying 2048, 16, 512, budget 128), pinned: a change to
// the trace or the scheduler shows here before it moves a recorded expectation.
struct Shape {
  int steps, prefill_steps, largest_prefill;
};
Shape shape_of(const MixedSchedule& s) {
  Shape r{s.steps(), 0, 0};
  for (int step = 0; step < s.steps(); ++step) {
    r.prefill_steps += s.prefill_tokens(step) > 0;
    r.largest_prefill = std::max(r.largest_prefill, s.prefill_tokens(step));
  }
  return r;
}

TEST(MixedSchedule, TheChaptersTracesSameWorkEitherWay) {
  for (bool verifying : {true, false}) {
    const ArrivingTrace t = ch15::interference_trace(verifying);
    MixedPolicy whole{Prefill::whole, 0, 128, 16, 32768, 256, 8448};
    if (verifying) whole.budget_rows = 2048, whole.max_batch = 16, whole.max_length = 512;
    MixedPolicy chunked = whole;
    chunked.prefill = Prefill::chunked;
    chunked.budget_tokens = verifying ? 128 : 2048;
    const MixedSchedule a = ch15::make_mixed_schedule(t, whole);
    const MixedSchedule b = ch15::make_mixed_schedule(t, chunked);
    check_mixed(t, whole, a);
    check_mixed(t, chunked, b);
    const Shape sa = shape_of(a), sb = shape_of(b);
    if (verifying) {
      EXPECT_EQ(t.trace.requests.size(), 12u);
      EXPECT_EQ(t.trace.prompt_tokens, 741);
      EXPECT_EQ(t.trace.tokens, 69);
      EXPECT_EQ(sa.largest_prefill, 376);
      EXPECT_EQ(sb.largest_prefill, 128);
      EXPECT_GT(sb.prefill_steps, sa.prefill_steps);  // a document in several chunks
    } else {
      EXPECT_EQ(t.trace.requests.size(), 272u);
      EXPECT_EQ(t.trace.prompt_tokens, 140236);
      EXPECT_EQ(t.trace.tokens, 15580);
      EXPECT_EQ(t.trace.longest, 8145);
      EXPECT_EQ(sa.steps, 880);
      EXPECT_EQ(sb.steps, 880);
      EXPECT_EQ(sa.prefill_steps, 257);
      EXPECT_EQ(sb.prefill_steps, 290);
      EXPECT_EQ(sa.largest_prefill, 8177);  // a document whole, beside a chat's prompt
      EXPECT_EQ(sb.largest_prefill, 2048);
    }
  }
}

}  // namespace

// Tests chapters/ch15/serving_schedule.hpp, the host side of ch15's serving engine, without a
// GPU: the seeded trace is reproducible and within its bounds; the block pool hands out and takes
// back exact counts; and every schedule (static or continuous batching, reserved regions or pages)
// serves every output token of every request exactly once, in order, one per step from admission
// to finish, never holds more KV than the budget or two live requests on one block, admits first
// come first served, and admits exactly when its policy says. Two small traces are checked step by
// step against counts worked out by hand.
#include "../../chapters/ch15/serving_schedule.hpp"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

namespace {

using ch15::Batching;
using ch15::BlockPool;
using ch15::LengthShape;
using ch15::Policy;
using ch15::Request;
using ch15::Schedule;
using ch15::Trace;

Trace trace_of(const std::vector<Request>& requests) {
  Trace t;
  for (const Request& r : requests) t.add(r);
  return t;
}

std::vector<int> batch_sizes(const Schedule& s) {
  std::vector<int> sizes;
  for (int step = 0; step < s.steps(); ++step) sizes.push_back(s.batch(step));
  return sizes;
}

// Every invariant a schedule must keep, whatever the policy.
void check_schedule(const Trace& trace, const Policy& p, const Schedule& s) {
  const int n = int(trace.requests.size());
  // Admitted first come first served, each once.
  ASSERT_EQ(int(s.admitted.size()), n);
  for (int i = 0; i < n; ++i) EXPECT_EQ(s.admitted[size_t(i)], i);
  std::vector<int> admit_step(size_t(n), -1);
  for (int step = 0; step < s.steps(); ++step)
    for (int i = s.admit_begin[size_t(step)]; i < s.admit_begin[size_t(step) + 1]; ++i)
      admit_step[size_t(s.admitted[size_t(i)])] = step;
  // Token t of request r decoded exactly once, at step admit + t; the last at finish_step.
  std::map<std::pair<int, int>, int> decoded_at;
  int64_t tokens = 0;
  for (int step = 0; step < s.steps(); ++step) {
    EXPECT_LE(s.batch(step), p.max_batch);
    EXPECT_GT(s.batch(step), 0) << "a step with nothing to decode";
    for (int i = s.entry_begin[size_t(step)]; i < s.entry_begin[size_t(step) + 1]; ++i) {
      const auto e = s.entries[size_t(i)];
      EXPECT_TRUE(decoded_at.emplace(std::pair{e.request, e.t}, step).second)
          << "token served twice";
      EXPECT_EQ(step, admit_step[size_t(e.request)] + e.t);
      ++tokens;
    }
  }
  EXPECT_EQ(tokens, trace.tokens);
  for (int r = 0; r < n; ++r) {
    const int last = trace.requests[size_t(r)].output - 1;
    ASSERT_TRUE(decoded_at.count({r, last})) << "request " << r << " not finished";
    EXPECT_EQ(s.finish_step[size_t(r)], decoded_at.at({r, last}));
  }
  // Live requests' blocks: within the budget, disjoint, as many as the request needs.
  const int pool_blocks = int(p.budget_rows / p.block_rows);
  int64_t peak = 0;
  for (int step = 0; step < s.steps(); ++step) {
    std::set<int> live_blocks;
    int held = 0;
    for (int r = 0; r < n; ++r) {
      if (admit_step[size_t(r)] > step || s.finish_step[size_t(r)] < step) continue;
      for (int b = 0; b < p.blocks_for(trace.requests[size_t(r)]); ++b) {
        const int block = s.block_table[size_t(r) * s.max_blocks + size_t(b)];
        EXPECT_GE(block, 0);
        EXPECT_LT(block, pool_blocks);
        EXPECT_TRUE(live_blocks.insert(block).second)
            << "block " << block << " held twice at step " << step;
        ++held;
      }
    }
    peak = std::max(peak, int64_t{held} * p.block_rows);
  }
  EXPECT_EQ(s.peak_rows_held, peak);
  EXPECT_LE(s.peak_rows_held, p.budget_rows);
  // Admission when the policy says so: static only into an empty batch; continuous whenever the
  // queue's head fits (the batch has room and the pool its blocks) at the start of a step.
  for (int step = 0; step < s.steps(); ++step) {
    int running_before = 0, free_blocks = pool_blocks;
    for (int r = 0; r < n; ++r)
      if (admit_step[size_t(r)] < step && s.finish_step[size_t(r)] >= step) {
        ++running_before;
        free_blocks -= p.blocks_for(trace.requests[size_t(r)]);
      }
    const int admitted = s.admit_begin[size_t(step) + 1] - s.admit_begin[size_t(step)];
    if (p.batching == Batching::static_batches && running_before > 0) EXPECT_EQ(admitted, 0);
    const int next =
        s.admit_begin[size_t(step) + 1];  // the queue's head after this step's admissions
    if (next < n && (p.batching == Batching::continuous || running_before == 0)) {
      int blocks = 0;
      for (int i = s.admit_begin[size_t(step)]; i < next; ++i)
        blocks += p.blocks_for(trace.requests[size_t(i)]);
      const bool room = running_before + admitted < p.max_batch;
      const bool fits = p.blocks_for(trace.requests[size_t(next)]) <= free_blocks - blocks;
      EXPECT_FALSE(room && fits) << "request " << next << " fitted at step " << step
                                 << " but waited";
    }
  }
}

TEST(ServingTrace, SameSeedSameTraceWithinBounds) {
  const LengthShape prompt{16, 64, 3}, output{16, 32, 4};
  const Trace a = ch15::make_trace(512, 15, prompt, output),
              b = ch15::make_trace(512, 15, prompt, output);
  const Trace c = ch15::make_trace(512, 16, prompt, output);
  ASSERT_EQ(a.requests.size(), 512u);
  int64_t tokens = 0, rows = 0;
  bool differs = false;
  for (size_t i = 0; i < a.requests.size(); ++i) {
    EXPECT_EQ(a.requests[i].prompt, b.requests[i].prompt);
    EXPECT_EQ(a.requests[i].output, b.requests[i].output);
    differs |= a.requests[i].output != c.requests[i].output;
    EXPECT_GE(a.requests[i].prompt, 16);
    EXPECT_LE(a.requests[i].prompt, prompt.max());
    EXPECT_GE(a.requests[i].output, 16);
    EXPECT_LE(a.requests[i].output, output.max());
    EXPECT_EQ(a.kv_start[i], rows);
    EXPECT_EQ(a.token_start[i], tokens);
    rows += a.requests[i].length();
    tokens += a.requests[i].output;
  }
  EXPECT_TRUE(differs) << "another seed gave the same trace";
  EXPECT_EQ(a.tokens, tokens);
  EXPECT_EQ(a.kv_rows, rows);
  EXPECT_EQ(prompt.max(), 16 + (64 << 3) - 1);
  // Long-tailed: the longest output is several times the mean.
  int longest = 0;
  for (const Request& r : a.requests) longest = std::max(longest, r.output);
  EXPECT_GT(longest, 4 * tokens / 512);
}

TEST(ServingBlockPool, AllocatesAndReleasesExactCounts) {
  BlockPool pool(5);
  const auto a = pool.allocate(2);
  EXPECT_EQ(a, (std::vector<int>{0, 1}));
  EXPECT_EQ(pool.free_blocks(), 3);
  EXPECT_TRUE(pool.allocate(4).empty());  // refused whole, nothing taken
  EXPECT_EQ(pool.free_blocks(), 3);
  const auto b = pool.allocate(3);
  EXPECT_EQ(b, (std::vector<int>{2, 3, 4}));
  EXPECT_EQ(pool.free_blocks(), 0);
  pool.release(a);
  EXPECT_EQ(pool.free_blocks(), 2);
  EXPECT_EQ(pool.allocate(2), a);  // the blocks just freed come back first
}

// Outputs {5, 1, 1, 1}, batch 2, room in the pool for all: static runs [0 1] for 5 steps, then
// [2 3] for one (6 steps); continuous puts 2 and 3 into request 1's and 2's freed places (5 steps).
TEST(ServingSchedule, StaticWaitsForTheLongestContinuousRefills) {
  const Trace trace = trace_of({{4, 5}, {4, 1}, {4, 1}, {4, 1}});
  Policy p{Batching::static_batches, 16, 64, 2, 32};
  const Schedule fixed = ch15::make_schedule(trace, p);
  check_schedule(trace, p, fixed);
  EXPECT_EQ(batch_sizes(fixed), (std::vector<int>{2, 1, 1, 1, 1, 2}));
  EXPECT_EQ(fixed.finish_step, (std::vector<int>{4, 0, 5, 5}));
  p.batching = Batching::continuous;
  const Schedule refilled = ch15::make_schedule(trace, p);
  check_schedule(trace, p, refilled);
  EXPECT_EQ(batch_sizes(refilled), (std::vector<int>{2, 2, 2, 1, 1}));
  EXPECT_EQ(refilled.finish_step, (std::vector<int>{4, 0, 1, 2}));
  EXPECT_EQ(refilled.largest_batch, 2);
}

// A budget of 64 rows: reserved regions of the 32-token maximum fit 2 requests of 8 tokens; pages
// of 16 fit 4 (one page each), so the 8 two-token requests take 4 steps rather than 8.
TEST(ServingSchedule, PagesFitMoreRequestsInTheSameBudget) {
  const Trace trace = trace_of(std::vector<Request>(8, Request{6, 2}));
  const Policy reserved{Batching::continuous, 32, 64, 8, 32},
      paged{Batching::continuous, 16, 64, 8, 32};
  const Schedule r = ch15::make_schedule(trace, reserved), q = ch15::make_schedule(trace, paged);
  check_schedule(trace, reserved, r);
  check_schedule(trace, paged, q);
  EXPECT_EQ(r.largest_batch, 2);
  EXPECT_EQ(q.largest_batch, 4);
  EXPECT_EQ(r.steps(), 8);
  EXPECT_EQ(q.steps(), 4);
  EXPECT_EQ(r.peak_rows_held, 64);
  EXPECT_EQ(q.peak_rows_held, 64);
  EXPECT_EQ(r.max_blocks, 1);
  EXPECT_EQ(q.max_blocks, 2);
}

TEST(ServingSchedule, EveryPolicyServesASeededTraceExactly) {
  const Trace trace = ch15::make_trace(200, 7, {1, 24, 2}, {1, 8, 3});
  for (const Batching batching : {Batching::static_batches, Batching::continuous})
    for (const int block_rows : {16, 128}) {
      const Policy p{batching, block_rows, 1024, 12, 128};
      SCOPED_TRACE(testing::Message()
                   << (batching == Batching::continuous ? "continuous" : "static") << ", blocks of "
                   << block_rows);
      check_schedule(trace, p, ch15::make_schedule(trace, p));
    }
}

// The schedules the chapter's examples replay (their policies as paged_kv_cache.cu and
// continuous_batching.cu configure them), pinned: a change to the trace or the scheduler changes
// what the recorded expectations measured, and must show here first.
TEST(ServingSchedule, TheChaptersTimingSchedules) {
  const Trace trace = ch15::serving_trace(/*verifying=*/false);
  EXPECT_EQ(trace.requests.size(), 512u);
  EXPECT_EQ(trace.tokens, 30732);
  EXPECT_EQ(trace.kv_rows, 79314);
  struct Case {
    Policy policy;
    int steps, largest_batch;
    int64_t peak_rows;
  };
  const Case cases[] = {
      {{Batching::continuous, 2048, 32768, 256, 2048}, 2205, 16, 32768},  // paged_kv_cache
      {{Batching::continuous, 16, 32768, 256, 2048}, 519, 192, 32768},
      {{Batching::static_batches, 16, 32768, 64, 2048}, 3034, 64, 11456},  // continuous_batching
      {{Batching::continuous, 16, 32768, 64, 2048}, 809, 64, 16352},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(testing::Message()
                 << "blocks of " << c.policy.block_rows << ", batch " << c.policy.max_batch);
    const Schedule s = ch15::make_schedule(trace, c.policy);
    check_schedule(trace, c.policy, s);
    EXPECT_EQ(s.steps(), c.steps);
    EXPECT_EQ(s.largest_batch, c.largest_batch);
    EXPECT_EQ(s.peak_rows_held, c.peak_rows);
  }
}

TEST(ServingSchedule, RefusesRequestsThatCannotFit) {
  const Trace trace = trace_of({{30, 5}});
  EXPECT_THROW(ch15::make_schedule(trace, Policy{Batching::continuous, 16, 64, 2, 32}),
               std::invalid_argument);
  EXPECT_THROW(ch15::make_schedule(trace, Policy{Batching::continuous, 16, 32, 2, 64}),
               std::invalid_argument);
}

TEST(ServingPercentile, NearestRank) {
  EXPECT_EQ(ch15::percentile({4, 1, 3, 2}, 0.5), 2);
  EXPECT_EQ(ch15::percentile({4, 1, 3, 2}, 0.99), 4);
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  EXPECT_EQ(ch15::percentile(v, 0.99), 99);
  EXPECT_EQ(ch15::percentile(v, 0.5), 50);
}

}  // namespace

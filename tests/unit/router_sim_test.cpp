// Tests chapters/ch17/router_sim.hpp, the request-routing simulation of ch17's router_load_balance,
// without a GPU, under a linear step-cost model (a fixed cost a step, per prefill token, per
// running request and per context token): the trace is reproducible and has the shape asked for;
// every request is served exactly once with exactly its tokens, under both routers; the same inputs
// give the same outcome; and on a trace where 30% of requests share one of 8 long system prompts,
// the prefix- and load-aware router hits the workers' prefix caches far more often than
// round-robin, and so cuts the TTFT tail (p99) by more than 2x, at the same tokens/s while neither
// saturates. And the step model router_load_balance.cu builds from its measured kernel times
// (Line, MeasuredStep): a line through two measurements reproduces them and never goes below zero,
// and a step adds up its parts as documented.
#include "../../chapters/ch17/router_sim.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace {

using namespace ch17::router;

double linear_cost(int64_t prefill_tokens, int batch, int64_t context_sum) {
  return 4e-3 + 40e-6 * double(prefill_tokens) + 50e-6 * batch + 2e-9 * double(context_sum);
}

TEST(RouterSim, TraceIsReproducibleAndShaped) {
  const TraceShape shape;
  const auto a = make_trace(shape, 7), b = make_trace(shape, 7), c = make_trace(shape, 8);
  ASSERT_EQ(int(a.size()), shape.requests);
  int shared = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].arrival_s, b[i].arrival_s);
    EXPECT_EQ(a[i].own_tokens, b[i].own_tokens);
    if (i > 0) {
      EXPECT_GE(a[i].arrival_s, a[i - 1].arrival_s);
    }
    EXPECT_GE(a[i].own_tokens, shape.own_min);
    EXPECT_LE(a[i].own_tokens, shape.own_max);
    EXPECT_LT(a[i].prefix, shape.prefixes);
    shared += a[i].prefix >= 0;
  }
  EXPECT_NEAR(double(shared) / shape.requests, shape.shared, 0.04);
  EXPECT_NEAR(a.back().arrival_s, shape.requests / shape.rate_per_s,
              0.1 * shape.requests / shape.rate_per_s);
  EXPECT_NE(a[5].arrival_s, c[5].arrival_s);
}

TEST(RouterSim, EveryRequestServedOnceWithItsTokens) {
  const auto trace = make_trace(TraceShape{}, 1);
  int64_t expected = 0;
  for (const Request& r : trace) expected += r.output_tokens;
  for (Router route : {round_robin(), prefix_and_load_aware()}) {
    const Outcome out = simulate(trace, ClusterShape{}, linear_cost, route);
    EXPECT_NO_THROW(check_served(trace, out));
    EXPECT_EQ(out.generated_tokens(), expected);
    EXPECT_GT(out.utilisation(), 0.0);
    EXPECT_LE(out.utilisation(), 1.0);
  }
}

TEST(RouterSim, CheckCatchesARequestServedTwiceOrShort) {
  const auto trace = make_trace(TraceShape{.requests = 50}, 1);
  Outcome out = simulate(trace, ClusterShape{}, linear_cost, round_robin());
  Outcome twice = out, short_one = out;
  ++twice.requests[17].times_admitted;
  --short_one.requests[3].generated;
  EXPECT_THROW(check_served(trace, twice), std::logic_error);
  EXPECT_THROW(check_served(trace, short_one), std::logic_error);
}

TEST(RouterSim, SameInputsSameOutcome) {
  const auto trace = make_trace(TraceShape{}, 3);
  const Outcome a = simulate(trace, ClusterShape{}, linear_cost, prefix_and_load_aware());
  const Outcome b = simulate(trace, ClusterShape{}, linear_cost, prefix_and_load_aware());
  for (size_t i = 0; i < trace.size(); ++i) {
    EXPECT_EQ(a.requests[i].worker, b.requests[i].worker);
    EXPECT_EQ(a.requests[i].first_token_s, b.requests[i].first_token_s);
  }
}

TEST(RouterSim, PrefixAwareRoutingHitsTheCacheAndCutsTheTail) {
  const auto trace = make_trace(TraceShape{}, 11);
  const Outcome rr = simulate(trace, ClusterShape{}, linear_cost, round_robin());
  const Outcome aware = simulate(trace, ClusterShape{}, linear_cost, prefix_and_load_aware());
  const auto hit_rate = [&](const Outcome& o) {
    int shared = 0, hits = 0;
    for (const Request& r : trace)
      if (r.prefix >= 0) ++shared, hits += o.requests[r.id].prefix_hit;
    return double(hits) / shared;
  };
  const auto summary = [&](const Outcome& o) {
    return testing::Message() << o.tokens_per_s() << " tokens/s, TTFT p50 "
                              << o.ttft_quantile(trace, 0.5) << " s, p99 "
                              << o.ttft_quantile(trace, 0.99) << " s, utilisation "
                              << o.utilisation() << ", prefix hits " << hit_rate(o);
  };
  SCOPED_TRACE(testing::Message() << "round-robin: " << summary(rr)
                                  << "; aware: " << summary(aware));
  EXPECT_GT(hit_rate(aware), 0.9);
  EXPECT_LT(hit_rate(rr), 0.5);
  EXPECT_GE(aware.tokens_per_s(), rr.tokens_per_s());  // the offered load, when neither saturates
  EXPECT_LT(2 * aware.ttft_quantile(trace, 0.99), rr.ttft_quantile(trace, 0.99));
}

TEST(RouterSim, LineThroughTwoMeasurementsReproducesThem) {
  const Line line = Line::through(512, 40e-6, 4096, 300e-6);
  EXPECT_NEAR(line(512), 40e-6, 1e-15);
  EXPECT_NEAR(line(4096), 300e-6, 1e-15);
  EXPECT_NEAR(line(8192), 300e-6 + 4096 * (260e-6 / 3584), 1e-15);  // extended beyond
  EXPECT_GT(line.fixed, 0.0);
  EXPECT_THROW(Line::through(10, 1, 10, 2), std::invalid_argument);
  EXPECT_THROW(Line::through(10, 1, 5, 2), std::invalid_argument);
}

TEST(RouterSim, LineNeverGoesBelowZeroOrDownhill) {
  // Noise: the larger point measured faster. The slope is held at 0 and the fixed cost at the
  // first point's time, so more work never costs less.
  const Line flat = Line::through(64, 20e-6, 2048, 18e-6);
  EXPECT_EQ(flat.per_unit, 0.0);
  EXPECT_EQ(flat(0), 20e-6);
  // A slope steep enough to put the fixed cost below zero: held at zero.
  const Line steep = Line::through(100, 1e-6, 200, 10e-6);
  EXPECT_EQ(steep.fixed, 0.0);
  EXPECT_GE(steep(0), 0.0);
  EXPECT_NEAR(steep(200), 18e-6, 1e-15);  // the slope is kept, so points above shift up
}

TEST(RouterSim, MeasuredStepAddsItsPartsPerLayer) {
  const MeasuredStep step{Line{5e-6, 1e-9}, 2e-8, Line{10e-6, 3e-9}, 32, 12};
  // Decode only: 4 running requests, 10000 context tokens; 12 GEMMs over 4 rows.
  EXPECT_NEAR(step(0, 4, 10000), 32 * (12 * (10e-6 + 4 * 3e-9) + 5e-6 + 10000 * 1e-9), 1e-15);
  // Prefill only: no decode attention at all, the GEMMs over the 300 prompt rows.
  EXPECT_NEAR(step(300, 0, 0), 32 * (12 * (10e-6 + 300 * 3e-9) + 300 * 2e-8), 1e-15);
  // Both: one pass over the weights for all rows.
  EXPECT_NEAR(step(300, 4, 10000),
              32 * (12 * (10e-6 + 304 * 3e-9) + 300 * 2e-8 + 5e-6 + 10000 * 1e-9), 1e-15);
}

TEST(RouterSim, EveryRequestServedOnceUnderAMeasuredStep) {
  const auto trace = make_trace(TraceShape{.requests = 400}, 5);
  const MeasuredStep step{Line{8e-6, 5e-9}, 5e-8, Line{12e-6, 1.5e-8}, 32, 12};
  for (Router route : {round_robin(), prefix_and_load_aware()}) {
    const Outcome out = simulate(trace, ClusterShape{}, step, route);
    EXPECT_NO_THROW(check_served(trace, out));
    EXPECT_GT(out.ttft_quantile(trace, 0.99), 0.0);
  }
}

}  // namespace

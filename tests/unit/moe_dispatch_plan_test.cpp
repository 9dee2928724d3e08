// Tests chapters/ch15/moe_dispatch_plan.hpp, the host side of ch15/moe_dispatch, without a GPU:
// the seeded routing, the host permutation the references use (and the device one must equal),
// and the tile schedule over groups that the grouped GEMM's persistent CTAs walk.
#include "../../chapters/ch15/moe_dispatch_plan.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>
#include <vector>

namespace {

namespace moe = ch15::moe;

constexpr int kTileRows = 128;

TEST(MoeDispatchPlan, RoutingIsSeededDistinctAndNormalised) {
  for (bool skewed : {false, true}) {
    const moe::Routing r = moe::make_routing(301, 12, 8, skewed);
    const moe::Routing again = moe::make_routing(301, 12, 8, skewed);
    EXPECT_EQ(r.expert, again.expert);
    EXPECT_EQ(r.weight, again.weight);
    EXPECT_NE(r.expert, moe::make_routing(301, 12, 8, skewed, moe::kRoutingSeed + 1).expert);
    for (int t = 0; t < r.tokens; ++t) {
      std::set<int> seen;
      double sum = 0;
      for (int j = 0; j < r.top_k; ++j) {
        const int e = r.expert[t * r.top_k + j];
        ASSERT_GE(e, 0);
        ASSERT_LT(e, r.experts);
        seen.insert(e);
        ASSERT_GT(r.weight[t * r.top_k + j], 0.0f);
        sum += r.weight[t * r.top_k + j];
      }
      EXPECT_EQ(seen.size(), size_t(r.top_k)) << "token " << t;
      EXPECT_NEAR(sum, 1.0, 1e-6) << "token " << t;
    }
  }
  EXPECT_THROW(moe::make_routing(4, 4, 5, false), std::invalid_argument);
}

// The timing size's load: uniform keeps every expert near the mean; skewed gives the 4 hot
// experts (0, 32, 64, 96) most of the tokens each, about half of all routed rows together.
TEST(MoeDispatchPlan, UniformIsBalancedAndSkewedHasHotExperts) {
  const int tokens = 8192, experts = 128, k = 8, mean = tokens * k / experts;
  const moe::Permutation uniform =
      moe::plan_permutation(moe::make_routing(tokens, experts, k, false));
  for (int e = 0; e < experts; ++e) {
    EXPECT_GT(uniform.counts[e], mean * 3 / 4) << e;
    EXPECT_LT(uniform.counts[e], mean * 5 / 4) << e;
  }
  const moe::Permutation skewed =
      moe::plan_permutation(moe::make_routing(tokens, experts, k, true));
  int hot_rows = 0;
  for (int e = 0; e < experts; ++e) {
    EXPECT_EQ(moe::is_hot(e, experts), e % 32 == 0) << e;
    if (moe::is_hot(e, experts)) {
      EXPECT_GT(skewed.counts[e], tokens * 3 / 4) << e;
      hot_rows += skewed.counts[e];
    }
  }
  EXPECT_GT(hot_rows, tokens * k * 2 / 5);
  EXPECT_LT(hot_rows, tokens * k * 3 / 5);
}

// Every routed row gets one place; places are expert-major and, within an expert, in routed order.
TEST(MoeDispatchPlan, PermutationIsStableAndExpertMajor) {
  const moe::Routing r = moe::make_routing(301, 12, 8, true);
  const moe::Permutation p = moe::plan_permutation(r);
  ASSERT_EQ(p.offsets.front(), 0);
  ASSERT_EQ(p.offsets.back(), 301 * 8);
  std::vector<int> seen(r.expert.size(), 0);
  std::vector<int> last(r.experts, -1);
  for (size_t a = 0; a < r.expert.size(); ++a) {
    const int e = r.expert[a], place = p.position[a];
    ASSERT_GE(place, p.offsets[e]);
    ASSERT_LT(place, p.offsets[e + 1]);
    EXPECT_GT(place, last[e]) << "routed row " << a << " out of order";
    last[e] = place;
    ++seen[place];
  }
  EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
}

// A hand-worked schedule: rows {3, 0, 300, 128}, 3 column tiles: 1, 0, 3 and 1 row tiles.
TEST(MoeDispatchPlan, TileScheduleByHand) {
  const std::vector<int32_t> prefix = moe::tile_prefix({3, 0, 300, 128}, kTileRows, 3);
  EXPECT_EQ(prefix, (std::vector<int32_t>{0, 3, 3, 12, 15}));
  auto at = [&](int item) {
    const moe::WorkItem w = moe::locate_tile(prefix.data(), 4, item, 3);
    return std::make_tuple(w.expert, w.row_tile, w.col_tile);
  };
  EXPECT_EQ(at(0), std::make_tuple(0, 0, 0));
  EXPECT_EQ(at(2), std::make_tuple(0, 0, 2));
  EXPECT_EQ(at(3), std::make_tuple(2, 0, 0));  // expert 1 has no rows: no items
  EXPECT_EQ(at(7), std::make_tuple(2, 1, 1));
  EXPECT_EQ(at(11), std::make_tuple(2, 2, 2));
  EXPECT_EQ(at(12), std::make_tuple(3, 0, 0));
  EXPECT_EQ(at(14), std::make_tuple(3, 0, 2));
}

// At the verification and timing sizes, both routings: the items are every (expert, row tile,
// column tile) once, and the rows the kernel stores (a tile's rows below its expert's end) cover
// each expert's rows exactly once per column tile.
TEST(MoeDispatchPlan, TileScheduleCoversEveryRowOnce) {
  struct Size {
    int tokens, experts, n_tiles;
  };
  for (const Size size : {Size{301, 12, 2}, Size{8192, 128, 3}})
    for (bool skewed : {false, true}) {
      const moe::Permutation p =
          moe::plan_permutation(moe::make_routing(size.tokens, size.experts, 8, skewed));
      const std::vector<int32_t> prefix = moe::tile_prefix(p.counts, kTileRows, size.n_tiles);
      std::set<std::tuple<int, int, int>> items;
      std::vector<int> stored(size_t(size.tokens) * 8 * size.n_tiles, 0);
      for (int item = 0; item < prefix.back(); ++item) {
        const moe::WorkItem w = moe::locate_tile(prefix.data(), size.experts, item, size.n_tiles);
        ASSERT_LT(w.row_tile, moe::row_tiles(p.counts[w.expert], kTileRows));
        ASSERT_LT(w.col_tile, size.n_tiles);
        items.insert({w.expert, w.row_tile, w.col_tile});
        const int first = p.offsets[w.expert] + w.row_tile * kTileRows;
        for (int row = first; row < std::min(first + kTileRows, p.offsets[w.expert + 1]); ++row)
          ++stored[size_t(row) * size.n_tiles + w.col_tile];
      }
      EXPECT_EQ(items.size(), size_t(prefix.back()));
      EXPECT_TRUE(std::all_of(stored.begin(), stored.end(), [](int n) { return n == 1; }));
    }
}

}  // namespace

// Tests chapters/ch10/stream_k_plan.hpp, the schedule of persistent_gemm's "persistent_stream_k",
// without a GPU: for the shapes the chapter runs and small odd ones, every k-block of every tile
// is run exactly once; each tile is finished by one head unit that comes last in its CTA; the
// parts a finisher reads are exactly the other units of its tile, each the first unit of its CTA
// and published by it; and so no CTA waits on one that waits.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "../../chapters/ch10/stream_k_plan.hpp"

namespace {

using ch10::stream_k::Plan;
using ch10::stream_k::Unit;

struct Shape {
  int tiles, kblocks, ctas;
};

// The checks, with gtest's messages naming the shape.
void check_plan(const Shape& s) {
  const Plan plan{s.tiles, s.kblocks, s.ctas};
  SCOPED_TRACE(testing::Message() << s.tiles << " tiles x " << s.kblocks << " k-blocks over "
                                  << s.ctas << " CTAs");
  // k-blocks run per (tile, k-block): whole tiles by the grid stride, then the split units.
  std::map<std::pair<int, int>, int> runs;
  for (int cta = 0; cta < s.ctas; ++cta)
    for (int tile = cta; tile < plan.first_split_tile(); tile += s.ctas)
      for (int kb = 0; kb < s.kblocks; ++kb) ++runs[{tile, kb}];
  std::map<int, int> finisher;                  // split tile -> the CTA whose head unit it is
  std::map<int, std::set<int>> writers;         // split tile -> CTAs writing a part of it
  for (int cta = 0; cta < s.ctas; ++cta) {
    Unit units[2];
    const int n = plan.units(cta, units);
    ASSERT_LE(n, 2);
    for (int u = 0; u < n; ++u) {
      const Unit& unit = units[u];
      ASSERT_GE(unit.tile, plan.first_split_tile());
      ASSERT_LT(unit.tile, s.tiles);
      ASSERT_LT(unit.kb_begin, unit.kb_end);
      ASSERT_LE(unit.kb_end, s.kblocks);
      for (int kb = unit.kb_begin; kb < unit.kb_end; ++kb) ++runs[{unit.tile, kb}];
      if (unit.head()) {
        EXPECT_EQ(u, n - 1) << "a head unit must be its CTA's last (it waits)";
        EXPECT_FALSE(finisher.count(unit.tile)) << "tile " << unit.tile << " has two heads";
        finisher[unit.tile] = cta;
      } else {
        EXPECT_EQ(u, 0) << "a part that is not a head must be its CTA's first (it never waits)";
        EXPECT_TRUE(plan.writes_partial(cta));
        writers[unit.tile].insert(cta);
      }
    }
    if (n == 0 || units[0].head()) EXPECT_FALSE(plan.writes_partial(cta));
  }
  for (int tile = 0; tile < s.tiles; ++tile)
    for (int kb = 0; kb < s.kblocks; ++kb)
      ASSERT_EQ((runs[{tile, kb}]), 1) << "tile " << tile << " k-block " << kb;
  // The kernel's finisher loop reads exactly the writers of its tile; they are later CTAs.
  for (int tile = plan.first_split_tile(); tile < s.tiles; ++tile) {
    ASSERT_TRUE(finisher.count(tile)) << "tile " << tile << " has no head";
    std::set<int> read;
    for (int c = plan.next_part(finisher[tile], tile); c < plan.ctas; c = plan.next_part(c, tile))
      read.insert(c);
    EXPECT_EQ(read, writers[tile]) << "tile " << tile;
    for (int writer : read) EXPECT_GT(writer, finisher[tile]);
  }
}

TEST(StreamKPlan, TheChaptersShapesAndSmallOddOnes) {
  const std::vector<Shape> shapes = {
      {2048, 128, 132},  // 8192^3 on an H100 or H200 SXM: 68 split tiles, ~66 k-blocks a CTA
      {512, 64, 132},    // 4096^3: 116 split tiles, ~56 k-blocks a CTA
      {154, 5, 132},     // the verification size: 22 split tiles, ranges of 0 or 1 k-block
      {2048, 128, 114},  // an H100 PCIe's 114 SMs
      {154, 5, 114},
      {7, 3, 5},   {13, 7, 4}, {5, 1, 3}, {3, 10, 4}, {8, 4, 8}, {9, 1, 8}, {1, 1, 1}, {17, 9, 16}};
  for (const auto& s : shapes) check_plan(s);
}

TEST(StreamKPlan, EveryCtaGetsANearlyEqualShare) {
  const Plan plan{2048, 128, 132};
  EXPECT_EQ(plan.whole_tiles_per_cta(), 15);
  EXPECT_EQ(plan.split_blocks(), 68 * 128);
  for (int cta = 0; cta < 132; ++cta) {
    const int64_t share = plan.begin(cta + 1) - plan.begin(cta);
    EXPECT_GE(share, 65);
    EXPECT_LE(share, 66);
  }
}

TEST(StreamKPlan, NoSplitWhenTheTilesFillTheLastWave) {
  const Plan plan{264, 64, 132};
  EXPECT_EQ(plan.first_split_tile(), 264);
  Unit units[2];
  for (int cta = 0; cta < 132; ++cta) EXPECT_EQ(plan.units(cta, units), 0);
}

}  // namespace

// Tests ch20/l2_ahead_plan.hpp: the W_o lines rung 7b prefetches into L2 are exactly every row's
// bytes past its first slab, each line once, slab by slab; and how many fit beside the cache on
// the H100's and the H200's L2 at the layer's shape. A wrong line there changes no output (a
// prefetch has no effect on results), so the GPU tests cannot catch it: this one must.
#include "../../chapters/ch20/l2_ahead_plan.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <utility>

namespace {

namespace plan = ch20::l2_ahead;

TEST(L2AheadPlan, TheLinesAreEveryRowsBytesPastItsFirstSlabOnceSlabBySlab) {
  for (const int64_t hidden : {int64_t{1024}, int64_t{2048}, int64_t{4096}}) {
    const int64_t lines = plan::rest_lines(hidden);
    EXPECT_EQ(lines, hidden * (hidden - plan::kSlabElements) / plan::kLineElements) << hidden;
    std::set<std::pair<int64_t, int64_t>> seen;
    int64_t last_slab = 1;
    for (int64_t i = 0; i < lines; ++i) {
      const int64_t offset = plan::line_offset(hidden, i);
      const int64_t row = offset / hidden, column = offset % hidden;
      ASSERT_LT(row, hidden) << hidden << ", line " << i;
      ASSERT_GE(column, plan::kSlabElements) << "line " << i << " is in the first slab";
      ASSERT_EQ(column % plan::kLineElements, 0) << "line " << i << " is not line-aligned";
      ASSERT_TRUE(seen.insert({row, column}).second) << hidden << ": line " << i << " twice";
      const int64_t slab = column / plan::kSlabElements;
      ASSERT_GE(slab, last_slab) << hidden << ": line " << i << " goes back a slab";
      last_slab = slab;
    }
    EXPECT_EQ(int64_t(seen.size()), lines) << hidden;
  }
}

TEST(L2AheadPlan, RowsOfPartialSlabsAreRefused) {
  EXPECT_TRUE(plan::whole_slabs(4096));
  EXPECT_TRUE(plan::whole_slabs(1024));
  EXPECT_FALSE(plan::whole_slabs(1536));
}

// The layer: hidden 4096, 8 KV heads of 128, 4096 cached keys, K and V in BF16: 16 MiB of cache a
// sequence. L2: 50 MiB (H100), 60 MiB (H200).
TEST(L2AheadPlan, WhatFitsBesideTheCacheAtTheLayersShape) {
  const int64_t cache_per_sequence = int64_t{8} * 4096 * 128 * 2 * 2, h100 = int64_t{50} << 20,
                h200 = int64_t{60} << 20, all = plan::rest_lines(4096);
  EXPECT_EQ(all, 3 * 4096 * 16);  // 25.2 MB
  EXPECT_EQ(plan::lines_that_fit(4096, cache_per_sequence, h100), all);
  EXPECT_EQ(plan::lines_that_fit(4096, cache_per_sequence, h200), all);
  EXPECT_EQ(plan::lines_that_fit(4096, 2 * cache_per_sequence, h100),
            (h100 * 4 / 5 - 2 * cache_per_sequence) / 128);
  EXPECT_EQ(plan::lines_that_fit(4096, 4 * cache_per_sequence, h100), 0);
  EXPECT_EQ(plan::lines_that_fit(4096, 4 * cache_per_sequence, h200), 0);
  EXPECT_EQ(plan::lines_that_fit(1024, cache_per_sequence, h200),
            0);  // one slab a row: nothing past it
}

}  // namespace

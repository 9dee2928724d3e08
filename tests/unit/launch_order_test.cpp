// Tests chapters/ch16/launch_order.hpp, the order in which ch16's fused attention kernels launch
// their (head, query block) CTAs, without a GPU: every block runs exactly once; head_major is the
// plain head-by-head order; causal groups are contiguous, differ in size by at most one, hold
// their K and V within the budget and run longest first; and, in a model of the GPU handing
// CTAs to free SMs in launch order, the grouped order ends within 1.5% of an even split of the
// work at ch16's causal shapes, where head-by-head longest-first ends 3% or more past it (the
// reason the chapter changed orders). Then the chained kernels' plans: list_schedule's and
// balanced_schedule's layout (every block once, each CTA's list in launch order), their bounds
// against an even split, and the packed (head, qb) entries of balanced_schedule's rung.
#include "../../chapters/ch16/launch_order.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <set>
#include <tuple>
#include <vector>

namespace {

using ch16::BlockIndex;
using ch16::LaunchOrder;

std::vector<BlockIndex> launch_sequence(const LaunchOrder& order) {
  std::vector<BlockIndex> blocks;
  for (int i = 0; i < order.ctas(); ++i) blocks.push_back(order.at(i));
  return blocks;
}

void expect_every_block_once(const LaunchOrder& order) {
  std::set<std::pair<int, int>> seen;
  for (const BlockIndex& b : launch_sequence(order)) {
    ASSERT_GE(b.head, 0);
    ASSERT_LT(b.head, order.heads);
    ASSERT_GE(b.qb, 0);
    ASSERT_LT(b.qb, order.blocks);
    EXPECT_TRUE(seen.insert({b.head, b.qb}).second) << "head " << b.head << " block " << b.qb;
  }
  EXPECT_EQ(int(seen.size()), order.blocks * order.heads);
}

TEST(LaunchOrder, OneBlockAHead) {
  for (int groups : {1, 2, 5}) expect_every_block_once(LaunchOrder{1, 5, groups, true});
}

TEST(LaunchOrder, HeadMajorIsHeadByHeadInOrder) {
  const LaunchOrder order = LaunchOrder::head_major(7, 5);
  for (int i = 0; i < order.ctas(); ++i) {
    EXPECT_EQ(order.at(i).head, i / 7);
    EXPECT_EQ(order.at(i).qb, i % 7);
  }
}

TEST(LaunchOrder, GroupsAreContiguousBalancedAndLongestFirst) {
  for (int heads : {1, 2, 5, 32, 128})
    for (int blocks : {2, 3, 22, 32, 64})  // (one block a head leaves no spans to overlap)
      for (int groups = 1; groups <= std::min(heads, 13); ++groups) {
        const LaunchOrder order{blocks, heads, groups, true};
        SCOPED_TRACE(testing::Message() << heads << " heads x " << blocks << " blocks in "
                                        << groups << " groups");
        expect_every_block_once(order);
        // A group is a run of heads whose launch spans overlap; groups' spans do not.
        const std::vector<BlockIndex> seq = launch_sequence(order);
        std::vector<int> first(heads, order.ctas()), last(heads, -1);
        for (int i = 0; i < order.ctas(); ++i)
          first[seq[i].head] = std::min(first[seq[i].head], i), last[seq[i].head] = i;
        std::vector<int> group_of(heads), group_size;
        int span_end = -1;
        for (int h = 0; h < heads; ++h) {  // heads in order of first launch, as the check below
          if (h > 0) EXPECT_GT(first[h], first[h - 1]) << "head " << h;
          if (first[h] > span_end) group_size.push_back(0);
          group_of[h] = int(group_size.size()) - 1, ++group_size.back();
          span_end = std::max(span_end, last[h]);
        }
        ASSERT_EQ(int(group_size.size()), groups);
        for (int i = 0; i < order.ctas(); ++i)  // place(): the group these spans found
          EXPECT_EQ(order.place(i).group, group_of[seq[i].head]) << "at CTA " << i;
        const auto [smallest, largest] = std::minmax_element(group_size.begin(), group_size.end());
        EXPECT_LE(*largest - *smallest, 1);
        // Longest first within a group: query blocks never increase until the next group.
        for (size_t i = 1; i < seq.size(); ++i)
          if (group_of[seq[i].head] == group_of[seq[i - 1].head])
            EXPECT_LE(seq[i].qb, seq[i - 1].qb) << "at CTA " << i;
      }
}

TEST(LaunchOrder, CausalGroupsFitTheBudgetWithAsFewGroupsAsPossible) {
  const int64_t mib = 1 << 20;
  // d128 s4096: 2 MiB of K and V a head; 25 MiB (half an H100's L2) holds 12 heads.
  EXPECT_EQ(LaunchOrder::causal(32, 128, 2 * mib, 25 * mib).groups, 11);
  EXPECT_EQ(LaunchOrder::causal(32, 128, 2 * mib, 1024 * mib).groups, 1);
  EXPECT_EQ(LaunchOrder::causal(32, 128, 2 * mib, mib).groups, 128);  // one head a group at least
  for (int64_t budget : {mib, 3 * mib, 25 * mib, 40 * mib}) {
    const LaunchOrder order = LaunchOrder::causal(32, 100, 2 * mib, budget);
    const int largest = (order.heads + order.groups - 1) / order.groups;
    EXPECT_TRUE(largest == 1 || largest * 2 * mib <= budget) << budget;
    const int64_t largest_with_one_group_fewer =
        order.groups == 1 ? 0 : (order.heads + order.groups - 2) / (order.groups - 1);
    EXPECT_TRUE(order.groups == 1 || largest_with_one_group_fewer * 2 * mib > budget)
        << "one group fewer would still fit " << budget;
  }
}

// The model: kSms SMs, one CTA each at a time, each taking the next CTA in launch order when it
// frees; a causal block costs its key tiles plus one for loading Q and storing O. Returns the end
// over an even split of the same work.
double tail_over_even_split(const LaunchOrder& order, int64_t seq, int rows, int key_tile) {
  constexpr int kSms = 132;
  auto cost = [&](int qb) {
    const int64_t last_row = std::min<int64_t>(seq, int64_t{qb + 1} * rows) - 1;
    return double(last_row / key_tile + 1) + 1.0;
  };
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
  for (int s = 0; s < kSms; ++s) free_at.push(0.0);
  double end = 0, work = 0;
  for (int i = 0; i < order.ctas(); ++i) {
    const double start = free_at.top();
    free_at.pop();
    const double c = cost(order.at(i).qb);
    work += c, end = std::max(end, start + c);
    free_at.push(start + c);
  }
  return end / (work / kSms);
}

TEST(LaunchOrder, GroupedLongestFirstLeavesASmallTail) {
  struct Shape {
    int heads;
    int64_t seq;
    int head_dim, rows;
  };
  const int64_t budget = 25 << 20;  // half an H100's or H200's 50 MiB L2
  for (const Shape s : {Shape{128, 4096, 128, 128}, Shape{32, 8192, 128, 128},
                        Shape{128, 4096, 64, 192}, Shape{128, 4096, 64, 128}}) {
    SCOPED_TRACE(testing::Message() << s.heads << " heads, seq " << s.seq << ", d" << s.head_dim
                                    << ", " << s.rows << "-row blocks");
    const int blocks = int((s.seq + s.rows - 1) / s.rows);
    const LaunchOrder grouped =
        LaunchOrder::causal(blocks, s.heads, 2 * s.seq * s.head_dim * 2, budget);
    const LaunchOrder head_by_head{blocks, s.heads, s.heads, true};  // the order before
    EXPECT_LT(tail_over_even_split(grouped, s.seq, s.rows, 128), 1.015);
    EXPECT_GT(tail_over_even_split(head_by_head, s.seq, s.rows, 128), 1.03);
  }
}

// What every chained plan must be (ch16::list_schedule's layout: ctas + 1 offsets, then the
// launch-order indices of each CTA's blocks): offsets from 0 to every block, each index once and
// in range, each CTA's list in launch order. Returns each CTA's work under `cost`.
std::vector<double> plan_work(const LaunchOrder& order, int ctas, const std::vector<int>& plan,
                              const std::function<double(int)>& cost) {
  std::vector<double> work(size_t(ctas), 0.0);
  EXPECT_EQ(plan.size(), size_t(ctas + 1 + order.ctas()));
  if (plan.size() != size_t(ctas + 1 + order.ctas())) return work;
  EXPECT_EQ(plan[0], 0);
  EXPECT_EQ(plan[size_t(ctas)], order.ctas());
  std::vector<int> seen(size_t(order.ctas()), 0);
  for (int c = 0; c < ctas; ++c) {
    EXPECT_LE(plan[size_t(c)], plan[size_t(c) + 1]);
    int previous = -1;
    for (int e = plan[size_t(c)]; e < plan[size_t(c) + 1]; ++e) {
      const int i = plan[size_t(ctas + 1 + e)];
      EXPECT_GE(i, 0);
      EXPECT_LT(i, order.ctas());
      if (i < 0 || i >= order.ctas()) continue;
      ++seen[size_t(i)];
      EXPECT_GT(i, previous) << "CTA " << c << " runs its blocks out of launch order";
      previous = i;
      work[size_t(c)] += cost(order.at(i).qb);
    }
  }
  for (int i = 0; i < order.ctas(); ++i) EXPECT_EQ(seen[size_t(i)], 1) << "launch index " << i;
  return work;
}

}  // namespace

// list_schedule (the wgmma_chained rung's plan): every launch-order index once, each CTA's list in
// launch order, the offsets consistent; and dealt to the CTA that frees up first, no CTA's work
// ends more than one block's cost past the even split (the list-scheduling bound), at ch16's causal
// shape on 132 CTAs.
TEST(ListSchedule, EveryBlockOnceInLaunchOrderAndWithinOneBlockOfEven) {
  for (const auto& [blocks, heads, ctas] : {std::tuple{32, 128, 132}, std::tuple{64, 32, 132},
                                            std::tuple{5, 3, 4}, std::tuple{3, 1, 8}}) {
    SCOPED_TRACE(testing::Message() << heads << " heads x " << blocks << " blocks on " << ctas);
    const LaunchOrder order =
        LaunchOrder::causal(blocks, heads, int64_t{1} << 21, int64_t{24} << 20);
    const auto cost = [&](int qb) { return double(qb + 2); };  // key tiles (qb + 1) plus one
    const std::vector<double> work =
        plan_work(order, ctas, ch16::list_schedule(order, ctas, cost), cost);
    double total = 0, biggest = 0;
    for (int i = 0; i < order.ctas(); ++i) {
      total += cost(order.at(i).qb);
      biggest = std::max(biggest, cost(order.at(i).qb));
    }
    EXPECT_LE(*std::max_element(work.begin(), work.end()), total / ctas + biggest + 1e-9);
  }
}

// balanced_schedule (the wgmma_chained_diagonal rung's plan): the same layout and invariants as
// list_schedule's, every CTA keeps a block, no CTA's work past list_schedule's busiest, and at
// ch16's causal d128 shapes on 132 CTAs (cost: key tiles plus half a tile) the busiest CTA within
// one tile of the even split, which list scheduling's bound (a block past it) does not promise.
TEST(BalancedSchedule, EveryBlockOnceInLaunchOrderAndWithinATileOfEven) {
  for (const auto& [blocks, heads, ctas] :
       {std::tuple{32, 128, 132}, std::tuple{64, 32, 132}, std::tuple{5, 3, 4}, std::tuple{3, 6, 5},
        std::tuple{3, 1, 8}}) {
    SCOPED_TRACE(testing::Message() << heads << " heads x " << blocks << " blocks on " << ctas);
    const LaunchOrder order =
        LaunchOrder::causal(blocks, heads, int64_t{blocks} << 16, int64_t{24} << 20);
    const auto cost = [&](int qb) { return qb + 1.5; };
    const std::vector<double> work =
        plan_work(order, ctas, ch16::balanced_schedule(order, ctas, cost), cost);
    const std::vector<double> dealt =
        plan_work(order, ctas, ch16::list_schedule(order, ctas, cost), cost);
    for (int c = 0; c < ctas; ++c)
      if (dealt[size_t(c)] > 0) EXPECT_GT(work[size_t(c)], 0) << "CTA " << c << " lost every block";
    double total = 0;
    for (int i = 0; i < order.ctas(); ++i) total += cost(order.at(i).qb);
    const double most = *std::max_element(work.begin(), work.end());
    const double most_dealt = *std::max_element(dealt.begin(), dealt.end());
    EXPECT_LE(most, most_dealt + 1e-9);
    if (ctas == 132) EXPECT_LE(most, total / ctas + 1.0);
  }
}

// PackedBlock: (head, qb) round-trips at the limits fits() allows, and fits() refuses one more
// head or block than an int holds.
TEST(PackedBlock, RoundTripsAtItsLimitsAndRefusesPastThem) {
  using ch16::PackedBlock;
  for (const BlockIndex b :
       {BlockIndex{0, 0}, BlockIndex{1, 2}, BlockIndex{127, 31}, BlockIndex{32767, 0},
        BlockIndex{0, 65535}, BlockIndex{32767, 65535}}) {
    const BlockIndex back = PackedBlock::unpack(PackedBlock::pack(b));
    EXPECT_EQ(back.head, b.head);
    EXPECT_EQ(back.qb, b.qb);
    EXPECT_GE(PackedBlock::pack(b), 0);
  }
  EXPECT_TRUE(PackedBlock::fits(LaunchOrder::head_major(1 << 16, 1 << 15)));
  EXPECT_FALSE(PackedBlock::fits(LaunchOrder::head_major((1 << 16) + 1, 1)));
  EXPECT_FALSE(PackedBlock::fits(LaunchOrder::head_major(1, (1 << 15) + 1)));
}

// ch16/launch_order.hpp: which (head, query block) each CTA of the fused attention kernels runs,
// by launch order (blockIdx.x of a 1-D grid). Host and device code (the host tests it:
// tests/unit/launch_order_test.cpp).
//
// Causal query blocks are unequal: at s4096 with 128-row blocks the last walks 32 key tiles and
// the first one. SMs take CTAs roughly in blockIdx order as they free up, so what is launched
// last decides the tail.
//   - Head by head, longest first (the kernels' earlier order): the grid ends with the
//     last heads' blocks, and the last head's longest block starts close to the end and runs on
//     alone. A model of 132 SMs taking blocks in launch order puts the end 3.2-3.4% past an even
//     split at b4 h32 s4096 and 5.6-5.8% at b1 h32 s8192 (tests/unit/launch_order_test.cpp).
//   - Every head's longest block first, then every head's next: only one-tile blocks are left for
//     the tail, but the 132 running CTAs then belong to 132 heads, and every block reads its
//     head's K and V (2 MiB at d128 s4096) from HBM instead of finding them in L2.
//   - So (FlashAttention-3's causal scheduler does the same): heads in groups whose K and V fit
//     in a cache budget, longest first across the group, one group after another. The sizes
//     differ by at most one, so the last group is not a remainder of one or two heads whose long
//     blocks start late. The same model: within 1.3% of an even split at every shape of ch16.
// Non-causal blocks are all the same length: head by head, in order (head_major).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <queue>
#include <utility>
#include <vector>

#if defined(__CUDACC__)
#define CH16_HOST_DEVICE __host__ __device__
#else
#define CH16_HOST_DEVICE
#endif

namespace ch16 {

struct BlockIndex {
  int head = 0, qb = 0;
};

struct LaunchOrder {
  int blocks = 1;              // query blocks per head
  int heads = 1;               // batch x heads
  int groups = 1;              // groups of heads, launched one after another
  bool longest_first = false;  // within a group: every head's last query block first

  // One head after another, its query blocks in order.
  static LaunchOrder head_major(int blocks, int heads) { return {blocks, heads, heads, false}; }
  // Causal: as few groups as keep each group's K and V (kv_bytes_per_head a head) within
  // cache_bytes.
  static LaunchOrder causal(int blocks, int heads, int64_t kv_bytes_per_head,
                            int64_t cache_bytes) {
    const int64_t per_group = std::clamp<int64_t>(cache_bytes / kv_bytes_per_head, 1, heads);
    return {blocks, heads, int((heads + per_group - 1) / per_group), true};
  }

  CH16_HOST_DEVICE int ctas() const { return blocks * heads; }

  // Where launch index i falls: its group of heads, the group's first head and size, and i's
  // position within the group. The first heads % groups groups hold one head more than the others.
  struct Place {
    int group, first, size, j;
  };
  CH16_HOST_DEVICE Place place(int i) const {
    const int small = heads / groups, big_groups = heads % groups;
    const int big_ctas = (small + 1) * blocks;  // CTAs of one larger group
    if (i < big_groups * big_ctas) {
      const int g = i / big_ctas;
      return {g, g * (small + 1), small + 1, i - g * big_ctas};
    }
    const int rest = i - big_groups * big_ctas, g = rest / (small * blocks);
    return {big_groups + g, big_groups * (small + 1) + g * small, small, rest - g * small * blocks};
  }

  // CTA i's block.
  CH16_HOST_DEVICE BlockIndex at(int i) const {
    const Place p = place(i);
    const int rank = p.j / p.size;  // heads fastest: the group's blocks of one rank side by side
    return {p.first + p.j % p.size, longest_first ? blocks - 1 - rank : rank};
  }
};

// A block packed into one int for a chained plan's entries, head in the high bits: unpacking is a
// shift and a mask, where LaunchOrder::at divides on every thread that asks.
struct PackedBlock {
  static constexpr int kQbBits = 16;
  // Every block of `order` packs: heads below 2^15 (the sign bit stays clear), qb below 2^16.
  static bool fits(const LaunchOrder& order) {
    return order.heads <= (1 << (31 - kQbBits)) && order.blocks <= (1 << kQbBits);
  }
  CH16_HOST_DEVICE static int pack(BlockIndex b) { return b.head << kQbBits | b.qb; }
  CH16_HOST_DEVICE static BlockIndex unpack(int e) {
    return {e >> kQbBits, e & ((1 << kQbBits) - 1)};
  }
};

// A chained kernel's plan from each CTA's list of launch indices: ctas + 1 offsets (CTA c runs
// entries offsets[c] .. offsets[c + 1] - 1), then the entries in the order each CTA runs them.
inline std::vector<int> plan_from_lists(const std::vector<std::vector<int>>& lists, int blocks) {
  const size_t ctas = lists.size();
  std::vector<int> plan(ctas + 1 + size_t(blocks));
  int at = 0;
  for (size_t c = 0; c < ctas; ++c) {
    plan[c] = at;
    for (const int i : lists[c]) plan[ctas + 1 + size_t(at++)] = i;
  }
  plan[ctas] = at;
  return plan;
}

// Host: the blocks of `order` dealt to `ctas` persistent CTAs the way a plain grid's blocks reach
// free SMs: in launch order, each to the CTA that would free up first, by `cost(qb)` (the launch
// order model's: a block's key tiles plus one). The causal launch order is longest first within
// each group of heads, so this is longest-processing-time-first per group, and the CTAs move
// through the groups together (their K and V stay in L2). Each CTA's list of launch-order
// indices, in the order it runs them.
inline std::vector<std::vector<int>> dealt_lists(const LaunchOrder& order, int ctas,
                                                 const std::function<double(int qb)>& cost) {
  std::vector<std::vector<int>> lists(static_cast<size_t>(ctas));
  using Slot = std::pair<double, int>;  // (the CTA's work so far, the CTA): least first
  std::priority_queue<Slot, std::vector<Slot>, std::greater<>> next_free;
  for (int c = 0; c < ctas; ++c) next_free.push({0.0, c});
  for (int i = 0; i < order.ctas(); ++i) {
    const Slot slot = next_free.top();
    next_free.pop();
    lists[size_t(slot.second)].push_back(i);
    next_free.push({slot.first + cost(order.at(i).qb), slot.second});
  }
  return lists;
}

// Host: dealt_lists as flash_wgmma::chained's plan (plan_from_lists' layout).
inline std::vector<int> list_schedule(const LaunchOrder& order, int ctas,
                                      const std::function<double(int qb)>& cost) {
  return plan_from_lists(dealt_lists(order, ctas, cost), order.ctas());
}

// Host: dealt_lists evened out (wgmma_chained_diagonal's plan). List scheduling leaves the busiest
// CTA up to a block's cost past the even split (the README has the model's figures); a static
// plan need not: while the busiest CTA's work can be lowered by moving one of its blocks to another
// CTA, or by swapping one of its blocks for a cheaper one of the same group of heads (so the CTAs
// still move through the groups together), the single change that leaves the lower maximum of
// the two is made. Each CTA's list stays in launch order; no CTA is left without a block it had
// (a CTA's last block never moves: the receiver would end at or past the giver's total). The same
// layout as list_schedule's.
inline std::vector<int> balanced_schedule(const LaunchOrder& order, int ctas,
                                          const std::function<double(int qb)>& cost) {
  std::vector<std::vector<int>> lists = dealt_lists(order, ctas, cost);
  std::vector<double> costs(size_t(order.ctas()));
  std::vector<int> group(size_t(order.ctas()));
  for (int i = 0; i < order.ctas(); ++i) {
    costs[size_t(i)] = cost(order.at(i).qb);
    group[size_t(i)] = order.place(i).group;
  }
  std::vector<double> work(static_cast<size_t>(ctas), 0.0);
  for (int c = 0; c < ctas; ++c)
    for (const int i : lists[size_t(c)]) work[size_t(c)] += costs[size_t(i)];
  constexpr double kEps = 1e-9;
  std::vector<int> by_work(static_cast<size_t>(ctas));
  for (int round = 0; round < 64 * order.ctas(); ++round) {
    const int a = int(std::max_element(work.begin(), work.end()) - work.begin());
    for (int c = 0; c < ctas; ++c) by_work[size_t(c)] = c;
    std::stable_sort(by_work.begin(), by_work.end(),
                     [&](int x, int y) { return work[size_t(x)] < work[size_t(y)]; });
    // The best change found: the larger of the two CTAs' new totals, the receiver, the giver's
    // entry and (a swap) the receiver's, -1 for a move.
    double best = work[size_t(a)];
    int best_b = -1, best_x = -1, best_y = -1;
    for (const int b : by_work) {
      const double gap = work[size_t(a)] - work[size_t(b)];
      if (b == a || gap <= kEps) break;
      const auto& la = lists[size_t(a)];
      const auto& lb = lists[size_t(b)];
      for (int x = 0; x < int(la.size()); ++x) {
        const double cx = costs[size_t(la[size_t(x)])];
        if (cx < gap - kEps) {
          const double top = std::max(work[size_t(a)] - cx, work[size_t(b)] + cx);
          if (top < best - kEps) best = top, best_b = b, best_x = x, best_y = -1;
        }
        for (int y = 0; y < int(lb.size()); ++y) {
          if (group[size_t(lb[size_t(y)])] != group[size_t(la[size_t(x)])]) continue;
          const double d = cx - costs[size_t(lb[size_t(y)])];
          if (d <= kEps || d >= gap - kEps) continue;
          const double top = std::max(work[size_t(a)] - d, work[size_t(b)] + d);
          if (top < best - kEps) best = top, best_b = b, best_x = x, best_y = y;
        }
      }
      if (best_b >= 0 && best <= work[size_t(a)] - gap / 2 + kEps) break;  // as even as it gets
    }
    if (best_b < 0) break;
    auto& la = lists[size_t(a)];
    auto& lb = lists[size_t(best_b)];
    const int x = la[size_t(best_x)];
    if (best_y < 0) {
      la.erase(la.begin() + best_x);
      lb.push_back(x);
      work[size_t(a)] -= costs[size_t(x)], work[size_t(best_b)] += costs[size_t(x)];
    } else {
      const int y = lb[size_t(best_y)];
      la[size_t(best_x)] = y, lb[size_t(best_y)] = x;
      const double d = costs[size_t(x)] - costs[size_t(y)];
      work[size_t(a)] -= d, work[size_t(best_b)] += d;
    }
  }
  // Launch order within each CTA: group by group, longest first in each.
  for (auto& list : lists) std::sort(list.begin(), list.end());
  return plan_from_lists(lists, order.ctas());
}

}  // namespace ch16

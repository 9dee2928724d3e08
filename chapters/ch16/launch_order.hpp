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

  // CTA i's block. The first heads % groups groups hold one head more than the others.
  CH16_HOST_DEVICE BlockIndex at(int i) const {
    const int small = heads / groups, big_groups = heads % groups;
    const int big_ctas = (small + 1) * blocks;  // CTAs of one larger group
    int first, size, j;                         // the group's first head, its size, i within it
    if (i < big_groups * big_ctas) {
      const int g = i / big_ctas;
      first = g * (small + 1), size = small + 1, j = i - g * big_ctas;
    } else {
      const int rest = i - big_groups * big_ctas, g = rest / (small * blocks);
      first = big_groups * (small + 1) + g * small, size = small, j = rest - g * small * blocks;
    }
    const int rank = j / size;  // heads fastest: the group's blocks of one rank run side by side
    return {first + j % size, longest_first ? blocks - 1 - rank : rank};
  }
};

// Host: the blocks of `order` dealt to `ctas` persistent CTAs the way a plain grid's blocks reach
// free SMs: in launch order, each to the CTA that would free up first, by `cost(qb)` (the launch
// order model's: a block's key tiles plus one). The causal launch order is longest first within
// each group of heads, so this is longest-processing-time-first per group, and the CTAs move
// through the groups together (their K and V stay in L2). For flash_wgmma::chained, as its plan:
// ctas + 1 offsets (CTA c runs entries offsets[c] .. offsets[c + 1] - 1), then the entries, each a
// launch-order index, in the order the CTA runs them.
inline std::vector<int> list_schedule(const LaunchOrder& order, int ctas,
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
  std::vector<int> plan(size_t(ctas) + 1 + size_t(order.ctas()));
  int at = 0;
  for (int c = 0; c < ctas; ++c) {
    plan[size_t(c)] = at;
    for (const int i : lists[static_cast<size_t>(c)]) plan[size_t(ctas) + 1 + size_t(at++)] = i;
  }
  plan[size_t(ctas)] = at;
  return plan;
}

}  // namespace ch16

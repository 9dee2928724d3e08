// ch15/moe_dispatch_plan.hpp: the host side of moe_dispatch, and the tile schedule its grouped
// GEMM walks on the device. Header-only and plain C++ where the device does not need it, so
// tests/unit/moe_dispatch_plan_test.cpp checks it without a GPU.
//
// - The routing: a seeded top-k assignment of every token to k distinct experts, with weights
//   that sum to 1 per token. "uniform": every expert equally likely. "skewed": kHotExperts
//   experts (spread over the expert ids) are kHotBias times as likely as the others, so each is
//   picked by most tokens and together they hold about half of all routed rows. Integer
//   arithmetic on std::mt19937_64's raw output, which the C++ standard fixes: the same routing
//   with every compiler.
// - The permutation: routed row number `assignment` = token * top_k + j goes to position
//   offsets[expert] + (its rank among the earlier assignments to that expert): expert-major,
//   stable. The device computes the same positions (histogram, scan, scatter); the reference and
//   the device reference use this host copy.
// - The tile schedule over groups: expert e's rows make ceil(count_e / tile_rows) row tiles, each
//   cut into n_tiles column tiles; the work items of all experts are numbered one after another
//   (tile_prefix[e] is expert e's first), an expert's row tile's column tiles consecutively, so
//   CTAs running at one time share its row block through L2. A persistent CTA maps a number to
//   its (expert, row tile, column tile) with locate_tile, a binary search over tile_prefix.
#pragma once

#include <cstdint>
#include <kernels/prefix_search.hpp>
#include <random>
#include <stdexcept>
#include <vector>

#if defined(__CUDACC__)
#define CH15_MOE_HD __host__ __device__
#else
#define CH15_MOE_HD
#endif

namespace ch15::moe {

constexpr int kHotExperts = 4;     // "skewed": this many hot experts...
constexpr uint64_t kHotBias = 64;  // ...each this many times as likely as a cold one
constexpr uint64_t kRoutingSeed = 15;

struct Routing {
  int tokens = 0, experts = 0, top_k = 0;
  std::vector<int32_t> expert;  // tokens x top_k, distinct within a token
  std::vector<float> weight;    // tokens x top_k, positive, summing to 1 within a token
};

// Hot experts are spread over the ids (0, E/4, E/2, 3E/4 for 4), not the first few.
inline bool is_hot(int expert, int experts) {
  return experts >= kHotExperts && expert % (experts / kHotExperts) == 0 &&
         expert / (experts / kHotExperts) < kHotExperts;
}

inline Routing make_routing(int tokens, int experts, int top_k, bool skewed,
                            uint64_t seed = kRoutingSeed) {
  if (top_k < 1 || top_k > experts)
    throw std::invalid_argument("moe routing: need 1 <= top_k <= experts");
  Routing r{tokens, experts, top_k, std::vector<int32_t>(size_t(tokens) * top_k),
            std::vector<float>(size_t(tokens) * top_k)};
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> odds(experts);
  std::vector<uint32_t> raw(top_k);
  for (int t = 0; t < tokens; ++t) {
    uint64_t total = 0;
    for (int e = 0; e < experts; ++e)
      total += odds[e] = (skewed && is_hot(e, experts)) ? kHotBias : 1;
    uint64_t raw_sum = 0;
    for (int j = 0; j < top_k; ++j) {  // k draws without replacement, each in proportion to odds
      uint64_t pick = rng() % total;
      int e = 0;
      while (pick >= odds[e]) pick -= odds[e++];
      r.expert[size_t(t) * top_k + j] = e;
      total -= odds[e];
      odds[e] = 0;
      raw_sum += raw[j] = 1 + uint32_t(rng() % 16);  // a weight of 1..16 parts
    }
    for (int j = 0; j < top_k; ++j)
      r.weight[size_t(t) * top_k + j] = float(double(raw[j]) / double(raw_sum));
  }
  return r;
}

struct Permutation {
  std::vector<int32_t> counts;    // experts: rows routed to each
  std::vector<int32_t> offsets;   // experts + 1: exclusive scan of counts
  std::vector<int32_t> position;  // tokens x top_k: each routed row's place in expert order
};

inline Permutation plan_permutation(const Routing& r) {
  Permutation p{std::vector<int32_t>(r.experts, 0), std::vector<int32_t>(r.experts + 1, 0),
                std::vector<int32_t>(r.expert.size())};
  for (int32_t e : r.expert) ++p.counts[e];
  for (int e = 0; e < r.experts; ++e) p.offsets[e + 1] = p.offsets[e] + p.counts[e];
  std::vector<int32_t> cursor(p.offsets.begin(), p.offsets.end() - 1);
  for (size_t a = 0; a < r.expert.size(); ++a) p.position[a] = cursor[r.expert[a]]++;
  return p;
}

// ---- The tile schedule over groups (host and device).
CH15_MOE_HD inline int row_tiles(int rows, int tile_rows) {
  return (rows + tile_rows - 1) / tile_rows;
}

// tile_prefix[0] = 0, tile_prefix[e + 1] = tile_prefix[e] + expert e's work items.
inline std::vector<int32_t> tile_prefix(const std::vector<int32_t>& counts, int tile_rows,
                                        int n_tiles) {
  std::vector<int32_t> prefix(counts.size() + 1, 0);
  for (size_t e = 0; e < counts.size(); ++e)
    prefix[e + 1] = prefix[e] + row_tiles(counts[e], tile_rows) * n_tiles;
  return prefix;
}

struct WorkItem {
  int expert, row_tile, col_tile;
};

// Work item `item` (< tile_prefix[experts]): the expert is the last e with tile_prefix[e] <= item
// (an expert with no rows has tile_prefix[e] == tile_prefix[e + 1] and is skipped).
CH15_MOE_HD inline WorkItem locate_tile(const int32_t* prefix, int experts, int item, int n_tiles) {
  const int lo = kernels::group_of_item(prefix, experts, item);
  const int local = item - prefix[lo];
  return {lo, local / n_tiles, local % n_tiles};
}

}  // namespace ch15::moe

// ch20/l2_ahead_plan.hpp: which bytes of W_o rung 7b (the megakernel's L2-ahead form,
// megakernel.cuh) prefetches into L2 during the attention phase, and how many fit. Host and
// device: the megakernel walks the lines, tests/unit/l2_ahead_plan_test.cpp checks on the host
// that they are exactly every row's bytes past its first slab, each once, slab by slab.
//
// W_o is [hidden][hidden] BF16, row-major. A warp's first pass over a row group (its "slab",
// kernels/streaming_gemv.cuh's load_slab: 4 loads of 16 bytes for each of 32 lanes) covers a
// row's first kSlabElements columns; load_first issues it while the barrier before the o phase
// resolves. The rest of each row, slab by slab, is what this plan prefetches: line i is slab
// 1 + i / (hidden x kSlabLines) (every row's slab 1 first, then slab 2, ...), so a budget short
// of the whole covers the slabs the warps read first.
#pragma once

#include <algorithm>
#include <cstdint>

#if defined(__CUDACC__)
#define CH20_HOST_DEVICE __host__ __device__
#else
#define CH20_HOST_DEVICE
#endif

namespace ch20::l2_ahead {

constexpr int64_t kLineBytes = 128, kLineElements = kLineBytes / 2;  // BF16
constexpr int64_t kSlabElements =
    4 * 32 * 8;  // kernels::gemv's kVectorsPerRow x lanes x BF16 a load
constexpr int64_t kSlabLines = kSlabElements / kLineElements;

// The plan needs whole slabs (hidden a multiple of kSlabElements): a partial last slab would make
// the line count name lines past the row's end.
CH20_HOST_DEVICE constexpr bool whole_slabs(int64_t hidden) { return hidden % kSlabElements == 0; }

// W_o's lines past each row's first slab.
CH20_HOST_DEVICE constexpr int64_t rest_lines(int64_t hidden) {
  return hidden > kSlabElements ? (hidden / kSlabElements - 1) * hidden * kSlabLines : 0;
}

// The element offset in W_o of line i (0 <= i < rest_lines(hidden)).
CH20_HOST_DEVICE constexpr int64_t line_offset(int64_t hidden, int64_t i) {
  const int64_t per_slab = hidden * kSlabLines;
  const int64_t slab = 1 + i / per_slab, row = i % per_slab / kSlabLines;
  return row * hidden + slab * kSlabElements + i % kSlabLines * kLineElements;
}

// How many of those lines fit in the L2 beside the KV cache the attention reads (cache_bytes): a
// fifth of the L2 left for what else passes through it (the activations, the partials, the first
// slabs). Of the 25.2 MB past the first slabs at hidden 4096: at batch 1 (16.8 MB of cache) all of
// it on an H100 (50 MiB of L2) and an H200 (60 MiB); at batch 2 about 8.4 and 16.8 MB; from batch
// 4 none. Negative room is none.
inline int64_t lines_that_fit(int64_t hidden, int64_t cache_bytes, int64_t l2_bytes) {
  const int64_t room = l2_bytes * 4 / 5 - cache_bytes;
  return std::clamp<int64_t>(room / kLineBytes, 0, rest_lines(hidden));
}

}  // namespace ch20::l2_ahead

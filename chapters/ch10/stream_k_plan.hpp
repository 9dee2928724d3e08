// ch10/stream_k_plan.hpp: which k-blocks of which tiles each CTA of persistent_gemm's
// "persistent_stream_k" runs. Host and device code (the host tests it: tests/unit).
//
// T tiles of K k-blocks over G resident CTAs: a tile per CTA at a time runs ceil(T / G) waves,
// and the last one is only (T % G) / G full (8192^3: 2048 tiles over 132 CTAs, so 68 CTAs run a
// 16th tile while 64 idle, 3% of the time). Here every CTA first runs its T / G whole tiles, and
// the last R = T % G tiles' R * K k-blocks, numbered in (tile, k-block) order, are cut into G
// contiguous ranges of about R * K / G (66 of 128 at 8192^3). R < G, so a range is shorter than
// a tile and meets at most two: it is a *unit* of one tile (the end, or a middle part) and then
// a unit of the next, which starts at its k-block 0 (a *head*). A range may also be empty.
//
// Who finishes a tile: the CTA of its head unit. Every other unit of the tile is the first unit
// of a later CTA's range, which writes its partial sums out and never waits; the head is the last
// unit of its CTA, and waits for those. So a CTA writes at most one partial (its first unit, when
// that is not a head), and no wait can be circular.
#pragma once

#if defined(__CUDACC__)
#define CH10_HOST_DEVICE __host__ __device__
#else
#define CH10_HOST_DEVICE
#endif

namespace ch10::stream_k {

// A part of one tile: k-blocks [kb_begin, kb_end) of tile number `tile` (before rasterisation).
struct Unit {
  int tile = 0, kb_begin = 0, kb_end = 0;
  CH10_HOST_DEVICE bool head() const { return kb_begin == 0; }
  CH10_HOST_DEVICE bool whole(int kblocks) const { return kb_begin == 0 && kb_end == kblocks; }
};

// In 32-bit integers (64-bit division is a long subroutine, and the producer runs on 40
// registers): split_blocks() * ctas < ctas^2 * kblocks must stay below 2^31, which holds for up
// to 1024 CTAs while kblocks < kMaxKBlocks (the variant requires it).
constexpr int kMaxKBlocks = 2048;

struct Plan {
  int tiles = 0, kblocks = 0, ctas = 1;

  CH10_HOST_DEVICE int whole_tiles_per_cta() const { return tiles / ctas; }
  CH10_HOST_DEVICE int first_split_tile() const { return whole_tiles_per_cta() * ctas; }
  CH10_HOST_DEVICE int split_blocks() const { return (tiles - first_split_tile()) * kblocks; }
  // CTA `cta`'s range of the split k-blocks is [begin(cta), begin(cta + 1)).
  CH10_HOST_DEVICE int begin(int cta) const { return split_blocks() * cta / ctas; }

  // The unit that starts at split k-block `at` of a range ending at `end` (at < end): up to the
  // end of the range or of the tile, whichever comes first. A kernel walks its range with it
  // (at += the unit's length), which keeps the units in registers, not in a local array.
  CH10_HOST_DEVICE Unit unit_at(int at, int end) const {
    const int tile_start = at - at % kblocks;
    const int stop = end < tile_start + kblocks ? end : tile_start + kblocks;
    return {first_split_tile() + at / kblocks, at - tile_start, stop - tile_start};
  }
  // The units of CTA `cta`'s range, in order, into `out`; returns how many (0, 1 or 2).
  CH10_HOST_DEVICE int units(int cta, Unit (&out)[2]) const {
    int n = 0;
    for (int at = begin(cta), end = begin(cta + 1); at < end && n < 2; ++n) {
      out[n] = unit_at(at, end);
      at += out[n].kb_end - out[n].kb_begin;
    }
    return n;
  }

  // Where split tile `tile`'s k-blocks end, in the numbering of begin().
  CH10_HOST_DEVICE int tile_end(int tile) const { return (tile - first_split_tile() + 1) * kblocks; }
  // CTA `cta`'s first unit is not a head: it writes that unit's sums out for the tile's head.
  CH10_HOST_DEVICE bool writes_partial(int cta) const {
    return begin(cta + 1) > begin(cta) && begin(cta) % kblocks != 0;
  }
  // The parts the head of split tile `tile` adds: the next CTA after `cta` whose range starts
  // before the tile's end (so inside the tile: a later range) and writes a part; `ctas` when there
  // is none. The head's CTA walks them with
  //   for (int c = next_part(head, tile); c < ctas; c = next_part(c, tile))
  CH10_HOST_DEVICE int next_part(int cta, int tile) const {
    for (int c = cta + 1; c < ctas && begin(c) < tile_end(tile); ++c)
      if (writes_partial(c)) return c;
    return ctas;
  }
};

}  // namespace ch10::stream_k

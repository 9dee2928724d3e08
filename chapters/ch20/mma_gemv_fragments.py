#!/usr/bin/env python3
"""Host emulation of kernels/streaming_mma.cuh's fragment mapping (ch20's streaming_mma rung).

Lane by lane, as the kernel does it: each lane's 16-byte weight loads (rows g and g + 8 of each
m16 tile, vectors u * 4 + t of a 128-column slab), the registers picked as A (a0..a3) and B (b0,
b1) for MMA step s of each 32-column chunk, the warps' k split over the slabs, the zero padding of
tokens past the count and of columns past k, and the C fragment written to the block's partials
[warp][row][token]. The MMA itself follows the PTX ISA's m16n8k16 fragment layout
(kernels/mma_fragments.py, written from the ISA, not from kernels/mma_bf16.cuh), so a wrong
register choice in the kernel's mapping gives a wrong sum here. Integers, so the check is exact.

  python3 chapters/ch20/mma_gemv_fragments.py              # the kernel's mapping: must match
  python3 chapters/ch20/mma_gemv_fragments.py --self-test  # and each planted slip must not
"""
import argparse
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "kernels"))
import mma_fragments  # noqa: E402 (the layout, from the PTX ISA)

WARPS, TILE_GROUPS, ROWS_PER_GROUP, VECTORS, BF16_PER_VECTOR = 8, 8, 4, 4, 8
TILE_ROWS = TILE_GROUPS * ROWS_PER_GROUP  # 32: two m16 tiles
M_TILES = TILE_ROWS // 16
SLAB_K = VECTORS * 4 * BF16_PER_VECTOR  # 128


def mma_m16n8k16(d, a, b):
    """d (16 x 8) += A B from the lanes' fragments (kernels/mma_fragments.py)."""
    prod = mma_fragments.product(a, b)
    for i in range(16):
        for j in range(8):
            d[i][j] += prod[i][j]


def vector(matrix, row, v, k):
    """The 16-byte load of `row`'s vector v (8 values), zeros past k or for a missing row."""
    if row is None or 8 * v >= k:
        return [0] * 8
    return matrix[row][8 * v:8 * v + 8]


def emulate(w, act, n_groups, tokens, k, slip=None):
    """out [token][row] as the kernel computes it; slip plants one mistake in the mapping."""
    n_tiles = -(-tokens // 8)
    tiles = -(-n_groups // TILE_GROUPS)
    slabs = -(-k // SLAB_K)
    out = [[None] * (n_groups * ROWS_PER_GROUP) for _ in range(tokens)]
    for tile in range(tiles):
        partial = [[[0] * (8 * n_tiles) for _ in range(TILE_ROWS)] for _ in range(WARPS)]
        for warp in range(WARPS):
            acc = [[[[0] * 8 for _ in range(16)] for _ in range(n_tiles)] for _ in range(M_TILES)]
            for slab in range(warp, slabs, WARPS):
                # Each lane's registers: wr[lane][m][h][u] (8 values), br[lane][n][u].
                wr, br = [], []
                for lane in range(32):
                    g, t = lane // 4, lane % 4
                    lw = [[[None] * VECTORS for _ in range(2)] for _ in range(M_TILES)]
                    for m in range(M_TILES):
                        for h in range(2):
                            r = m * 16 + h * 8 + g
                            group = tile * TILE_GROUPS + r // ROWS_PER_GROUP
                            row = group * ROWS_PER_GROUP + r % ROWS_PER_GROUP
                            for u in range(VECTORS):
                                v = slab * (SLAB_K // 8) + u * 4 + t
                                if slip == "a_vector_order":  # A numbered unlike B
                                    v = slab * (SLAB_K // 8) + t * VECTORS + u
                                lw[m][h][u] = vector(w, row if group < n_groups else None, v, k)
                    lb = [[None] * VECTORS for _ in range(n_tiles)]
                    for n in range(n_tiles):
                        token = n * 8 + g
                        for u in range(VECTORS):
                            v = slab * (SLAB_K // 8) + u * 4 + t
                            lb[n][u] = vector(act, token if token < tokens else None, v, k)
                    wr.append(lw)
                    br.append(lb)

                def word(values, j):  # register j of a 16-byte load: values 2j, 2j + 1
                    return values[2 * j:2 * j + 2]

                for u in range(VECTORS):
                    for s in range(2):
                        for m in range(M_TILES):
                            a = []
                            for lane in range(32):
                                lo, hi = 2 * s, 2 * s + 1
                                if slip == "a_rows_swapped":
                                    a.append([word(wr[lane][m][1][u], lo), word(wr[lane][m][0][u], lo),
                                              word(wr[lane][m][1][u], hi), word(wr[lane][m][0][u], hi)])
                                else:
                                    a.append([word(wr[lane][m][0][u], lo), word(wr[lane][m][1][u], lo),
                                              word(wr[lane][m][0][u], hi), word(wr[lane][m][1][u], hi)])
                            for n in range(n_tiles):
                                b = []
                                for lane in range(32):
                                    b0, b1 = word(br[lane][n][u], 2 * s), word(br[lane][n][u], 2 * s + 1)
                                    if slip == "b_swap":  # the kernel's Fragments::planted_b_swap
                                        b0, b1 = b1, b0
                                    if slip == "b_step_order":
                                        b0, b1 = word(br[lane][n][u], 2 * (1 - s)), word(br[lane][n][u], 3 - 2 * s)
                                    b.append([b0, b1])
                                mma_m16n8k16(acc[m][n], a, b)
            for lane in range(32):
                g, t = lane // 4, lane % 4
                for m in range(M_TILES):
                    for n in range(n_tiles):
                        for i in range(4):
                            row = m * 16 + g + (i // 2) * 8
                            col = n * 8 + 2 * t + i % 2
                            if slip == "c_rows_half_swapped":
                                row = m * 16 + g + (1 - i // 2) * 8
                            partial[warp][row][col] = acc[m][n][g + (i // 2) * 8][2 * t + i % 2]
        for j in range(TILE_GROUPS):
            group = tile * TILE_GROUPS + j
            if group >= n_groups:
                continue
            for slot in range(ROWS_PER_GROUP):
                for token in range(tokens):
                    r = j * ROWS_PER_GROUP + slot
                    out[token][group * ROWS_PER_GROUP + slot] = sum(partial[v][r][token] for v in range(WARPS))
    return out


def check(tokens, n_groups, k, slip=None, seed=1):
    rng = random.Random(seed)
    n = n_groups * ROWS_PER_GROUP
    w = [[rng.randint(-3, 3) for _ in range(k)] for _ in range(n)]
    act = [[rng.randint(-3, 3) for _ in range(k)] for _ in range(tokens)]
    want = [[sum(act[tk][p] * w[j][p] for p in range(k)) for j in range(n)] for tk in range(tokens)]
    return emulate(w, act, n_groups, tokens, k, slip) == want


# k = 1064: 9 slabs (warp 0 takes two, the last slab 40 columns wide: a masked tail); 11 groups:
# 2 tiles, the second ragged (3 of 8 groups). 3 and 17 tokens pad their last tile with zeros.
CASES = [(3, 11, 1064), (17, 11, 1064), (8, 3, 256)]
SLIPS = ["b_swap", "b_step_order", "a_rows_swapped", "c_rows_half_swapped", "a_vector_order"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--self-test", action="store_true", help="also require each slip to fail")
    args = parser.parse_args()
    ok = True
    for tokens, groups, k in CASES:
        good = check(tokens, groups, k)
        print(f"mapping   tokens={tokens:2d} groups={groups} k={k}: {'match' if good else 'MISMATCH'}")
        ok &= good
    if args.self_test:
        for slip in SLIPS:
            caught = not check(3, 11, 1064, slip)
            print(f"slip {slip}: {'caught' if caught else 'NOT CAUGHT'}")
            ok &= caught
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

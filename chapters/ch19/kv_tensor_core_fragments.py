#!/usr/bin/env python3
"""Host check of kv_tensor_core.cuh's fragment mapping, no GPU needed.

Emulates one warp of ch19::kv_tensor_core::pass lane by lane: the loads (which bytes of which key
each lane takes), the E4M3 pair widening (a value pair per 16-bit half), the byte permutes, the
two shuffles that build P^T, and mma.sync m16n8k16 from its fragments as the PTX ISA lays them
out (A: a0 (row g, k 2t..2t+1), a1 (row g+8), a2 (row g, k 2t+8..), a3 (row g+8, k 2t+8..);
B: b0 (k 2t..2t+1, col g), b1 (k 2t+8..); C: c0, c1 (row g, cols 2t, 2t+1), c2, c3 (row g+8)).
Values stand for the codes (any numbers: the check is of where they go, in double precision), so
a wrong byte offset, key or lane shows as an error of the order of the output, not of rounding.
It compares the warp's attention over 37 keys (two full 16-key tiles and a partial one: the
masking of keys past the end) with the direct softmax, and exits 1 on a mismatch. With
--self-test it also plants each of DEFECTS in turn and exits 1 unless every one fails the check
(ctest: ch19.kv_tensor_core_fragments).

  python3 chapters/ch19/kv_tensor_core_fragments.py [--self-test]
"""
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "kernels"))
import mma_fragments  # noqa: E402 (the layout, from the PTX ISA)

D, QUERIES, KEYS, TILE = 128, 4, 37, 16
K_DEQUANT = V_DEQUANT = 1 / 448
SCALE = 1.4426950408889634 / math.sqrt(D)  # log2(e) / sqrt(d): scores in log2 units


def k_word_offset(t, s):  # kv_tensor_core.cuh's k_word_offset
    return (0 if s < 4 else D // 2) + 16 * t + 4 * (s % 4)


def mma(c, a, b):
    """c[lane][4] + A . B, in the C fragment layout (kernels/mma_fragments.py)."""
    prod = mma_fragments.product(a, b)
    return [[c[lane][i] + v for i, v in enumerate(mma_fragments.c_fragment(prod, lane))]
            for lane in range(32)]


def word_of(piece, w):  # 4 values ("bytes") of a 16-value load
    return piece[4 * w:4 * w + 4]


def byte_perm(x, y, selector):
    src = list(x) + list(y)
    return [src[(selector >> (4 * i)) & 0xF] for i in range(4)]


def low(w):
    return (w[0], w[1])


def high(w):
    return (w[2], w[3])


def warp_error(defect=None):
    """The emulated warp's largest |error| against the direct softmax, and the largest |output|.
    `defect` plants one of DEFECTS (the self-test's check that the comparison can fail)."""
    rnd = random.Random(1)
    K = [[float(rnd.randint(-448, 448)) for _ in range(D)] for _ in range(KEYS)]
    V = [[float(rnd.randint(-448, 448)) for _ in range(D)] for _ in range(KEYS)]
    q = [[rnd.gauss(0, 2) for _ in range(D)] for _ in range(QUERIES)]
    end = KEYS

    def row(M, key):
        return M[key] if key < end else [0.0] * D

    qb = []  # Q^T's B fragments: column g is query g / 2 for even g, zero for odd g
    for lane in range(32):
        g, t = lane // 4, lane % 4
        frag = []
        for s in range(8):
            d = k_word_offset(t, s)
            if defect == "q_word_order":  # Q^T's words in another order than K's
                d = k_word_offset(t, s ^ 1)
            x = [q[g // 2][d + e] * SCALE if g % 2 == 0 else 0.0 for e in range(4)]
            frag.append(((x[0], x[1]), (x[2], x[3])))
        qb.append(frag)

    m, l = [-1e30] * 32, [0.0] * 32
    o = [[[0.0] * 4 for _ in range(8)] for _ in range(32)]
    for at in range(0, end, TILE):
        k_tile, v_tile = [], []
        for lane in range(32):
            g, t = lane // 4, lane % 4
            k_tile.append([[row(K, at + g + 8 * r)[64 * h + 16 * t:64 * h + 16 * t + 16]
                            for h in range(2)] for r in range(2)])
            v_tile.append([row(V, at + t + 4 * i)[16 * g:16 * g + 16] for i in range(4)])
        s = [[0.0] * 4 for _ in range(32)]
        for step in range(8):
            a = []
            for lane in range(32):
                kg = word_of(k_tile[lane][0][step // 4], step % 4)
                kg8 = word_of(k_tile[lane][1][step // 4], step % 4)
                if defect == "k_pair_swap":  # the byte pairs of a K word the other way round
                    kg, kg8 = high(kg) + low(kg), high(kg8) + low(kg8)
                a.append([low(kg), low(kg8), high(kg), high(kg8)])
            s = mma(s, a, [qb[lane][step] for lane in range(32)])
        s0 = [s[L][0] * K_DEQUANT if at + L // 4 < end else -math.inf for L in range(32)]
        s1 = [s[L][2] * K_DEQUANT if at + L // 4 + 8 < end or defect == "no_tail_mask"
              else -math.inf for L in range(32)]
        tile_max = [max(s0[L], s1[L]) for L in range(32)]
        for mask in (4, 8, 16):
            tile_max = [max(tile_max[L], tile_max[L ^ mask]) for L in range(32)]
        if any(tile_max[L] > m[L] for L in range(32)):
            for L in range(32):
                m_new = max(m[L], tile_max[L])
                c = 2.0 ** max(m[L] - m_new, -1000.0)  # ex2.approx.ftz: 2^(-1e30) = 0
                l[L] *= c
                for i in range(8):
                    o[L][i][0] *= c
                    if defect != "rescale_one_row":
                        o[L][i][2] *= c
                m[L] = m_new
        p_pair = []
        for L in range(32):
            p0, p1 = 2.0 ** (s0[L] - m[L]), 2.0 ** (s1[L] - m[L])
            l[L] += p0 + p1
            p_pair.append((p0, p1))
        second = 4 if defect != "p_shuffle_source" else 0  # keys t + 4, t + 12 from lane t + 4
        pb = [(p_pair[4 * (L % 4) + (L // 4) // 2], p_pair[4 * (L % 4 + second) + (L // 4) // 2])
              for L in range(32)]
        for i in range(8):
            sel = 0x5140 if i % 2 == 0 or defect == "v_selector" else 0x7362
            a = []
            for L in range(32):
                rows = [word_of(piece, i // 2) for piece in v_tile[L]]  # keys t, t+4, t+8, t+12
                keys_t = byte_perm(rows[0], rows[2], sel)
                keys_t4 = byte_perm(rows[1], rows[3], sel)
                a.append([low(keys_t), high(keys_t), low(keys_t4), high(keys_t4)])
            new = mma([o[L][i] for L in range(32)], a, pb)
            for L in range(32):
                o[L][i] = new[L]
    for mask in (4, 8, 16):
        l = [l[L] + l[L ^ mask] for L in range(32)]
    out = [[0.0] * D for _ in range(QUERIES)]
    for L in range(32):
        g, t = L // 4, L % 4
        for i in range(8):
            out[t][16 * g + 2 * i] = o[L][i][0] * V_DEQUANT / l[L]
            out[t][16 * g + 2 * i + 1] = o[L][i][2] * V_DEQUANT / l[L]

    worst, largest = 0.0, 0.0
    for j in range(QUERIES):
        scores = [sum(q[j][d] * K[key][d] * K_DEQUANT for d in range(D)) / math.sqrt(D)
                  for key in range(KEYS)]
        top = max(scores)
        p = [math.exp(x - top) for x in scores]
        for d in range(D):
            ref = sum(p[key] * V[key][d] * V_DEQUANT for key in range(KEYS)) / sum(p)
            worst, largest = max(worst, abs(out[j][d] - ref)), max(largest, abs(ref))
    return worst, largest


# Planted defects, each a one-token slip in kv_tensor_core.cuh's mapping; --self-test requires
# every one of them to fail the comparison (a check that passes on all of them checks nothing).
DEFECTS = ("q_word_order", "k_pair_swap", "no_tail_mask", "rescale_one_row", "p_shuffle_source",
           "v_selector")


def passes(worst, largest):
    return worst < 1e-9 * largest


def main():
    worst, largest = warp_error()
    ok = passes(worst, largest)
    print(f"{'PASS' if ok else 'FAIL'}: largest |error| {worst:.3g}, "
          f"largest |output| {largest:.3g}")
    if "--self-test" in sys.argv[1:]:
        for defect in DEFECTS:
            caught = not passes(*warp_error(defect))
            print(f"planted {defect}: {'caught' if caught else 'NOT CAUGHT'}")
            ok = ok and caught
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

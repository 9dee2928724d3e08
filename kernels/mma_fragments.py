"""mma.sync m16n8k16's fragment layout, per the PTX ISA, for host emulations of the kernels that
build its operands lane by lane (ch19's kv_tensor_core_fragments.py, ch20's mma_gemv_fragments.py).

Written from the ISA, not from kernels/include/kernels/mma_bf16.cuh, so that an emulation checks
a kernel's register choices against the instruction's real layout. With g = lane // 4 and
t = lane % 4, each register holding a pair of values (low index first):
  A (16 x 16): a0 = (row g, k 2t..2t+1), a1 = (row g+8, same k), a2 = (row g, k 2t+8..2t+9),
               a3 = (row g+8, k 2t+8..2t+9);
  B (16 x 8):  b0 = (k 2t..2t+1, col g), b1 = (k 2t+8..2t+9, col g);
  C (16 x 8):  c0, c1 = (row g, cols 2t, 2t+1), c2, c3 = (row g+8, cols 2t, 2t+1).
a[lane] is the lane's 4 A registers and b[lane] its 2 B registers, each a pair of numbers.
"""


def product(a, b):
    """A . B (16 x 8), A and B gathered from the 32 lanes' fragments."""
    A = [[0] * 16 for _ in range(16)]
    B = [[0] * 8 for _ in range(16)]
    for lane in range(32):
        g, t = lane // 4, lane % 4
        for j in range(2):
            A[g][2 * t + j], A[g + 8][2 * t + j] = a[lane][0][j], a[lane][1][j]
            A[g][2 * t + 8 + j], A[g + 8][2 * t + 8 + j] = a[lane][2][j], a[lane][3][j]
            B[2 * t + j][g], B[2 * t + 8 + j][g] = b[lane][0][j], b[lane][1][j]
    return [[sum(A[i][k] * B[k][n] for k in range(16)) for n in range(8)] for i in range(16)]


def c_fragment(matrix, lane):
    """The lane's 4 C registers of a 16 x 8 matrix."""
    g, t = lane // 4, lane % 4
    return [matrix[g][2 * t], matrix[g][2 * t + 1], matrix[g + 8][2 * t], matrix[g + 8][2 * t + 1]]

// kernels/mma_bf16.cuh: the warp-level BF16 tensor-core instructions of sm_80+ (mma.sync
// m16n8k16, FP32 accumulate) and the ldmatrix loads that feed them from shared memory.
//
// Fragments (g = lane / 4, t = lane % 4), each register two BF16, the lower index in the low half:
//   A (16 x 16, row-major): a0 = (row g, cols 2t, 2t+1), a1 = (row g+8, same cols),
//                           a2 = (row g, cols 2t+8, 2t+9), a3 = (row g+8, cols 2t+8, 2t+9);
//   B (16 x 8, k x n):      b0 = (k 2t, 2t+1; col g),     b1 = (k 2t+8, 2t+9; col g);
//   C, D (16 x 8, FP32):    c0, c1 = (row g, cols 2t, 2t+1), c2, c3 = (row g+8, cols 2t, 2t+1).
// A C fragment pair of two adjacent 8-column tiles, packed to BF16, is exactly an A fragment
// (FlashAttention keeps P = softmax(S) in registers this way).
// ldmatrix.x4: lanes 8i..8i+7 give the shared-memory addresses of the 8 rows (16 bytes each) of
// matrix i; every lane receives, per matrix, (row g, cols 2t, 2t+1), or with .trans the transpose:
// (rows 2t, 2t+1; col g), which is the B fragment of a matrix stored n-contiguous (V in P V).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace kernels {

__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr)
               : "memory");
}

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr)
               : "memory");
}

// d (16 x 8, FP32) += a (16 x 16) * b (16 x 8), BF16 operands.
__device__ __forceinline__ void mma_bf16_m16n8k16(float (&d)[4], const uint32_t (&a)[4],
                                                  uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// d (16 x 8, FP32) += a (16 x 8) * b (8 x 8), BF16 operands: a0 = (row g, cols 2t, 2t+1), a1 =
// (row g+8, same cols); b0 = (k 2t, 2t+1; col g); d as m16n8k16's.
__device__ __forceinline__ void mma_bf16_m16n8k8(float (&d)[4], uint32_t a0, uint32_t a1,
                                                 uint32_t b0) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(b0));
}

}  // namespace kernels

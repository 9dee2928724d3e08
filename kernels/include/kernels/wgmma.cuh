// kernels/wgmma.cuh: Hopper's warpgroup MMA (wgmma.mma_async, sm_90a) as the BF16 GEMMs of ch09
// and ch10 use it, and the register reallocation (setmaxnreg, sm_90a) that warp-specialised
// kernels pair with it.
//
// A warpgroup is 4 consecutive warps starting at a warp index divisible by 4; its 128 threads
// issue one wgmma together. The tensor cores read both operands from shared memory through
// 64-bit matrix descriptors and accumulate into registers spread over the warpgroup; the
// instruction is asynchronous: fence before the first one that touches the accumulators,
// commit a group, wait for groups to finish before reading the accumulators or reusing the
// shared memory they read.
//
// Everything here is sm_90a-only: call it only inside a kernel body under BENCH_SM90A_DEVICE
// (kernels/arch.cuh), from a variant declared {.arch_specific = 90}.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace kernels::wgmma {

// Descriptor of a K-major tile written by TMA in the 128-byte swizzle (rows of 64 BF16, 8-row
// core groups 1024 bytes apart); `tile` must lie in a 1024-byte-aligned swizzle atom, plus a
// multiple of 32 bytes to start at a later k16 step of the same rows.
__device__ __forceinline__ uint64_t descriptor_k_major_sw128(const void* tile) {
  const uint64_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  return ((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
// Waits until at most N committed groups of this warpgroup are still running.
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// d (64 x 256 per warpgroup, FP32) += A (64 x 16, BF16) * B (256 x 16, BF16)^T, both K-major in
// shared memory; accumulate == 0: d = A B^T.
__device__ __forceinline__ void mma_m64n256k16_bf16(float (&d)[128], uint64_t desc_a,
                                                    uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, "
      "%9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, "
      "%27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, "
      "%45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, "
      "%63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, "
      "%81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, "
      "%99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, "
      "%114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, "
      "%129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]),
        "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]),
        "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]),
        "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]),
        "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
        "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
        "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]),
        "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]),
        "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]),
        "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
        "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]),
        "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]),
        "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]),
        "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]),
        "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
        "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// Stores a warpgroup's 64 x kN accumulators as BF16 into rows row0.. and columns col0.. of a
// row-major matrix `cols` wide. Fragment layout: register 4i + {0,1,2,3} holds (row, col),
// (row, col+1), (row+8, col), (row+8, col+1) with row = 16 warp + lane / 4, col = 8 i + 2 (lane %
// 4); each pair is one bf16x2 store.
template <int kN>
__device__ __forceinline__ void store_m64n_bf16(const float (&acc)[kN / 2],
                                                __nv_bfloat16* __restrict__ out, int64_t cols,
                                                int64_t row0, int64_t col0) {
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int64_t row = row0 + warp * 16 + lane / 4;
#pragma unroll
  for (int i = 0; i < kN / 8; ++i) {
    const int64_t col = col0 + i * 8 + 2 * (lane % 4);
    *reinterpret_cast<__nv_bfloat162*>(out + row * cols + col) =
        __floats2bfloat162_rn(acc[4 * i], acc[4 * i + 1]);
    *reinterpret_cast<__nv_bfloat162*>(out + (row + 8) * cols + col) =
        __floats2bfloat162_rn(acc[4 * i + 2], acc[4 * i + 3]);
  }
}
__device__ __forceinline__ void store_m64n256_bf16(const float (&acc)[128],
                                                   __nv_bfloat16* __restrict__ out, int64_t cols,
                                                   int64_t row0, int64_t col0) {
  store_m64n_bf16<256>(acc, out, cols, row0, col0);
}
// store_m64n256_bf16 for a tile whose rows stop part-way: rows at or past row_end are not
// written (a grouped GEMM's last row tile of a group, whose later rows belong to the next group).
__device__ __forceinline__ void store_m64n256_bf16_rows_below(const float (&acc)[128],
                                                              __nv_bfloat16* __restrict__ out,
                                                              int64_t cols, int64_t row0,
                                                              int64_t col0, int64_t row_end) {
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int64_t row = row0 + warp * 16 + lane / 4;
  const bool low = row < row_end, high = row + 8 < row_end;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int64_t col = col0 + i * 8 + 2 * (lane % 4);
    if (low)
      *reinterpret_cast<__nv_bfloat162*>(out + row * cols + col) =
          __floats2bfloat162_rn(acc[4 * i], acc[4 * i + 1]);
    if (high)
      *reinterpret_cast<__nv_bfloat162*>(out + (row + 8) * cols + col) =
          __floats2bfloat162_rn(acc[4 * i + 2], acc[4 * i + 3]);
  }
}

// --- Attention's shapes (ch16/flash_attention): m64n128k16, FP32 accumulators d[64] ---------------
// Fragment layout of d: as store_m64n_bf16 says, with kN = 128 (16 column groups).

// The FP32 accumulators of an m64n64 wgmma (32) and of an m64n128 one (64, the first 32 the same):
// their operand lists (%0..%31, %0..%63) and constraints, laid out by hand.
// clang-format off
#define BENCH_WGMMA_ACC32_REGS \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, " \
  "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define BENCH_WGMMA_ACC64_REGS BENCH_WGMMA_ACC32_REGS ", " \
  "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, " \
  "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
#define BENCH_WGMMA_ACC32(d) \
      "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), \
      "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), \
      "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define BENCH_WGMMA_ACC64(d) BENCH_WGMMA_ACC32(d), \
      "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), \
      "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), \
      "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), \
      "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
// The same 64 as outputs only ("=f"): for a wgmma whose scale-d is 0, which does not read d. With
// "+f" the compiler keeps d's previous values alive up to the instruction.
#define BENCH_WGMMA_OUT32(d) \
      "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3]), "=f"(d[4]), "=f"(d[5]), "=f"(d[6]), "=f"(d[7]), \
      "=f"(d[8]), "=f"(d[9]), "=f"(d[10]), "=f"(d[11]), "=f"(d[12]), "=f"(d[13]), "=f"(d[14]), "=f"(d[15]), \
      "=f"(d[16]), "=f"(d[17]), "=f"(d[18]), "=f"(d[19]), "=f"(d[20]), "=f"(d[21]), "=f"(d[22]), "=f"(d[23]), \
      "=f"(d[24]), "=f"(d[25]), "=f"(d[26]), "=f"(d[27]), "=f"(d[28]), "=f"(d[29]), "=f"(d[30]), "=f"(d[31])
#define BENCH_WGMMA_OUT64(d) BENCH_WGMMA_OUT32(d), BENCH_WGMMA_OUT32((d + 32))
#define BENCH_WGMMA_ACC128_REGS BENCH_WGMMA_ACC64_REGS ", " \
  "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, " \
  "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, " \
  "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, " \
  "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
#define BENCH_WGMMA_ACC128(d) BENCH_WGMMA_ACC64(d), BENCH_WGMMA_ACC64((d + 64))
// clang-format on

// Descriptor of an MN-major tile (the B operand of O += P V, V stored [key][dim]) written by TMA in
// the 128-byte swizzle: each K row (key) holds 64 contiguous BF16 of N (dim), 8 K rows make one
// 1024-byte swizzle atom (SBO = 1024: the next 8 keys), and the next 64 N values lie `lbo_bytes`
// further on (LBO: the next 64-column box). PTX ISA, "Matrix Descriptor Format" / "Canonical
// Layouts": MN-major 128B swizzling ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO)). `tile` must start a
// 1024-byte-aligned atom (a k16 step advances 16 keys: 2048 bytes).
__device__ __forceinline__ uint64_t descriptor_mn_major_sw128(const void* tile, uint32_t lbo_bytes) {
  const uint64_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  return ((addr & 0x3FFFF) >> 4) | (uint64_t{(lbo_bytes & 0x3FFFF) >> 4} << 16) | (uint64_t{1024 >> 4} << 32) |
         (uint64_t{1} << 62);
}

// d (64 x 128 per warpgroup, FP32) += A (64 x 16) * B (128 x 16)^T, both K-major in shared memory
// (descriptor_k_major_sw128); accumulate == 0: d = A B^T.
__device__ __forceinline__ void mma_m64n128k16_bf16(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                    int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      BENCH_WGMMA_ACC64_REGS
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : BENCH_WGMMA_ACC64(d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

// d (64 x 64, FP32) += A (64 x 16) * B (64 x 16)^T, both K-major in shared memory: the product
// of mma_m64n128k16_bf16 over its first 64 columns (B's first 64 rows; d is that form's d[0 .. 31],
// in the same fragment layout). ch16's wgmma_chained_diagonal: a causal diagonal tile's scores for
// the warpgroup whose rows all lie before the tile's second half.
__device__ __forceinline__ void mma_m64n64k16_bf16(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                   int accumulate) {
  // clang-format off
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      BENCH_WGMMA_ACC32_REGS
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : BENCH_WGMMA_ACC32(d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  // clang-format on
}

// d (64 x 128, FP32) = A (64 x 16) * B (128 x 16)^T, both K-major in shared memory: the first k
// step of a product into registers that hold something else until then. scale-d is the immediate
// 0 and d an output only, so d's previous values are dead before this instruction, not live up to
// it (with a second accumulator in flight beside it, ch16's overlap schedule spilled without).
__device__ __forceinline__ void mma_m64n128k16_bf16_overwrite(float (&d)[64], uint64_t desc_a,
                                                              uint64_t desc_b) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      BENCH_WGMMA_ACC64_REGS
      "}, %64, %65, 0, 1, 1, 0, 0;\n"
      : BENCH_WGMMA_OUT64(d)
      : "l"(desc_a), "l"(desc_b));
}

// d (64 x 128, FP32) += A (64 x 16, BF16, in registers) * B (16 x 128), B MN-major in shared memory
// (descriptor_mn_major_sw128: imm-trans-b = 1). A's four registers per thread are the mma.sync
// m16n8k16 A fragment of the thread's warp's 16 rows (rows 16 warp + lane / 4 and + 8, columns
// 2 (lane % 4) + {0, 1, 8, 9}): two adjacent 8-column groups of an FP32 accumulator packed to BF16,
// so a softmax computed on d's fragments feeds the next product without leaving registers.
__device__ __forceinline__ void mma_m64n128k16_bf16_a_regs(float (&d)[64], const uint32_t (&a)[4],
                                                           uint64_t desc_b_mn_major, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      BENCH_WGMMA_ACC64_REGS
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, 1;\n}\n"
      : BENCH_WGMMA_ACC64(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b_mn_major), "r"(accumulate));
}

// --- head_dim 64 (ch16/flash_attention's d64 twins): O += P V is m64n64k16, d[32] -------------
// Fragment layout of d: as above, with 8 column groups. S = Q K^T stays m64n128k16 (128 keys).

// d (64 x 64, FP32) += A (64 x 16, BF16, in registers) * B (16 x 64), B MN-major in shared memory:
// mma_m64n128k16_bf16_a_regs at half the width. With N = 64 a key row of B is one 128-byte swizzle
// row, so the descriptor's LBO (the next 64 columns) is never used.
__device__ __forceinline__ void mma_m64n64k16_bf16_a_regs(float (&d)[32], const uint32_t (&a)[4],
                                                          uint64_t desc_b_mn_major,
                                                          int accumulate) {
  // clang-format off
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      BENCH_WGMMA_ACC32_REGS
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, 1;\n}\n"
      : BENCH_WGMMA_ACC32(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b_mn_major), "r"(accumulate));
  // clang-format on
}

// --- FP8 (ch19/fp8_gemm): m64n256k32, E4M3 x E4M3, FP32 accumulators d[128] ---------------------
// d (64 x 256 per warpgroup, FP32) += A (64 x 32, E4M3) * B (256 x 32, E4M3)^T, both K-major in
// shared memory; accumulate == 0: d = A B^T. The 8-bit forms take no transpose immediates (PTX ISA,
// wgmma.mma_async: imm-trans-a/b exist only for .f16/.bf16), so both operands must be K-major. A k32
// step is 32 bytes of a row, as a BF16 k16 step is: descriptor_k_major_sw128 and its +32-byte
// steps describe an E4M3 tile of 128-value rows (128 bytes, the same swizzle) unchanged. Fragment
// layout of d: as store_m64n_bf16 says, with kN = 256.
__device__ __forceinline__ void mma_m64n256k32_e4m3(float (&d)[128], uint64_t desc_a,
                                                    uint64_t desc_b, int accumulate) {
  // clang-format off
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3 {"
      BENCH_WGMMA_ACC128_REGS
      "}, %128, %129, p, 1, 1;\n}\n"
      : BENCH_WGMMA_ACC128(d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  // clang-format on
}

// The same at half the width: d (64 x 128, FP32) += A (64 x 32, E4M3) * B (128 x 32, E4M3)^T, 64
// accumulators a thread. ch19/fp8_gemm's block-scaled rung covers a 64 x 256 share in two of these
// so that a k-block's partial sums (64) fit beside the FP32 totals (128) in the registers.
__device__ __forceinline__ void mma_m64n128k32_e4m3(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                    int accumulate) {
  // clang-format off
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      BENCH_WGMMA_ACC64_REGS
      "}, %64, %65, p, 1, 1;\n}\n"
      : BENCH_WGMMA_ACC64(d)
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
  // clang-format on
}

// Register reallocation between warpgroups (setmaxnreg): every warp of a warpgroup executes the
// same one. `shrink` hands registers above N back to the SM's pool; `grow` waits until the pool
// holds enough and raises this warp's limit to N. N is a multiple of 8 in [24, 256]. ptxas honours
// it only when the kernel's register count at entry is fixed (__launch_bounds__(threads, 1) or
// -maxrregcount) and each role is one branch of an if/else; otherwise it warns (C7508) and
// ignores it.
//
// The pool is the CTA's own registers, what it was launched with, not the SM's 64 Ki: ptxas gives
// a kernel that uses setmaxnreg the most __launch_bounds__(threads, 1) allows, 65536 / threads
// rounded down to a multiple of 8 (168 at 384 threads, 64,512 registers). A split that asks for
// more than that makes `grow` wait forever: ch10's persistent_stream_k hung so on its first run
// (one 48-register producer and two 232-register consumers: 65,536). Check a split with
// static_assert(fits_register_pool(...)).
constexpr int register_pool(int threads) { return (65536 / threads) / 8 * 8 * threads; }
constexpr bool fits_register_pool(int producer_registers, int consumer_registers, int consumers,
                                  int warpgroup_threads = 128) {
  return (producer_registers + consumer_registers * consumers) * warpgroup_threads <=
         register_pool((1 + consumers) * warpgroup_threads);
}

template <int N>
__device__ __forceinline__ void shrink_registers() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void grow_registers() {
  static_assert(N % 8 == 0 && N >= 24 && N <= 256, "setmaxnreg takes a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

}  // namespace kernels::wgmma

// ch19/fp8_gemm: the BF16 wgmma GEMM → the same kernel on E4M3 operands with per-tensor scales →
// fine-grained (1 x 128, 128 x 128) scales with the partial sums promoted to FP32 every k-block.
//
// D (m x n, column-major, BF16) = A (m x k, row-major) x B (k x n, column-major), FP32
// accumulate: the suite's TN layout (kernels/gemm_bf16.cuh). Both operands k-contiguous is not a
// choice here: the 8-bit wgmma takes both operands K-major only (no transpose immediates), as
// cuBLASLt's FP8 does. Square shapes, the axis mnk: 4096 and 8192.
//
// The problem is one problem: A and B are BF16 values, the harness's uniform(-1, 1) inputs with
// each 128-wide k-block of an A row, and each 128 x 128 block of B, scaled by its own power of
// two in 2^-4 .. 2^3 (kernels/fp8_block_scaling.hpp: without it every block's abs-max is ~1 and
// a rung that read the wrong block's scale would still pass). The FP8 sides read E4M3 codes under
// the chapter's rule (kernels/fp8_e4m3.hpp: code = E4M3(x * 448 / amax), value ≈ code * amax /
// 448), one scale per tensor or one per block, quantised whenever the harness refills the inputs
// (untimed, as weights and an FP8 producer's activations arrive already quantised; the cast
// itself is fused_quantize's lesson). Every side writes D as BF16.
//
// The ladder (every rung sm_90a: wgmma and setmaxnreg):
//   1. baseline "bf16_wgmma": ch10's warp-specialised tile (kernels/ws_gemm.cuh): 128 x 256 tile
//      of D^T, a 4-stage TMA ring in the 128-byte swizzle, one producer warpgroup (one thread
//      issues the copies), two consumer warpgroups each 64 x 256 with 128 FP32 accumulators a
//      thread, 4 wgmma.m64n256k16 a 64-wide k-block. Reproduced here generic over the operand
//      type, so that between the two rungs only the type changes.
//   2. step "e4m3_wgmma": the same kernel instantiated on E4M3. A k-block is still one
//      128-byte swizzle row, now of 128 values, so each stage carries twice the k and each of the
//      4 wgmma.m64n256k32 per k-block does twice the work at twice the rate; the ring, the
//      descriptors (+32 bytes a step) and the barriers are byte-for-byte the same. The FP32 sums
//      are multiplied by dequant(A) x dequant(B), read once per thread, before the BF16 round.
//   3. optimized "e4m3_persistent" (measured ahead of cuBLASLt FP8, README):
//      rung 2's math on ch10's persistent_tma_store schedule. One CTA
//      per SM walks tiles b, b + grid, ... (static: equal tiles), the ring's slots counting on
//      across tiles, so the producer loads the next tile's first k-blocks while the consumers
//      store this one; the store goes through shared memory to TMA (kernels/tma_store_epilogue.cuh)
//      instead of 64 scattered st.global a thread. At twice the math rate the per-tile start and
//      epilogue are twice rung 2's share of a tile's time; this takes both off the tensor cores'
//      path except the staging writes. Ping-pong consumers would hide those too; the README says
//      why this rung keeps the cooperative tile. Its kernel, with the tile and the ring's roles
//      that every rung uses, is kernels/fp8_gemm.cuh: calibrate times it for the FP8 ceiling.
//   4. step "e4m3_block_scaled" (DeepSeek-V3's scaling): A scaled per row per 128-wide k-block,
//      B per 128 x 128 block. A scale that changes along k no longer commutes with the sum, so
//      each k-block is summed alone in the wgmma's registers and then promoted: multiplied by
//      a_scale[row][kb] x b_scale[kb][tile's B block] and added into a separate FP32 total.
//      That also bounds what the FP8 tensor cores' reduced-precision accumulation sums to one
//      k-block of 128. The producer adds the tile's 256 A scales of the k-block to each stage
//      (one 1 KiB copy); the one B scale a k-block is a cached load. 128 totals + 128 partial
//      sums would not fit 232 registers, so each consumer covers its 64 x 256 share as two
//      m64n128k32 halves in turn (64 partial sums): wait, promote, next half. The promotion's
//      128 FMAs a thread a k-block and the wait before it are what this rung costs over rung 2;
//      DeepGEMM hides them behind the other warpgroup's wgmma with a ping-pong schedule.
//   5. vendor "cublaslt_e4m3": cuBLASLt FP8 on rung 2's codes and scale pointers.
// The FP8 sides are held to the FP8 tensor ceiling (bench::ceiling::fp8), the baseline to BF16's.
//
// Accuracy: every side against the double-precision GEMM of the BF16 values, relative L2 6e-2.
// E4M3 keeps 3 mantissa bits: rounding a uniform(-1, 1) operand costs rms ~2.6e-2 relative per
// value, a product ~sqrt(2) of that, and sums of random-sign terms keep the ratio, so the FP8
// sides should land near 3.7e-2 in both scaling modes; the BF16 baseline near 3e-3. A wrong or
// missing scale is off by orders of magnitude; a block-scaled rung that reads a neighbouring,
// transposed or next-k-block scale scales the dominant products by up to 2^7; a mis-addressed
// operand gives uncorrelated output (~1.4): all fail. tests/unit/fp8_block_scaling_test.cpp
// checks these on the host's exact model of the quantisation.
//
//   ./bench compare --chapter ch19 --example fp8_gemm
#include <bench/bench.hpp>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <kernels/arch.cuh>
#include <kernels/cublaslt_gemm.hpp>
#include <kernels/fp8_block_scaling.hpp>
#include <kernels/fp8_gemm.cuh>
#include <kernels/fp8_quantize.cuh>
#include <kernels/gemm_bf16.cuh>
#include <kernels/occupancy.cuh>
#include <kernels/tma.cuh>
#include <kernels/wgmma.cuh>
#include <kernels/ws_gemm.cuh>

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace {

using bf16 = __nv_bfloat16;
using fp8 = __nv_fp8_e4m3;
namespace tma = kernels::tma;
namespace wgmma = kernels::wgmma;

// ---- The tile: ch10's, in bytes, so that it holds either operand type (kernels/fp8_gemm.cuh,
// which the persistent rung's kernel lives in too, since calibrate measures the FP8 ceiling on
// it): a k-block is one 128-byte swizzle row, 64 BF16 or 128 E4M3, 4 wgmma steps of 32 bytes;
// a 4-stage ring of 48 KiB stages; one producer warpgroup, two consumers of 64 x 256 each.
using kernels::fp8_gemm::consume;
using kernels::fp8_gemm::E4m3Operands;
using kernels::fp8_gemm::grouped_tile;
using kernels::fp8_gemm::init_ring;
using kernels::fp8_gemm::produce;
using kernels::fp8_gemm::Scaling;
using kernels::fp8_gemm::Tile;
using kernels::fp8_gemm::kBM, kernels::fp8_gemm::kBN, kernels::fp8_gemm::kConsumers,
    kernels::fp8_gemm::kRowBytes, kernels::fp8_gemm::kStages, kernels::fp8_gemm::kStepBytes,
    kernels::fp8_gemm::kStepsPerBlock, kernels::fp8_gemm::kThreads, kernels::fp8_gemm::kWarpgroup,
    kernels::fp8_gemm::kXShare;
// The block-scaled rung's consumers hold 128 totals + 64 partial sums + the k-block's scales:
// the producer gives up all it can (24, setmaxnreg's least) so that they get 240.
constexpr int kBlockScaledProducerRegisters = 24, kBlockScaledConsumerRegisters = 240;
static_assert(wgmma::fits_register_pool(kBlockScaledProducerRegisters,
                                        kBlockScaledConsumerRegisters, kConsumers));

// The one-tile kernels' shared memory: the ring, and the block-scaled rung's A-scale slots.
struct alignas(1024) Smem {
  uint8_t x[kStages][kBM * kRowBytes];  // 16 KiB each (1024-aligned: the swizzle is address bits)
  uint8_t y[kStages][kBN * kRowBytes];  // 32 KiB each
  float y_scales[kStages][kBN];  // the block-scaled rung: the tile's A scales of the k-block
  uint64_t full[kStages], empty[kStages];
};
constexpr size_t kSmemBytes = sizeof(Smem) + 1024;  // + room to align the dynamic base
// The opt-in limit a block may ask for on sm_90 (227 KiB): past it cudaFuncSetAttribute fails at
// the first launch, on the GPU only. The A-scale slots (4 KiB) took this layout to 198 KiB.
static_assert(kSmemBytes <= 227 * 1024, "the ring no longer fits one block's shared memory");

// What differs between the operand types (kernels::fp8_gemm::E4m3Operands: E4M3 codes,
// wgmma.m64n256k32, per-tensor scales): here, the baseline's BF16 and the block-scaled rung's.
struct Bf16Operands {
  using T = bf16;
  static constexpr int kBK = kRowBytes / int(sizeof(T));  // 64
  static constexpr CUtensorMapDataType kMapType = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  static constexpr Scaling kScaling = Scaling::none;
  __device__ static void mma(float (&acc)[128], uint64_t a, uint64_t b, int accumulate) {
    wgmma::mma_m64n256k16_bf16(acc, a, b, accumulate);
  }
};
struct E4m3BlockOperands : E4m3Operands {
  static constexpr Scaling kScaling = Scaling::per_block;
};
// A k-block of the block-scaled rung is exactly one scale block along k, and a tile's 128 X rows
// (B's rows: D's columns) exactly one weight block: one B scale a tile a k-block.
static_assert(E4m3Operands::kBK == kernels::fp8_block::kBlockK &&
              kBM == kernels::fp8_block::kBlockK);

// The ring's roles (kernels/fp8_gemm.cuh), on either operand type: the producer's one thread
// (produce) waits for a stage's release, then one expect_tx for the whole stage and its 4 copies
// (2 of X, 2 of Y), block-scaled plus the tile's 256 A scales of the k-block; each consumer
// (consume) waits for a stage, queues its 4 wgmma as one group and releases the stage the group
// before once that has finished. A slot is the running count of k-blocks a role has put through
// the ring: one tile per CTA, the slot is the k-block.

// One tile per CTA (grid = tile count). D^T (rows x cols, row-major) = X Y^T with X = B, Y = A.
// x_scales / y_scales: the operands' per-tensor scales (E4M3 only; BF16 passes nullptr).
template <class Op>
__global__ void __launch_bounds__(kThreads, 1)
    wgmma_gemm(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_y,
               bf16* __restrict__ out, int rows, int cols, int k,
               const kernels::Fp8Scales* __restrict__ x_scales,
               const kernels::Fp8Scales* __restrict__ y_scales) {
#if BENCH_SM90A_DEVICE
  extern __shared__ uint8_t raw[];
  Smem& sm = init_ring<Smem>(raw, kConsumers);  // empty: each consumer's leader
  const Tile tile = grouped_tile(blockIdx.x, rows, cols);
  const int kblocks = k / Op::kBK;
  uint32_t slot = 0;  // one tile: the slot is the k-block
  if (threadIdx.x / kWarpgroup == 0) {
    wgmma::shrink_registers<kernels::fp8_gemm::kProducerRegisters>();
    if (threadIdx.x == 0) produce<Op>(sm, &map_x, &map_y, nullptr, tile, kblocks, slot);
  } else {
    wgmma::grow_registers<kernels::fp8_gemm::kConsumerRegisters>();
    const int cw = threadIdx.x / kWarpgroup - 1;
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;  // the first wgmma overwrites; never undefined
    consume<Op>(acc, sm, cw, kblocks, slot);
    if constexpr (Op::kScaling == Scaling::per_tensor)
      kernels::fp8_gemm::apply_scale(acc, x_scales->dequant * y_scales->dequant);
    wgmma::store_m64n256_bf16(acc, out, cols, tile.r0 + cw * kXShare, tile.c0);
  }
#endif
}

// ---- The persistent rung: kernels::fp8_gemm::persistent_gemm<E4m3Operands>, rung 2's math
// (produce, consume, apply_scale above) on ch10's persistent_tma_store schedule. One CTA per SM
// walks tiles b, b + grid, ..., the ring's slots counting on across them (the producer loads the
// next tile's first k-blocks while the consumers store this one), and each consumer's epilogue
// goes through shared memory to a TMA store (kernels/tma_store_epilogue.cuh) instead of 64
// scattered st.global a thread while no wgmma runs. Its shared memory is the ring without the
// A-scale slots, plus the staging (225 KiB + 1 KiB). It lives in kernels/ because calibrate
// times it too: the FP8 ceiling is the faster of cuBLASLt and this kernel.

// ---- The block-scaled rung's consumer: one k-block at a time, promoted into FP32 totals.
constexpr int kHalfN = kBN / 2;            // one m64n128k32 covers half a consumer's columns
constexpr int kWarpsPerWarpgroup = kWarpgroup / 32;
constexpr int kBlockScaledReleases = kConsumers * kWarpsPerWarpgroup;  // every warp reads scales

// Consumer `cw`'s 64 x 256 into `total`, in the m64n256 fragment layout (store_m64n256_bf16).
// Half h's m64n128 fragment register 4i + j sits at column h 128 + 8i + 2 (lane % 4) + j % 2,
// which is register 64h + 4i + j of the m64n256 fragment: the halves concatenate.
__device__ __forceinline__ void consume_block_scaled(float (&total)[128], Smem& sm, int cw,
                                                     int kblocks,
                                                     const float* __restrict__ x_scales,
                                                     int x_block, int x_blocks) {
  const int lane = threadIdx.x % 32;
  const int pair = 2 * (lane % 4);  // this thread's first column within each 8-column group
  float part[kHalfN / 2];
#pragma unroll
  for (int i = 0; i < kHalfN / 2; ++i) part[i] = 0.0f;  // overwritten by each half's first wgmma
  for (int kb = 0; kb < kblocks; ++kb) {
    const int s = kb % kStages;
    // The tile's one B scale of this k-block: a cached load, issued before the wait hides it.
    const float x_scale = __ldg(x_scales + kernels::fp8_block::scale_index(x_block, kb, x_blocks));
    tma::wait_parity(&sm.full[s], (kb / kStages) & 1);
    // A descriptor's address field is the shared address / 16: a later step of the same rows,
    // or the second half's Y rows, is the stage's descriptor plus its byte offset / 16.
    const uint64_t x_desc = wgmma::descriptor_k_major_sw128(&sm.x[s][cw * kXShare * kRowBytes]);
    const uint64_t y_desc = wgmma::descriptor_k_major_sw128(&sm.y[s][0]);
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      wgmma::fence();  // part's registers: the previous promotion read them
#pragma unroll
      for (int step = 0; step < kStepsPerBlock; ++step)
        wgmma::mma_m64n128k32_e4m3(part, x_desc + step * kStepBytes / 16,
                                   y_desc + (half * kHalfN * kRowBytes + step * kStepBytes) / 16,
                                   step > 0);
      wgmma::commit();
      wgmma::wait<0>();  // the promotion reads this half's sums
      // Promotion: total += part x a_scale[column] x b_scale, in FP32 (columns of D^T are A rows).
#pragma unroll
      for (int i = 0; i < kHalfN / 8; ++i) {
        const float2 y_scale =
            *reinterpret_cast<const float2*>(&sm.y_scales[s][half * kHalfN + 8 * i + pair]);
        const float s0 = x_scale * y_scale.x, s1 = x_scale * y_scale.y;
        float* t = &total[half * (kHalfN / 2) + 4 * i];
        t[0] = fmaf(part[4 * i], s0, t[0]);
        t[1] = fmaf(part[4 * i + 1], s1, t[1]);
        t[2] = fmaf(part[4 * i + 2], s0, t[2]);
        t[3] = fmaf(part[4 * i + 3], s1, t[3]);
      }
    }
    // Every warp read the stage's scales, so every warp releases it (its wgmma are done too).
    __syncwarp();
    if (lane == 0) tma::arrive(&sm.empty[s]);
  }
}

// x_scales: B's [k-blocks][n / 128] dequant scales; map_y_scales: A's [k-blocks][m], in boxes of
// one k-block's 256 tile columns.
__global__ void __launch_bounds__(kThreads, 1)
    block_scaled_gemm(const __grid_constant__ CUtensorMap map_x,
                      const __grid_constant__ CUtensorMap map_y,
                      const __grid_constant__ CUtensorMap map_y_scales, bf16* __restrict__ out,
                      int rows, int cols, int k, const float* __restrict__ x_scales) {
#if BENCH_SM90A_DEVICE
  extern __shared__ uint8_t raw[];
  Smem& sm = init_ring<Smem>(raw, kBlockScaledReleases);
  const Tile tile = grouped_tile(blockIdx.x, rows, cols);
  const int kblocks = k / E4m3BlockOperands::kBK;
  if (threadIdx.x / kWarpgroup == 0) {
    wgmma::shrink_registers<kBlockScaledProducerRegisters>();
    uint32_t slot = 0;  // one tile: the slot is the k-block (consume_block_scaled counts kb)
    if (threadIdx.x == 0)
      produce<E4m3BlockOperands>(sm, &map_x, &map_y, &map_y_scales, tile, kblocks, slot);
  } else {
    wgmma::grow_registers<kBlockScaledConsumerRegisters>();
    const int cw = threadIdx.x / kWarpgroup - 1;
    float total[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) total[i] = 0.0f;
    consume_block_scaled(total, sm, cw, kblocks, x_scales, tile.r0 / kBM, rows / kBM);
    wgmma::store_m64n256_bf16(total, out, cols, tile.r0 + cw * kXShare, tile.c0);
  }
#endif
}

// ---- The workload: the BF16 GEMM of the widened operands, their E4M3 codes and scales.
constexpr int kQuantizeBlocks = 4;  // per SM, setup only
constexpr uint32_t kOperandA = 0, kOperandB = 1;  // spread_exponent's operand tags
constexpr int kActivationBlockRows = 1, kWeightBlockRows = kernels::fp8_block::kBlockK;

// out = x with block (row / block_rows, column / 128) scaled by its 2^spread_exponent (exact).
__global__ void widen_blocks(const bf16* __restrict__ x, bf16* __restrict__ out, int64_t rows,
                             int64_t cols, int block_rows, uint32_t operand) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows * cols;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / cols, col = i % cols;
    const int e = kernels::fp8_block::spread_exponent(operand, row / block_rows,
                                                      col / kernels::fp8_block::kBlockK);
    out[i] = __float2bfloat16(ldexpf(__bfloat162float(x[i]), e));
  }
}
// The same on the host, in FP32 (exact: a power of two times a BF16 value).
std::vector<float> widened(std::span<const bf16> x, int64_t rows, int64_t cols, int block_rows,
                           uint32_t operand) {
  std::vector<float> out(x.size());
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t col = 0; col < cols; ++col)
      out[row * cols + col] = std::ldexp(
          static_cast<float>(x[row * cols + col]),
          kernels::fp8_block::spread_exponent(operand, row / block_rows,
                                              col / kernels::fp8_block::kBlockK));
  return out;
}

struct Fp8Gemm : kernels::GemmBf16 {
  bench::DeviceBuffer<bf16> a_wide, b_wide;        // the operands every side multiplies
  bench::DeviceBuffer<fp8> a8, b8;                 // E4M3 codes, one scale per tensor
  bench::DeviceBuffer<kernels::Fp8Scales> scales;  // [0]: A's, [1]: B's (16-byte slots)
  bench::DeviceBuffer<fp8> a8_blocks, b8_blocks;   // E4M3 codes, one scale per block
  bench::DeviceBuffer<float> a_block_scales, b_block_scales;  // [k / 128][m], [k / 128][n / 128]
  // Verification: 11 x 14 tiles (m 2816, n 1792: 154, more than the persistent grid and not a
  // multiple of it, so on 132 SMs 22 CTAs run a second tile, which starts mid-ring and reuses
  // the staging) and k 640: 5 E4M3 k-blocks and 10 BF16 ones, so every ring wraps inside a
  // tile. Timing: m = n = k = the axis mnk.
  explicit Fp8Gemm(bench::Setup& s)
      : GemmBf16(s, s.size("m", s.axis("mnk"), 2816), s.size("n", s.axis("mnk"), 1792),
                 s.size("k", s.axis("mnk"), 640)),
        a_wide(m * k),
        b_wide(n * k),
        a8(m * k),
        b8(n * k),
        scales(2),
        a8_blocks(m * k),
        b8_blocks(n * k),
        a_block_scales(k / kernels::fp8_block::kBlockK * m),
        b_block_scales(k / kernels::fp8_block::kBlockK * (n / kWeightBlockRows)) {
    // Fewest bytes, as the per-tensor FP8 sides move them: the E4M3 codes of A and B read (one
    // byte a value), their two dequantisation scales, D written in BF16. GemmBf16's count (BF16
    // operands) is the baseline's; the baseline and the block-scaled rung (its block scales) are
    // under-counted here, which lowers only their bandwidth fraction, far below their compute one.
    s.bytes(double(a8.bytes() + b8.bytes() + d.bytes()) + 2.0 * sizeof(float));
  }
  void inputs_filled(cudaStream_t stream) {
    const int blocks = kernels::sm_count() * kQuantizeBlocks;
    widen_blocks<<<blocks, kernels::kQuantizeThreads, 0, stream>>>(a.data(), a_wide.data(), m, k,
                                                                  kActivationBlockRows, kOperandA);
    BENCH_CHECK_LAUNCH();
    widen_blocks<<<blocks, kernels::kQuantizeThreads, 0, stream>>>(b.data(), b_wide.data(), n, k,
                                                                  kWeightBlockRows, kOperandB);
    BENCH_CHECK_LAUNCH();
    kernels::quantize_e4m3_per_tensor(a_wide.data(), a8.data(), m * k, a_scales(), blocks, stream);
    kernels::quantize_e4m3_per_tensor(b_wide.data(), b8.data(), n * k, b_scales(), blocks, stream);
    kernels::quantize_e4m3_blocks(a_wide.data(), a8_blocks.data(), m, k, kActivationBlockRows,
                                  a_block_scales.data(), stream);
    kernels::quantize_e4m3_blocks(b_wide.data(), b8_blocks.data(), n, k, kWeightBlockRows,
                                  b_block_scales.data(), stream);
  }
  kernels::Fp8Scales* a_scales() const { return scales.data(); }
  kernels::Fp8Scales* b_scales() const { return scales.data() + 1; }
};

std::string requirements(const Fp8Gemm& w) {
  return kernels::fp8_gemm::requirements(w.m, w.n, w.k);
}

// What correct means: the GEMM of the widened BF16 values, in double (CPU) or the device's plain
// GEMM at the timing size.
void reference(const Fp8Gemm& w, bench::HostData& h) {
  const std::vector<float> a = widened(h.input<bf16>("a"), w.m, w.k, kActivationBlockRows, kOperandA);
  const std::vector<float> b = widened(h.input<bf16>("b"), w.n, w.k, kWeightBlockRows, kOperandB);
  kernels::reference_gemm_tn(std::span<const float>(a), std::span<const float>(b), h.expected("d"),
                             w.m, w.n, w.k);
}
void device_reference(const Fp8Gemm& w, cudaStream_t stream) {
  kernels::reference_gemm_tn(w.a_wide.data(), w.b_wide.data(), w.d.data(), w.m, w.n, w.k, stream);
}

// Each operand: rows x k row-major, in boxes of box_rows x one 128-byte row, 128-byte swizzled.
using kernels::fp8_gemm::operand_map;
using kernels::ws::allow_smem;
unsigned tile_count(const Fp8Gemm& w) { return unsigned(kernels::ws::tile_count(w)); }

template <class Op>
void launch_wgmma_gemm(const Fp8Gemm& w, const typename Op::T* a, const typename Op::T* b,
                       const kernels::Fp8Scales* a_scales, const kernels::Fp8Scales* b_scales,
                       cudaStream_t stream) {
  allow_smem<wgmma_gemm<Op>, kSmemBytes>();
  // D^T (n x m, row-major) = B A^T: X = B gives the tile rows, Y = A the columns.
  const CUtensorMap map_x = operand_map<Op>(b, w.n, w.k, kXShare);
  const CUtensorMap map_y = operand_map<Op>(a, w.m, w.k, kernels::fp8_gemm::kYShare);
  wgmma_gemm<Op><<<tile_count(w), kThreads, kSmemBytes, stream>>>(
      map_x, map_y, w.d.data(), int(w.n), int(w.m), int(w.k), b_scales, a_scales);
  BENCH_CHECK_LAUNCH();
}

void launch_bf16(const Fp8Gemm& w, cudaStream_t stream) {
  launch_wgmma_gemm<Bf16Operands>(w, w.a_wide.data(), w.b_wide.data(), nullptr, nullptr, stream);
}
void launch_e4m3(const Fp8Gemm& w, cudaStream_t stream) {
  launch_wgmma_gemm<E4m3Operands>(w, w.a8.data(), w.b8.data(), w.a_scales(), w.b_scales(), stream);
}
// The persistent kernel: grid = the CTAs resident at once, at most one per tile
// (kernels::ws::persistent_grid); D through its TMA-store map (kernels::ws::output_map).
void launch_e4m3_persistent(const Fp8Gemm& w, cudaStream_t stream) {
  kernels::fp8_gemm::launch_persistent<E4m3Operands>(w.a8.data(), w.b8.data(), w.d.data(), w.m,
                                                     w.n, w.k, w.a_scales(), w.b_scales(), stream);
}
void launch_e4m3_block_scaled(const Fp8Gemm& w, cudaStream_t stream) {
  allow_smem<block_scaled_gemm, kSmemBytes>();
  const CUtensorMap map_x = operand_map<E4m3BlockOperands>(w.b8_blocks.data(), w.n, w.k, kXShare);
  const CUtensorMap map_y =
      operand_map<E4m3BlockOperands>(w.a8_blocks.data(), w.m, w.k, kernels::fp8_gemm::kYShare);
  const CUtensorMap map_y_scales =
      tma::make_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, sizeof(float), w.a_block_scales.data(),
                       uint64_t(w.k / kernels::fp8_block::kBlockK), uint64_t(w.m), 1, kBN,
                       CU_TENSOR_MAP_SWIZZLE_NONE);
  block_scaled_gemm<<<tile_count(w), kThreads, kSmemBytes, stream>>>(
      map_x, map_y, map_y_scales, w.d.data(), int(w.n), int(w.m), int(w.k), w.b_block_scales.data());
  BENCH_CHECK_LAUNCH();
}

// cuBLASLt FP8 on the same codes, with the same dequant scales as its A and B scale pointers.
class CublasltE4m3 {
 public:
  CublasltE4m3(const Fp8Gemm& w, cudaStream_t stream)
      : gemm_(w.m, w.n, w.k, {.ab = CUDA_R_8F_E4M3, .d = CUDA_R_16BF}, nullptr,
              &w.a_scales()->dequant, &w.b_scales()->dequant) {
    gemm_.pick_fastest(w.d.data(), stream);  // on its own operands: w's are not filled yet
  }
  void operator()(const Fp8Gemm& w, cudaStream_t stream) {
    gemm_.run(w.a8.data(), w.b8.data(), w.d.data(), stream);
  }

 private:
  kernels::LtGemm gemm_;
};

constexpr bench::VariantOptions kFp8Rung{.arch_specific = 90, .compute_ceiling = bench::ceiling::fp8};

BENCH_EXAMPLE(ch19, fp8_gemm, Fp8Gemm)
    .int_axis("mnk", {4096, 8192})
    // At 8192^3 the board runs at its power limit: timed sustained, as ch09's and ch10's are.
    .mode_where([](const bench::Point& p) { return p.axis("mnk") == 8192; }, bench::Mode::sustained)
    .baseline("bf16_wgmma", launch_bf16, {.arch_specific = 90})
    .step("e4m3_wgmma", launch_e4m3, kFp8Rung)
    .optimized("e4m3_persistent", launch_e4m3_persistent, kFp8Rung)
    .step("e4m3_block_scaled", launch_e4m3_block_scaled, kFp8Rung)
    .stateful<CublasltE4m3>(bench::Role::vendor, "cublaslt_e4m3",
                            {.min_compute_capability = 89, .compute_ceiling = bench::ceiling::fp8})
    .requires_that(requirements)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::relative_l2(kernels::fp8_block::kE4m3GemmRelativeL2));

}  // namespace

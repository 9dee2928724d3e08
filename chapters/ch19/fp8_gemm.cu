// ch19/fp8_gemm: the BF16 wgmma GEMM → the same kernel on E4M3 operands with per-tensor scales.
//
// D (m x n, column-major, BF16) = A (m x k, row-major) x B (k x n, column-major), FP32
// accumulate: the suite's TN layout (kernels/gemm_bf16.cuh). Both operands k-contiguous is not a
// choice here: the 8-bit wgmma takes both operands K-major only (no transpose immediates), as
// cuBLASLt's FP8 does. Square shapes, the axis mnk: 4096 and 8192.
//
// The problem is one problem: A and B are BF16 values; the FP8 sides read their E4M3 codes under
// the chapter's per-tensor rule (kernels/fp8_e4m3.hpp: code = E4M3(x * 448 / amax), value ≈
// code * amax / 448), quantised whenever the harness refills the inputs (untimed, as weights and
// an FP8 producer's activations arrive already quantised; the cast itself is fused_quantize's
// lesson). Every side writes D as BF16.
//
// The ladder (every rung sm_90a: wgmma and setmaxnreg):
//   1. baseline "bf16_wgmma": ch10's warp-specialised tile (ws_gemm.cuh): 128 x 256 tile of D^T,
//      a 4-stage TMA ring in the 128-byte swizzle, one producer warpgroup (one thread issues the
//      copies), two consumer warpgroups each 64 x 256 with 128 FP32 accumulators a thread, 4
//      wgmma.m64n256k16 a 64-wide k-block. Reproduced here generic over the operand type, so
//      that between the two rungs only the type changes.
//   2. optimized "e4m3_wgmma": the same kernel instantiated on E4M3. A k-block is still one
//      128-byte swizzle row, now of 128 values, so each stage carries twice the k and each of the
//      4 wgmma.m64n256k32 per k-block does twice the work at twice the rate; the ring, the
//      descriptors (+32 bytes a step) and the barriers are byte-for-byte the same. The FP32 sums
//      are multiplied by dequant(A) x dequant(B), read once per thread, before the BF16 round.
//   3. vendor "cublaslt_e4m3": cuBLASLt FP8 on the same codes and scale pointers.
// The FP8 sides are held to the FP8 tensor ceiling (bench::ceiling::fp8), the baseline to BF16's.
//
// Accuracy: every side against the double-precision GEMM of the BF16 values, relative L2 6e-2.
// E4M3 keeps 3 mantissa bits: rounding a uniform(-1, 1) operand costs rms ~2.6e-2 relative per
// value, a product ~sqrt(2) of that, and sums of random-sign terms keep the ratio, so the FP8
// sides should land near 3.7e-2; the BF16 baseline near 3e-3. A wrong or missing scale is off by
// orders of magnitude and a mis-addressed operand gives uncorrelated output (~1.4): both fail.
// Not covered: the FP8 tensor cores' own accumulation precision over long k (the block-scaled
// rung with FP32 promotion, README "what is left").
//
//   ./bench compare --chapter ch19 --example fp8_gemm
#include <bench/bench.hpp>
#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <kernels/arch.cuh>
#include <kernels/cublaslt_gemm.hpp>
#include <kernels/fp8_quantize.cuh>
#include <kernels/gemm_bf16.cuh>
#include <kernels/occupancy.cuh>
#include <kernels/tma.cuh>
#include <kernels/wgmma.cuh>

#include <cstdint>
#include <string>

namespace {

using bf16 = __nv_bfloat16;
using fp8 = __nv_fp8_e4m3;
namespace tma = kernels::tma;
namespace wgmma = kernels::wgmma;

// ---- The tile: ch10's, in bytes, so that it holds either operand type.
constexpr int kRowBytes = 128;  // a k-block row: one 128-byte swizzle row (64 BF16 or 128 E4M3)
constexpr int kBM = 128;        // tile rows (D columns), from X = B: wgmma's M side
constexpr int kBN = 256;        // tile columns (D rows), from Y = A: wgmma's N side
constexpr int kStages = 4;
constexpr int kConsumers = 2;  // math warpgroups, 64 tile rows each
constexpr int kWarpgroup = 128;
constexpr int kThreads = (1 + kConsumers) * kWarpgroup;  // producer + 2 consumers
constexpr int kXShare = kBM / kConsumers;                 // 64 X rows per copy
constexpr int kYShare = kBN / kConsumers;                 // 128 Y rows per copy
constexpr int kStepBytes = 32;                            // one wgmma's k: 16 BF16 or 32 E4M3
constexpr int kStepsPerBlock = kRowBytes / kStepBytes;    // 4 wgmma a k-block
constexpr uint32_t kStageBytes = (kBM + kBN) * kRowBytes;  // 48 KiB
constexpr int kGroupRows = 16;  // rasterisation: 16 row-tiles per column band (ch10's)
constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;  // setmaxnreg, per thread
static_assert(wgmma::fits_register_pool(kProducerRegisters, kConsumerRegisters, kConsumers));

struct alignas(1024) Smem {
  uint8_t x[kStages][kBM * kRowBytes];  // 16 KiB each (1024-aligned: the swizzle is address bits)
  uint8_t y[kStages][kBN * kRowBytes];  // 32 KiB each
  uint64_t full[kStages], empty[kStages];
};
constexpr size_t kSmemBytes = sizeof(Smem) + 1024;  // + room to align the dynamic base

// What differs between the two operand types: the values a k-block holds, the copy engine's
// element type, the wgmma, and whether the sums carry scales.
struct Bf16Operands {
  using T = bf16;
  static constexpr int kBK = kRowBytes / int(sizeof(T));  // 64
  static constexpr CUtensorMapDataType kMapType = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  static constexpr bool kScaled = false;
  __device__ static void mma(float (&acc)[128], uint64_t a, uint64_t b, int accumulate) {
    wgmma::mma_m64n256k16_bf16(acc, a, b, accumulate);
  }
};
struct E4m3Operands {
  using T = fp8;
  static constexpr int kBK = kRowBytes / int(sizeof(T));  // 128
  static constexpr CUtensorMapDataType kMapType = CU_TENSOR_MAP_DATA_TYPE_UINT8;  // codes as bytes
  static constexpr bool kScaled = true;
  __device__ static void mma(float (&acc)[128], uint64_t a, uint64_t b, int accumulate) {
    wgmma::mma_m64n256k32_e4m3(acc, a, b, accumulate);
  }
};

struct Tile {
  int r0, c0;  // first row (of X) and column (of Y) of the tile of D^T
};
// Grouped rasterisation: consecutive CTAs walk kGroupRows row-tiles of one column band, so the
// CTAs running together share their Y blocks and re-read X from L2.
__device__ __forceinline__ Tile grouped_tile(int tile, int rows, int cols) {
  const int tiles_r = rows / kBM, tiles_c = cols / kBN;
  const int per_band = kGroupRows * tiles_c;
  const int band = tile / per_band, in_band = tile % per_band;
  const int first_r = band * kGroupRows, band_rows = min(tiles_r - first_r, kGroupRows);
  return {(first_r + in_band % band_rows) * kBM, (in_band / band_rows) * kBN};
}

// The producer's one thread: for each k-block, wait until both consumers released the stage's
// previous use, then one expect_tx for the whole stage and its 4 copies (2 of X, 2 of Y).
template <class Op>
__device__ __forceinline__ void produce(Smem& sm, const CUtensorMap* map_x, const CUtensorMap* map_y,
                                        Tile t, int kblocks) {
  for (int kb = 0; kb < kblocks; ++kb) {
    const int s = kb % kStages;
    if (kb >= kStages) tma::wait_parity(&sm.empty[s], ((kb / kStages) - 1) & 1);
    tma::arrive_expect_tx(&sm.full[s], kStageBytes);
    for (int part = 0; part < kConsumers; ++part) {
      tma::load_2d(&sm.x[s][part * kXShare * kRowBytes], map_x, kb * Op::kBK,
                   t.r0 + part * kXShare, &sm.full[s]);
      tma::load_2d(&sm.y[s][part * kYShare * kRowBytes], map_y, kb * Op::kBK,
                   t.c0 + part * kYShare, &sm.full[s]);
    }
  }
}

// Consumer `cw`: its 64 x 256 of the tile. Each k-block's 4 wgmma are one group; the stage a
// group read is released (by the warpgroup's first thread) once the next group is queued and the
// older one has finished, the last one after the final wait.
template <class Op>
__device__ __forceinline__ void consume(float (&acc)[128], Smem& sm, int cw, int kblocks) {
  const bool leader = threadIdx.x % kWarpgroup == 0;
  for (int kb = 0; kb < kblocks; ++kb) {
    const int s = kb % kStages;
    tma::wait_parity(&sm.full[s], (kb / kStages) & 1);
    wgmma::fence();
#pragma unroll
    for (int step = 0; step < kStepsPerBlock; ++step)  // +32 bytes along the swizzled rows
      Op::mma(acc,
              wgmma::descriptor_k_major_sw128(&sm.x[s][cw * kXShare * kRowBytes + step * kStepBytes]),
              wgmma::descriptor_k_major_sw128(&sm.y[s][step * kStepBytes]), kb > 0 || step > 0);
    wgmma::commit();
    wgmma::wait<1>();
    if (kb > 0 && leader) tma::arrive(&sm.empty[(kb - 1) % kStages]);
  }
  wgmma::wait<0>();
  if (leader) tma::arrive(&sm.empty[(kblocks - 1) % kStages]);
}

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
  Smem& sm = tma::aligned_1024<Smem>(raw);
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      tma::mbarrier_init(&sm.full[s], 1);  // the producer's one expect_tx
      tma::mbarrier_init(&sm.empty[s], kConsumers);
    }
    tma::fence_barrier_init();
  }
  __syncthreads();
  const Tile tile = grouped_tile(blockIdx.x, rows, cols);
  const int kblocks = k / Op::kBK;
  if (threadIdx.x / kWarpgroup == 0) {
    wgmma::shrink_registers<kProducerRegisters>();
    if (threadIdx.x == 0) produce<Op>(sm, &map_x, &map_y, tile, kblocks);
  } else {
    wgmma::grow_registers<kConsumerRegisters>();
    const int cw = threadIdx.x / kWarpgroup - 1;
    float acc[128];
#pragma unroll
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;  // the first wgmma overwrites; never undefined
    consume<Op>(acc, sm, cw, kblocks);
    if constexpr (Op::kScaled) {
      // Per-tensor scales commute with the sum: one multiply per accumulator, in FP32, before
      // the BF16 round (the same place cuBLASLt applies its A and B scales).
      const float scale = x_scales->dequant * y_scales->dequant;
#pragma unroll
      for (int i = 0; i < 128; ++i) acc[i] *= scale;
    }
    wgmma::store_m64n256_bf16(acc, out, cols, tile.r0 + cw * kXShare, tile.c0);
  }
#endif
}

// ---- The workload: the BF16 GEMM, plus the E4M3 codes and scales of its operands.
constexpr int kQuantizeBlocks = 4;  // per SM, setup only

struct Fp8Gemm : kernels::GemmBf16 {
  bench::DeviceBuffer<fp8> a8, b8;               // E4M3 codes, written by inputs_filled
  bench::DeviceBuffer<kernels::Fp8Scales> scales;  // [0]: A's, [1]: B's (16-byte slots)
  // Verification: 3 x 5 tiles (m 768, n 640) and k 640: 5 E4M3 k-blocks and 10 BF16 ones, so
  // both rings wrap. Timing: m = n = k = the axis mnk.
  explicit Fp8Gemm(bench::Setup& s)
      : GemmBf16(s, s.size("m", s.axis("mnk"), 768), s.size("n", s.axis("mnk"), 640),
                 s.size("k", s.axis("mnk"), 640)),
        a8(m * k),
        b8(n * k),
        scales(2) {}
  void inputs_filled(cudaStream_t stream) {
    const int blocks = kernels::sm_count() * kQuantizeBlocks;
    kernels::quantize_e4m3_per_tensor(a.data(), a8.data(), m * k, a_scales(), blocks, stream);
    kernels::quantize_e4m3_per_tensor(b.data(), b8.data(), n * k, b_scales(), blocks, stream);
  }
  kernels::Fp8Scales* a_scales() const { return scales.data(); }
  kernels::Fp8Scales* b_scales() const { return scales.data() + 1; }
};

std::string requirements(const Fp8Gemm& w) {
  if (w.m % kBN != 0 || w.n % kBM != 0 || w.k % E4m3Operands::kBK != 0 || w.k == 0)
    return "whole tiles only: needs m % 256 == 0, n % 128 == 0, k % 128 == 0, k > 0";
  return "";
}

// A rows x k row-major operand in boxes of box_rows x one 128-byte row, 128-byte swizzled.
template <class Op>
CUtensorMap operand_map(const typename Op::T* base, int64_t rows, int64_t k, uint32_t box_rows) {
  return tma::make_map_2d(Op::kMapType, sizeof(typename Op::T), base, uint64_t(rows), uint64_t(k),
                          box_rows, Op::kBK, CU_TENSOR_MAP_SWIZZLE_128B);
}

template <class Op>
void launch_wgmma_gemm(const Fp8Gemm& w, const typename Op::T* a, const typename Op::T* b,
                       const kernels::Fp8Scales* a_scales, const kernels::Fp8Scales* b_scales,
                       cudaStream_t stream) {
  static const bool configured = [] {
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(wgmma_gemm<Op>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          int(kSmemBytes)));
    return true;
  }();
  (void)configured;
  // D^T (n x m, row-major) = B A^T: X = B gives the tile rows, Y = A the columns.
  const CUtensorMap map_x = operand_map<Op>(b, w.n, w.k, kXShare);
  const CUtensorMap map_y = operand_map<Op>(a, w.m, w.k, kYShare);
  const unsigned tiles = unsigned((w.n / kBM) * (w.m / kBN));
  wgmma_gemm<Op><<<tiles, kThreads, kSmemBytes, stream>>>(map_x, map_y, w.d.data(), int(w.n),
                                                          int(w.m), int(w.k), b_scales, a_scales);
  BENCH_CHECK_LAUNCH();
}

void launch_bf16(const Fp8Gemm& w, cudaStream_t stream) {
  launch_wgmma_gemm<Bf16Operands>(w, w.a.data(), w.b.data(), nullptr, nullptr, stream);
}
void launch_e4m3(const Fp8Gemm& w, cudaStream_t stream) {
  launch_wgmma_gemm<E4m3Operands>(w, w.a8.data(), w.b8.data(), w.a_scales(), w.b_scales(), stream);
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
    .optimized("e4m3_wgmma", launch_e4m3, kFp8Rung)
    .stateful<CublasltE4m3>(bench::Role::vendor, "cublaslt_e4m3",
                            {.min_compute_capability = 89, .compute_ceiling = bench::ceiling::fp8})
    .requires_that(requirements)
    .reference(kernels::reference_gemm_bf16)
    .device_reference(kernels::device_reference_gemm_bf16)
    .tolerance(bench::relative_l2(6e-2));

}  // namespace

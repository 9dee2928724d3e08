// ch09/tensor_core_gemm_wgmma.cu: the ladder's sm_90a rung: wgmma.mma_async fed by TMA.
//
// Structure (one CTA computes a 128 x 256 tile of D^T, i.e. 256 rows of D by 128 columns):
//   1. three warpgroups: warpgroup 0 is the producer (one thread issues TMA copies), warpgroups 1
//      and 2 are consumers, each owning 64 x 256 FP32 accumulators (128 registers per thread);
//   2. a 4-stage shared-memory ring of (128 x 64 B-tile, 256 x 64 A-tile) BF16 k-blocks, each
//      row 128 bytes, laid out by TMA in the 128-byte swizzle that wgmma's descriptors read
//      without bank conflicts; "full" mbarriers (TMA bytes landed) and "empty" mbarriers (both
//      consumers done with the stage) hand stages back and forth;
//   3. per k-block each consumer issues four wgmma m64n256k16 (K-major A and B from shared
//      memory), commits, and waits for the *previous* group only, so one k-block of tensor work
//      is always queued while it releases the stage before;
//   4. grouped rasterisation: consecutive CTAs walk 16 row-tiles of one column band, so a wave
//      of 132 CTAs re-reads operand tiles from L2, not HBM;
//   5. epilogue: accumulators converted to BF16 pairs and stored straight from registers.
// wgmma's M side is B (n rows) and its N side is A (m rows): the accumulator rows are then D's
// columns and each thread's adjacent accumulator pair is two adjacent rows of column-major D.
// Shapes: m % 256 == 0, n % 128 == 0, k % 64 == 0 (refused otherwise, see wgmma_gemm_requires).
#include <bench/bench.hpp>
#include <kernels/arch.cuh>
#include <kernels/tma.cuh>

#include "tensor_core_gemm.cuh"

namespace ch09 {
namespace {

constexpr int kBM = 128;                       // rows of the CTA tile (wgmma M side: from B)
constexpr int kBN = 256;                       // columns of the CTA tile (wgmma N side: from A)
constexpr int kBK = 64;                        // one 128-byte swizzle row of BF16
constexpr int kStages = 4;
constexpr int kConsumers = 2;                  // each takes 64 of the 128 rows
constexpr int kThreads = 128 * (1 + kConsumers);
constexpr int kGroupRows = 16;                 // rasterisation group (row-tiles)
constexpr uint32_t kStageBytes = (kBM + kBN) * kBK * sizeof(bf16);

struct alignas(1024) Smem {
  bf16 x[kStages][kBM * kBK];  // B k-blocks: 16 KiB each, 1024-aligned (swizzle atom)
  bf16 y[kStages][kBN * kBK];  // A k-blocks: 32 KiB each
  uint64_t full[kStages], empty[kStages];
};
constexpr size_t kSmemBytes = sizeof(Smem) + 1024;  // + room to align the dynamic base

// Shared-memory matrix descriptor: K-major, 128-byte swizzle, 8-row core groups 1024 bytes apart.
__device__ __forceinline__ uint64_t descriptor(const bf16* tile) {
  const uint64_t addr = kernels::tma::smem_addr(tile);
  return ((addr & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// d (64 x 256 per warpgroup) += A_tile (64 x 16) * B_tile (256 x 16)^T; accumulate == 0: d = product.
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(accumulate));
}

__global__ void __launch_bounds__(kThreads, 1)
    wgmma_gemm(const __grid_constant__ CUtensorMap map_x, const __grid_constant__ CUtensorMap map_y,
               bf16* __restrict__ out, int rows, int cols, int k) {
#if BENCH_SM90A_DEVICE  // empty for other targets: the variant is arch_specific = 90, SKIPPED there
  extern __shared__ uint8_t raw[];
  Smem& sm = *reinterpret_cast<Smem*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t{1023});
  // Grouped rasterisation of the (rows / kBM) x (cols / kBN) tiles.
  const int tiles_r = rows / kBM, tiles_c = cols / kBN;
  const int per_group = kGroupRows * tiles_c, group = blockIdx.x / per_group;
  const int first_r = group * kGroupRows, group_size = min(tiles_r - first_r, kGroupRows);
  const int tile_r = first_r + (blockIdx.x % per_group) % group_size;
  const int tile_c = (blockIdx.x % per_group) / group_size;
  const int r0 = tile_r * kBM, c0 = tile_c * kBN;
  const int kblocks = k / kBK;
  const int wg = threadIdx.x / 128;
  namespace tma = kernels::tma;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      tma::mbarrier_init(&sm.full[s], 1);
      tma::mbarrier_init(&sm.empty[s], kConsumers);
    }
    tma::fence_barrier_init();
  }
  __syncthreads();

  if (wg == 0) {  // producer: one thread keeps the ring full
    if (threadIdx.x == 0) {
      for (int kb = 0; kb < kblocks; ++kb) {
        const int s = kb % kStages;
        if (kb >= kStages) tma::wait_parity(&sm.empty[s], ((kb / kStages) - 1) & 1);
        tma::arrive_expect_tx(&sm.full[s], kStageBytes);
        tma::load_2d(sm.x[s], &map_x, kb * kBK, r0, &sm.full[s]);
        tma::load_2d(sm.y[s], &map_y, kb * kBK, c0, &sm.full[s]);
      }
    }
    return;
  }

  const int cw = wg - 1;  // consumer index: rows cw*64 .. cw*64+63 of the tile
  float acc[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  for (int kb = 0; kb < kblocks; ++kb) {
    const int s = kb % kStages;
    tma::wait_parity(&sm.full[s], (kb / kStages) & 1);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk)  // +32 bytes along the swizzled row per k16 step
      wgmma_m64n256k16(acc, descriptor(&sm.x[s][cw * 64 * kBK + kk * 16]), descriptor(&sm.y[s][kk * 16]),
                       kb > 0 || kk > 0);
    wgmma_commit();
    wgmma_wait<1>();  // the previous k-block's group is done: release its stage
    if (kb > 0 && threadIdx.x % 128 == 0) asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(tma::smem_addr(&sm.empty[(kb - 1) % kStages])) : "memory");
  }
  wgmma_wait<0>();

  // Accumulator fragment: register 4i + {0,1,2,3} holds (row, col), (row, col+1), (row+8, col),
  // (row+8, col+1) with row = 16 warp + lane / 4, col = 8 i + 2 (lane % 4).
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int64_t row = r0 + cw * 64 + warp * 16 + lane / 4;
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int64_t col = c0 + i * 8 + 2 * (lane % 4);
    *reinterpret_cast<__nv_bfloat162*>(out + row * cols + col) = __floats2bfloat162_rn(acc[4 * i], acc[4 * i + 1]);
    *reinterpret_cast<__nv_bfloat162*>(out + (row + 8) * cols + col) = __floats2bfloat162_rn(acc[4 * i + 2], acc[4 * i + 3]);
  }
#endif
}

// A rows x k row-major BF16 matrix seen in boxes of box_rows x 64, 128-byte swizzled.
CUtensorMap make_map(const bf16* base, uint64_t rows, uint64_t k, uint32_t box_rows) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    BENCH_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || fn == nullptr)
      throw bench::CudaError(cudaErrorSymbolNotFound, "cuTensorMapEncodeTiled not found in the driver");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  CUtensorMap map{};
  const cuuint64_t dims[2] = {k, rows};
  const cuuint64_t strides[1] = {k * sizeof(bf16)};
  const cuuint32_t box[2] = {kBK, box_rows};
  const cuuint32_t element_strides[2] = {1, 1};
  const CUresult r = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<bf16*>(base), dims, strides, box,
                            element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw bench::CudaError(cudaErrorInvalidValue, "cuTensorMapEncodeTiled failed (CUresult " + std::to_string(int(r)) + ")");
  return map;
}

}  // namespace

std::string wgmma_gemm_requires(const GemmBf16& w) {
  if (w.m % kBN != 0 || w.n % kBM != 0 || w.k % kBK != 0 || w.k == 0)
    return "wgmma rung tiles only: needs m % 256 == 0, n % 128 == 0, k % 64 == 0";
  return "";
}

void launch_wgmma_gemm(const GemmBf16& w, cudaStream_t stream) {
  // D^T (n x m, row-major) = B (n x k) * A (m x k)^T: X = B gives the rows, Y = A the columns.
  const CUtensorMap map_x = make_map(w.b.data(), w.n, w.k, kBM);
  const CUtensorMap map_y = make_map(w.a.data(), w.m, w.k, kBN);
  static const bool configured = [] {
    BENCH_CUDA_CHECK(cudaFuncSetAttribute(wgmma_gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kSmemBytes)));
    return true;
  }();
  (void)configured;
  const unsigned grid = unsigned((w.n / kBM) * (w.m / kBN));
  wgmma_gemm<<<grid, kThreads, kSmemBytes, stream>>>(map_x, map_y, w.d.data(), int(w.n), int(w.m), int(w.k));
  BENCH_CHECK_LAUNCH();
}

}  // namespace ch09

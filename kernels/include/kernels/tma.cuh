// kernels/tma.cuh: the Hopper (sm_90) bulk tensor copy engine and the mbarrier it completes on.
//
// Device side: mbarrier init / arrive.expect_tx / parity wait, a 2D tile load global -> shared
// (cp.async.bulk.tensor, completes on an mbarrier with a byte count) and a 2D tile store
// shared -> global (bulk async group, waited with wait_read<N>()), and a 3D tile load. Host side:
// 2D and 3D tensor maps built with cuTensorMapEncodeTiled, reached through the runtime's driver
// entry point so the program needs no -lcuda. For clusters (sm_90): a load multicast to several
// CTAs of a cluster, an arrival on another CTA's mbarrier, the cluster barrier.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include <bench/check.hpp>

namespace kernels::tma {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The dynamic shared memory `raw` as a T at the next 1024-byte boundary. A 128-byte swizzle
// repeats every 1024 bytes and is the address bits only from such a boundary, and dynamic shared
// memory promises less: a kernel asks for sizeof(T) + 1024 bytes and takes its layout from here.
template <class T>
__device__ __forceinline__ T& aligned_1024(uint8_t* raw) {
  return *reinterpret_cast<T*>((reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t{1023});
}

// --- mbarrier -------------------------------------------------------------------------------
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(arrivals)
               : "memory");
}
// Makes initialised barriers visible to the copy engine (the async proxy).
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// One arrival that also tells the barrier to expect `bytes` more bytes of transactions.
__device__ __forceinline__ void arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
// One plain arrival (no transaction bytes): a consumer telling a producer it is done with a stage.
__device__ __forceinline__ void arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}
// Spins until the barrier's phase with the given parity has completed.
__device__ __forceinline__ void wait_parity(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "WAIT_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

// --- bulk tensor copies ---------------------------------------------------------------------
// Loads the box at (x = column, y = row) of `map` into `dst`; completes on `bar` with the box's
// byte count (the whole box, zero-filled parts included). The coordinates may be negative or run
// past the end: out-of-bounds elements are filled with zeros. But the box's first byte in each
// row must be 16-byte aligned (x * element size a multiple of 16): at an unaligned x the H100
// faults with cudaErrorIllegalInstruction. `dst` must be 128-byte aligned.
__device__ __forceinline__ void load_2d(void* dst, const CUtensorMap* map, int x, int y,
                                        uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_addr(dst)),
      "l"(map), "r"(x), "r"(y), "r"(smem_addr(bar))
      : "memory");
}
// The same for a 3D map: the box at (x, y, z), innermost first.
__device__ __forceinline__ void load_3d(void* dst, const CUtensorMap* map, int x, int y, int z,
                                        uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(smem_addr(dst)),
      "l"(map), "r"(x), "r"(y), "r"(z), "r"(smem_addr(bar))
      : "memory");
}
// Stores `src` to the box at (x, y) of `map`; out-of-bounds elements are not written.
__device__ __forceinline__ void store_2d(const CUtensorMap* map, int x, int y, const void* src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                   map),
               "r"(x), "r"(y), "r"(smem_addr(src))
               : "memory");
}
__device__ __forceinline__ void commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Waits until at most N bulk groups still read their shared-memory source (then it may be reused).
template <int N>
__device__ __forceinline__ void wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}
// Waits until at most N bulk groups are incomplete (their global writes done).
template <int N>
__device__ __forceinline__ void wait_all() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}
// Orders this thread's ordinary shared-memory writes before later copy-engine reads of them.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

// --- host: tensor map -----------------------------------------------------------------------
// The driver's cuTensorMapEncodeTiled, looked up once through the runtime (no -lcuda).
inline PFN_cuTensorMapEncodeTiled_v12000 encode_tiled_fn() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    BENCH_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
    if (found != cudaDriverEntryPointSuccess || p == nullptr)
      throw bench::CudaError(cudaErrorSymbolNotFound, "cuTensorMapEncodeTiled not found in the driver");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// A tiled map of kRank dimensions (innermost first; strides in bytes, of dimensions 1..): no
// interleave, unit element strides, 256-byte L2 promotion, out-of-bounds elements read as zeros.
template <int kRank>
inline CUtensorMap encode_tiled(CUtensorMapDataType dtype, const void* base,
                                const cuuint64_t (&dims)[kRank],
                                const cuuint64_t (&strides)[kRank - 1],
                                const cuuint32_t (&box)[kRank], CUtensorMapSwizzle swizzle) {
  CUtensorMap map{};
  cuuint32_t element_strides[kRank];
  for (cuuint32_t& e : element_strides) e = 1;
  const CUresult r =
      encode_tiled_fn()(&map, dtype, kRank, const_cast<void*>(base), dims, strides, box,
                        element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw bench::CudaError(cudaErrorInvalidValue,
                           std::string("cuTensorMapEncodeTiled") + (kRank == 3 ? " (3D)" : "") +
                               " failed (CUresult " + std::to_string(int(r)) + ")");
  return map;
}

// A row-major rows x cols matrix of `dtype` (element_bytes each) seen in boxes of box_rows x
// box_cols, written to shared memory in the given swizzle. With a swizzle, box_cols *
// element_bytes must not exceed its span (32, 64 or 128 bytes) and the destination must be
// aligned to the swizzle's repeat (256, 512 or 1024 bytes) for the pattern to be the address
// bits a kernel computes. cols * element_bytes must be a multiple of 16, the base 16-byte aligned.
inline CUtensorMap make_map_2d(CUtensorMapDataType dtype, uint32_t element_bytes, const void* base,
                               uint64_t rows, uint64_t cols, uint32_t box_rows, uint32_t box_cols,
                               CUtensorMapSwizzle swizzle) {
  return encode_tiled<2>(dtype, base, {cols, rows}, {cols * element_bytes}, {box_cols, box_rows},
                         swizzle);
}

// `planes` row-major rows x cols matrices of `dtype`, `plane_stride` elements apart, seen in boxes
// of box_rows x box_cols of one plane: rows past a plane's end are out of bounds (zero-filled),
// not the next plane's. The swizzle and alignment rules of make_map_2d apply.
inline CUtensorMap make_map_3d(CUtensorMapDataType dtype, uint32_t element_bytes, const void* base,
                               uint64_t planes, uint64_t plane_stride, uint64_t rows, uint64_t cols,
                               uint32_t box_rows, uint32_t box_cols, CUtensorMapSwizzle swizzle) {
  return encode_tiled<3>(dtype, base, {cols, rows, planes},
                         {cols * element_bytes, plane_stride * element_bytes},
                         {box_cols, box_rows, 1}, swizzle);
}

// A row-major rows x cols FP32 matrix seen in boxes of box_rows x box_cols (no swizzle, no
// interleave). cols * 4 must be a multiple of 16 bytes and the base 16-byte aligned.
inline CUtensorMap make_map_2d_f32(const float* base, uint64_t rows, uint64_t cols,
                                   uint32_t box_rows, uint32_t box_cols) {
  return make_map_2d(CU_TENSOR_MAP_DATA_TYPE_FLOAT32, sizeof(float), base, rows, cols, box_rows,
                     box_cols, CU_TENSOR_MAP_SWIZZLE_NONE);
}

}  // namespace kernels::tma

// --- clusters (sm_90): multicast loads and barriers of another CTA of the cluster -----------
namespace kernels::tma {

// This CTA's rank in its cluster.
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}
// Every thread of every CTA of the cluster: this CTA's shared-memory writes (barrier inits
// included) before the barrier are visible to the cluster after it.
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
// One arrival on the barrier at `bar`'s offset in the shared memory of CTA `rank` of the cluster
// (this CTA's own rank included), with mbarrier.arrive's default semantics: release at CTA scope.
// That is all a ring stage's release needs when its readers are wgmma (complete at
// wgmma.wait_group, before the arrive) and its writer is the copy engine: neither touches the
// stage through the generic proxy, so a cluster-scope release has nothing to order. And it is not
// free: `.release.cluster` waits for the thread's outstanding memory operations (ERRBAR in SASS),
// and the matching `.acquire.cluster` wait invalidates L1 (CCTL.IVALL). On a GEMM's consumers
// that made ch10's multicast step much slower at 4096^3 (ch10's README, 'The multicast step's
// barrier scope', has the figures).
// The waiting side uses wait_parity.
__device__ __forceinline__ void arrive_cluster(uint64_t* bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(smem_addr(bar)), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}
// A ring stage's release where kCtas producers write into it: one arrival (arrive_cluster's CTA
// scope) on the barrier at `bar`'s offset in each of the cluster's first kCtas CTAs, or, with
// kCtas == 1, on this CTA's own barrier (no cluster needed).
template <int kCtas>
__device__ __forceinline__ void arrive_each_cta(uint64_t* bar) {
  if constexpr (kCtas == 1) {
    arrive(bar);
  } else {
#pragma unroll
    for (uint32_t rank = 0; rank < kCtas; ++rank) arrive_cluster(bar, rank);
  }
}
// load_2d into every CTA of the cluster named in `cta_mask` (bit r: rank r): one read of global
// memory, the box written at `dst`'s offset in each of their shared memories, and each one's
// barrier at `bar`'s offset told the box's byte count.
__device__ __forceinline__ void load_2d_multicast(void* dst, const CUtensorMap* map, int x, int y,
                                                  uint64_t* bar, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_addr(dst)),
      "l"(map), "r"(x), "r"(y), "r"(smem_addr(bar)), "h"(cta_mask)
      : "memory");
}

}  // namespace kernels::tma

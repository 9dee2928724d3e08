// ch15/moe_dispatch: a mixture-of-experts layer sends each token to k of E experts (ch17's gate
// picks them) and each expert is a GEMM over the tokens routed to it. Run as a host loop over the
// experts, that is E small GEMMs launched one after another behind a read-back of the counts; run
// as a device-side permutation and ONE grouped GEMM, every expert's tiles share one persistent
// grid and nothing waits for the host.
//
// The work (both sides): tokens x top-8 over E experts, x [tokens][hidden] BF16, each expert's
// W_e [ffn][hidden] BF16 (k-contiguous: the suite's TN layout); every routed row (token, j) gives
// y_e = x[token] W_e^T (FP32 sums, stored BF16, as PyTorch's grouped_mm does), and
// y[token] = sum_j weight[token][j] y_{e_j} (FP32, stored BF16). Also written: counts[e], the rows
// routed to each expert (exact: a lost or doubled routed row fails even where y would not show it).
// Routing (moe_dispatch_plan.hpp): seeded, made on the host at setup; the axis `routing`:
// uniform, or skewed (4 hot experts hold about half the routed rows).
//
//   1. baseline "host_loop": count the rows per expert on the GPU, copy the counts to the host and
//      wait; then per expert a gather kernel (its rows into a contiguous block) and a cuBLASLt
//      GEMM of that block's row count; then the combine (unpermute) kernel. ~2E launches from the
//      host, each GEMM too small to fill the GPU by itself, and a sync.
//   2. step "grouped_wgmma": the permutation on the device (per-chunk histograms, one scan
//      that also numbers the GEMM's work items, a stable placement of every routed row, a row
//      copy), one grouped GEMM, the same combine. The grouped GEMM is kernels/ws_gemm.cuh's
//      warp-specialised TMA + wgmma tile (ch10's persistent_gemm): persistent CTAs walk the list
//      of (expert, 128-row tile, 256-column tile) work items that the scan numbered; A's tensor
//      map covers the whole permuted buffer and a tile starts at its expert's offset (rows past
//      the expert's end are read, multiplied and not stored), B's covers all experts' weights.
//   3. step "grouped_gather": no permuted copy of x. The permutation stops at the row index (each
//      sorted place's token) and the grouped GEMM's producer warpgroup gathers A's rows straight
//      from x with cp.async into the swizzled stage the wgmma descriptors read; the weights stay
//      on TMA. Removes the 256 MiB row copy and its read-back (512 MiB of HBM traffic at the
//      timing size), for a 256 KiB index.
//   4. step "cluster_permute": grouped_gather with the permutation in ONE launch
//      (moe::permute_in_cluster: one cluster of 16 CTAs, else 8, per-warp histograms in shared
//      memory, the CTAs' counts read through DSMEM, the scans in a CTA each) instead of three
//      kernels.
//   5. step "tma_store": cluster_permute with the expert outputs handed to the copy engine
//      (2e below): each consumer stages its tile in shared memory, 64 x 64 at a time, and TMA
//      stores it, instead of bf16x2 stores from the accumulators that write half sectors while
//      the tensor cores wait. Step "grouped_wgmma_tma_store": the same store on grouped_wgmma's
//      TMA-fed rows, the build of CUTLASS's grouped GEMM in torch._grouped_mm (README).
//   6. step "index_once": tma_store with each producer thread's 8 row indices read once a tile
//      and held as 32-bit byte offsets (2b, kHoldRows), instead of an index load and 64-bit
//      address arithmetic per row every k-block: the producer's instructions were the gather's
//      cost, not its copies.
//   7. optimized "fused_permute": index_once with the permutation inside the GEMM's own launch
//      (moe::permute_in_grid: the GEMM's CTAs, all resident, count, number and place the rows
//      between two grid barriers), so no CTA waits for a separate launch on 16 SMs.
//   8. step "row_tma_gather": cluster_permute with A's rows gathered by TMA, one box of one row
//      each (2c below), issued by one producer warp, instead of 128 threads of cp.async. Measured
//      several times SLOWER in the GEMM than the cp.async gather (README): kept as the step
//      that shows why a Hopper grouped GEMM gathers its rows with cp.async, not with TMA.
//   9. step "epilogue_combine": cluster_permute with the combine in the GEMM's epilogue (2d
//      below): each routed row's sums, rounded to BF16 and weighted, reduced into an FP32 copy of
//      y (red.global.add.v4.f32), then one pass to BF16 y that also zeroes the FP32 copy. The
//      expert outputs (routed x ffn BF16, 96 MiB at the timing size) are never written nor read.
//  10. vendor "cublas_grouped": grouped_wgmma's permutation, then cuBLAS's grouped GEMM
//      (cublasGemmGroupedBatchedEx, a group per expert); its group sizes are host arrays, so the
//      counts come back to the host before it.
// Timing: 8192 tokens, 128 experts, hidden 2048 -> ffn 768 (issue 41; the PyTorch peer is
// scripts/peers/torch_moe_gating.py --only moe_dispatch). Verification: 301 tokens, 12 experts,
// 320 -> 512: 5 k-blocks (the ring wraps inside a tile), 2 column tiles, partial row tiles in
// every expert, against a double CPU reference; at the timing size a plain GPU reference (host
// permutation, kernels/reference_gemm.cuh's grouped form over all experts in one launch, a plain
// combine).
// Tolerance: y at BF16's default relative L2 (8e-3); the reference rounds each expert output to
// BF16 as every rung does, so what is left is the final rounding and FP32 sums in another order.
// counts exactly (int32's default). epilogue_combine's sums are also in an order that changes from
// run to run (whichever CTA's reduction reaches L2 first), so its y is not bitwise reproducible:
// 8 terms a value in FP32 differ between orders by a few FP32 ulps (2^-24 relative each), which
// can move a BF16 rounding by one BF16 ulp in a rare element; the relative L2 error stays at the
// final rounding's (about 1e-3), well inside 8e-3, on every run.
// Metrics (the grouped rungs, the last call's events): permute_us, gemm_us and
// gemm_tflops (the grouped GEMM alone, the figure torch._grouped_mm is timed by) and combine_us;
// in epilogue_combine gemm_us includes the combine's reductions and combine_us is the pass to BF16;
// in fused_permute gemm_us includes the permutation.
//
//   ./bench compare --chapter ch15 --example moe_dispatch
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <bench/bench.hpp>
#include <bench/parallel.hpp>
#include <kernels/arch.cuh>
#include <kernels/async_copy.cuh>
#include <kernels/cublas_check.hpp>
#include <kernels/cublaslt_gemm.hpp>
#include <kernels/event_span.hpp>
#include <kernels/occupancy.cuh>
#include <kernels/reference_gemm.cuh>
#include <kernels/tma_store_epilogue.cuh>
#include <kernels/ws_gemm.cuh>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "moe_dispatch_plan.hpp"
#include "moe_permutation.cuh"

namespace {

using bf16 = __nv_bfloat16;
namespace moe = ch15::moe;
namespace ws = kernels::ws;
namespace wgmma = kernels::wgmma;
namespace tma = kernels::tma;
namespace cp_async = kernels::cp_async;
using moe::kWarps;

constexpr int kTopK = 8;

template <class T>
bench::DeviceBuffer<T> upload(const std::vector<T>& host) {
  bench::DeviceBuffer<T> device(int64_t(host.size()));
  BENCH_CUDA_CHECK(cudaMemcpy(device.data(), host.data(), device.bytes(), cudaMemcpyHostToDevice));
  return device;
}

struct Dispatch {
  int64_t tokens, experts, top_k, hidden, ffn, routed;
  moe::Routing routing;                 // host copy, made at setup from the seed
  moe::Permutation plan;                // host permutation: the references'
  bench::DeviceBuffer<int32_t> expert;  // the routing on the device (tokens x top_k)
  bench::DeviceBuffer<float> weight;
  bench::DeviceSpan<const bf16> x, w;
  bench::DeviceSpan<bf16> y;
  bench::DeviceSpan<int32_t> counts;
  explicit Dispatch(bench::Setup& s)
      : tokens(s.size("tokens", 8192, 301)),
        experts(s.size("experts", 128, 12)),
        top_k(kTopK),
        hidden(s.size("hidden", 2048, 320)),
        ffn(s.size("ffn", 768, 512)),
        routed(tokens * top_k),
        routing(moe::make_routing(int(tokens), int(experts), int(top_k),
                                  s.string_axis("routing") == "skewed")),
        plan(moe::plan_permutation(routing)),
        expert(upload(routing.expert)),
        weight(upload(routing.weight)),
        x(s.input<bf16>("x", tokens * hidden, bench::uniform(-1, 1))),
        w(s.input<bf16>("w", experts * ffn * hidden, bench::uniform(-1, 1))),
        y(s.output<bf16>("y", tokens * ffn)),
        counts(s.output<int32_t>("counts", experts)) {
    s.param("top_k", top_k);
    s.flops(2.0 * double(routed) * double(hidden) * double(ffn), bench::ceiling::bf16);
    // Fewest bytes: x and every expert's weights read once, the routing read, y and counts written.
    // Shared by every rung, so it counts the work, not a rung's intermediates: neither the expert
    // outputs (written and read back by all rungs but epilogue_combine) nor epilogue_combine's FP32
    // y32 and its reductions (meant to stay in L2; not measured) are in it.
    s.bytes(double(x.bytes() + w.bytes() + y.bytes() + counts.bytes()) + 8.0 * double(routed));
  }
};

// The permuted operands and results, a variant's own (never shared with another variant or the
// reference, so that one cannot pass on rows another left behind). A GEMM that gathers its rows
// from x has no permuted x (copies_x false) but the index of each place's token; a GEMM that
// combines in its epilogue has no sorted y (stores_y false).
struct Sorted {
  bench::DeviceBuffer<bf16> x, y;          // [routed][hidden], [routed][ffn], expert-major
  bench::DeviceBuffer<int32_t> position;   // routed row (token * top_k + j) -> its row in x, y
  bench::DeviceBuffer<int32_t> row_token;  // place -> its token (only without x)
  explicit Sorted(const Dispatch& w, bool copies_x = true, bool stores_y = true)
      : x(copies_x ? bench::DeviceBuffer<bf16>(w.routed * w.hidden) : bench::DeviceBuffer<bf16>()),
        y(stores_y ? bench::DeviceBuffer<bf16>(w.routed * w.ffn) : bench::DeviceBuffer<bf16>()),
        position(w.routed),
        row_token(copies_x ? bench::DeviceBuffer<int32_t>()
                           : bench::DeviceBuffer<int32_t>(w.routed)) {}
  // Untimed, once, by a rung whose expert outputs are written where compute-sanitizer's initcheck
  // cannot see it (cuBLASLt's kernels, the TMA unit's stores) and read by the combine: a defined
  // first write, else initcheck reports every read (README, "Sanitizer"). 0xFF bytes are BF16
  // NaNs, not zeros: a row the GEMM failed to write reaches y as NaN and fails the verification.
  // Synchronised: the calls may come on another stream than setup's.
  void poison_y(cudaStream_t stream) const {
    BENCH_CUDA_CHECK(cudaMemsetAsync(y.data(), 0xFF, y.bytes(), stream));
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
};

void launch_combine(const Dispatch& w, const Sorted& s, cudaStream_t stream) {
  moe::combine<kTopK><<<unsigned((w.tokens + kWarps - 1) / kWarps), 32 * kWarps, 0, stream>>>(
      s.y.data(), s.position.data(), w.weight.data(), w.tokens, int(w.ffn), w.y.data());
  BENCH_CHECK_LAUNCH();
}

// ---- 1. Baseline: a host loop over the experts ------------------------------------------------
__global__ void count_experts(const int32_t* __restrict__ expert, int64_t routed,
                              int32_t* __restrict__ counts) {
  const int64_t a = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (a < routed) atomicAdd(&counts[expert[a]], 1);
}
// Expert e's rows into x_sorted[base..]: a warp looks at 32 routed rows and copies those of e,
// each to the next free row (an atomic cursor: the order within the expert does not matter,
// position remembers it).
__global__ void __launch_bounds__(32 * kWarps)
    gather_expert(const int32_t* __restrict__ expert, int64_t routed, int top_k, int e, int base,
                  int32_t* __restrict__ cursor, const bf16* __restrict__ x, int64_t hidden,
                  bf16* __restrict__ x_sorted, int32_t* __restrict__ position) {
  const int64_t a = (blockIdx.x * int64_t{kWarps} + threadIdx.x / 32) * 32 + threadIdx.x % 32;
  if (a - threadIdx.x % 32 >= routed) return;  // whole warps
  unsigned mine = __ballot_sync(0xffffffffu, a < routed && expert[a] == e);
  if (mine == 0) return;
  int first = 0;
  if (threadIdx.x % 32 == 0) first = base + atomicAdd(cursor, __popc(mine));
  first = __shfl_sync(0xffffffffu, first, 0);
  for (int n = 0; mine != 0; ++n, mine &= mine - 1) {
    const int lane = __ffs(mine) - 1;
    const int64_t row = a - threadIdx.x % 32 + lane;
    if (threadIdx.x % 32 == 0) position[row] = first + n;
    moe::copy_row(x, row / top_k, x_sorted, first + n, hidden);
  }
}

class HostLoop {
 public:
  HostLoop(const Dispatch& w, cudaStream_t stream)
      : sorted_(w), cursor_(w.experts), counts_(w.experts) {
    for (int32_t rows : w.plan.counts)  // cuBLASLt's plans, made untimed
      if (rows > 0) gemm_for(w, rows);
    sorted_.poison_y(stream);  // cuBLASLt writes the expert outputs
  }
  void operator()(const Dispatch& w, cudaStream_t stream) {
    BENCH_CUDA_CHECK(cudaMemsetAsync(w.counts.data(), 0, w.counts.bytes(), stream));
    BENCH_CUDA_CHECK(cudaMemsetAsync(cursor_.data(), 0, cursor_.size() * sizeof(int32_t), stream));
    count_experts<<<unsigned((w.routed + 255) / 256), 256, 0, stream>>>(w.expert.data(), w.routed,
                                                                        w.counts.data());
    BENCH_CHECK_LAUNCH();
    BENCH_CUDA_CHECK(cudaMemcpyAsync(counts_.data(), w.counts.data(), w.counts.bytes(),
                                     cudaMemcpyDeviceToHost, stream));
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));  // the loop needs every expert's count
    const unsigned blocks = unsigned((w.routed + 32 * kWarps - 1) / (32 * kWarps));
    for (int e = 0, base = 0; e < int(w.experts); base += counts_[e++]) {
      if (counts_[e] == 0) continue;
      gather_expert<<<blocks, 32 * kWarps, 0, stream>>>(
          w.expert.data(), w.routed, int(w.top_k), e, base, cursor_.data() + e, w.x.data(),
          w.hidden, sorted_.x.data(), sorted_.position.data());
      BENCH_CHECK_LAUNCH();
      // y_e [rows][ffn] = x_e [rows][hidden] W_e^T: the TN GEMM with m = ffn (A = W_e), n = rows.
      gemm_for(w, counts_[e])
          .run(w.w.data() + e * w.ffn * w.hidden, sorted_.x.data() + int64_t{base} * w.hidden,
               sorted_.y.data() + int64_t{base} * w.ffn, stream);
    }
    launch_combine(w, sorted_, stream);
  }

 private:
  // One plan per row count, as a framework's per-shape cache of cuBLAS heuristics.
  kernels::LtGemm& gemm_for(const Dispatch& w, int rows) {
    auto& plan = gemms_[rows];
    if (!plan)
      plan = std::make_unique<kernels::LtGemm>(w.ffn, rows, w.hidden, kernels::LtGemmTypes{});
    return *plan;
  }
  Sorted sorted_;
  bench::DeviceBuffer<int32_t> cursor_;
  std::vector<int32_t> counts_;
  std::map<int, std::unique_ptr<kernels::LtGemm>> gemms_;
};

// ---- 2. Step grouped_wgmma: the permutation on the device, one grouped GEMM --------------------
// The grouped GEMM: ws_gemm's producer and consumers, looped over this CTA's work items (a
// persistent kernel, as ch10's persistent_gemm, with `slot` running on across items). X = the
// sorted rows (a tile's 128 rows from its expert's offset), Y = the experts' weights stacked
// [expert * ffn + column][hidden]. The item count is read from memory and broadcast from lane 0,
// so the loop that holds the wgmma is uniform to the compiler.
// Where a consumer warpgroup's finished tile goes (its 64 rows from `first`, 256 columns from
// col0; rows at or past `end` belong to the next expert and are left alone). Every rung but
// epilogue_combine stores the expert outputs, BF16, in sorted order, for the combine kernel.
// An epilogue is called by each consumer warpgroup `cw` once a tile, with the ring's shared
// memory (an epilogue may keep staging space after it: kSmemBytes is the CTA's whole dynamic
// shared memory), and once more at the end (finish) before the CTA's shared memory goes.
struct StoreSorted {
  static constexpr size_t kSmemBytes = ws::kSmemBytes;
  bf16* __restrict__ y_sorted;
  int ffn;
  __device__ __forceinline__ void operator()(const float (&acc)[128], ws::Smem&, int, int first,
                                             int col0, int end) const {
    wgmma::store_m64n256_bf16_rows_below(acc, y_sorted, ffn, first, col0, end);
  }
  __device__ __forceinline__ void finish() const {}
};

// ---- 2d. Step epilogue_combine: the combine in the GEMM's epilogue --------------------------
// A token's kTopK rows sit in kTopK different experts' tiles, computed by different CTAs at
// different times, so no CTA holds a token's whole sum: each adds its row's share, weighted, into
// an FP32 copy of y (y32, tokens x ffn, 25 MB at the timing size: L2 is 50 MB) with reductions,
// which the L2 performs (red: no value comes back, the SM does not wait). A pass afterwards
// (finish_combine) turns y32 into BF16 y and zeroes it for the next call. What goes: the expert
// outputs' BF16 write (routed x ffn, 96 MiB at the timing size) and the combine's read of them.
// What comes: the reductions (the same routed x ffn values, as FP32) and the pass over y32.
// Each value is rounded to BF16 before it is weighted, as the other rungs store it (and PyTorch's
// grouped_mm returns it): the same arithmetic as theirs, only the sums' order differs.
//
// The vector form: red.global.add.v4.f32 (PTX ISA 8.1, sm_90 and later; 16-byte aligned address,
// as every vector access): one request of 4 floats instead of 4. The accumulator fragment gives a
// thread 2 adjacent columns of 2 rows (r and r + 8; wgmma::store_m64n_bf16 says which), so lanes
// 2q and 2q + 1, which hold columns c, c+1 and c+2, c+3 of the same two rows, swap one pair:
// the even lane then has 4 adjacent columns of row r, the odd one of row r + 8. Two shuffles per
// 4 values; each thread then writes one row of the tile (its token and weight found once a tile).
// y32 rows are ffn floats (ffn % 256 == 0) and the columns 8 i + 4 (lane % 4 / 2) from a
// 256-aligned col0: every address is 16-byte aligned.
__device__ __forceinline__ void red_add_v4(float* address, float a, float b, float c, float d) {
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(address), "f"(a), "f"(b),
               "f"(c), "f"(d)
               : "memory");
}
__device__ __forceinline__ float bf16_rounded(float v) {
  return __bfloat162float(__float2bfloat16(v));
}

struct CombineIntoY32 {
  float* __restrict__ y32;                // [tokens][ffn], zero when the call starts
  const int32_t* __restrict__ row_token;  // place -> token
  const int32_t* __restrict__ position;   // routed row (token * kTopK + j) -> place
  const float* __restrict__ weight;       // routed row -> routing weight
  int ffn;
  static constexpr size_t kSmemBytes = ws::kSmemBytes;
  __device__ __forceinline__ void operator()(const float (&acc)[128], ws::Smem&, int, int first,
                                             int col0, int end) const {
    const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
    const bool upper = (lane & 1) != 0;  // after the swap: row r + 8 (odd lanes) or r (even)
    const int row = first + warp * 16 + lane / 4 + (upper ? 8 : 0);
    const bool inside = row < end;
    // The row's token, and its weight: the routed row of that token whose place is this row (the
    // permutation keeps place -> token only; kTopK places of the token, one 32-byte sector).
    int64_t token = 0;
    float scale = 0.0f;
    if (inside) {
      token = __ldg(row_token + row);
#pragma unroll
      for (int j = 0; j < kTopK; ++j)
        if (__ldg(position + token * kTopK + j) == row) scale = __ldg(weight + token * kTopK + j);
    }
    float* out = y32 + token * ffn + col0 + 4 * ((lane % 4) / 2);
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      // Row r's pair (r0, r1) and row r + 8's (s0, s1), BF16-rounded as the stored outputs are.
      const float r0 = bf16_rounded(acc[4 * i]), r1 = bf16_rounded(acc[4 * i + 1]);
      const float s0 = bf16_rounded(acc[4 * i + 2]), s1 = bf16_rounded(acc[4 * i + 3]);
      // Even lanes give away row r + 8's pair and odd lanes row r's: all lanes shuffle.
      const float got0 = __shfl_xor_sync(0xffffffffu, upper ? r0 : s0, 1);
      const float got1 = __shfl_xor_sync(0xffffffffu, upper ? r1 : s1, 1);
      // Selects, not a branch on `upper`: that would split every warp in two halves, each
      // issuing its own reduction. The even lane's columns come first in either row.
      if (inside)
        red_add_v4(out + 8 * i, scale * (upper ? got0 : r0), scale * (upper ? got1 : r1),
                   scale * (upper ? s0 : got0), scale * (upper ? s1 : got1));
    }
  }
  __device__ __forceinline__ void finish() const {}
};

// y = BF16(y32), and y32 = 0 for the next call, 8 values a thread. The zeroing rides on this pass
// rather than a memset at the start of the call: both are timed work either way, but here the
// lines are already being read (the zero stores hit lines in L2 this thread just read) and it is
// one launch less; y32 is zeroed once, untimed, when the rung is built.
__global__ void finish_combine(float* __restrict__ y32, int64_t values, bf16* __restrict__ y) {
  const int64_t i = (blockIdx.x * int64_t{blockDim.x} + threadIdx.x) * kernels::kBf16PerVector;
  if (i >= values) return;
  float4* from = reinterpret_cast<float4*>(y32 + i);
  const float4 a = from[0], b = from[1];
  from[0] = from[1] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const float sums[kernels::kBf16PerVector] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
  *reinterpret_cast<uint4*>(y + i) = kernels::pack_bf16x8(sums);
}

// ---- 2e. Step tma_store: the expert outputs leave through shared memory and TMA stores -------
// From registers (StoreSorted) a warp's store instruction writes 16 bytes in each of 8 rows: half
// of each 32-byte sector, so every sector is written in two halves by two instructions, while
// the tensor cores wait (both consumers store at once). Instead, as ch10's persistent_tma_store
// does, the tile goes to the copy engine (kernels/tma_store_epilogue.cuh: 64 x 64 chunks staged in
// the 128-byte swizzle, two buffers a consumer, nobody waits for the writes).
// Here a TMA box cannot stop at the expert's end (the rows after it are the next expert's, and
// another CTA writes them), so only a consumer's share whose 64 rows all belong to the expert
// goes by TMA; the share that holds the expert's end (at most one in each of the expert's column
// tiles) is stored from registers below the end as before, and a share wholly past it, nothing.
// The branch is uniform over the warpgroup (first and end are the tile's), as the warpgroup
// barriers inside store_tile_tma need.
struct StoreSortedTma {
  static constexpr size_t kSmemBytes = ws::kTmaStoreSmemBytes;
  CUtensorMap map;  // y_sorted [routed][ffn] in 64 x 64 boxes, 128-byte swizzled
  bf16* __restrict__ y_sorted;
  int ffn;
  __device__ __forceinline__ void operator()(const float (&acc)[128], ws::Smem& sm, int cw,
                                             int first, int col0, int end) const {
    if (first + ws::kXShare <= end)
      ws::store_tile_tma(acc, reinterpret_cast<ws::TmaStoreSmem&>(sm).staging[cw], &map, cw,
                         ws::Tile{first - cw * ws::kXShare, col0});
    else if (first < end)
      wgmma::store_m64n256_bf16_rows_below(acc, y_sorted, ffn, first, col0, end);
  }
  // The last TMA stores must have read their staging before the CTA's shared memory goes (and
  // written y_sorted, which the combine kernel reads next).
  __device__ __forceinline__ void finish() const {
    if (threadIdx.x % ws::kWarpgroup == 0) tma::wait_all<0>();
  }
};

// The consumer warpgroups of every grouped GEMM here: for each of this CTA's work items, its
// k-blocks into the accumulators (ws::mma_tile; kGenericX as there), then the tile handed to the
// epilogue (StoreSorted, StoreSortedTma or CombineIntoY32) with the rows that belong to its
// expert. A template so that its wgmma is compiled only where a kernel's sm_90a body calls it.
// offsets and tile_prefix are not __restrict__: in fused_permute this launch wrote them.
template <bool kGenericX, class Epilogue>
__device__ __forceinline__ void consume_items(ws::Smem& sm, const int32_t* offsets,
                                              const int32_t* tile_prefix, int items, int experts,
                                              int n_tiles, int kblocks, const Epilogue& epilogue,
                                              uint32_t& slot) {
  float acc[128];
  const int cw = ws::start_consumer(acc);
  for (int item = int(blockIdx.x); item < items; item += int(gridDim.x)) {
    const moe::WorkItem at = moe::locate_tile(tile_prefix, experts, item, n_tiles);
    ws::mma_tile<1, kGenericX>(acc, sm, cw, kblocks, slot);
    const int first = offsets[at.expert] + at.row_tile * ws::kBM + cw * ws::kXShare;
    epilogue(acc, sm, cw, first, at.col_tile * ws::kBN, offsets[at.expert + 1]);
  }
  epilogue.finish();
}

template <class Epilogue>
__global__ void __launch_bounds__(ws::kSpecialisedThreads, 1)
    grouped_gemm(const __grid_constant__ CUtensorMap map_x,
                 const __grid_constant__ CUtensorMap map_w,
                 const __grid_constant__ Epilogue epilogue, const int32_t* __restrict__ offsets,
                 const int32_t* __restrict__ tile_prefix, int experts, int ffn, int hidden) {
#if BENCH_SM90A_DEVICE
  extern __shared__ uint8_t raw[];
  ws::Smem& sm = ws::init_ring(raw, 1);  // full: the producer's one expect_tx per stage
  const int n_tiles = ffn / ws::kBN, kblocks = hidden / ws::kBK;
  const int items = __shfl_sync(0xffffffffu, tile_prefix[experts], 0);
  uint32_t slot = 0;
  if (threadIdx.x / ws::kWarpgroup == 0) {
    wgmma::shrink_registers<ws::kProducerRegisters>();
    if (threadIdx.x == 0)
      for (int item = int(blockIdx.x); item < items; item += int(gridDim.x)) {
        const moe::WorkItem at = moe::locate_tile(tile_prefix, experts, item, n_tiles);
        const ws::Tile tile{offsets[at.expert] + at.row_tile * ws::kBM,
                            (at.expert * n_tiles + at.col_tile) * ws::kBN};
        ws::produce_k_blocks(sm, &map_x, &map_w, tile, 0, kblocks, slot);
      }
  } else {
    consume_items<false>(sm, offsets, tile_prefix, items, experts, n_tiles, kblocks, epilogue,
                         slot);
  }
#endif
}

// ---- 2b. The gathering rungs: A's rows gathered from x by cp.async -------------------------
// Hopper's TMA copies boxes, not lists of rows (a row gather is Blackwell's tile::gather4), so a
// stage's X block (128 rows x 64 columns, 16 KiB) is 1024 cp.async of 16 bytes, 8 per producer
// thread, each to the chunk the 128-byte swizzle gives it: the layout TMA writes and the wgmma
// descriptors expect. The W block stays on TMA (thread 0). A stage's full barrier counts 129
// arrivals: thread 0's expect_tx for W's bytes and one per producer thread, which cp.async makes
// once that thread's copies have landed (no thread waits). The stage is written by ordinary
// copies (the generic proxy) and read by wgmma (the async proxy): the consumers fence after the
// barrier (ws::mma_tile's kGenericX). Rows past the expert's end are zero-filled, multiplied and
// not stored. Issue rate: a k-block's A is 32 warp-wide cp.async (each 4 whole 128-byte rows,
// 512 bytes), against 4.2 MFLOP of wgmma for the CTA (about 1000 cycles at the dense BF16 rate).
// Few copies, but each warp issues every instruction of its 8 rows in a dependent chain, so what
// surrounds each copy decides whether the producer keeps up (kHoldRows below).
namespace gather {
constexpr int kChunksPerRow = ws::kBK * int(sizeof(bf16)) / 16;  // 8 chunks of 16 bytes a row
constexpr int kRowStride = ws::kWarpgroup / kChunksPerRow;       // a thread's rows: 16 apart
constexpr int kRowsPerThread = ws::kBM / kRowStride;             // 8 of them
constexpr uint32_t kWBytes = ws::kBN * ws::kBK * sizeof(bf16);   // W's 32 KiB of a stage
constexpr uint32_t kFullArrivals = 1 + ws::kWarpgroup;           // expect_tx + each copier
}  // namespace gather

// The epilogue is a parameter: StoreSorted (grouped_gather, cluster_permute), StoreSortedTma
// (tma_store, index_once, fused_permute: 2e above) or CombineIntoY32 (epilogue_combine, 2d above).
//
// kHoldRows (index_once, fused_permute): the producer's instructions, not the copies, were what
// the consumers waited for: a row's copy was an index load, a sign extension, a 64-bit multiply
// and address arithmetic, every k-block, for each of a thread's 8 rows, under the producer's 40
// registers (README, the stall profile). With kHoldRows a thread reads its 8 row indices once a
// tile and holds them as 32-bit byte offsets into x (token * row bytes + its chunk; x under 4 GiB,
// checked at setup), so a k-block's copy of a row is one 64-bit add; rows past the expert's end
// read x's first row and copy nothing.
//
// kFusedPermute (fused_permute): the permutation first, in this launch (moe::permute_in_grid, a
// cooperative launch), with the ring's shared memory as its scratch before any stage is loaded.
// It then reads the permutation's outputs through `permutation`'s plain pointers, never through
// the const __restrict__ parameters (those allow the non-coherent path, which may not see what
// another CTA wrote in this launch).
template <class Epilogue, bool kHoldRows = false, bool kFusedPermute = false>
__global__ void __launch_bounds__(ws::kSpecialisedThreads, 1)
    grouped_gemm_gather(const bf16* __restrict__ x, const __grid_constant__ CUtensorMap map_w,
                        const __grid_constant__ Epilogue epilogue,
                        const int32_t* __restrict__ row_token, const int32_t* __restrict__ offsets,
                        const int32_t* __restrict__ tile_prefix, int experts, int ffn, int hidden,
                        const moe::GridPermutation permutation) {
  static_assert(kHoldRows || !kFusedPermute, "the fused form reads its row indices once a tile");
#if BENCH_SM90A_DEVICE
  using namespace gather;
  extern __shared__ uint8_t raw[];
  ws::Smem& sm = ws::init_ring(raw, kFullArrivals);
  const int n_tiles = ffn / ws::kBN, kblocks = hidden / ws::kBK;
  const int32_t* offs = offsets;
  const int32_t* prefix = tile_prefix;
  const int32_t* tokens = row_token;
  if constexpr (kFusedPermute) {
    using Scan = cub::BlockScan<int32_t, ws::kSpecialisedThreads>;
    static_assert(sizeof(Scan::TempStorage) <= sizeof(sm.y[0]), "the scan's scratch: a W block");
    static_assert(ws::kSpecialisedThreads / 32 * ws::kSpecialisedThreads * sizeof(int32_t) <=
                      sizeof(sm.x),
                  "the [warp][expert] table for experts <= 384 (setup checks): the X blocks");
    moe::permute_in_grid<ws::kSpecialisedThreads>(
        permutation, experts, ws::kBM, n_tiles, reinterpret_cast<int32_t*>(&sm.x[0][0]),
        *reinterpret_cast<Scan::TempStorage*>(&sm.y[0][0]));
    tma::fence_proxy_async_shared();  // the scratch's generic writes before the stages' TMA
    offs = permutation.offsets;
    prefix = permutation.tile_prefix;
    tokens = permutation.row_token;
  }
  const int items = __shfl_sync(0xffffffffu, prefix[experts], 0);
  uint32_t slot = 0;
  if (threadIdx.x / ws::kWarpgroup == 0) {
    wgmma::shrink_registers<ws::kProducerRegisters>();
    // Thread p fills 16-byte chunk p % 8 of rows p / 8 + 16 i. The swizzle puts chunk c of row r
    // at chunk c ^ (r % 8), the same for all of a thread's rows (16 apart), so it is one column.
    const int chunk = int(threadIdx.x) % kChunksPerRow, row0 = int(threadIdx.x) / kChunksPerRow;
    const int swizzled = (chunk ^ (row0 % 8)) * 8;
    for (int item = int(blockIdx.x); item < items; item += int(gridDim.x)) {
      const moe::WorkItem at = moe::locate_tile(prefix, experts, item, n_tiles);
      const int first = offs[at.expert] + at.row_tile * ws::kBM, end = offs[at.expert + 1];
      const int c0 = (at.expert * n_tiles + at.col_tile) * ws::kBN;
      uint32_t row_bytes[kRowsPerThread];  // kHoldRows: the thread's rows, bytes into x
      uint32_t inside = 0;                 // kHoldRows: bit i set if row i is the expert's
      if constexpr (kHoldRows) {
#pragma unroll
        for (int i = 0; i < kRowsPerThread; ++i) {
          const int row = first + row0 + i * kRowStride;
          const int32_t token = row < end ? (kFusedPermute ? tokens[row] : __ldg(tokens + row)) : 0;
          row_bytes[i] =
              uint32_t(token) * uint32_t(hidden * int(sizeof(bf16))) + uint32_t(chunk * 16);
          inside |= uint32_t(row < end) << i;
        }
      }
      for (int kb = 0; kb < kblocks; ++kb, ++slot) {
        const int s = int(slot % ws::kStages);
        if (slot >= ws::kStages) tma::wait_parity(&sm.empty[s], ((slot / ws::kStages) - 1) & 1);
        if (threadIdx.x == 0) {
          tma::arrive_expect_tx(&sm.full[s], kWBytes);
          for (int part = 0; part < ws::kConsumers; ++part)
            tma::load_2d(&sm.y[s][part * ws::kYShare * ws::kBK], &map_w, kb * ws::kBK,
                         c0 + part * ws::kYShare, &sm.full[s]);
        }
        bf16* to = &sm.x[s][row0 * ws::kBK + swizzled];
        if constexpr (kHoldRows) {
          const char* block = reinterpret_cast<const char*>(x) + kb * ws::kBK * int(sizeof(bf16));
#pragma unroll
          for (int i = 0; i < kRowsPerThread; ++i)
            cp_async::copy16(to + i * kRowStride * ws::kBK, block + row_bytes[i],
                             int((inside >> i) & 1u) * 16);
        } else {
          // The thread's 8 row indices re-read each k-block (L1 hits), as the rungs before
          // index_once do: with 64-bit addresses, 8 more live registers spill under 40.
          const bf16* column = x + kb * ws::kBK + chunk * 8;
#pragma unroll 4
          for (int i = 0; i < kRowsPerThread; ++i) {  // a zero fill still needs a valid source
            const int row = first + row0 + i * kRowStride;
            const bool in = row < end;
            cp_async::copy16(to + i * kRowStride * ws::kBK,
                             in ? column + int64_t{__ldg(tokens + row)} * hidden : x, in ? 16 : 0);
          }
        }
        cp_async::arrive_on(&sm.full[s]);
      }
    }
    cp_async::commit();  // nothing left in flight when the thread exits
    cp_async::wait<0>();
  } else {
    consume_items</*kGenericX=*/true>(sm, offs, prefix, items, experts, n_tiles, kblocks, epilogue,
                                      slot);
  }
#endif
}

// ---- 2c. Step row_tma_gather: the gather as TMA, a row per copy (measured slower) --------------
// The idea: the cp.async gather costs the GEMM beside TMA: 128 threads each issue 8 copies and
// make one arrival on the stage's barrier (129 arrivals a stage), re-read their row indices every
// k-block, and the consumers fence the generic proxy before every stage. Here a box of ONE row
// (64 columns, 128 bytes) is a TMA copy of its own: the tensor map covers x [tokens][hidden], a
// row's coordinate is its token, and the 128-byte swizzle is a function of the shared-memory
// address (bits 7-9 pick the XOR), so row r's box written at stage + 128 r lands in exactly the
// chunks a whole-tile box would have put it in. One producer warp: each lane holds the tokens of
// 4 of the tile's 128 rows for the whole tile and issues their 4 copies per k-block; lane 0 also
// the stage's one expect_tx (the whole 48 KiB: X's rows and W's block) and W's two boxes. Rows
// past the expert's end ask for row `tokens` of x, past its end: TMA fills zeros and still counts
// the box's bytes. The writes are the async proxy's, as TMA's always are: the consumers are
// ws_gemm's own, with no proxy fence.
// What was measured (README): the GEMM took several times the cp.async gather's time; spread
// over 1713 items x 32 k-blocks on 132 CTAs, that is tens of ns for each of a stage's 130 copies
// if they go one after another.
// Two costs serialise them: a TMA copy takes its map and coordinates in uniform registers
// (UTMALDG [URa], [URb]), so a load_2d whose 32 lanes hold 32 different tokens becomes a loop of
// 32 single-lane issues that ptxas builds around it; and one SM's TMA unit takes the requests in
// turn, 130 a stage where a whole-tile box is one. Which of the two dominates is not measured
// (the SASS and an ncu profile would say). Hopper's TMA moves boxes, not row lists (Blackwell's
// tile::gather4 moves 4 rows a request); for a gather on Hopper, per-thread cp.async wins.
namespace row_tma {
constexpr int kRowsPerLane = ws::kBM / 32;  // 4 rows of the tile per lane
static_assert(kRowsPerLane * 32 == ws::kBM, "the producer warp's lanes cover the tile's rows");
// Lane 0's one expect_tx must be exactly the bytes of the copies issued on the stage's barrier:
// kBM one-row boxes of A (each kBK columns) and B's kConsumers boxes of kYShare rows. Too few
// and the stage completes before its last rows land; too many and the consumers wait forever.
static_assert(ws::kBM * ws::kBK * sizeof(bf16) +
                      ws::kConsumers * ws::kYShare * ws::kBK * sizeof(bf16) ==
                  ws::kStageBytes,
              "the stage's expect_tx against its boxes");
}  // namespace row_tma

__global__ void __launch_bounds__(ws::kSpecialisedThreads, 1)
    grouped_gemm_row_tma(const __grid_constant__ CUtensorMap map_rows,
                         const __grid_constant__ CUtensorMap map_w, bf16* __restrict__ y_sorted,
                         const int32_t* __restrict__ row_token, const int32_t* __restrict__ offsets,
                         const int32_t* __restrict__ tile_prefix, int experts, int ffn, int hidden,
                         int tokens) {
#if BENCH_SM90A_DEVICE
  using row_tma::kRowsPerLane;
  extern __shared__ uint8_t raw[];
  ws::Smem& sm = ws::init_ring(raw, 1);  // full: lane 0's one expect_tx per stage
  const int n_tiles = ffn / ws::kBN, kblocks = hidden / ws::kBK;
  const int items = __shfl_sync(0xffffffffu, tile_prefix[experts], 0);
  uint32_t slot = 0;
  if (threadIdx.x / ws::kWarpgroup == 0) {
    wgmma::shrink_registers<ws::kProducerRegisters>();
    if (threadIdx.x < 32) {
      const int lane = int(threadIdx.x);
      for (int item = int(blockIdx.x); item < items; item += int(gridDim.x)) {
        const moe::WorkItem at = moe::locate_tile(tile_prefix, experts, item, n_tiles);
        const int first = offsets[at.expert] + at.row_tile * ws::kBM, end = offsets[at.expert + 1];
        const int c0 = (at.expert * n_tiles + at.col_tile) * ws::kBN;
        int token[kRowsPerLane];  // the lane's rows: lane + 32 i of the tile
#pragma unroll
        for (int i = 0; i < kRowsPerLane; ++i) {
          const int row = first + lane + 32 * i;
          token[i] = row < end ? row_token[row] : tokens;
        }
        for (int kb = 0; kb < kblocks; ++kb, ++slot) {
          const int s = int(slot % ws::kStages);
          if (slot >= ws::kStages) tma::wait_parity(&sm.empty[s], ((slot / ws::kStages) - 1) & 1);
          if (lane == 0) {
            tma::arrive_expect_tx(&sm.full[s], ws::kStageBytes);
            for (int part = 0; part < ws::kConsumers; ++part)
              tma::load_2d(&sm.y[s][part * ws::kYShare * ws::kBK], &map_w, kb * ws::kBK,
                           c0 + part * ws::kYShare, &sm.full[s]);
          }
#pragma unroll
          for (int i = 0; i < kRowsPerLane; ++i)
            tma::load_2d(&sm.x[s][(lane + 32 * i) * ws::kBK], &map_rows, kb * ws::kBK, token[i],
                         &sm.full[s]);
        }
      }
    }
  } else {
    consume_items<false>(sm, offsets, tile_prefix, items, experts, n_tiles, kblocks,
                         StoreSorted{y_sorted, ffn}, slot);
  }
#endif
}

// The three ways the rungs permute (all on the GPU with no read-back; after any of them the
// workload's counts, the offsets, the work items' numbering and each routed row's place are on the
// device).
enum class Permute {
  three_kernels,  // per-chunk histograms, a one-CTA scan, the placement: grouped_wgmma, _gather
  one_cluster,    // moe::permute_in_cluster: one launch of one cluster of 16 CTAs, else 8
  in_gemm,        // moe::permute_in_grid, inside the gathering GEMM's own cooperative launch
};
// Where the grouped GEMM's producer finds A's rows.
enum class RowsFrom {
  permuted_copy,         // a copy of x in expert order (step (4) below), whole-tile TMA boxes
  cp_async_gather,       // x itself, through the row index, 16-byte cp.async per thread
  cp_async_gather_held,  // the same, each thread's row offsets read once a tile and held
  tma_row_gather,        // x itself, through the row index, a one-row TMA box per row
};
// How the grouped GEMM stores the expert outputs (the rungs that combine in their own kernel).
enum class StoreBy {
  registers,  // StoreSorted: bf16x2 stores from the accumulators
  tma,        // StoreSortedTma: staged in shared memory, TMA stores (2e)
};
// Where the weighted sum over a token's experts is made.
enum class CombineIn {
  own_kernel,     // moe::combine over the BF16 expert outputs the GEMM stored
  gemm_epilogue,  // the GEMM's reductions into y32, then finish_combine (2d)
};

// Steps (1)-(4) of the grouped rungs. Without the row copy (copies_x false: the gathers) step
// (3) also writes each place's token and (4) is gone; one_cluster always gathers.
class DevicePermutation {
 public:
  explicit DevicePermutation(const Dispatch& w, bool copies_x = true,
                             Permute how = Permute::three_kernels, bool stores_y = true)
      : sorted(w, copies_x, stores_y),
        offsets(w.experts + 1),
        tile_prefix(w.experts + 1),
        copies_x_(copies_x),
        how_(how),
        chunks_(int((w.routed + moe::kChunk - 1) / moe::kChunk)),
        chunk_base_(how == Permute::three_kernels
                        ? bench::DeviceBuffer<int32_t>(int64_t{chunks_} * w.experts)
                        : bench::DeviceBuffer<int32_t>()) {
    if (how_ == Permute::one_cluster) {
      if (copies_x_) throw std::logic_error("moe_dispatch: the cluster permutation only gathers");
      static const bool configured = [] {  // the table for up to kScanThreads experts
        BENCH_CUDA_CHECK(cudaFuncSetAttribute(
            moe::permute_in_cluster, cudaFuncAttributeMaxDynamicSharedMemorySize,
            int(moe::cluster_permutation_smem(moe::kScanThreads))));
        BENCH_CUDA_CHECK(cudaFuncSetAttribute(moe::permute_in_cluster,
                                              cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
        return true;
      }();
      (void)configured;
      // The CTAs of 1024 threads (64 registers: a whole SM's register file each) must be resident
      // together in one GPC: 16 where this GPU can hold them, else 8. Asked here, outside the
      // timed launches, so that a GPU or partition that cannot hold even 8 is a SKIP with its
      // reason, not a failed launch.
      const size_t smem = moe::cluster_permutation_smem(int(w.experts));
      for (int ctas : {moe::kClusterCtasWide, moe::kClusterCtas}) {
        int clusters = 0;
        if (kernels::query_resident_clusters(clusters, moe::permute_in_cluster, unsigned(ctas),
                                             moe::kClusterThreads, smem, ctas) == cudaSuccess &&
            clusters >= 1) {
          cluster_ctas_ = ctas;
          break;
        }
        (void)cudaGetLastError();  // a size this GPU refuses: try the next
      }
      if (cluster_ctas_ == 0)
        throw bench::Unsupported(
            "moe_dispatch: one cluster of 8 CTAs x 1024 threads cannot be resident on this GPU");
    }
  }
  void operator()(const Dispatch& w, cudaStream_t stream) {
    const int experts = int(w.experts);
    if (how_ == Permute::in_gemm) return;  // the GEMM's own launch permutes
    if (how_ == Permute::one_cluster) {
      cudaLaunchAttribute cluster = kernels::cluster_dims_x(unsigned(cluster_ctas_));
      cudaLaunchConfig_t config = {};
      config.gridDim = dim3(unsigned(cluster_ctas_));
      config.blockDim = dim3(moe::kClusterThreads);
      config.dynamicSmemBytes = moe::cluster_permutation_smem(experts);
      config.stream = stream;
      config.attrs = &cluster;
      config.numAttrs = 1;
      BENCH_CUDA_CHECK(cudaLaunchKernelEx(
          &config, moe::permute_in_cluster, w.expert.data(), int(w.routed), experts, int(w.top_k),
          int(ws::kBM), int(w.ffn / ws::kBN), w.counts.data(), offsets.data(), tile_prefix.data(),
          sorted.position.data(), sorted.row_token.data()));
      return;
    }
    const unsigned chunk_blocks = unsigned((chunks_ + kWarps - 1) / kWarps);
    const size_t per_block = size_t{kWarps} * experts * sizeof(int32_t);
    moe::count_chunks<<<chunk_blocks, 32 * kWarps, per_block, stream>>>(
        w.expert.data(), w.routed, experts, chunks_, chunk_base_.data());
    BENCH_CHECK_LAUNCH();
    moe::scan_chunks<<<1, moe::kScanThreads, 0, stream>>>(
        chunk_base_.data(), experts, chunks_, int(w.routed), ws::kBM, int(w.ffn / ws::kBN),
        w.counts.data(), offsets.data(), tile_prefix.data());
    BENCH_CHECK_LAUNCH();
    moe::place_rows<<<chunk_blocks, 32 * kWarps, per_block, stream>>>(
        w.expert.data(), w.routed, experts, chunks_, chunk_base_.data(), sorted.position.data(),
        int(w.top_k), copies_x_ ? nullptr : sorted.row_token.data());
    BENCH_CHECK_LAUNCH();
    if (!copies_x_) return;
    moe::scatter_rows<<<unsigned((w.routed + kWarps - 1) / kWarps), 32 * kWarps, 0, stream>>>(
        w.x.data(), sorted.position.data(), w.routed, int(w.top_k), w.hidden, sorted.x.data());
    BENCH_CHECK_LAUNCH();
  }
  Sorted sorted;
  bench::DeviceBuffer<int32_t> offsets, tile_prefix;

 private:
  bool copies_x_;
  Permute how_;
  int chunks_;
  int cluster_ctas_ = 0;  // the permutation cluster's CTAs (16 or 8), one_cluster only
  bench::DeviceBuffer<int32_t> chunk_base_;
};

// The GEMM's epilogue for a rung: the combine's reductions, or the expert outputs' stores.
template <CombineIn kCombine, StoreBy kStore>
using EpilogueOf =
    std::conditional_t<kCombine == CombineIn::gemm_epilogue, CombineIntoY32,
                       std::conditional_t<kStore == StoreBy::tma, StoreSortedTma, StoreSorted>>;

template <RowsFrom kRows, class Epilogue, bool kFusedPermute>
constexpr auto grouped_kernel() {
  if constexpr (kRows == RowsFrom::permuted_copy) {
    return grouped_gemm<Epilogue>;
  } else if constexpr (kRows == RowsFrom::cp_async_gather) {
    return grouped_gemm_gather<Epilogue>;
  } else if constexpr (kRows == RowsFrom::cp_async_gather_held) {
    return grouped_gemm_gather<Epilogue, /*kHoldRows=*/true, kFusedPermute>;
  } else {
    static_assert(std::is_same_v<Epilogue, StoreSorted>, "row_tma_gather stores from registers");
    return grouped_gemm_row_tma;
  }
}

// The grouped rungs: a permutation, one grouped GEMM, the combine (its own kernel, or the GEMM's
// epilogue and the pass to BF16).
template <Permute kPermute, RowsFrom kRows, CombineIn kCombine = CombineIn::own_kernel,
          StoreBy kStore = StoreBy::registers>
class GroupedWgmma {
  using Epilogue = EpilogueOf<kCombine, kStore>;
  static constexpr bool kFused = kPermute == Permute::in_gemm;
  static constexpr auto kKernel = grouped_kernel<kRows, Epilogue, kFused>();
  static constexpr size_t kSmem = Epilogue::kSmemBytes;
  static constexpr bool kCopy = kRows == RowsFrom::permuted_copy;
  static constexpr bool kInEpilogue = kCombine == CombineIn::gemm_epilogue;
  static_assert(!kInEpilogue || kRows == RowsFrom::cp_async_gather,
                "the epilogue combine is built on the gather");
  static_assert(!kFused || kRows == RowsFrom::cp_async_gather_held,
                "the fused permutation is built on the held-rows gather");

 public:
  GroupedWgmma(const Dispatch& w, cudaStream_t stream)
      : flops_(2.0 * double(w.routed) * double(w.hidden) * double(w.ffn)),
        permute_(w, /*copies_x=*/kCopy, kPermute, /*stores_y=*/!kInEpilogue),
        map_w_(ws::operand_map(w.w.data(), w.experts * w.ffn, w.hidden, ws::kYShare)) {
    if constexpr (kInEpilogue) {  // zero once here; each call's finish_combine leaves it zero
      y32_ = bench::DeviceBuffer<float>(w.tokens * w.ffn);
      BENCH_CUDA_CHECK(cudaMemsetAsync(y32_.data(), 0, y32_.bytes(), stream));
      // The calls may come on another stream than this one: the zeros must have landed first.
      BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    if constexpr (kCopy)
      map_x_ = ws::operand_map(permute_.sorted.x.data(), w.routed, w.hidden, ws::kXShare);
    if constexpr (kRows == RowsFrom::tma_row_gather)  // x itself, a box of one row
      map_x_ = ws::operand_map(w.x.data(), w.tokens, w.hidden, 1);
    if constexpr (kInEpilogue)
      epilogue_ = CombineIntoY32{y32_.data(), permute_.sorted.row_token.data(),
                                 permute_.sorted.position.data(), w.weight.data(), int(w.ffn)};
    else if constexpr (kStore == StoreBy::tma) {
      // y_sorted [routed][ffn] is the staging's D^T: output_map's D is ffn x routed.
      epilogue_ = StoreSortedTma{ws::output_map(permute_.sorted.y.data(), w.ffn, w.routed),
                                 permute_.sorted.y.data(), int(w.ffn)};
      permute_.sorted.poison_y(stream);  // the TMA unit writes the expert outputs
    } else
      epilogue_ = StoreSorted{permute_.sorted.y.data(), int(w.ffn)};
    ws::allow_smem<kKernel, kSmem>();
    grid_ = kernels::resident_grid(kKernel, ws::kSpecialisedThreads, kSmem);
    if constexpr (kRows == RowsFrom::cp_async_gather_held)
      if (w.x.bytes() > int64_t{UINT32_MAX})
        throw bench::Unsupported("the held row offsets are 32-bit: x must be under 4 GiB");
    if constexpr (kFused) setup_fused_permutation(w, stream);
  }
  void operator()(const Dispatch& w, cudaStream_t stream) {
    parts_[0].begin(stream);
    permute_(w, stream);
    parts_[0].end(stream);
    parts_[1].begin(stream);
    const Sorted& sorted = permute_.sorted;
    const int experts = int(w.experts), ffn = int(w.ffn), hidden = int(w.hidden);
    if constexpr (kRows == RowsFrom::permuted_copy)
      kKernel<<<grid_, ws::kSpecialisedThreads, kSmem, stream>>>(
          map_x_, map_w_, epilogue_, permute_.offsets.data(), permute_.tile_prefix.data(), experts,
          ffn, hidden);
    else if constexpr (kFused)  // every CTA resident at once (the grid barriers)
      BENCH_CUDA_CHECK(kernels::launch_cooperative(
          kKernel, grid_, ws::kSpecialisedThreads, kSmem, stream, w.x.data(), map_w_, epilogue_,
          sorted.row_token.data(), permute_.offsets.data(), permute_.tile_prefix.data(), experts,
          ffn, hidden, permutation_));
    else if constexpr (kRows == RowsFrom::cp_async_gather ||
                       kRows == RowsFrom::cp_async_gather_held)
      kKernel<<<grid_, ws::kSpecialisedThreads, kSmem, stream>>>(
          w.x.data(), map_w_, epilogue_, sorted.row_token.data(), permute_.offsets.data(),
          permute_.tile_prefix.data(), experts, ffn, hidden, moe::GridPermutation{});
    else
      kKernel<<<grid_, ws::kSpecialisedThreads, kSmem, stream>>>(
          map_x_, map_w_, sorted.y.data(), sorted.row_token.data(), permute_.offsets.data(),
          permute_.tile_prefix.data(), experts, ffn, hidden, int(w.tokens));
    BENCH_CHECK_LAUNCH();
    parts_[1].end(stream);
    parts_[2].begin(stream);
    if constexpr (kInEpilogue) {
      const int64_t values = w.tokens * w.ffn;
      const int64_t threads = values / kernels::kBf16PerVector;  // ffn % 256 == 0: no tail
      finish_combine<<<unsigned((threads + 255) / 256), 256, 0, stream>>>(y32_.data(), values,
                                                                          w.y.data());
      BENCH_CHECK_LAUNCH();
    } else {
      launch_combine(w, sorted, stream);
    }
    parts_[2].end(stream);
  }
  // Where the call's time goes (the last call's events): the permutation, the grouped GEMM alone
  // (comparable with torch._grouped_mm, which the peer times alone too) and the combine. In
  // epilogue_combine gemm_us (and gemm_tflops) include the combine's reductions, and combine_us
  // is the pass from y32 to BF16 y; in fused_permute gemm_us includes the permutation (its
  // permute_us is an empty span).
  std::vector<bench::Metric> metrics() const {
    const double gemm_ms = parts_[1].ms();
    return {{"permute_us", 1e3 * parts_[0].ms()},
            {"gemm_us", 1e3 * gemm_ms},
            {"gemm_tflops", flops_ / (gemm_ms * 1e-3) * 1e-12},
            {"combine_us", 1e3 * parts_[2].ms()}};
  }

 private:
  std::array<kernels::EventSpan, 3> parts_;  // permute, GEMM, combine
  double flops_ = 0;
  DevicePermutation permute_;
  CUtensorMap map_x_{}, map_w_;  // map_x_: the permuted copy's, or x's rows (tma_row_gather)
  // epilogue_combine's FP32 sums [tokens][ffn]: zero between calls.
  bench::DeviceBuffer<float> y32_;
  Epilogue epilogue_{};
  unsigned grid_ = 0;
  // fused_permute: each CTA's rows per expert, the grid barrier's counter, the kernel's view.
  bench::DeviceBuffer<int32_t> cta_rows_;
  bench::DeviceBuffer<unsigned long long> barrier_;
  moe::GridPermutation permutation_{};

  void setup_fused_permutation(const Dispatch& w, cudaStream_t stream) {
    if (!kernels::device_attribute(cudaDevAttrCooperativeLaunch))
      throw bench::Unsupported("fused_permute: this GPU has no cooperative launch");
    if (w.experts > ws::kSpecialisedThreads)
      throw bench::Unsupported("fused_permute: a thread per expert needs experts <= 384");
    cta_rows_ = bench::DeviceBuffer<int32_t>(int64_t{grid_} * w.experts);
    barrier_ = bench::DeviceBuffer<unsigned long long>(1);
    BENCH_CUDA_CHECK(cudaMemsetAsync(barrier_.data(), 0, barrier_.bytes(), stream));
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));  // the calls may come on another stream
    Sorted& sorted = permute_.sorted;
    permutation_ = moe::GridPermutation{w.expert.data(),
                                        int(w.routed),
                                        int(w.top_k),
                                        cta_rows_.data(),
                                        w.counts.data(),
                                        permute_.offsets.data(),
                                        permute_.tile_prefix.data(),
                                        sorted.position.data(),
                                        sorted.row_token.data(),
                                        barrier_.data()};
  }
};

// ---- Vendor: the same device permutation, then cuBLAS's grouped GEMM (cublasGemmGroupedBatchedEx,
// one group per expert with rows). Its sizes are host arrays, so the counts come back to the host
// first: the read-back the grouped rungs avoid, kept here because the API needs it.
class CublasGrouped {
 public:
  CublasGrouped(const Dispatch& w, cudaStream_t stream)
      : permute_(w), pointers_(3 * w.experts), counts_(w.experts) {
    kernels::check_cublas(cublasCreate(&handle_), "cublasCreate");
    kernels::check_cublas(cublasSetStream(handle_, stream), "cublasSetStream");
    // A trial of one group on zeroed scratch rows (as A and B: the workload's inputs are not
    // filled yet), so that a cuBLAS without this path for BF16 is a SKIP with its reason rather
    // than a failure in the timed call.
    BENCH_CUDA_CHECK(
        cudaMemsetAsync(permute_.sorted.x.data(), 0, permute_.sorted.x.bytes(), stream));
    std::vector<int32_t> one_group(w.experts, 0);
    one_group[0] = int32_t(std::min<int64_t>(w.routed, 128));
    const cublasStatus_t status = grouped(w, one_group, stream, permute_.sorted.x.data());
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    if (status != CUBLAS_STATUS_SUCCESS)
      throw bench::Unsupported(std::string("cublasGemmGroupedBatchedEx (BF16): ") +
                               cublasGetStatusString(status));
  }
  ~CublasGrouped() { cublasDestroy(handle_); }
  CublasGrouped(const CublasGrouped&) = delete;
  CublasGrouped& operator=(const CublasGrouped&) = delete;
  void operator()(const Dispatch& w, cudaStream_t stream) {
    permute_(w, stream);
    BENCH_CUDA_CHECK(cudaMemcpyAsync(counts_.data(), w.counts.data(), w.counts.bytes(),
                                     cudaMemcpyDeviceToHost, stream));
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));  // the group sizes are host arrays
    kernels::check_cublas(grouped(w, counts_, stream, w.w.data()), "cublasGemmGroupedBatchedEx");
    launch_combine(w, permute_.sorted, stream);
  }

 private:
  // y_e [rows][ffn] = x_e [rows][hidden] W_e^T, column-major: C (ffn x rows) = W_e^T' x_e^T', as
  // LtGemm's TN: op(A) = T on W_e (lda hidden), op(B) = N on x_e (ldb hidden), ldc ffn.
  cublasStatus_t grouped(const Dispatch& w, const std::vector<int32_t>& counts, cudaStream_t stream,
                         const bf16* weights) {
    m_.clear(), n_.clear(), k_.clear(), lda_.clear(), ldc_.clear();
    host_pointers_.assign(3 * w.experts, nullptr);
    int groups = 0;
    for (int e = 0, base = 0; e < int(w.experts); base += counts[e++]) {
      if (counts[e] == 0) continue;
      host_pointers_[groups] = weights + e * w.ffn * w.hidden;
      host_pointers_[w.experts + groups] = permute_.sorted.x.data() + int64_t{base} * w.hidden;
      host_pointers_[2 * w.experts + groups] = permute_.sorted.y.data() + int64_t{base} * w.ffn;
      m_.push_back(int(w.ffn)), n_.push_back(counts[e]), k_.push_back(int(w.hidden));
      lda_.push_back(int(w.hidden)), ldc_.push_back(int(w.ffn));
      ++groups;
    }
    BENCH_CUDA_CHECK(cudaMemcpyAsync(pointers_.data(), host_pointers_.data(), pointers_.bytes(),
                                     cudaMemcpyHostToDevice, stream));
    const std::vector<cublasOperation_t> ta(groups, CUBLAS_OP_T), tb(groups, CUBLAS_OP_N);
    const std::vector<float> alpha(groups, 1.0f), beta(groups, 0.0f);
    const std::vector<int> one(groups, 1);
    const void* const* a = pointers_.data();
    return cublasGemmGroupedBatchedEx(handle_, ta.data(), tb.data(), m_.data(), n_.data(),
                                      k_.data(), alpha.data(), a, CUDA_R_16BF, lda_.data(),
                                      a + w.experts, CUDA_R_16BF, lda_.data(), beta.data(),
                                      const_cast<void* const*>(a + 2 * w.experts), CUDA_R_16BF,
                                      ldc_.data(), groups, one.data(), CUBLAS_COMPUTE_32F);
  }
  DevicePermutation permute_;
  bench::DeviceBuffer<const void*> pointers_;  // A, B, C pointer arrays, experts each
  std::vector<const void*> host_pointers_;
  std::vector<int32_t> counts_;
  std::vector<int> m_, n_, k_, lda_, ldc_;
  cublasHandle_t handle_ = nullptr;
};

std::string requirements(const Dispatch& w) {
  if (w.ffn % ws::kBN != 0 || w.hidden % ws::kBK != 0 || w.hidden == 0)
    return "whole column tiles and k-blocks: needs ffn % 256 == 0, hidden % 64 == 0";
  if (w.experts > moe::kScanThreads) return "the scan's one CTA: needs experts <= 1024";
  return "";
}

// ---- References ---------------------------------------------------------------------------------
// Double on the CPU (verification size): each expert output rounded to BF16, as both sides store
// it.
void reference(const Dispatch& w, bench::HostData& h) {
  const auto x = h.input<bf16>("x"), wt = h.input<bf16>("w");
  auto y = h.expected("y"), counts = h.expected("counts");
  for (int64_t e = 0; e < w.experts; ++e) counts[e] = w.plan.counts[e];
  // Tokens split over the host's cores, each token's row one thread's: the same bits.
  bench::parallel_chunks(
      size_t(w.tokens), bench::parallel_parts(), [&](size_t, size_t first, size_t last) {
        std::vector<double> row(w.ffn);
        for (int64_t t = int64_t(first); t < int64_t(last); ++t) {
          std::fill(row.begin(), row.end(), 0.0);
          for (int64_t j = 0; j < w.top_k; ++j) {
            const int64_t e = w.routing.expert[t * w.top_k + j];
            for (int64_t c = 0; c < w.ffn; ++c) {
              double dot = 0;
              for (int64_t k = 0; k < w.hidden; ++k)
                dot += double(__bfloat162float(x[t * w.hidden + k])) *
                       double(__bfloat162float(wt[(e * w.ffn + c) * w.hidden + k]));
              row[c] += double(w.routing.weight[t * w.top_k + j]) *
                        double(__bfloat162float(__float2bfloat16(float(dot))));
            }
          }
          for (int64_t c = 0; c < w.ffn; ++c) y[t * w.ffn + c] = row[c];
        }
      });
}

// A plain GPU version for the timing size: the host's permutation, a copy per element, the
// simple reference GEMM over every expert in ONE launch (reference_gemm_tn_grouped: expert e is
// group e, its rows of x_sorted and y_sorted the group's columns; each output the same FP32 FMA
// chain, bit for bit, as reference_gemm_tn on that expert alone), a combine of a thread per
// output. Called an expert at a time, the GEMM was 128 launches of 84-108 CTAs each (64 x 64
// tiles), fewer than the GPU has SMs, one after another: ~51 ms a check on an H200, so few timed
// samples could be checked within the harness's budget.
__global__ void reference_gather(const bf16* x, const int32_t* position, int64_t routed, int top_k,
                                 int64_t hidden, bf16* x_sorted) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < routed * hidden)
    x_sorted[position[i / hidden] * hidden + i % hidden] =
        x[(i / hidden / top_k) * hidden + i % hidden];
}
__global__ void reference_combine(const bf16* y_sorted, const int32_t* position,
                                  const float* weight, int64_t tokens, int top_k, int64_t ffn,
                                  bf16* y) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= tokens * ffn) return;
  const int64_t t = i / ffn, c = i % ffn;
  float sum = 0;
  for (int j = 0; j < top_k; ++j)
    sum += weight[t * top_k + j] * __bfloat162float(y_sorted[position[t * top_k + j] * ffn + c]);
  y[i] = __float2bfloat16(sum);
}
void device_reference(const Dispatch& w, cudaStream_t stream) {
  const bench::DeviceBuffer<int32_t> position = upload(w.plan.position);
  const bench::DeviceBuffer<bf16> x_sorted(w.routed * w.hidden), y_sorted(w.routed * w.ffn);
  BENCH_CUDA_CHECK(cudaMemcpyAsync(w.counts.data(), w.plan.counts.data(), w.counts.bytes(),
                                   cudaMemcpyHostToDevice, stream));
  reference_gather<<<unsigned((w.routed * w.hidden + 255) / 256), 256, 0, stream>>>(
      w.x.data(), position.data(), w.routed, int(w.top_k), w.hidden, x_sorted.data());
  BENCH_CHECK_LAUNCH();
  // y_e [rows][ffn] = x_e [rows][hidden] W_e^T: the TN product with m = ffn (A = W_e, the e-th
  // ffn x hidden block of w), columns offsets[e] .. + counts[e] - 1 of x_sorted and y_sorted.
  kernels::reference_gemm_tn_grouped(w.w.data(), x_sorted.data(), y_sorted.data(), w.ffn, w.hidden,
                                     std::span<const int32_t>(w.plan.offsets).first(w.experts),
                                     std::span<const int32_t>(w.plan.counts), stream);
  reference_combine<<<unsigned((w.tokens * w.ffn + 255) / 256), 256, 0, stream>>>(
      y_sorted.data(), position.data(), w.weight.data(), w.tokens, int(w.top_k), w.ffn, w.y.data());
  BENCH_CHECK_LAUNCH();
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));  // the scratch buffers go out of scope
}

BENCH_EXAMPLE(ch15, moe_dispatch, Dispatch)
    .string_axis("routing", {"uniform", "skewed"})
    .stateful<HostLoop>(bench::Role::baseline, "host_loop",
                        {.blocks_host = true, .host_bound = true})
    .stateful<GroupedWgmma<Permute::three_kernels, RowsFrom::permuted_copy>>(bench::Role::step,
                                                                             "grouped_wgmma",
                                                                             {.arch_specific = 90})
    .stateful<GroupedWgmma<Permute::three_kernels, RowsFrom::cp_async_gather>>(
        bench::Role::step, "grouped_gather", {.arch_specific = 90})
    .stateful<GroupedWgmma<Permute::one_cluster, RowsFrom::cp_async_gather>>(bench::Role::step,
                                                                             "cluster_permute",
                                                                             {.arch_specific = 90})
    .stateful<GroupedWgmma<Permute::one_cluster, RowsFrom::cp_async_gather, CombineIn::own_kernel,
                           StoreBy::tma>>(bench::Role::step, "tma_store", {.arch_specific = 90})
    .stateful<GroupedWgmma<Permute::one_cluster, RowsFrom::cp_async_gather_held,
                           CombineIn::own_kernel, StoreBy::tma>>(bench::Role::step, "index_once",
                                                                 {.arch_specific = 90})
    .stateful<GroupedWgmma<Permute::in_gemm, RowsFrom::cp_async_gather_held, CombineIn::own_kernel,
                           StoreBy::tma>>(bench::Role::optimized, "fused_permute",
                                          {.arch_specific = 90})
    // grouped_wgmma with tma_store's epilogue: the GEMM built as CUTLASS's in torch._grouped_mm
    // (TMA-fed rows, TMA stores; README), its permutation still the row copy.
    .stateful<GroupedWgmma<Permute::three_kernels, RowsFrom::permuted_copy, CombineIn::own_kernel,
                           StoreBy::tma>>(bench::Role::step, "grouped_wgmma_tma_store",
                                          {.arch_specific = 90})
    // Measured several times slower than cluster_permute (its GEMM: one TMA copy per row, issued
    // in turn; README): a step, kept for that lesson.
    .stateful<GroupedWgmma<Permute::one_cluster, RowsFrom::tma_row_gather>>(bench::Role::step,
                                                                            "row_tma_gather",
                                                                            {.arch_specific = 90})
    // The combine in the GEMM's epilogue (2d): measured slower than cluster_permute (its
    // reductions cost the GEMM more than the combine kernel takes; README): a step.
    .stateful<
        GroupedWgmma<Permute::one_cluster, RowsFrom::cp_async_gather, CombineIn::gemm_epilogue>>(
        bench::Role::step, "epilogue_combine", {.arch_specific = 90})
    .stateful<CublasGrouped>(bench::Role::vendor, "cublas_grouped", {.blocks_host = true})
    .requires_that(requirements)
    .reference(reference)
    .device_reference(device_reference);

}  // namespace

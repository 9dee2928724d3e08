// kernels/reference_gemm.cuh: a simple, trusted GEMM for re-checking fast ones at their timing
// size (an example's .device_reference), where a CPU reference would take minutes, and the
// CPU double reference for the verification size.
//   D (m x n, column-major) = A (m x k, row-major) x B (k x n, column-major): the "TN" layout,
//   both operands k-contiguous. Inputs of any type convertible to float; FP32 products and sums,
//   each output summed over k in order. CUDA cores, no tensor cores: plainly right, and fast
//   enough that a GEMM case's device checks fit their budget (docs/validity.md, row 2).
//
// The numbers, in every form below: output (i, j) is one FP32 FMA chain
//   acc = 0; for p = 0, 1, ..., ceil(k / 16) * 16 - 1: acc = fmaf(a(i, p), b(p, j), acc)
// with a and b converted to float (exactly) and zero past k, then Out(acc). The padding to a
// multiple of 16 is part of it: a zero step turns an underflowed -0 into +0. Any tiling that
// keeps each chain gives the same bits (tests/gpu/reference_gemm_test.cu holds the forms to it).
//
// Two forms, chosen by reference_gemm_tn below from the problem's size:
//  - 64 x 64 (small problems): a CTA of 256 threads computes a 64 x 64 block of D, a thread
//    4 x 4 of it, over k-slices of 16 staged in shared memory k-major. It spends about as many
//    instructions staging a slice (an index, a division and a bounds check per element) as
//    multiplying it, and FP32 GEMM is issue-bound: one instruction a cycle per scheduler, and
//    an FMA is one.
//  - 128 x 128 (the rest): the classic SGEMM shape. 256 threads, 8 x 8 outputs a thread (rows
//    4 tx .. 4 tx + 3 and 64 + the same, columns likewise from ty), k-slices of 16 in shared
//    memory k-major, double-buffered: the next slice is loaded into registers (raw input type,
//    one row pointer per operand, 16-byte loads where aligned) while the current one is
//    multiplied, then converted and stored in the other buffer, one barrier a slice. Per k step a
//    thread issues 64 FMAs and 4 16-byte shared loads (a warp spans 8 x 4 threads: 8 distinct
//    A float4s and 4 distinct B float4s, one wavefront each, no bank conflict); per slice of 16
//    steps about 50 more instructions (loads, conversions, 16 staging stores, each warp's 32 rows
//    on 32 banks). So about 90% of issue slots are FMAs, against about half for the 64 x 64 form.
//    Estimate: 2 to 2.5 times the 64 x 64 form's rate (40-50 TFLOP/s on an H100 of ~60 FP32
//    TFLOP/s at its loaded clock), not more: two CTAs an SM (128 registers a thread) leave four
//    warps a scheduler to hide the shared loads' latency. Measured: the DISABLED_ printout in
//    tests/gpu/reference_gemm_test.cu.
//    Registers and spills (sm_90a, -Xptxas=--warn-on-spills): see the kernel's comment.
//
// A grouped form, reference_gemm_tn_grouped below: G products that share m and k (a mixture of
// experts' per-expert GEMMs, ch15/moe_dispatch's device reference), group g's A the g-th m x k
// block of one array and its B and D columns a range of one B and one D. Called one product at a
// time, each of ch15's 128 experts (768 x 447-564 x 2048 with uniform routing) has 24-30 tiles of
// 128 x 128, under the SM count, so it runs as 84-108 CTAs of the 64 x 64 form, still fewer than
// the SMs, and the 128 launches run one after another (docs/validity.md, row 2). The grouped
// form is ONE launch of the same kernels over every group's tiles (a 1D grid; a CTA finds its
// group by a binary search over a prefix of the groups' tile counts), with the tile form chosen
// as for one product from the total tile count: at ch15's shape 3,426 (uniform routing) or 3,612
// (skewed) CTAs of the 128 x 128 form. The kernels take the tile lookup as a template parameter
// (OneProduct or Groups) and are otherwise the same code, so every output is the same FMA chain,
// bit for bit, as the one-product call on that group (tests/gpu/reference_gemm_test.cu holds it
// to that). With OneProduct the kernels' PTX is what it was before the lookup existed (CUDA 13.0,
// sm_90a: the same instructions, only the names differ). ptxas -v (sm_90a,
// -Xptxas=--warn-on-spills) for Groups, BF16 and FP8 inputs: the 128 x 128 form 127-128
// registers as with OneProduct, the 64 x 64 form 79-80 against OneProduct's 40 (3 CTAs an SM
// instead of 8; it runs only below one 128 x 128 tile an SM, where that costs at most a second
// short wave); no spills.
#pragma once

#include <bench/bench.hpp>
#include <bench/parallel.hpp>
#include <cstdint>
#include <kernels/occupancy.cuh>
#include <kernels/prefix_search.hpp>
#include <limits>
#include <span>
#include <stdexcept>
#include <vector>

namespace kernels {

namespace detail {
// ---- Which tile a CTA computes ----------------------------------------------------------------
// Both forms' kernels take, after the operands and sizes, a lookup from the CTA's block index to
// its tile and to the product the tile belongs to (offsets from the launch's a, b and d, and that
// product's column count). Nothing else differs between a plain and a grouped launch.
struct RefTileAt {
  unsigned tile_i, tile_j;               // D's rows tile_i x tile .., columns tile_j x tile ..
  int n;                                 // the product's columns
  int64_t a_offset, b_offset, d_offset;  // elements from the launch's a, b and d to the product's
};

// One product on a 2D grid: tile (blockIdx.x, blockIdx.y).
struct OneProduct {
  __device__ __forceinline__ RefTileAt locate(int /*m*/, int n, int /*k*/, int /*tile*/) const {
    return {blockIdx.x, blockIdx.y, n, 0, 0, 0};
  }
};

// Groups of products on a 1D grid. Group g: D_g (m x n_g) = A_g (m x k) x B_g (k x n_g), with
// A_g = a + g m k, B_g and D_g columns first_column[g] .. first_column[g] + columns[g] - 1 of b
// (k values each, as stored) and of d (m values each), n_g = columns[g]. Its tiles are the blocks
// tile_prefix[g] .. tile_prefix[g + 1] - 1, m's tiles fastest (a plain launch's grid order). A
// group with no columns has no tiles (tile_prefix[g] == tile_prefix[g + 1]) and is never found.
struct Groups {
  const int32_t* first_column;
  const int32_t* columns;
  const int32_t* tile_prefix;  // groups + 1 entries, tile_prefix[0] = 0
  int groups;
  __device__ __forceinline__ RefTileAt locate(int m, int /*n*/, int k, int tile) const {
    const int block = int(blockIdx.x);
    const int g = group_of_item(tile_prefix, groups, block);
    const int m_tiles = (m + tile - 1) / tile, t = block - tile_prefix[g];
    const int64_t first = first_column[g];
    const unsigned tile_i = t % m_tiles, tile_j = t / m_tiles;
    return {tile_i, tile_j, columns[g], int64_t{g} * m * k, first * k, first * m};
  }
};

// ---- The 64 x 64 form: small problems, and the 128 x 128 form's oracle in the tests ----------
// A CTA computes a kRefTile x kRefTile block of D, a thread kRefMicro x kRefMicro of it, over
// k-slices of kRefSlice staged in shared memory k-major (each operand element read once per CTA,
// and each thread reads its kRefMicro values of A and of B per k step as one 16-byte load).
constexpr int kRefTile = 64, kRefSlice = 16, kRefMicro = 4;
constexpr int kRefThreads = (kRefTile / kRefMicro) * (kRefTile / kRefMicro);
constexpr int kRefPad = 4;  // keeps each k row 16-byte aligned; spreads the staging stores

template <class In>
__device__ void stage_slice(const In* __restrict__ x, int64_t first_row, int64_t rows, int64_t k,
                            int64_t p0, float (&s)[kRefSlice][kRefTile + kRefPad]) {
  // Consecutive threads read consecutive p of a row: coalesced, as both operands are k-contiguous.
  for (int e = threadIdx.x; e < kRefTile * kRefSlice; e += kRefThreads) {
    const int row = e / kRefSlice, p = e % kRefSlice;
    const int64_t r = first_row + row, q = p0 + p;
    s[p][row] = r < rows && q < k ? static_cast<float>(x[r * k + q]) : 0.0f;
  }
}

template <class In, class Out, class Tiles>
__global__ void __launch_bounds__(kRefThreads)
    reference_gemm_tn_64(const In* __restrict__ a, const In* __restrict__ b, Out* __restrict__ d,
                         int m, int n, int k, Tiles tiles) {
  __shared__ __align__(16) float as[kRefSlice][kRefTile + kRefPad],
      bs[kRefSlice][kRefTile + kRefPad];
  const RefTileAt at = tiles.locate(m, n, k, kRefTile);
  a += at.a_offset, b += at.b_offset, d += at.d_offset, n = at.n;
  const int ti = threadIdx.x % (kRefTile / kRefMicro), tj = threadIdx.x / (kRefTile / kRefMicro);
  const int64_t i0 = int64_t{at.tile_i} * kRefTile, j0 = int64_t{at.tile_j} * kRefTile;
  float acc[kRefMicro][kRefMicro] = {};
  for (int64_t p0 = 0; p0 < k; p0 += kRefSlice) {
    stage_slice(a, i0, m, k, p0, as);
    stage_slice(b, j0, n, k, p0, bs);
    __syncthreads();
#pragma unroll 8  // not 16: fully unrolled, ptxas (CUDA 13.0) spills
    for (int q = 0; q < kRefSlice; ++q) {
      const float4 av = *reinterpret_cast<const float4*>(&as[q][ti * kRefMicro]);
      const float4 bv = *reinterpret_cast<const float4*>(&bs[q][tj * kRefMicro]);
      const float ar[kRefMicro] = {av.x, av.y, av.z, av.w},
                  br[kRefMicro] = {bv.x, bv.y, bv.z, bv.w};
#pragma unroll
      for (int r = 0; r < kRefMicro; ++r)
#pragma unroll
        for (int c = 0; c < kRefMicro; ++c) acc[r][c] = fmaf(ar[r], br[c], acc[r][c]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int c = 0; c < kRefMicro; ++c) {
    const int64_t j = j0 + tj * kRefMicro + c;
#pragma unroll
    for (int r = 0; r < kRefMicro; ++r) {
      const int64_t i = i0 + ti * kRefMicro + r;
      if (i < m && j < n) d[j * m + i] = Out(acc[r][c]);
    }
  }
}

template <class In, class Out>
void launch_reference_gemm_tn_64(const In* a, const In* b, Out* d, int64_t m, int64_t n, int64_t k,
                                 cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((m + kRefTile - 1) / kRefTile),
                  static_cast<unsigned>((n + kRefTile - 1) / kRefTile));
  reference_gemm_tn_64<<<grid, kRefThreads, 0, stream>>>(a, b, d, int(m), int(n), int(k),
                                                         OneProduct{});
  BENCH_CHECK_LAUNCH();
}

// ---- The 128 x 128 form --------------------------------------------------------------------
constexpr int kBigTile = 128, kBigMicro = 8, kBigHalf = kBigTile / 2;
constexpr int kBigThreads = (kBigTile / kBigMicro) * (kBigTile / kBigMicro);  // 256
constexpr int kChunk = kRefSlice / 2;  // k values a thread stages per operand row and slice
static_assert(kBigThreads == 2 * kBigTile,
              "a thread stages half a slice of one row of each operand");

// kChunk consecutive k values of one row, in the input type: what a thread holds in registers
// while the current slice is multiplied.
template <class In>
struct alignas(16) RefChunk {
  In v[kChunk];
};

// Loads x[0 .. kChunk - 1] of a row into c, zeros past `left` values or where the row is outside
// the matrix. kVector: x is aligned to min(16, the chunk's bytes), so a whole chunk is one or two
// 16-byte loads (an 8-byte one for 1-byte inputs); a chunk cut by k's end goes element by element.
template <bool kVector, class In>
__device__ __forceinline__ void load_chunk(RefChunk<In>& c, const In* __restrict__ x, bool row_ok,
                                           int left) {
  if constexpr (kVector) {
    if (row_ok && left >= kChunk) {
      if constexpr (sizeof(In) == 1) {
        *reinterpret_cast<uint2*>(c.v) = *reinterpret_cast<const uint2*>(x);
      } else {
#pragma unroll
        for (int i = 0; i < int(sizeof(In)) * kChunk / 16; ++i)
          reinterpret_cast<uint4*>(c.v)[i] = reinterpret_cast<const uint4*>(x)[i];
      }
      return;
    }
  }
#pragma unroll
  for (int j = 0; j < kChunk; ++j) c.v[j] = row_ok && j < left ? x[j] : In{};
}

// The chunk, as floats, into k rows `first .. first + kChunk - 1` of a slice, at column `row`.
// A warp's 32 threads hold 32 consecutive rows of one chunk position: 32 banks, no conflict.
template <class In>
__device__ __forceinline__ void store_chunk(float (&s)[kRefSlice][kBigTile], const RefChunk<In>& c,
                                            int first, int row) {
#pragma unroll
  for (int j = 0; j < kChunk; ++j) s[first + j][row] = static_cast<float>(c.v[j]);
}

// Registers: __launch_bounds__(256, 2) caps them at 128 so that two CTAs share an SM. ptxas -v
// (CUDA 13.0, sm_90a, -Xptxas=--warn-on-spills) gives 127-128 for FP32, BF16, FP16 and FP8
// inputs, 0 bytes of spills; uncapped it would take 124-143 (FP32 inputs hold 16 registers of
// the next slice, FP8 ones 4).
template <bool kVector, class In, class Out, class Tiles>
__global__ void __launch_bounds__(kBigThreads, 2)
    reference_gemm_tn_128(const In* __restrict__ a, const In* __restrict__ b, Out* __restrict__ d,
                          int m, int n, int k, Tiles tiles) {
  __shared__ __align__(16) float as[2][kRefSlice][kBigTile], bs[2][kRefSlice][kBigTile];
  const RefTileAt at = tiles.locate(m, n, k, kBigTile);
  a += at.a_offset, b += at.b_offset, d += at.d_offset, n = at.n;
  // Staging: thread t loads k values (t / 128) * 8 .. + 7 of each slice for row t % 128 of A's
  // tile and of B's.
  const int row = threadIdx.x % kBigTile, first = threadIdx.x / kBigTile * kChunk;
  const int64_t i0 = int64_t{at.tile_i} * kBigTile, j0 = int64_t{at.tile_j} * kBigTile;
  const bool a_ok = i0 + row < m, b_ok = j0 + row < n;
  const In* a_row = a + (a_ok ? (i0 + row) * k : 0) + first;
  const In* b_row = b + (b_ok ? (j0 + row) * k : 0) + first;
  int left = k - first;  // k values from a_row, b_row on
  // Computing: a warp spans 8 row groups (tx) by 4 column groups (ty).
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int tx = warp % 2 * 8 + lane % 8, ty = warp / 2 * 4 + lane / 8;

  RefChunk<In> a_next, b_next;
  load_chunk<kVector>(a_next, a_row, a_ok, left);
  load_chunk<kVector>(b_next, b_row, b_ok, left);
  store_chunk(as[0], a_next, first, row);
  store_chunk(bs[0], b_next, first, row);
  __syncthreads();
  float acc[kBigMicro][kBigMicro] = {};
  const int slices = (k + kRefSlice - 1) / kRefSlice;
  for (int slice = 0; slice < slices; ++slice) {
    const int cur = slice & 1;
    const bool more = slice + 1 < slices;
    if (more) {  // the next slice's loads are in flight while this one is multiplied
      a_row += kRefSlice;
      b_row += kRefSlice;
      left -= kRefSlice;
      load_chunk<kVector>(a_next, a_row, a_ok, left);
      load_chunk<kVector>(b_next, b_row, b_ok, left);
    }
#pragma unroll
    for (int q = 0; q < kRefSlice; ++q) {
      const float4 a_lo = *reinterpret_cast<const float4*>(&as[cur][q][tx * 4]);
      const float4 a_hi = *reinterpret_cast<const float4*>(&as[cur][q][kBigHalf + tx * 4]);
      const float4 b_lo = *reinterpret_cast<const float4*>(&bs[cur][q][ty * 4]);
      const float4 b_hi = *reinterpret_cast<const float4*>(&bs[cur][q][kBigHalf + ty * 4]);
      const float ar[kBigMicro] = {a_lo.x, a_lo.y, a_lo.z, a_lo.w, a_hi.x, a_hi.y, a_hi.z, a_hi.w};
      const float br[kBigMicro] = {b_lo.x, b_lo.y, b_lo.z, b_lo.w, b_hi.x, b_hi.y, b_hi.z, b_hi.w};
#pragma unroll
      for (int r = 0; r < kBigMicro; ++r)
#pragma unroll
        for (int c = 0; c < kBigMicro; ++c) acc[r][c] = fmaf(ar[r], br[c], acc[r][c]);
    }
    if (more) {  // the other buffer: its last readers passed the previous slice's barrier
      store_chunk(as[cur ^ 1], a_next, first, row);
      store_chunk(bs[cur ^ 1], b_next, first, row);
    }
    __syncthreads();
  }
#pragma unroll
  for (int c = 0; c < kBigMicro; ++c) {
    const int64_t j = j0 + c / 4 * kBigHalf + ty * 4 + c % 4;
#pragma unroll
    for (int r = 0; r < kBigMicro; ++r) {
      const int64_t i = i0 + r / 4 * kBigHalf + tx * 4 + r % 4;
      if (i < m && j < n) d[j * m + i] = Out(acc[r][c]);
    }
  }
}

// Whether the 128 x 128 form may read whole chunks (16-byte loads, 8-byte for 1-byte inputs): the
// bases aligned to a unit and rows of whole units. A grouped launch's products start at whole
// rows of a and b, so the same test holds for all of them.
template <class In>
bool reference_gemm_vector_loads(const In* a, const In* b, int64_t k) {
  static_assert(sizeof(In) == 1 || sizeof(In) == 2 || sizeof(In) == 4 || sizeof(In) == 8);
  constexpr int64_t unit = sizeof(In) * kChunk < 16 ? sizeof(In) * kChunk : 16;
  return reinterpret_cast<uintptr_t>(a) % unit == 0 && reinterpret_cast<uintptr_t>(b) % unit == 0 &&
         k * int64_t{sizeof(In)} % unit == 0;
}

template <class In, class Out, class Tiles>
void launch_reference_gemm_tn_128_on(dim3 grid, const In* a, const In* b, Out* d, int64_t m,
                                     int64_t n, int64_t k, Tiles tiles, cudaStream_t stream) {
  if (reference_gemm_vector_loads(a, b, k))
    reference_gemm_tn_128<true>
        <<<grid, kBigThreads, 0, stream>>>(a, b, d, int(m), int(n), int(k), tiles);
  else
    reference_gemm_tn_128<false>
        <<<grid, kBigThreads, 0, stream>>>(a, b, d, int(m), int(n), int(k), tiles);
  BENCH_CHECK_LAUNCH();
}

template <class In, class Out>
void launch_reference_gemm_tn_128(const In* a, const In* b, Out* d, int64_t m, int64_t n, int64_t k,
                                  cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((m + kBigTile - 1) / kBigTile),
                  static_cast<unsigned>((n + kBigTile - 1) / kBigTile));
  launch_reference_gemm_tn_128_on(grid, a, b, d, m, n, k, OneProduct{}, stream);
}

// The 128 x 128 form once its tiles reach every SM; below that the 64 x 64 form's four times as
// many CTAs keep more SMs busy.
inline bool reference_gemm_fills_sms(int64_t big_tiles) { return big_tiles >= kernels::sm_count(); }
inline int64_t reference_gemm_tiles(int64_t m, int64_t n, int64_t tile) {
  return ((m + tile - 1) / tile) * ((n + tile - 1) / tile);
}
inline bool reference_gemm_big_tiles(int64_t m, int64_t n) {
  return reference_gemm_fills_sms(reference_gemm_tiles(m, n, kBigTile));
}

// ---- The grouped launch --------------------------------------------------------------------
// The group table (first columns, column counts, and the prefix of the groups' tile counts for
// the form's tile size) made on the host and copied on the stream, then one launch over every
// group's tiles. Returns once the product is done: the table's buffer is freed on return.
template <class In, class Out>
void launch_reference_gemm_tn_grouped(const In* a, const In* b, Out* d, int64_t m, int64_t k,
                                      std::span<const int32_t> first_column,
                                      std::span<const int32_t> columns, bool big_tiles,
                                      cudaStream_t stream) {
  if (first_column.size() != columns.size())
    throw std::invalid_argument("reference_gemm_tn_grouped: a first column for every group");
  const int64_t groups = int64_t(columns.size()), tile = big_tiles ? kBigTile : kRefTile;
  std::vector<int32_t> table(first_column.begin(), first_column.end());  // then columns, prefix
  table.insert(table.end(), columns.begin(), columns.end());
  table.push_back(0);
  for (int64_t g = 0; g < groups; ++g) {
    if (columns[g] < 0 || first_column[g] < 0)
      throw std::invalid_argument("reference_gemm_tn_grouped: a negative column count or start");
    const int64_t tiles = table.back() + reference_gemm_tiles(m, columns[g], tile);
    if (tiles > std::numeric_limits<int32_t>::max())
      throw std::invalid_argument("reference_gemm_tn_grouped: more than 2^31 - 1 tiles");
    table.push_back(int32_t(tiles));
  }
  const int64_t total_tiles = table.back();
  if (total_tiles == 0) return;
  const bench::DeviceBuffer<int32_t> device_table(int64_t(table.size()));
  BENCH_CUDA_CHECK(cudaMemcpyAsync(device_table.data(), table.data(), device_table.bytes(),
                                   cudaMemcpyHostToDevice, stream));
  const int32_t* t = device_table.data();
  const Groups lookup{t, t + groups, t + 2 * groups, int(groups)};
  const dim3 grid(static_cast<unsigned>(total_tiles));
  if (big_tiles) {
    launch_reference_gemm_tn_128_on(grid, a, b, d, m, /*n: the group's*/ 0, k, lookup, stream);
  } else {
    reference_gemm_tn_64<<<grid, kRefThreads, 0, stream>>>(a, b, d, int(m), 0, int(k), lookup);
    BENCH_CHECK_LAUNCH();
  }
  BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));  // before device_table is freed
}
}  // namespace detail

template <class In, class Out>
void reference_gemm_tn(const In* a, const In* b, Out* d, int64_t m, int64_t n, int64_t k,
                       cudaStream_t stream) {
  if (detail::reference_gemm_big_tiles(m, n))
    detail::launch_reference_gemm_tn_128(a, b, d, m, n, k, stream);
  else
    detail::launch_reference_gemm_tn_64(a, b, d, m, n, k, stream);
}

// Groups of products that share m and k, in one launch (header comment). Group g, for g < G:
//   D_g (m x n_g, column-major) = A_g (m x k, row-major) x B_g (k x n_g, column-major), with
//   A_g = a + g m k, B_g = b + first_column[g] k, D_g = d + first_column[g] m, n_g = columns[g]
// (B_g and D_g are columns first_column[g] .. + n_g - 1 of one B and one D). Groups may be empty
// and need not be contiguous; D's columns in no group are not written. Each output has exactly
// the bits reference_gemm_tn(A_g, B_g, D_g, m, n_g, k) gives it. first_column and columns are host
// arrays of G entries each; the call blocks the host until the product is done.
template <class In, class Out>
void reference_gemm_tn_grouped(const In* a, const In* b, Out* d, int64_t m, int64_t k,
                               std::span<const int32_t> first_column,
                               std::span<const int32_t> columns, cudaStream_t stream) {
  int64_t big_tiles = 0;
  for (int32_t n : columns) big_tiles += detail::reference_gemm_tiles(m, n, detail::kBigTile);
  detail::launch_reference_gemm_tn_grouped(a, b, d, m, k, first_column, columns,
                                           detail::reference_gemm_fills_sms(big_tiles), stream);
}

// The same product on the CPU in double, for an example's .reference at its verification size:
//   kernels::reference_gemm_tn(h.input<float>("a"), h.input<float>("b"), h.expected("d"), m, n, k);
// The output's columns are split over the host's cores (bench::parallel_chunks), each element
// still summed by one thread in k order, so the bits do not depend on the core count; below
// ~10^8 multiply-adds one thread does it all. On one core this product, twice a variant, was most
// of the verification time of the large GEMM examples (ch10, ch19, calibrate's FP8 ceilings).
template <class In>
void reference_gemm_tn(std::span<const In> a, std::span<const In> b, std::span<double> d, int64_t m,
                       int64_t n, int64_t k) {
  const double work = double(m) * double(n) * double(k);
  bench::parallel_chunks(std::size_t(n), work < 1e8 ? 1 : bench::parallel_parts(),
                         [&](std::size_t, std::size_t first, std::size_t last) {
                           std::vector<double> column(static_cast<std::size_t>(k));
                           for (int64_t j = int64_t(first); j < int64_t(last); ++j) {
                             for (int64_t p = 0; p < k; ++p)
                               column[p] = static_cast<float>(b[j * k + p]);
                             for (int64_t i = 0; i < m; ++i) {
                               double sum = 0;
                               for (int64_t p = 0; p < k; ++p)
                                 sum += static_cast<float>(a[i * k + p]) * column[p];
                               d[j * m + i] = sum;
                             }
                           }
                         });
}

}  // namespace kernels

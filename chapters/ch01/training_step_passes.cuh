// ch01/training_step: the BF16 sides' own kernels, memory-bound passes around the cuBLASLt GEMMs:
// the FP32 -> BF16 casts, backward's loss and dGELU passes (a BF16 gradient and its column sums in
// one pass), the plain-forward rung's GELU, and the bias SGD that writes the next step's BF16
// copies.
#pragma once

#include <kernels/bf16_pack.cuh>
#include <kernels/group_reduce.cuh>
#include <kernels/vector_access.cuh>

#include "training_step_fp32.cuh"
#include "training_step_model.cuh"

namespace {

// ---- The optimized step: BF16 operands, cuBLASLt epilogues, FP32 master weights ---------------
// FP32 -> BF16, eight values: two 16-byte streaming loads, one 16-byte store. Every array cast
// here (the batch, the weights, the biases) has a multiple of 8 elements, as the width is.
__device__ inline void to_bf16x8(const float* in, bf16* out, int64_t vector) {
  const float4* from = reinterpret_cast<const float4*>(in) + 2 * vector;
  const float4 lo = kernels::load_stream(from), hi = kernels::load_stream(from + 1);
  const float v[kernels::kBf16PerVector] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  kernels::store_stream(reinterpret_cast<uint4*>(out) + vector, kernels::pack_bf16x8(v));
}
__global__ void to_bf16(const float* in, bf16* out, int64_t n) {
  for (int64_t i = first_index(); i < n / kernels::kBf16PerVector; i += grid_stride())
    to_bf16x8(in, out, i);
}
// Untimed: values in (-scale, scale) from a hash of the index, for timing cuBLASLt's candidates
// on data like the step's (the tensor cores' power, hence the ranking, depends on the data).
__global__ void fill_for_tuning(bf16* p, int64_t n, float scale) {
  for (int64_t i = first_index(); i < n; i += grid_stride()) {
    const uint32_t h = static_cast<uint32_t>(i * 2654435761u) ^ static_cast<uint32_t>(i >> 13);
    p[i] = __float2bfloat16(scale * (float(h >> 8) * 0x1p-23f - 1.0f));
  }
}

// The BF16 copies of the weights and biases that the previous step's SGD kernel would have left
// (untimed: each timed step writes the next step's copies itself, see bias_sgd_and_bf16_copies).
void Mlp::inputs_filled(cudaStream_t stream) {
  to_bf16<<<kStreamBlocks, kBlock, 0, stream>>>(w.data(), w_bf16.data(), w.size());
  BENCH_CHECK_LAUNCH();
  to_bf16<<<kStreamBlocks, kBlock, 0, stream>>>(b.data(), b_bf16.data(), b.size());
  BENCH_CHECK_LAUNCH();
}

// ---- Backward's elementwise passes: a BF16 gradient and its column sums, in one pass ----------
// Two kernels below (the loss's, for the top layer, and dGELU's, for the layers under it) each
// write a gradient dz (batch x width, BF16, row-major: the next GEMMs' operand) and, for the
// bias gradient, the FP32 sums of dz's columns over one of kChunks slices of the rows;
// finish_columns then adds the slices in a fixed order (the same bits every run: no atomics).
// A block of kBlock threads covers a strip of kStripColumns columns and one row slice: its 32
// lanes side by side take 8 columns each, so a warp reads 512 contiguous bytes of a BF16 row in
// 16-byte loads, and its 8 warps take every 8th row of the slice. Each thread loads several rows
// before it computes, so enough bytes are in flight to reach the copy ceiling (the kernels are
// memory-bound: a few FLOPs per byte); __launch_bounds__ holds them to 64 registers, 4 blocks
// (1024 threads) an SM, and the rows in flight are what fits that without spilling.
constexpr int kStripLanes = 32;                                       // threads across a strip
constexpr int kRowLanes = kBlock / kStripLanes;                       // warps down the rows
constexpr int kStripColumns = kStripLanes * kernels::kBf16PerVector;  // 256 columns
constexpr int kRowsInFlight = 4;      // dGELU: 32 bytes a row (dh, z), 128 bytes in flight
constexpr int kLossRowsInFlight = 2;  // loss: 48 bytes a row (z, t), 96 in flight; 4 would
                                      // spill at 64 registers (4 blocks of 256 an SM)

// Where a thread of such a block works: its 8-column vector and its rows.
struct StripThread {
  int64_t vectors_per_row, vector, first_row, end_row;
  __device__ StripThread(int64_t rows, int64_t width)
      : vectors_per_row(width / kernels::kBf16PerVector),
        vector(blockIdx.x * int64_t{kStripLanes} + threadIdx.x % kStripLanes) {
    const int64_t per = (rows + kChunks - 1) / kChunks;
    first_row = blockIdx.y * per + threadIdx.x / kStripLanes;
    end_row = min(rows, (blockIdx.y + int64_t{1}) * per);
    if (vector >= vectors_per_row) end_row = first_row;  // past the last column: no rows
  }
  // Which 8-element group of the matrix this thread's columns are in row `row`: the uint4 index
  // in a BF16 matrix; in an FP32 one the group is two float4s, from index 2 at(row).
  __device__ int64_t at(int64_t row) const { return row * vectors_per_row + vector; }
};

// The block's column sums of its strip (every thread holds 8 columns' sums over its rows) into
// partials[slice][column]. Every thread of the block must call it (it has a barrier).
__device__ void write_strip_partials(const float (&sum)[kernels::kBf16PerVector], float* partials,
                                     int64_t width) {
  __shared__ float by_lane[kRowLanes][kStripColumns];
  const int lane = threadIdx.x % kStripLanes, row_lane = threadIdx.x / kStripLanes;
  for (int k = 0; k < kernels::kBf16PerVector; ++k)
    by_lane[row_lane][lane * kernels::kBf16PerVector + k] = sum[k];
  __syncthreads();
  const int c = threadIdx.x;  // kBlock == kStripColumns: one column a thread
  float total = 0;
  for (int r = 0; r < kRowLanes; ++r) total += by_lane[r][c];
  const int64_t col = blockIdx.x * int64_t{kStripColumns} + c;
  if (col < width) partials[blockIdx.y * width + col] = total;
}
static_assert(kBlock == kStripColumns, "write_strip_partials sums one column per thread");

// Backward's start, from the top layer's pre-activation z alone (its forward GEMM stores z with
// the bias epilogue, and no activation: a = GELU(z) is needed only here, so it is recomputed in
// FP32 instead of written and read back): per element a - t, its square for the loss, and
// dL/dz = (a - t) / (batch width) * GELU'(z) in BF16; per block the loss's partial sum and the
// column partials of dL/dz (the top bias gradient). 8 bytes an element: z 2, t 4, dz 2.
__global__ void __launch_bounds__(kBlock, 4)
    loss_top_grad(const bf16* z, const float* t, bf16* dz, float* partials, float* loss_partials,
                  int64_t rows, int64_t width, float scale) {
  constexpr int kPer = kernels::kBf16PerVector;
  const StripThread me(rows, width);
  const auto* z_vectors = reinterpret_cast<const uint4*>(z);
  const auto* t_halves = reinterpret_cast<const float4*>(t);  // two per 8 elements
  auto* dz_vectors = reinterpret_cast<uint4*>(dz);
  float sum[kPer] = {}, squares = 0;
  for (int64_t row = me.first_row; row < me.end_row; row += kRowLanes * kLossRowsInFlight) {
    uint4 zs[kLossRowsInFlight];
    float4 ts[kLossRowsInFlight][2];
#pragma unroll
    for (int j = 0; j < kLossRowsInFlight; ++j) {
      const int64_t r = row + j * kRowLanes;
      if (r < me.end_row) {
        zs[j] = kernels::load_stream(z_vectors + me.at(r));
        ts[j][0] = kernels::load_stream(t_halves + 2 * me.at(r));
        ts[j][1] = kernels::load_stream(t_halves + 2 * me.at(r) + 1);
      }
    }
#pragma unroll
    for (int j = 0; j < kLossRowsInFlight; ++j) {
      const int64_t r = row + j * kRowLanes;
      if (r >= me.end_row) break;
      float v[kPer];
      kernels::unpack_bf16x8(zs[j], v);
      const float target[kPer] = {ts[j][0].x, ts[j][0].y, ts[j][0].z, ts[j][0].w,
                                  ts[j][1].x, ts[j][1].y, ts[j][1].z, ts[j][1].w};
      for (int k = 0; k < kPer; ++k) {
        const float th = gelu_tanh_f(v[k]), diff = gelu_f(v[k], th) - target[k];
        squares = fmaf(diff, diff, squares);
        v[k] = diff * scale * gelu_grad_f(v[k], th);
      }
      const uint4 g = kernels::pack_bf16x8(v);
      kernels::store_stream(dz_vectors + me.at(r), g);
      kernels::unpack_bf16x8(g, v);  // the bias gradient sums what the GEMMs will read
      for (int k = 0; k < kPer; ++k) sum[k] += v[k];
    }
  }
  write_strip_partials(sum, partials, width);
  squares = kernels::group_reduce<kBlock>(squares, kernels::Sum{});
  if (threadIdx.x == 0) loss_partials[blockIdx.y * gridDim.x + blockIdx.x] = squares;
}

// What DGELU_BGRAD does in the input-gradient GEMM's epilogue, as one pass after a plain GEMM:
// dz = dh * GELU'(z) (dh: the plain GEMM's BF16 output, dL/da of the layer; z: the forward's
// pre-activation, the aux matrix) and the column partials of dz (the layer's bias gradient).
// dh and z read once, dz written once: 6 bytes an element. dh and dz are distinct buffers (the
// read-only load path must not see its own kernel's writes).
__global__ void __launch_bounds__(kBlock, 4)
    dgelu_bias_columns(const bf16* dh, const bf16* z, bf16* dz, float* partials, int64_t rows,
                       int64_t width) {
  constexpr int kPer = kernels::kBf16PerVector;
  const StripThread me(rows, width);
  const auto* dh_vectors = reinterpret_cast<const uint4*>(dh);
  const auto* z_vectors = reinterpret_cast<const uint4*>(z);
  auto* dz_vectors = reinterpret_cast<uint4*>(dz);
  float sum[kPer] = {};
  for (int64_t row = me.first_row; row < me.end_row; row += kRowLanes * kRowsInFlight) {
    uint4 dhs[kRowsInFlight], zs[kRowsInFlight];
#pragma unroll
    for (int j = 0; j < kRowsInFlight; ++j) {
      const int64_t r = row + j * kRowLanes;
      if (r < me.end_row) {
        dhs[j] = kernels::load_stream(dh_vectors + me.at(r));
        zs[j] = kernels::load_stream(z_vectors + me.at(r));
      }
    }
#pragma unroll
    for (int j = 0; j < kRowsInFlight; ++j) {
      const int64_t r = row + j * kRowLanes;
      if (r >= me.end_row) break;
      float g[kPer], pre[kPer];
      kernels::unpack_bf16x8(dhs[j], g);
      kernels::unpack_bf16x8(zs[j], pre);
      for (int k = 0; k < kPer; ++k) g[k] *= gelu_grad_f(pre[k]);
      const uint4 packed = kernels::pack_bf16x8(g);
      kernels::store_stream(dz_vectors + me.at(r), packed);
      kernels::unpack_bf16x8(packed, g);
      for (int k = 0; k < kPer; ++k) sum[k] += g[k];
    }
  }
  write_strip_partials(sum, partials, width);
}

// The launch shape of the two kernels above, and of finish_columns after them.
dim3 strip_grid(int64_t width) {
  return dim3(static_cast<unsigned>((width + kStripColumns - 1) / kStripColumns), kChunks);
}
unsigned column_blocks(int64_t width) {
  return static_cast<unsigned>((width + kBlock - 1) / kBlock);
}

// The plain-forward rung's activation, what GELU_AUX_BIAS does in the GEMM: a = GELU(z) from the
// BF16 pre-activation the GEMM (bias epilogue) stored. Eight values a thread: one 16-byte load,
// one 16-byte store (n is a multiple of 8: the width is). 4 bytes an element.
__global__ void gelu_bf16(const bf16* z, bf16* a, int64_t n) {
  constexpr int kPer = kernels::kBf16PerVector;
  for (int64_t i = first_index(); i < n / kPer; i += grid_stride()) {
    float v[kPer];
    kernels::unpack_bf16x8(kernels::load_stream(reinterpret_cast<const uint4*>(z) + i), v);
    for (float& e : v) e = gelu_f(e);
    kernels::store_stream(reinterpret_cast<uint4*>(a) + i, kernels::pack_bf16x8(v));
  }
}

// What is left of SGD once the weight-gradient GEMMs have updated the FP32 master weights in
// their epilogue (w_out = w - lr dW): every layer's bias update, b_out = b + db_scale db (db_scale
// = -lr, or 1 where the bias gradient already carries the GEMM's alpha = -lr), and the BF16
// copies of the new weights and biases that the next step's GEMMs and forward epilogues read, in
// one launch. Per weight it reads 4 bytes and writes 2 (the separate SGD pass it replaces read 8
// and wrote 6, and the GEMM wrote dW's 4 besides). Eight weights a thread: two 16-byte streaming
// loads, one 16-byte store (the width is a multiple of 8, so nw is a multiple of 64). db is BF16
// where cuBLASLt's DGELU_BGRAD writes it (D's type), FP32 where the file's kernels or BGRADB do.
template <class Grad>
__global__ void bias_sgd_and_bf16_copies(const float* w_out, bf16* w_next, int64_t nw,
                                         const float* b, const Grad* db, float db_scale,
                                         float* b_out, bf16* b_next, int64_t nb) {
  const int64_t vectors = nw / kernels::kBf16PerVector;
  for (int64_t i = first_index(); i < vectors + nb; i += grid_stride()) {
    if (i < vectors) {
      to_bf16x8(w_out, w_next, i);
    } else {
      const int64_t j = i - vectors;
      const float v = fmaf(db_scale, float(db[j]), b[j]);
      b_out[j] = v;
      b_next[j] = __float2bfloat16(v);
    }
  }
}

}  // namespace

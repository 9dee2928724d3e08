// ch16/paged_reference_gather.cuh: paged_attention's device reference copies K and V out of the
// page pools, through the block table, into a packed cache that kernels/reference_attention.cuh
// reads a sequence at a time. Part of the trusted reference, so plain: ONE launch for every
// sequence, each 16-byte piece of the packed cache copied on its own, its source found by the same
// index arithmetic as the CPU reference's copy loop (paged_attention.cu, reference()).
//
// Why a kernel: the reference used to copy each page with the driver (one cudaMemcpy2DAsync per
// page, sequence and tensor: a row of 16 positions per head), about 130,000 driver calls a check
// at batch 64 (README), so that only 2-3 of 20 timed samples could be checked within the
// harness's budget (docs/validity.md, row 2). tests/gpu/paged_reference_gather_test.cu
// holds this kernel's output to that copy loop's, bit for bit.
//
// Layouts (BF16, rows of kernels::kRefHeadDim = 128 values):
//   pools     [page][head][page_size][128]: position j of sequence s, head h is row j % page_size
//             of head h in page block_table[s * max_pages + j / page_size];
//   packed    [sequence][head][position][128], sequences back to back, no padding: sequence s's
//             rows start at row starts[s] x heads (starts: the positions of the sequences before
//             s), and its pair (s, h) is rows starts[s] x heads + h x lengths[s] + j, j <
//             lengths[s]: for each sequence the [head][position][128] block reference_attention
//             takes, at k + starts[s] x heads x 128.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <bench/bench.hpp>
#include <cstdint>
#include <kernels/reference_attention.cuh>
#include <stdexcept>

namespace ch16::paged {

constexpr int kReferenceGatherThreads = 256;
// Blocks per sequence at most: a grid-stride loop covers longer sequences (at batch 64, lengths to
// 32k, 64 pieces a thread for the longest).
constexpr int64_t kReferenceGatherBlocks = 1024;
constexpr int64_t kRowPieces = kernels::kRefHeadDim * sizeof(__nv_bfloat16) / 16;  // 16 a row

// Grid (blocks, sequences): blockIdx.y is the sequence; its threads stride over its pieces
// (head, position, 16-byte piece of the row), the piece fastest.
__global__ void __launch_bounds__(kReferenceGatherThreads)
    gather_pages_for_reference(const __nv_bfloat16* __restrict__ k_pages,
                               const __nv_bfloat16* __restrict__ v_pages,
                               const int* __restrict__ block_table, int max_pages,
                               const int* __restrict__ lengths, const int64_t* __restrict__ starts,
                               int heads, int page_size, __nv_bfloat16* __restrict__ k_packed,
                               __nv_bfloat16* __restrict__ v_packed) {
  const int64_t s = blockIdx.y, length = lengths[s];
  const int64_t pieces = heads * length * kRowPieces;  // the sequence's, in the packed cache
  const int64_t packed_first = starts[s] * heads * kRowPieces;
  const auto* k_from = reinterpret_cast<const uint4*>(k_pages);
  const auto* v_from = reinterpret_cast<const uint4*>(v_pages);
  auto* k_to = reinterpret_cast<uint4*>(k_packed) + packed_first;
  auto* v_to = reinterpret_cast<uint4*>(v_packed) + packed_first;
  for (int64_t e = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; e < pieces;
       e += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = e % kRowPieces, j = e / kRowPieces % length, head = e / kRowPieces / length;
    const int64_t page = block_table[s * max_pages + j / page_size];
    const int64_t from = ((page * heads + head) * page_size + j % page_size) * kRowPieces + c;
    k_to[e] = k_from[from];
    v_to[e] = v_from[from];
  }
}

// Every sequence's K and V into k_packed and v_packed, each sum(lengths) x heads x 128 BF16
// values. lengths, starts and block_table are device copies; max_length is the longest length
// (it sizes the grid). Pools and packed caches from cudaMalloc (16-byte aligned).
inline void launch_gather_pages_for_reference(const __nv_bfloat16* k_pages,
                                              const __nv_bfloat16* v_pages, const int* block_table,
                                              int max_pages, const int* lengths,
                                              const int64_t* starts, int64_t sequences,
                                              int64_t max_length, int heads, int page_size,
                                              __nv_bfloat16* k_packed, __nv_bfloat16* v_packed,
                                              cudaStream_t stream) {
  if (sequences == 0 || max_length == 0) return;
  if (sequences > 65535)
    throw std::invalid_argument("gather_pages_for_reference: > 65535 sequences");
  const int64_t threads_needed = heads * max_length * kRowPieces;
  const int64_t blocks =
      std::min(kReferenceGatherBlocks,
               (threads_needed + kReferenceGatherThreads - 1) / kReferenceGatherThreads);
  gather_pages_for_reference<<<dim3(unsigned(blocks), unsigned(sequences)), kReferenceGatherThreads,
                               0, stream>>>(k_pages, v_pages, block_table, max_pages, lengths,
                                            starts, heads, page_size, k_packed, v_packed);
  BENCH_CHECK_LAUNCH();
}

}  // namespace ch16::paged

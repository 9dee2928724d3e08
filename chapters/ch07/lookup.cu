// ch07/lookup: a random row gather (an embedding lookup), out[i][:] = table[idx[i]][:], with
// the lanes of a warp laid across rows or along them.
//
// The table is far larger than L2 and the indices are uniformly random, so nothing can make
// the rows themselves local to each other: every lookup costs a trip to DRAM for its row (64
// bytes = two 32-byte sectors, both fully used). What a kernel does control is the locality of
// each warp instruction, and that is the lesson:
//   1. baseline: one thread per lookup loops over the 16 floats of its row. One warp load
//      instruction touches 32 different rows (32 sectors, 4 bytes used of each) and the same
//      sectors are requested again by the next 15 instructions, hoping they still sit in L1;
//      each warp store likewise scatters 4-byte pieces over 32 output rows;
//   2. optimized: four lanes per lookup, each moving one 16-byte quarter of the row through
//      the read-only path (__ldg, LDG.E.128.CONSTANT). One warp instruction now touches 8 rows,
//      each sector once, and the warp's store is 512 contiguous bytes: 16x fewer load and store
//      instructions, each touching every sector exactly once, for the same DRAM bytes.
// Both read the same table, the same indices, in the same layout, and write the same output;
// no index sorting or relayout happens anywhere (that would be a different, untimed workload).
//
//   ./bench compare --chapter ch07 --example lookup
#include <bench/bench.hpp>

#include <cmath>

namespace {

constexpr int kDim = 16;  // floats per row: 64 bytes, a whole number of 16-byte vectors

struct Lookup {
  int64_t rows, lookups;
  bench::DeviceSpan<const float> table;   // rows x kDim, row-major
  bench::DeviceSpan<const int32_t> idx;   // lookups, uniform in [0, rows)
  bench::DeviceSpan<float> out;           // lookups x kDim
  explicit Lookup(bench::Setup& s)
      : rows(s.size("rows", int64_t{1} << 24, 10'007)),  // 1 GiB table; odd sizes to verify
        lookups(s.size("lookups", int64_t{1} << 23, 3'001)),
        table(s.input<float>("table", rows * kDim, bench::uniform(-1, 1))),
        idx(s.input<int32_t>("idx", lookups, bench::integers(0, rows - 1))),
        out(s.output<float>("out", lookups * kDim)) {
    s.param("dim", kDim);
    // Fewest bytes: the indices, each distinct row once (expected count for uniform indices:
    // rows * (1 - (1 - 1/rows)^lookups), ~88% of lookups here), and the output.
    const double distinct = double(rows) * -std::expm1(double(lookups) * std::log1p(-1.0 / double(rows)));
    s.bytes(lookups * 4.0 + distinct * kDim * 4.0 + lookups * kDim * 4.0);
  }
};

constexpr int kBlock = 256;

__global__ void row_per_thread(const float* __restrict__ table, const int32_t* __restrict__ idx,
                               float* __restrict__ out, int64_t lookups) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= lookups) return;
  const int64_t r = idx[i];
#pragma unroll
  for (int d = 0; d < kDim; ++d) out[i * kDim + d] = table[r * kDim + d];
}

// Thread t serves lookup t / 4 and copies 16-byte vector t % 4 of its row.
__global__ void lanes_along_row(const float4* __restrict__ table, const int32_t* __restrict__ idx,
                                float4* __restrict__ out, int64_t lookups) {
  constexpr int kVecs = kDim / 4;
  const int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  const int64_t i = t / kVecs;
  if (i >= lookups) return;
  const int q = static_cast<int>(t % kVecs);
  const int64_t r = __ldg(idx + i);  // the four lanes of a lookup share one sector: broadcast
  out[i * kVecs + q] = __ldg(table + r * kVecs + q);
}

void launch_row_per_thread(const Lookup& w, cudaStream_t stream) {
  const int64_t blocks = (w.lookups + kBlock - 1) / kBlock;
  row_per_thread<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(w.table.data(), w.idx.data(), w.out.data(), w.lookups);
  BENCH_CHECK_LAUNCH();
}

void launch_lanes_along_row(const Lookup& w, cudaStream_t stream) {
  const int64_t blocks = (w.lookups * (kDim / 4) + kBlock - 1) / kBlock;
  lanes_along_row<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(
      reinterpret_cast<const float4*>(w.table.data()), w.idx.data(), reinterpret_cast<float4*>(w.out.data()), w.lookups);
  BENCH_CHECK_LAUNCH();
}

void reference(const Lookup& w, bench::HostData& h) {
  auto table = h.input<float>("table");
  auto idx = h.input<int32_t>("idx");
  auto out = h.expected("out");
  for (int64_t i = 0; i < w.lookups; ++i)
    for (int d = 0; d < kDim; ++d) out[i * kDim + d] = table[int64_t{idx[i]} * kDim + d];
}

// The timing-size check (docs/validity.md row 2): one thread per output float, the plainest
// gather, sharing no code with the variants.
__global__ void reference_lookup(const float* table, const int32_t* idx, float* out, int64_t lookups) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < lookups * kDim) out[i] = table[int64_t{idx[i / kDim]} * kDim + i % kDim];
}

void device_reference(const Lookup& w, cudaStream_t stream) {
  const int64_t blocks = (w.lookups * kDim + kBlock - 1) / kBlock;
  reference_lookup<<<static_cast<unsigned>(blocks), kBlock, 0, stream>>>(w.table.data(), w.idx.data(), w.out.data(), w.lookups);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch07, lookup, Lookup)
    .baseline("row_per_thread", launch_row_per_thread)
    .optimized("lanes_along_row", launch_lanes_along_row)
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::exact());

}  // namespace

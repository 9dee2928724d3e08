// ch10/global_sum.cuh: the work that cluster_reduction and atomic_reduction share: the sum of n
// FP32 values into one float, its CPU and device references, the per-block streaming sum every variant starts
// from, the two-pass baseline both examples improve on, and the single-pass finish both optimized
// kernels end with.
//
// The timing size is the axis `mib` (kSumMib; an odd 1,000,003 floats when verifying). The default,
// 16 MiB (2^22 floats, 256 chunks): the stream takes only microseconds (ch10's README,
// 'Measured', has the times), so what the two-pass form adds (a
// second kernel behind a drained first one, its one-block run, the partials' round trip) is a real
// share. With --sweep up to 1 GiB, where both sides read at the HBM ceiling and the saved
// microseconds are a percent or two at best (or the single pass loses): the crossover (the
// chapter's README).
//
// Each block sums one 64 KB chunk (kChunk floats, 16 float4 per thread, 4 of them in flight:
// ch08/hbm_streaming's recipe for reaching HBM's read rate; short-lived blocks, because a
// persistent grid-stride grid ran slower in ch07/hbm_copy). Only what happens to
// the block sums (256 or 16,384 of them) differs between the variants.
//
// Accuracy (the tolerance both examples use): the inputs are uniform in [0, 1), so every partial
// sum is positive, and a sum whose longest chain of FP32 additions has depth d is within d * 2^-24
// of the exact sum, relatively, whatever the order. In a block: 2 (float4) + 4 (4 float4 into each
// of 4 accumulators) + 2 (the accumulators) + 1 (tail) + 5 (warp) + 7 (8 warp sums) = 21. The
// two-pass baseline adds at most 16 (partials per thread) + 5 + 31 (32 warp sums) = 52 in pass 2: d = 73,
// 4.4e-6. The single-pass kernels add their block or cluster sums in FP64 (error ~2^-53 per add),
// so they stay near 21 * 2^-24 = 1.3e-6. relative_l2(1e-5) holds all of them with a 2x margin;
// an FP32 sum computed in BF16, or one skipped block (1/16,384 = 6e-5 at 1 GiB, more at the
// smaller sizes), fails it.
#pragma once

#include <bench/bench.hpp>
#include <kernels/group_reduce.cuh>
#include <kernels/reference_rows.cuh>
#include <kernels/vector_access.cuh>

namespace ch10 {
namespace {  // each including file gets its own copy: kernels must not clash at link time

constexpr int kBlock = 256;
constexpr int kInFlight = 4;           // float4 loads per thread issued before the first is used
constexpr int64_t kChunk = 16'384;     // floats per block: 64 KB, 4 rounds of 4 float4 per thread
constexpr int kFinalBlock = 1024;      // the two-pass baseline's pass 2: one block

// Where a single-pass kernel leaves its running total between blocks. Both counters are zero
// before every launch: the workload zeroes them once, and the last block of each launch resets
// them, so no memset (a second operation on the stream) is needed.
struct SinglePass {
  double* total;       // FP64 running total of the block (or cluster) sums
  unsigned* arrivals;  // how many blocks (or clusters) have added theirs
  float* out;
};

struct GlobalSum {
  int64_t n;
  unsigned chunks;  // blocks of kChunk floats, the last one partial
  bench::DeviceSpan<const float> x;
  bench::DeviceSpan<float> sum;
  bench::DeviceBuffer<float> partials;  // two-pass: one per block
  bench::DeviceBuffer<double> total{1};
  bench::DeviceBuffer<unsigned> arrivals{1};
  bench::DeviceBuffer<double> reference_partials;  // the device reference's own scratch
  explicit GlobalSum(bench::Setup& s)
      // Verifying: 61 full chunks and 579 floats (3 past a float4).
      : n(s.size("n", s.axis("mib") << 18, 1'000'003)),
        chunks(static_cast<unsigned>((n + kChunk - 1) / kChunk)),
        x(s.input<float>("x", n, bench::uniform(0, 1))),  // positive: relative error has a bound
        sum(s.output<float>("sum", 1)),
        partials(chunks),
        reference_partials(chunks) {
    s.param("chunk", kChunk);
    BENCH_CUDA_CHECK(cudaMemset(total.data(), 0, sizeof(double)));
    BENCH_CUDA_CHECK(cudaMemset(arrivals.data(), 0, sizeof(unsigned)));
    BENCH_CUDA_CHECK(cudaDeviceSynchronize());
    s.bytes(4.0 * n + 4.0, bench::ceiling::hbm_read);  // x read once, the sum written once
    s.flops(1.0 * n);                                   // one add per element
  }
  SinglePass single_pass() const { return {total.data(), arrivals.data(), sum.data()}; }
};

// The axis `mib`, the MiB of x: 16 (the default, scored) to 1 GiB (--sweep).
inline const std::vector<int64_t> kSumMib = {16, 64, 256, 1024};
inline const std::vector<int64_t> kSumMibDefault = {16};

void reference(const GlobalSum& w, bench::HostData& h) {
  auto x = h.input<float>("x");
  double sum = 0;
  for (int64_t i = 0; i < w.n; ++i) sum += x[i];
  h.expected("sum")[0] = sum;
}

// The timing-size check (docs/validity.md row 2), sharing no code with the variants: one block
// per kChunk floats sums them in double (kernels/reference_rows.cuh), then one block sums those
// partials in double and rounds once to float. Deterministic, and ~2^-53 per add.
__global__ void reference_chunk_sums(const float* x, int64_t n, double* partials) {
  double sum = 0;
  for (int64_t i = blockIdx.x * kChunk + threadIdx.x; i < n && i < (blockIdx.x + 1) * kChunk; i += kernels::kReferenceRowBlock)
    sum += x[i];
  sum = kernels::reference_block_sum(sum);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void reference_total(const double* partials, unsigned count, float* out) {
  double sum = 0;
  for (unsigned i = threadIdx.x; i < count; i += kernels::kReferenceRowBlock) sum += partials[i];
  sum = kernels::reference_block_sum(sum);
  if (threadIdx.x == 0) *out = float(sum);
}

void device_reference(const GlobalSum& w, cudaStream_t stream) {
  reference_chunk_sums<<<w.chunks, kernels::kReferenceRowBlock, 0, stream>>>(w.x.data(), w.n, w.reference_partials.data());
  BENCH_CHECK_LAUNCH();
  reference_total<<<1, kernels::kReferenceRowBlock, 0, stream>>>(w.reference_partials.data(), w.chunks, w.sum.data());
  BENCH_CHECK_LAUNCH();
}

__device__ __forceinline__ float horizontal_sum(float4 v) { return (v.x + v.y) + (v.z + v.w); }

// The sum of chunk `chunk` of x, returned to every thread of the block (all must call it). A
// chunk past the end (a cluster's spare blocks) sums to 0. Chunks start on 64 KB boundaries, so
// only the last one can end off a float4: its 0-3 last floats are added as scalars.
__device__ __forceinline__ float block_chunk_sum(const float* __restrict__ x, int64_t n, int64_t chunk) {
  const int64_t begin = chunk * kChunk;
  const int64_t length = begin >= n ? 0 : (n - begin < kChunk ? n - begin : kChunk);
  const auto* body = reinterpret_cast<const float4*>(x + begin);
  const int vectors = static_cast<int>(length / 4);
  float acc[kInFlight] = {};
  int i = threadIdx.x;
#pragma unroll 1
  for (; i + (kInFlight - 1) * kBlock < vectors; i += kInFlight * kBlock) {
    float4 v[kInFlight];
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) v[j] = kernels::load_stream(body + i + j * kBlock);
#pragma unroll
    for (int j = 0; j < kInFlight; ++j) acc[j] += horizontal_sum(v[j]);
  }
  for (; i < vectors; i += kBlock) acc[0] += horizontal_sum(kernels::load_stream(body + i));
  if (threadIdx.x < length - 4 * vectors) acc[0] += x[begin + 4 * vectors + threadIdx.x];
  const float mine = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  return kernels::group_reduce<kBlock>(mine, kernels::Sum{});
}

// ---- The two-pass baseline: pass 1 writes one partial per block to global memory (L2), pass 2,
// a second kernel of one block, reads them back and writes the sum.
__global__ void __launch_bounds__(kBlock) chunk_partials(const float* __restrict__ x, int64_t n,
                                                         float* __restrict__ partials) {
  const float block_sum = block_chunk_sum(x, n, blockIdx.x);
  if (threadIdx.x == 0) partials[blockIdx.x] = block_sum;
}

__global__ void __launch_bounds__(kFinalBlock) sum_partials(const float* __restrict__ partials,
                                                            unsigned count, float* __restrict__ out) {
  float acc = 0.0f;
#pragma unroll 8  // 8 independent loads in flight per thread: pass 2 is latency-bound
  for (unsigned i = threadIdx.x; i < count; i += kFinalBlock) acc += partials[i];
  acc = kernels::group_reduce<kFinalBlock>(acc, kernels::Sum{});
  if (threadIdx.x == 0) *out = acc;
}

void launch_two_pass(const GlobalSum& w, cudaStream_t stream) {
  chunk_partials<<<w.chunks, kBlock, 0, stream>>>(w.x.data(), w.n, w.partials.data());
  BENCH_CHECK_LAUNCH();
  sum_partials<<<1, kFinalBlock, 0, stream>>>(w.partials.data(), w.chunks, w.sum.data());
  BENCH_CHECK_LAUNCH();
}

// ---- The single-pass finish, called by one thread per contributor (block or cluster) with that
// contributor's sum. The add goes into an FP64 total: with FP32 atomics the result would depend on
// the order the blocks arrive in (each add rounds at the total's magnitude: 16,384 adds can move
// the last ~2 digits of the float, differently every run); in FP64 the order changes the total by
// ~1e-12, far below the float the sum is rounded to at the end.
// The last contributor to arrive (atomicInc returns count - 1 and wraps the counter back to 0)
// reads the total, resets it to 0 for the next launch, and writes the float result. The fences
// make the pattern correct: each add is performed before its arrival is counted, and the last
// arrival sees every add before it reads the total.
__device__ __forceinline__ void add_and_finish(float partial, unsigned contributors, SinglePass p) {
  atomicAdd(p.total, static_cast<double>(partial));
  __threadfence();
  if (atomicInc(p.arrivals, contributors - 1) == contributors - 1) {
    __threadfence();
    const auto bits = atomicExch(reinterpret_cast<unsigned long long*>(p.total), 0ull);
    *p.out = static_cast<float>(__longlong_as_double(static_cast<long long>(bits)));
  }
}

}  // namespace
}  // namespace ch10

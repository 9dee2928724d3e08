// ch08/register_spills: when a thread's live values outgrow its register budget, ptxas spills
// them to local memory; keep the per-thread state within the budget and let the threads, not
// each thread's unrolled state, supply the parallelism.
//
// What the hardware does: an SM's 64K 32-bit registers are split among its resident threads. A
// kernel that asks for full occupancy (__launch_bounds__(256, 8): 2048 threads) gets at most 32
// registers per thread. Values that do not fit are stored to and reloaded from local memory
// (STL / LDL in SASS): per-thread addresses in device memory, cached in L1 (shared with the
// shared-memory carveout), evicted to L2 when the spills of all 2048 threads do not fit there.
// Every spill is an extra memory instruction next to the arithmetic, and a wait when it misses.
//
// The work: for each element x0 of x, the recurrence p <- p (x0/2) + x0, `steps` times, then
// halved (kernels::dependent_fma_chain): compute-bound, 2 steps flops per 8 bytes.
//
// What changes from baseline to optimized (one kernel template, register_spills.cuh):
//   1. baseline: 16 elements per thread, their recurrences interleaved for ILP: 3 x 16 = 48 live
//      floats (x0, t, p each) against a 32-register cap. ptxas (sm_90a, CUDA 13.0, -O3):
//        344 bytes stack frame, 864 bytes spill stores, 784 bytes spill loads
//        Used 32 registers, used 0 barriers, 344 bytes cumulative stack size
//      so the steps of the recurrences reload and restore their state through local memory,
//      and 2048 threads x 344 bytes = 688 KB of stack per SM is more than L1 holds: the spills
//      travel to L2;
//   2. optimized: 4 elements per thread, 12 live floats, same cap, same occupancy:
//        0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
//        Used 19 registers, used 0 barriers
//      The SM still holds 2048 x 4 = 8192 independent recurrences, far more than its 4
//      schedulers need to hide the 4-cycle FMA latency: the baseline's extra ILP bought nothing;
//   3. the spill proof is the build's ptxas report: the baseline is compiled in its own file
//      (register_spills_baseline.cu) so that its expected warning is silenced there alone; in
//      SASS (cuobjdump -sass) the baseline has 412 LDL/STL instructions, the optimized none.
// Each element's FMAs are the same on both sides, in the same order: bit-identical outputs.
// ch08/loop_unrolling shows the other side of the trade (more independent work per thread
// helps while it fits in registers).
//
//   ./bench compare --chapter ch08 --example register_spills
//   cuobjdump -res-usage build/<preset>/chapters/ch08/ch08 | grep -A1 interleaved_chains
#include <bench/bench.hpp>
#include <kernels/dependent_fma.cuh>

#include "iterated_map.cuh"
#include "register_spills.cuh"

namespace ch08 {
// register_spills_baseline.cu: launch_chains<16>.
void launch_spilling_chains(const float* x, float* y, int64_t n, int steps, cudaStream_t stream);
}  // namespace ch08

namespace {

using ch08::IteratedMap;  // n elements, `steps` FMAs each; sizes and cost model there

constexpr int kFittingItems = 4;  // 12 live floats per thread: fits in 32 registers (19 used)

void reference(const IteratedMap& w, bench::HostData& h) {
  auto x = h.input<float>("x");
  auto y = h.expected("y");
  for (int64_t i = 0; i < w.n; ++i) y[i] = kernels::dependent_fma_chain(double{x[i]}, w.steps);
}

void launch_spilling(const IteratedMap& w, cudaStream_t stream) {
  ch08::launch_spilling_chains(w.x.data(), w.y.data(), w.n, w.steps, stream);
}

void launch_fitting(const IteratedMap& w, cudaStream_t stream) {
  ch08::launch_chains<kFittingItems>(w.x.data(), w.y.data(), w.n, w.steps, stream);
}

// The timing-size check (docs/validity.md row 2): one thread per element, the chain written out
// in double (the CPU reference's kernels::dependent_fma_chain<double>, not the variants' code).
__global__ void reference_chain(const float* x, float* y, int64_t n, int steps) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  const double x0 = x[i], t = 0.5 * x0;
  double p = x0;
  for (int k = 0; k < steps; ++k) p = p * t + x0;
  y[i] = float(0.5 * p);
}

void device_reference(const IteratedMap& w, cudaStream_t stream) {
  constexpr int kBlock = 256;
  reference_chain<<<static_cast<unsigned>((w.n + kBlock - 1) / kBlock), kBlock, 0, stream>>>(w.x.data(), w.y.data(), w.n, w.steps);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch08, register_spills, IteratedMap)
    .baseline("16_per_thread_spills", launch_spilling)
    .optimized("4_per_thread_in_registers", launch_fitting)
    .reference(reference)
    .device_reference(device_reference);

}  // namespace

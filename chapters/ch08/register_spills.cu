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
// The work: for each element x0 of x, the recurrence p <- p (x0/2) + x0, `iters` times, then
// halved (kernels::dependent_fma_chain): compute-bound, 2 iters flops per 8 bytes.
//
// What changes from baseline to optimized (one kernel template, register_spills.cuh):
//   1. baseline: 32 elements per thread, their recurrences interleaved for ILP: 3 x 32 = 96 live
//      floats (x0, t, p each) under a 32-register cap. ptxas spills (sm_90a, CUDA 13.0):
//        ptxas info : Used 32 registers, 8 bytes stack frame, ... spill stores, ... spill loads
//      and every step of every recurrence reloads and restores its state;
//   2. optimized: 4 elements per thread, 12 live floats: no spill, same 32-register cap, same
//      occupancy (ptxas: "Used N registers, 0 bytes spill stores, 0 bytes spill loads"). The
//      SM still holds 2048 x 4 = 8192 independent recurrences, far more than the 4 schedulers
//      need to hide the 4-cycle FMA latency: the extra ILP of the baseline was never needed;
//   3. the spill proof is the build's ptxas report: the baseline is compiled in its own file
//      (register_spills_baseline.cu) so that its expected warning is silenced there alone.
// Each element's FMAs are the same on both sides, in the same order: bit-identical outputs.
// ch08/loop_unrolling shows the other side of the trade (more independent work per thread
// helps while it fits in registers).
//
//   ./bench compare --chapter ch08 --example register_spills
//   cuobjdump -res-usage build/<preset>/chapters/ch08/ch08 | grep -A1 interleaved_chains
#include <bench/bench.hpp>
#include <kernels/dependent_fma.cuh>

#include "register_spills.cuh"

namespace ch08 {
// register_spills_baseline.cu: launch_chains<32>.
void launch_spilling_chains(const float* x, float* y, int64_t n, int iters, cudaStream_t stream);
}  // namespace ch08

namespace {

constexpr int kFittingItems = 4;  // 12 live floats per thread: fits in 32 registers

struct Recurrences {
  int64_t n;
  int iters;
  bench::DeviceSpan<const float> x;
  bench::DeviceSpan<float> y;
  explicit Recurrences(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 25, 100'003)),
        iters(static_cast<int>(s.size("iters", 128, 41))),
        x(s.input<float>("x", n, bench::uniform(-1, 1))),
        y(s.output<float>("y", n)) {
    s.bytes(2.0 * n * sizeof(float));  // x read once, y written once
    s.flops(2.0 * n * iters);          // one FMA per step (the final halving not counted)
  }
};

void reference(const Recurrences& w, bench::HostData& h) {
  auto x = h.input<float>("x");
  auto y = h.expected("y");
  for (int64_t i = 0; i < w.n; ++i) y[i] = kernels::dependent_fma_chain(double{x[i]}, w.iters);
}

void launch_spilling(const Recurrences& w, cudaStream_t stream) {
  ch08::launch_spilling_chains(w.x.data(), w.y.data(), w.n, w.iters, stream);
}

void launch_fitting(const Recurrences& w, cudaStream_t stream) {
  ch08::launch_chains<kFittingItems>(w.x.data(), w.y.data(), w.n, w.iters, stream);
}

BENCH_EXAMPLE(ch08, register_spills, Recurrences)
    .baseline("32_per_thread_spills", launch_spilling)
    .optimized("4_per_thread_in_registers", launch_fitting)
    .reference(reference);

}  // namespace

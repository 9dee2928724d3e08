// ch12/conditional_graph: an iterative solver that runs until it converges. Jacobi iteration
// for the tridiagonal system d x_i - x_{i-1} - x_{i+1} = b_i (d = 2.2: converges, slowly, at
// about 0.91 per step) until the largest update of a pair of steps is under 1e-5.
//
//   1. baseline: the classic host loop. Each round launches two Jacobi steps and a check kernel
//      that writes "keep going", copies that flag to pinned host memory and synchronises the
//      stream, then the host decides whether to launch another round. Every round pays a launch
//      and a device-to-host round trip, and the GPU idles while the host decides. It blocks the
//      host (declared blocks_host);
//   2. optimized: the same round is the body of a conditional WHILE node (CUDA 12.4+): the
//      check kernel calls cudaGraphSetConditional(handle, keep_going) on the device, and the
//      graph runs the body again without the host. Built with cudaGraphConditionalHandleCreate
//      (default 1, re-applied at every launch), cudaGraphAddNode and a capture into the body
//      graph; instantiated and uploaded once in untimed setup. One cudaGraphLaunch per solve.
// Both run the same kernels in the same order, so both stop after the same number of rounds
// and produce bitwise the same x.
//
// Timed samples are checked on the device (docs/validity.md row 2) against a device reference:
// the CPU reference's exact Thomas solve in double, each of its two recurrences run by one thread
// (thomas_forward, thomas_backward), sharing no code with the variants. At n = 1001 it must agree
// with the CPU reference, or the case fails verification.
//
//   ./bench compare --chapter ch12 --example conditional_graph
#include "ch12_graph.cuh"

#include <algorithm>
#include <vector>

namespace {

constexpr int kBlock = 256;
constexpr float kDiag = 2.2f;
constexpr float kTolerance = 1e-5f;  // on the largest |update| over a round of two steps
constexpr int kMaxRounds = 100'000;  // a safety net; the solves here take ~65 rounds

struct Control {  // device-side loop state
  unsigned max_delta_bits;  // a non-negative float's bits order like the float: atomicMax works
  int rounds;
  int keep_going;
};

struct Solve {
  int64_t n;
  bench::DeviceSpan<const float> b;
  bench::DeviceSpan<float> x;
  bench::DeviceBuffer<float> other;  // Jacobi needs the previous iterate: x -> other -> x
  bench::DeviceBuffer<Control> control{1};
  // The device reference's own (thomas_forward, thomas_backward), never touched by the variants:
  // the Thomas algorithm's c and d, in double.
  bench::DeviceBuffer<double> reference_c;
  bench::DeviceBuffer<double> reference_d;
  explicit Solve(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 18, 1001)),
        b(s.input<float>("b", n, bench::uniform(-1, 1))),
        x(s.output<float>("x", n)),
        other(n),
        reference_c(n),
        reference_d(n) {
    // c depends only on the matrix, not on b: computed here once, untimed, on the host with the
    // CPU reference's expression (the same doubles), so a device check runs one chain of
    // dependent divisions (d's) instead of two. d depends on b: every check computes it.
    std::vector<double> c(n);
    for (int64_t i = 0; i < n; ++i) c[i] = -1.0 / (kDiag + (i > 0 ? c[i - 1] : 0.0));  // a = c = -1
    BENCH_CUDA_CHECK(
        cudaMemcpy(reference_c.data(), c.data(), reference_c.bytes(), cudaMemcpyHostToDevice));
    // Untimed, once: a value for the loop state before any kernel runs. The code never reads it
    // stale (init writes it at the start of each solve, check writes keep_going before the
    // baseline copies it), but ch12 uses dynamic parallelism, which initcheck does not support:
    // it saw none of the kernels' writes and flagged every round's copy of keep_going as reading
    // uninitialised memory. A host-side write here is one it sees. The legacy stream orders it
    // before the case's (blocking) stream.
    BENCH_CUDA_CHECK(cudaMemset(control.data(), 0, control.bytes()));
  }
};

__global__ void init(float* x, int64_t n, Control* c) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) x[i] = 0;
  if (blockIdx.x == 0 && threadIdx.x == 0) *c = Control{0, 0, 1};
}

__global__ void __launch_bounds__(kBlock) jacobi_step(const float* __restrict__ x, const float* __restrict__ b, float* __restrict__ y, int64_t n,
                            Control* c) {
  float delta = 0;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float left = i > 0 ? x[i - 1] : 0.0f;
    const float right = i + 1 < n ? x[i + 1] : 0.0f;
    y[i] = (b[i] + left + right) / kDiag;
    delta = fmaxf(delta, fabsf(y[i] - x[i]));
  }
  // Block maximum first (warp shuffles, then one warp over the warps' results): one atomic per
  // block, not per warp, so thousands of atomics on one address do not serialise the step.
  __shared__ float warp_max[kBlock / 32];
  for (int offset = 16; offset > 0; offset /= 2) delta = fmaxf(delta, __shfl_xor_sync(0xffffffffu, delta, offset));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = delta;
  __syncthreads();
  if (threadIdx.x < 32) {
    delta = threadIdx.x < kBlock / 32 ? warp_max[threadIdx.x] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) delta = fmaxf(delta, __shfl_xor_sync(0xffffffffu, delta, offset));
    if (threadIdx.x == 0) atomicMax(&c->max_delta_bits, __float_as_uint(delta));
  }
}

// One thread: decide whether another round is needed, reset the round's maximum.
template <bool kSetConditional>
__global__ void check(Control* c, cudaGraphConditionalHandle handle) {
  const bool more = __uint_as_float(c->max_delta_bits) >= kTolerance && ++c->rounds < kMaxRounds;
  c->max_delta_bits = 0;
  c->keep_going = more;
  if constexpr (kSetConditional) cudaGraphSetConditional(handle, more ? 1u : 0u);
}

unsigned grid(const Solve& w) { return static_cast<unsigned>(std::min<int64_t>((w.n + kBlock - 1) / kBlock, 1024)); }

void launch_init(const Solve& w, cudaStream_t s) {
  init<<<grid(w), kBlock, 0, s>>>(w.x.data(), w.n, w.control.data());
  BENCH_CHECK_LAUNCH();
}

// x -> other -> x, then the check.
template <bool kSetConditional>
void launch_round(const Solve& w, cudaGraphConditionalHandle handle, cudaStream_t s) {
  jacobi_step<<<grid(w), kBlock, 0, s>>>(w.x.data(), w.b.data(), w.other.data(), w.n, w.control.data());
  BENCH_CHECK_LAUNCH();
  jacobi_step<<<grid(w), kBlock, 0, s>>>(w.other.data(), w.b.data(), w.x.data(), w.n, w.control.data());
  BENCH_CHECK_LAUNCH();
  check<kSetConditional><<<1, 1, 0, s>>>(w.control.data(), handle);
  BENCH_CHECK_LAUNCH();
}

// Rounds the last solve took (the check kernel counts them on the device): reported by both sides
// as the metric `rounds`, so a run can show that both did the same work. The count depends on b,
// which is fresh for every timed sample (docs/validity.md row 18), so it can move by a round or so
// between samples and runs; a time that moves with it is the work, not the method.
std::vector<bench::Metric> rounds_metric(const Solve& w) {
  Control c{};
  BENCH_CUDA_CHECK(cudaMemcpy(&c, w.control.data(), sizeof c, cudaMemcpyDeviceToHost));
  return {{"rounds", double(c.rounds + 1)}};  // check counts the rounds after the first
}

class HostLoop {
 public:
  HostLoop(const Solve& w, cudaStream_t) : w_(&w) {
    BENCH_CUDA_CHECK(cudaHostAlloc(&flag_, sizeof(int), cudaHostAllocDefault));
  }
  ~HostLoop() { cudaFreeHost(flag_); }
  HostLoop(const HostLoop&) = delete;
  HostLoop& operator=(const HostLoop&) = delete;
  void operator()(const Solve& w, cudaStream_t s) {
    launch_init(w, s);
    do {
      launch_round<false>(w, 0, s);
      BENCH_CUDA_CHECK(cudaMemcpyAsync(flag_, &w.control.data()->keep_going, sizeof(int), cudaMemcpyDeviceToHost, s));
      BENCH_CUDA_CHECK(cudaStreamSynchronize(s));
    } while (*flag_ != 0);
  }
  std::vector<bench::Metric> metrics() const { return rounds_metric(*w_); }

 private:
  const Solve* w_;
  int* flag_ = nullptr;
};

struct WhileGraph {
  ch12::GraphExec exec;
  const Solve* w_;
  WhileGraph(const Solve& w, cudaStream_t s) : w_(&w) {
    cudaGraph_t g = nullptr;
    BENCH_CUDA_CHECK(cudaGraphCreate(&g, 0));
    const ch12::Graph graph(g);
    cudaGraphConditionalHandle handle{};
    BENCH_CUDA_CHECK(cudaGraphConditionalHandleCreate(&handle, g, 1, cudaGraphCondAssignDefault));
    cudaGraphNodeParams params{};
    params.type = cudaGraphNodeTypeConditional;
    params.conditional.handle = handle;
    params.conditional.type = cudaGraphCondTypeWhile;
    params.conditional.size = 1;
    cudaGraphNode_t node = nullptr;
#if CUDART_VERSION >= 13000
    BENCH_CUDA_CHECK(cudaGraphAddNode(&node, g, nullptr, nullptr, 0, &params));
#else
    BENCH_CUDA_CHECK(cudaGraphAddNode(&node, g, nullptr, 0, &params));
#endif
    // The body: one round, captured into the graph the conditional node owns.
    ch12::OwnedStream capture;
    cudaGraph_t body = params.conditional.phGraph_out[0];
    BENCH_CUDA_CHECK(cudaStreamBeginCaptureToGraph(capture.get(), body, nullptr, nullptr, 0, cudaStreamCaptureModeThreadLocal));
    launch_round<true>(w, handle, capture.get());
    BENCH_CUDA_CHECK(cudaStreamEndCapture(capture.get(), &body));
    exec.instantiate(g);
    exec.upload(s);
  }
  void operator()(const Solve& w, cudaStream_t s) const {
    launch_init(w, s);
    exec.launch(s);
  }
  std::vector<bench::Metric> metrics() const { return rounds_metric(*w_); }
};

// The exact solution (Thomas algorithm, double); the solver stops within ~1e-4 of it.
void reference(const Solve& w, bench::HostData& h) {
  auto b = h.input<float>("b");
  auto x = h.expected("x");
  std::vector<double> c(w.n), d(w.n);
  for (int64_t i = 0; i < w.n; ++i) {
    const double m = kDiag + (i > 0 ? c[i - 1] : 0.0);  // a = c = -1
    c[i] = -1.0 / m;
    d[i] = (b[i] + (i > 0 ? d[i - 1] : 0.0)) / m;
  }
  for (int64_t i = w.n - 1; i >= 0; --i) x[i] = d[i] - c[i] * (i + 1 < w.n ? x[i + 1] : 0.0);
}

// The device reference (docs/validity.md row 2: timed samples checked on the device): the CPU
// reference above, run on the device, the same operations on the same doubles. Each recurrence is
// sequential, so one thread (thread 0) runs it element by element as the CPU does; the block
// around it only copies tiles of its operands into shared memory and its results back out, so the
// thread's loop reads shared memory rather than paying a global load's latency per element. Slow
// next to the variants, plainly right: estimated ~20 ms a check at n = 2^18, nearly all of it the
// forward sweep's dependent double divisions (~120 cycles an element). The baseline samples until
// the 3 s timeout (~2000 samples at its time in ch12's README, 'Measured'), which asks for
// 93 (1 + ln(2000 / 93)) ~ 380 checks:
// ~8 s of the 15 s a case (harness/src/sample_check.hpp); the optimized side's ~80, ~2 s.
constexpr int kReferenceThreads = 256;
constexpr int kReferenceTile = 2048;  // elements per staged tile: 40 KiB of shared memory

// d[i] = (b[i] + d[i - 1]) / (kDiag + c[i - 1]), with d[-1] = c[-1] = 0: the CPU reference's
// forward sweep, c read from the constructor's copy.
__global__ void __launch_bounds__(kReferenceThreads)
    thomas_forward(const float* b, const double* c, double* d, int64_t n) {
  __shared__ float tile_b[kReferenceTile];
  __shared__ double tile_c[kReferenceTile];  // c[i - 1]
  __shared__ double tile_d[kReferenceTile];
  double d_prev = 0.0;  // thread 0's d[i - 1]
  for (int64_t i0 = 0; i0 < n; i0 += kReferenceTile) {
    const int len = n - i0 < kReferenceTile ? int(n - i0) : kReferenceTile;
    for (int j = threadIdx.x; j < len; j += kReferenceThreads) {
      tile_b[j] = b[i0 + j];
      tile_c[j] = i0 + j > 0 ? c[i0 + j - 1] : 0.0;
    }
    __syncthreads();
    if (threadIdx.x == 0)
      for (int j = 0; j < len; ++j) {
        const double m = kDiag + tile_c[j];  // a = c = -1
        d_prev = (tile_b[j] + d_prev) / m;
        tile_d[j] = d_prev;
      }
    __syncthreads();  // tile_d written; tile_b and tile_c read: the next tile may overwrite them
    for (int j = threadIdx.x; j < len; j += kReferenceThreads) d[i0 + j] = tile_d[j];
  }
}

// x[i] = d[i] - c[i] x[i + 1], with x[n] = 0: the CPU reference's back substitution, x carried in
// double and stored as float. __dmul_rn then __dsub_rn, each rounded, as the CPU's loop computes
// it: not contracted into one fma.
__global__ void __launch_bounds__(kReferenceThreads)
    thomas_backward(const double* c, const double* d, float* x, int64_t n) {
  __shared__ double tile_c[kReferenceTile];
  __shared__ double tile_d[kReferenceTile];
  __shared__ float tile_x[kReferenceTile];
  double x_next = 0.0;  // thread 0's x[i + 1]; 0 past the end (the CPU's i + 1 < n guard)
  for (int64_t end = n; end > 0; end -= kReferenceTile) {
    const int64_t i0 = end > kReferenceTile ? end - kReferenceTile : 0;
    const int len = int(end - i0);
    for (int j = threadIdx.x; j < len; j += kReferenceThreads) {
      tile_c[j] = c[i0 + j];
      tile_d[j] = d[i0 + j];
    }
    __syncthreads();
    if (threadIdx.x == 0)
      for (int j = len - 1; j >= 0; --j) {
        x_next = __dsub_rn(tile_d[j], __dmul_rn(tile_c[j], x_next));
        tile_x[j] = float(x_next);
      }
    __syncthreads();  // tile_x written; tile_c and tile_d read: the next tile may overwrite them
    for (int j = threadIdx.x; j < len; j += kReferenceThreads) x[i0 + j] = tile_x[j];
  }
}

void device_reference(const Solve& w, cudaStream_t s) {
  thomas_forward<<<1, kReferenceThreads, 0, s>>>(w.b.data(), w.reference_c.data(),
                                                 w.reference_d.data(), w.n);
  BENCH_CHECK_LAUNCH();
  thomas_backward<<<1, kReferenceThreads, 0, s>>>(w.reference_c.data(), w.reference_d.data(),
                                                  w.x.data(), w.n);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch12, conditional_graph, Solve)
    .stateful<HostLoop>(bench::Role::baseline, "host_loop_sync_per_round",
                        {.blocks_host = true, .host_bound = true})
    // The device loop's time moves with the machine too (README): scored against the spread of
    // speedups over machines, like graph_update, not by its own time.
    .stateful<WhileGraph>(bench::Role::optimized, "conditional_while_node", {.host_bound = true})
    .reference(reference)
    .device_reference(device_reference)
    // Stopping at a largest update of 1e-5 leaves x within ~0.91/(1-0.91) * 1e-5 ~ 1e-4 of the
    // exact solution per element (|x| ~ 1): a relative L2 of 1e-3 covers it with margin, while
    // a variant that stopped early or skipped rounds would be off by far more.
    .tolerance(bench::relative_l2(1e-3));

}  // namespace

// ch14/codegen_fusion: a chain of elementwise operations known only at run time, run one
// kernel per operation (eager mode) or as one kernel generated as CUDA source and compiled with
// NVRTC (what torch.compile's Inductor or XLA do for pointwise chains).
//
// Each elementwise op on its own moves 8 bytes per element through HBM (read 4, write 4) to do
// one flop: it runs at the copy ceiling and the arithmetic is free. A chain of K such ops run
// eagerly moves 8K bytes per element; the same chain fused moves 8, because the intermediates
// stay in registers. No hand-written kernel can know the chain in advance (it is data: a list
// built at run time), so the fused kernel is written by a program:
//   1. baseline "one_kernel_per_op": a generic nvcc-compiled kernel launched once per op (the
//      first reads x and writes y, the others update y in place), each a float4 streaming pass;
//   2. optimized "nvrtc_fused": ch14::codegen::fused_kernel_source prints the whole chain as one
//      kernel (elementwise_codegen.hpp; tests/unit/elementwise_codegen_test.cpp checks its
//      text), NVRTC compiles it once, untimed, in the variant's constructor (the metrics
//      jit_compile_ms and jit_cached_first_call_ms give the first call without and with the
//      on-disk cache: ch14::MeasuredJitKernel), and the timed part is one launch: one read of x,
//      one write of y, the K ops in registers.
// Same ops, same order, each rounded to float, and --fmad=false so no multiply-add pair becomes
// an FMA the unfused kernels could not form: the two outputs are bit-identical.
// Target: the fused kernel at >= 90% of the HBM copy ceiling (it is a copy with 8 flops per
// element); the eager chain at ~1/K of it, so the speedup is ~K = 8.
//
//   ./bench compare --chapter ch14 --example codegen_fusion
#include <bench/bench.hpp>

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include "elementwise_codegen.hpp"
#include "nvrtc_jit.hpp"

namespace {

using ch14::codegen::Op;
using ch14::codegen::OpKind;

// The chain, as a graph compiler would receive it: y = min(max(|1.5 x - 0.25| * 0.75 + 0.125,
// 0.05), 0.9) * 2. On x in [-1, 1] about a third of the values reach each clamp, so both
// branches of max/min are exercised and the output has spread.
constexpr std::array<Op, 8> kChain = {{{OpKind::mul, 1.5f},
                                       {OpKind::add, -0.25f},
                                       {OpKind::abs},
                                       {OpKind::mul, 0.75f},
                                       {OpKind::add, 0.125f},
                                       {OpKind::max, 0.05f},
                                       {OpKind::min, 0.9f},
                                       {OpKind::mul, 2.0f}}};

struct Chain {
  int64_t n;
  bench::DeviceSpan<const float> x;
  bench::DeviceSpan<float> y;
  explicit Chain(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 28, 100'003)),  // 1 GiB each way, 20x L2; odd to verify
        x(s.input<float>("x", n, bench::uniform(-1, 1))),
        y(s.output<float>("y", n)) {
    s.param("ops", static_cast<int64_t>(kChain.size()));
    s.bytes(2.0 * n * sizeof(float));            // read x once, write y once
    s.flops(double(kChain.size()) * double(n));  // one flop per op per element
  }
};

constexpr int kBlock = ch14::codegen::kFusedBlock;

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::max<int64_t>(1, (n / 4 + kBlock - 1) / kBlock));
}

// One eager op: y[i] = op(src[i]). src == y for every op after the first (in place), so the
// pointers carry no __restrict__; each thread reads its float4 before writing it.
__global__ void __launch_bounds__(kBlock)
    apply_one_op(const float* src, float* y, int64_t n, Op op) {
  const int64_t vectors = n / 4;
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i < vectors) {
    float4 v = reinterpret_cast<const float4*>(src)[i];
    v.x = ch14::codegen::apply(op, v.x);
    v.y = ch14::codegen::apply(op, v.y);
    v.z = ch14::codegen::apply(op, v.z);
    v.w = ch14::codegen::apply(op, v.w);
    reinterpret_cast<float4*>(y)[i] = v;
  }
  if (blockIdx.x == 0 && threadIdx.x < n - 4 * vectors) {
    const int64_t t = 4 * vectors + threadIdx.x;
    y[t] = ch14::codegen::apply(op, src[t]);
  }
}

void launch_one_kernel_per_op(const Chain& w, cudaStream_t stream) {
  const float* src = w.x.data();
  for (const Op& op : kChain) {
    apply_one_op<<<blocks_for(w.n), kBlock, 0, stream>>>(src, w.y.data(), w.n, op);
    BENCH_CHECK_LAUNCH();
    src = w.y.data();
  }
}

// The generated kernel: built from kChain in the constructor (untimed), launched once per call.
class NvrtcFused {
 public:
  NvrtcFused(const Chain&, cudaStream_t)
      : kernel_(ch14::codegen::fused_kernel_source(kChain, "fused_chain"), "fused_chain",
                {"--std=c++17", "--fmad=false"}) {}
  void operator()(const Chain& w, cudaStream_t stream) const {
    const float* x = w.x.data();
    float* y = w.y.data();
    long long n = w.n;
    void* args[] = {&x, &y, &n};
    kernel_.launch(blocks_for(w.n), kBlock, args, stream);
  }
  std::vector<bench::Metric> metrics() const { return kernel_.metrics(); }

 private:
  ch14::MeasuredJitKernel kernel_;
};

// The chain's specification, op by op in float (each op rounds to float, as both kernels do).
void reference(const Chain& w, bench::HostData& h) {
  auto x = h.input<float>("x");
  auto y = h.expected("y");
  for (int64_t i = 0; i < w.n; ++i) {
    float v = x[i];
    for (const Op& op : kChain) v = ch14::codegen::apply(op, v);
    y[i] = v;
  }
}

// Both GPU forms agree bit for bit; the host compiler may contract a multiply-add of the
// reference into an FMA (x86-64 with -march=native), one rounding fewer, so the reference is
// given a few float ulps: values are in [0.1, 1.8], and 1e-6 relative is 8 ulps.
// The timing-size check (docs/validity.md row 2): one thread per element walks kChain in double
// with its own reading of each op, sharing no code with the variants (ch14::codegen::apply is the
// unfused kernels' code). A drift between this and apply fails verification, where both run.
__device__ double reference_apply(Op op, double v) {
  switch (op.kind) {
    case OpKind::add: return v + op.constant;
    case OpKind::mul: return v * op.constant;
    case OpKind::max: return fmax(v, double(op.constant));
    case OpKind::min: return fmin(v, double(op.constant));
    case OpKind::abs: return fabs(v);
  }
  return v;
}

__global__ void reference_chain(const float* x, float* y, int64_t n, std::array<Op, kChain.size()> chain) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (i >= n) return;
  double v = x[i];
  for (const Op& op : chain) v = reference_apply(op, v);
  y[i] = static_cast<float>(v);
}

void device_reference(const Chain& w, cudaStream_t stream) {
  reference_chain<<<static_cast<unsigned>((w.n + 255) / 256), 256, 0, stream>>>(w.x.data(), w.y.data(), w.n, kChain);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch14, codegen_fusion, Chain)
    .baseline("one_kernel_per_op", launch_one_kernel_per_op)
    .stateful<NvrtcFused>(bench::Role::optimized, "nvrtc_fused")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::allclose(1e-7, 1e-6));

}  // namespace

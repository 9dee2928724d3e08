// ch14/jit_specialization: one kernel, compiled twice: ahead of time with its shapes and strides
// as run-time arguments, and at run time by NVRTC with the actual shapes baked in as constants.
//
// The work is attention's head transpose with a bias: in is [batch, seq, heads, dim] (a
// projection's output), out[b][h][s][d] = in[b][s][h][d] + bias[h][d], written as [batch, heads,
// seq, dim]. A kernel that serves any shape takes the sizes and the input strides as arguments
// and must turn each output index into coordinates with 64-bit division and modulo by values
// it cannot see: a division by an unknown divisor is a ~20-instruction reciprocal-and-correct
// sequence (after a run-time test that the operands fit 32 bits), and the kernel does three. The
// same source with the sizes known folds each one to a multiply-high and a shift, or a mask for
// powers of two, and the stride multiplies to shifts: the integer work that made it
// instruction-bound disappears and the loads and stores are all that is left.
//   1. baseline "runtime_shapes": the template below instantiated by nvcc with RuntimeShape
//      (sizes and strides as kernel arguments);
//   2. optimized "nvrtc_baked_shapes": the same template text (kept as a string by
//      CH14_CODE_AND_TEXT) instantiated by NVRTC with BakedShape, whose members are
//      `static constexpr` values printed from this workload's sizes. It is compiled in the
//      variant's constructor, untimed, and the first-call costs are reported as metrics:
//      jit_compile_ms (NVRTC, source to cubin: what a process with an empty cache pays once per
//      shape), jit_load_ms (loading that cubin) and jit_cached_first_call_ms (reading the cubin
//      back from the on-disk cache and loading it: what every later process pays; see
//      nvrtc_jit.hpp for the cache's key and place). jit_cache_hit says the second load did hit.
// Same source, same arithmetic (one add per element), bit-identical outputs. Each thread moves
// one float, as the generic kernel does: vectorising is a separate lesson (ch07).
// Expected: the baseline limited by integer issue, the baked kernel near the scalar-copy rate
// (ch07 measured 80% of the copy ceiling for one float per thread).
//
//   ./bench compare --chapter ch14 --example jit_specialization
#include <bench/bench.hpp>

#include <memory>
#include <string>
#include <vector>

#include "nvrtc_jit.hpp"

namespace {

// Compiles the code here (nvcc) and keeps its text as `name` (for NVRTC): one source for both.
// The text must not contain preprocessor directives or comments (they do not survive #).
#define CH14_CODE_AND_TEXT(name, ...) \
  __VA_ARGS__                         \
  constexpr const char* name = #__VA_ARGS__;

CH14_CODE_AND_TEXT(kPermuteSource,
template <class Shape>
__device__ __forceinline__ void permute_add_bias(const float* __restrict__ in, const float* __restrict__ bias,
                                                 float* __restrict__ out, const Shape& shape) {
  const long long total = shape.batch * shape.heads * shape.seq * shape.dim;
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= total) return;
  const long long d = i % shape.dim;
  long long rest = i / shape.dim;
  const long long s = rest % shape.seq;
  rest /= shape.seq;
  const long long h = rest % shape.heads;
  const long long b = rest / shape.heads;
  const float x = in[b * shape.in_stride_b + s * shape.in_stride_s + h * shape.in_stride_h + d * shape.in_stride_d];
  out[i] = x + bias[h * shape.dim + d];
}
)

// What the ahead-of-time kernel knows: nothing until it runs.
struct RuntimeShape {
  long long batch, heads, seq, dim;
  long long in_stride_b, in_stride_s, in_stride_h, in_stride_d;
};

constexpr int kBlock = 256;

struct HeadTranspose {
  int64_t batch, seq, heads, dim;
  bench::DeviceSpan<const float> in;    // [batch, seq, heads, dim]
  bench::DeviceSpan<const float> bias;  // [heads, dim]
  bench::DeviceSpan<float> out;         // [batch, heads, seq, dim]
  explicit HeadTranspose(bench::Setup& s)
      : batch(s.size("batch", 32, 3)),  // timing: 32 x 2048 x 12 x 128 = 403 MB each way
        seq(s.size("seq", 2048, 37)),   // verification: odd sizes, no power of two
        heads(s.size("heads", 12, 5)),
        dim(s.size("dim", 128, 24)),
        in(s.input<float>("in", batch * seq * heads * dim, bench::uniform(-1, 1))),
        bias(s.input<float>("bias", heads * dim, bench::uniform(-1, 1))),
        out(s.output<float>("out", batch * heads * seq * dim)) {
    s.bytes(double(in.bytes()) + double(bias.bytes()) + double(out.bytes()));
  }
  int64_t total() const { return batch * seq * heads * dim; }
  // The input is contiguous here, but the kernel is written for any strided view.
  RuntimeShape shape() const { return {batch, heads, seq, dim, seq * heads * dim, heads * dim, dim, 1}; }
  unsigned blocks() const { return static_cast<unsigned>((total() + kBlock - 1) / kBlock); }
};

__global__ void __launch_bounds__(kBlock) permute_add_bias_runtime(const float* __restrict__ in, const float* __restrict__ bias,
                                                                   float* __restrict__ out, RuntimeShape shape) {
  permute_add_bias(in, bias, out, shape);
}

void launch_runtime_shapes(const HeadTranspose& w, cudaStream_t stream) {
  permute_add_bias_runtime<<<w.blocks(), kBlock, 0, stream>>>(w.in.data(), w.bias.data(), w.out.data(), w.shape());
  BENCH_CHECK_LAUNCH();
}

// The NVRTC translation unit: the shared template, the shape as constants, an entry point.
std::string baked_source(const RuntimeShape& r) {
  auto c = [](const char* name, long long v) {
    return "  static constexpr long long " + std::string(name) + " = " + std::to_string(v) + ";\n";
  };
  return std::string(kPermuteSource) + "\nstruct BakedShape {\n" + c("batch", r.batch) + c("heads", r.heads) +
         c("seq", r.seq) + c("dim", r.dim) + c("in_stride_b", r.in_stride_b) + c("in_stride_s", r.in_stride_s) +
         c("in_stride_h", r.in_stride_h) + c("in_stride_d", r.in_stride_d) +
         "};\n"
         "extern \"C\" __global__ void __launch_bounds__(" + std::to_string(kBlock) + ") permute_add_bias_baked(\n"
         "    const float* __restrict__ in, const float* __restrict__ bias, float* __restrict__ out) {\n"
         "  permute_add_bias(in, bias, out, BakedShape{});\n"
         "}\n";
}

// Compiles for this workload's shape in the constructor (untimed), twice over: once bypassing
// the cache to time NVRTC, once through the cache as a later process would find it.
class NvrtcBakedShapes {
 public:
  NvrtcBakedShapes(const HeadTranspose& w, cudaStream_t) {
    const std::string source = baked_source(w.shape());
    const std::vector<std::string> options = {"--std=c++17"};
    {
      ch14::JitKernel fresh(source, "permute_add_bias_baked", options, ch14::JitKernel::Cache::refresh);
      compile_ms_ = fresh.stats().compile_ms;
      load_ms_ = fresh.stats().load_ms;
    }
    kernel_ = std::make_unique<ch14::JitKernel>(source, "permute_add_bias_baked", options);
  }
  void operator()(const HeadTranspose& w, cudaStream_t stream) const {
    const float* in = w.in.data();
    const float* bias = w.bias.data();
    float* out = w.out.data();
    void* args[] = {&in, &bias, &out};
    kernel_->launch(w.blocks(), kBlock, args, stream);
  }
  std::vector<bench::Metric> metrics() const {
    return {{"jit_compile_ms", compile_ms_},
            {"jit_load_ms", load_ms_},
            {"jit_cached_first_call_ms", kernel_->stats().load_ms},
            {"jit_cache_hit", kernel_->stats().cache_hit ? 1.0 : 0.0}};
  }

 private:
  double compile_ms_ = 0, load_ms_ = 0;
  std::unique_ptr<ch14::JitKernel> kernel_;
};

void reference(const HeadTranspose& w, bench::HostData& h) {
  auto in = h.input<float>("in");
  auto bias = h.input<float>("bias");
  auto out = h.expected("out");
  const RuntimeShape r = w.shape();
  int64_t i = 0;
  for (int64_t b = 0; b < w.batch; ++b)
    for (int64_t hd = 0; hd < w.heads; ++hd)
      for (int64_t s = 0; s < w.seq; ++s)
        for (int64_t d = 0; d < w.dim; ++d, ++i)
          out[i] = double(in[b * r.in_stride_b + s * r.in_stride_s + hd * r.in_stride_h + d]) + double(bias[hd * w.dim + d]);
}

// One float addition per element: the result is the exactly rounded sum, within half an ulp
// of the reference's double sum (|sum| < 2, so 2^-24 absolute, and relative to it).
BENCH_EXAMPLE(ch14, jit_specialization, HeadTranspose)
    .baseline("runtime_shapes", launch_runtime_shapes)
    .stateful<NvrtcBakedShapes>(bench::Role::optimized, "nvrtc_baked_shapes")
    .reference(reference)
    .tolerance(bench::allclose(1.2e-7, 6e-8));

}  // namespace

// ch14/jit_specialization: one generic kernel, compiled twice: ahead of time with shapes and
// strides as run-time arguments, and at run time by NVRTC with the actual ones baked in.
//
// The work is attention's head transpose with a bias, as a framework runs it: the strided view
// in.permute(0, 2, 1, 3) of a [batch, seq, heads, dim] projection, plus a [heads, dim] bias
// broadcast over batch and seq, written contiguous as [batch, heads, seq, dim]. A kernel that
// serves any view (PyTorch's TensorIterator, without its precomputed fast dividers) walks the
// output index through the dims: coordinate = rest % size[r], rest /= size[r], offset +=
// coordinate * stride[r] for each operand, the loop unrolled to a maximum rank with the unused
// dims skipped. With sizes unknown, the 4 divisions (3 quotients with their remainders, one
// remainder alone) are 64-bit divisions by run-time values: a test that the operands fit 32
// bits, then a ~10-instruction reciprocal-and-correct sequence, and the stride products are
// full 64-bit multiplies: 122 PTX instructions per element (nvcc -O3, sm_90a). With the sizes
// known, each division becomes a multiply-high and shift (a mask or shift for powers of two),
// the stride products fold to shifts and adds: 48 PTX instructions, no division.
//   1. baseline "runtime_shapes": the template below instantiated by nvcc with RuntimeShape
//      (rank, sizes and strides as kernel arguments);
//   2. optimized "nvrtc_baked_shapes": the same template text (kept as a string by
//      CH14_CODE_AND_TEXT) instantiated by NVRTC with BakedShape, whose members return this
//      workload's sizes and strides as constants. It is compiled in the variant's constructor,
//      untimed, and the first-call costs are reported as metrics: jit_compile_ms (NVRTC, source
//      to cubin: what a process with an empty cache pays once per shape), jit_load_ms (loading
//      that cubin into the context) and jit_cached_first_call_ms (reading the cubin back from
//      the on-disk cache and loading it, in this process), and, in a process that found an
//      earlier process's cubin before compiling anything, jit_later_process_first_call_ms (what a
//      second process pays; nvrtc_jit.hpp has the cache's key and place); jit_cache_hit says the
//      timed kernel's load did hit, jit_registers what ptxas allocated.
// Same source, same arithmetic (one add per element), bit-identical outputs. Each thread moves
// one float, as the generic kernel does: vectorising is a separate lesson (ch07).
// Expected: the baseline limited by integer issue (about 3x the instructions per element), the
// baked kernel by memory, near the scalar-copy rate (ch07's README, 'The copies against size',
// has it for one float per thread): a speedup of 1.3-2x, to be measured.
//
//   ./bench compare --chapter ch14 --example jit_specialization
#include <bench/bench.hpp>

#include <array>
#include <string>
#include <vector>

#include "nvrtc_jit.hpp"

namespace {

// Compiles the code here (nvcc) and keeps its text as `name` (for NVRTC): one source for both.
// The text must not contain preprocessor directives or comments (they do not survive #).
#define CH14_CODE_AND_TEXT(name, ...) \
  __VA_ARGS__                         \
  constexpr const char* name = #__VA_ARGS__;

// The macro's argument is kernel source, laid out for reading:
// clang-format off
CH14_CODE_AND_TEXT(kGatherSource,
template <class Shape>
__device__ __forceinline__ void strided_add_contiguous(const float* __restrict__ in, const float* __restrict__ bias,
                                                       float* __restrict__ out, const Shape& shape) {
  long long total = 1;
  for (int r = 0; r < Shape::max_rank; ++r)
    if (r < shape.rank()) total *= shape.size(r);
  const long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i >= total) return;
  long long rest = i, in_offset = 0, bias_offset = 0;
  for (int r = Shape::max_rank - 1; r >= 0; --r) {
    if (r >= shape.rank()) continue;
    const long long coordinate = rest % shape.size(r);
    rest /= shape.size(r);
    in_offset += coordinate * shape.in_stride(r);
    bias_offset += coordinate * shape.bias_stride(r);
  }
  out[i] = in[in_offset] + bias[bias_offset];
}
)
// clang-format on

constexpr int kMaxRank = 4;

// What the ahead-of-time kernel knows: nothing until it runs. Sizes are the output's, in order;
// strides (in elements) say where each output coordinate lands in each operand.
struct RuntimeShape {
  static constexpr int max_rank = kMaxRank;  // loops unroll to this; dims past rank_ are skipped
  int rank_;
  long long sizes[kMaxRank], in_strides[kMaxRank], bias_strides[kMaxRank];
  __device__ int rank() const { return rank_; }
  __device__ long long size(int r) const { return sizes[r]; }
  __device__ long long in_stride(int r) const { return in_strides[r]; }
  __device__ long long bias_stride(int r) const { return bias_strides[r]; }
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
        dim(s.size("dim", 128, 23)),
        in(s.input<float>("in", batch * seq * heads * dim, bench::uniform(-1, 1))),
        bias(s.input<float>("bias", heads * dim, bench::uniform(-1, 1))),
        out(s.output<float>("out", batch * heads * seq * dim)) {
    s.bytes(double(in.bytes()) + double(bias.bytes()) + double(out.bytes()));
  }
  int64_t total() const { return batch * seq * heads * dim; }
  // Output dims (batch, heads, seq, dim); in is read through the permuted view, bias broadcast.
  RuntimeShape shape() const {
    return {4, {batch, heads, seq, dim}, {seq * heads * dim, dim, heads * dim, 1}, {0, dim, 0, 1}};
  }
  unsigned blocks() const { return static_cast<unsigned>((total() + kBlock - 1) / kBlock); }
};

__global__ void __launch_bounds__(kBlock)
    strided_add_runtime(const float* __restrict__ in, const float* __restrict__ bias,
                        float* __restrict__ out, RuntimeShape shape) {
  strided_add_contiguous(in, bias, out, shape);
}

void launch_runtime_shapes(const HeadTranspose& w, cudaStream_t stream) {
  strided_add_runtime<<<w.blocks(), kBlock, 0, stream>>>(w.in.data(), w.bias.data(), w.out.data(),
                                                         w.shape());
  BENCH_CHECK_LAUNCH();
}

// The NVRTC translation unit: the shared template, the shape as constants, an entry point.
std::string baked_source(const RuntimeShape& r) {
  auto by_dim = [&](const char* name, const long long(&v)[kMaxRank]) {
    std::string s =
        "  __device__ static constexpr long long " + std::string(name) + "(int r) { return ";
    for (int d = 0; d < r.rank_ - 1; ++d)
      s += "r == " + std::to_string(d) + " ? " + std::to_string(v[d]) + "LL : ";
    return s + std::to_string(v[r.rank_ - 1]) + "LL; }\n";
  };
  return std::string(kGatherSource) + "\nstruct BakedShape {\n" +
         "  static constexpr int max_rank = " + std::to_string(r.rank_) + ";\n" +
         "  __device__ static constexpr int rank() { return " + std::to_string(r.rank_) + "; }\n" +
         by_dim("size", r.sizes) + by_dim("in_stride", r.in_strides) +
         by_dim("bias_stride", r.bias_strides) +
         "};\n"
         "extern \"C\" __global__ void __launch_bounds__(" +
         std::to_string(kBlock) +
         ") strided_add_baked(\n"
         "    const float* __restrict__ in, const float* __restrict__ bias, float* __restrict__ "
         "out) {\n"
         "  strided_add_contiguous(in, bias, out, BakedShape{});\n"
         "}\n";
}

// Compiles for this workload's shape in the constructor (untimed), twice over: once bypassing
// the cache to time NVRTC, once through the cache as a later process would find it
// (ch14::MeasuredJitKernel).
class NvrtcBakedShapes {
 public:
  NvrtcBakedShapes(const HeadTranspose& w, cudaStream_t)
      : kernel_(baked_source(w.shape()), "strided_add_baked", {"--std=c++17"}) {}
  void operator()(const HeadTranspose& w, cudaStream_t stream) const {
    const float* in = w.in.data();
    const float* bias = w.bias.data();
    float* out = w.out.data();
    void* args[] = {&in, &bias, &out};
    kernel_.launch(w.blocks(), kBlock, args, stream);
  }
  std::vector<bench::Metric> metrics() const { return kernel_.metrics(); }

 private:
  ch14::MeasuredJitKernel kernel_;
};

void reference(const HeadTranspose& w, bench::HostData& h) {
  auto in = h.input<float>("in");
  auto bias = h.input<float>("bias");
  auto out = h.expected("out");
  int64_t i = 0;
  for (int64_t b = 0; b < w.batch; ++b)
    for (int64_t hd = 0; hd < w.heads; ++hd)
      for (int64_t s = 0; s < w.seq; ++s)
        for (int64_t d = 0; d < w.dim; ++d, ++i)
          out[i] = double(in[((b * w.seq + s) * w.heads + hd) * w.dim + d]) +
                   double(bias[hd * w.dim + d]);
}

// One float addition of two values in [-1, 1]: the kernel's result is the exactly rounded sum,
// within half an ulp, 2^-24 |sum|, of the reference's double sum.
// The timing-size check (docs/validity.md row 2): one thread per output element reads its input
// through the permutation written out by hand, adds the bias in double; no shape structs, no JIT.
__global__ void reference_head_transpose(const float* in, const float* bias, float* out, int64_t batch, int64_t seq,
                                         int64_t heads, int64_t dim) {
  const int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;  // out is [batch, heads, seq, dim]
  if (i >= batch * heads * seq * dim) return;
  const int64_t d = i % dim, s = i / dim % seq, hd = i / dim / seq % heads, b = i / dim / seq / heads;
  out[i] = static_cast<float>(double(in[((b * seq + s) * heads + hd) * dim + d]) + double(bias[hd * dim + d]));
}

void device_reference(const HeadTranspose& w, cudaStream_t stream) {
  reference_head_transpose<<<static_cast<unsigned>((w.total() + kBlock - 1) / kBlock), kBlock, 0, stream>>>(
      w.in.data(), w.bias.data(), w.out.data(), w.batch, w.seq, w.heads, w.dim);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch14, jit_specialization, HeadTranspose)
    .baseline("runtime_shapes", launch_runtime_shapes)
    .stateful<NvrtcBakedShapes>(bench::Role::optimized, "nvrtc_baked_shapes")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::allclose(1e-12, 6e-8));

}  // namespace

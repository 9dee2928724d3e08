// ch04/gradient_compression: all-reducing FP32 gradients as BF16 (1 GiB of FP32 per GPU, N >= 2).
//
// Lesson: an all-reduce at the link's bandwidth is limited by bytes, so sending half the bytes
// halves it, at a precision cost that can be bounded in advance.
//
// What changes from baseline to optimized:
//   1. baseline: ncclAllReduce on the FP32 gradients (4 bytes an element on the links);
//   2. optimized: each GPU rounds its gradient to BF16 (one pass over HBM), ncclAllReduce sums
//      the BF16 buffers (2 bytes an element on the links; NCCL adds in FP32 and rounds each
//      partial sum to BF16), and each GPU widens the sum back into its FP32 result (exact).
// Both leave the FP32 sum on every GPU; every GPU is checked (multi_gpu.cuh). Both all-reduce on
// communicators of at least 32 blocks (ch04::kBandwidthCtas), as ch04/allreduce's optimized does.
//
// Error bound (checked): each GPU's gradient is drawn in [-1/N, 1/N] (the 1/N of the average
// already applied, as data-parallel training does), so sum|x_g| <= 1. BF16 keeps 8 significant
// bits, u = 2^-8. Rounding the N inputs costs <= u sum|x_g|; each of the N-1 additions rounds a
// partial sum no larger than sum|x_g|, <= u sum|x_g| each: |error| <= N u sum|x_g| <= N u. The
// tolerance is that bound for the largest N the chapter supports (8): 8 x 2^-8 = 2^-5; on 2 GPUs
// the bound is 2^-7 and the report's max_abs_err shows what the run really lost. The FP32
// baseline is ~5 orders of magnitude inside it.
//
// Declared bytes: what the bound allows on the links, 2(N-1)/N x 2 bytes per element (busbw
// bytes at BF16), against the `p2p` ceiling: the FP32 baseline reaches at most half of it.
//
//   ./bench compare --chapter ch04 --example gradient_compression
#include "multi_gpu.cuh"

#include <kernels/bf16_pack.cuh>

namespace {

struct Gradients {
  ch04::Sharded io;
  Gradients(bench::Setup& s, const std::vector<int>& gpus)
      : io(s, gpus, s.size("n", int64_t{1} << 28, 100'003),
           bench::uniform(-1.0 / double(gpus.size()), 1.0 / double(gpus.size())), "sum") {
    s.bytes(ch04::busbw_factor(gpus.size()) * double(io.n) * 2.0, "p2p_gbps");
  }
  explicit Gradients(bench::Setup& s) : Gradients(s, ch04::all_gpus()) {}
  void inputs_filled(cudaStream_t s) const { io.refresh(s); }
};

// BF16 is the high half of an FP32 pattern: narrowing rounds to nearest even, widening is a shift.
__global__ void to_bf16(const float* __restrict__ in, int64_t n, unsigned short* __restrict__ out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = static_cast<unsigned short>(kernels::pack_bf16x2(in[i], 0.0f) & 0xffffu);
}
__global__ void to_f32(const unsigned short* __restrict__ in, int64_t n, float* __restrict__ out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __uint_as_float(static_cast<unsigned>(in[i]) << 16);
}

class Fp32AllReduce {
 public:
  Fp32AllReduce(const Gradients& w, cudaStream_t) : fan_(w.io.gpus), comms_(w.io.gpus, ch04::kBandwidthCtas) {}
  void operator()(const Gradients& w, cudaStream_t s) const {
    const auto& io = w.io;
    fan_.fork(s);
    ch04::all_reduce(comms_, fan_, io.size(), s, [&](size_t i) { return io.input(i); },
                     [&](size_t i) { return io.output(i); }, size_t(io.n), ncclFloat);
    fan_.join(s);
    io.check(s);
  }

 private:
  ch04::Fan fan_;
  ch04::Communicators comms_;
};

class Bf16AllReduce {
 public:
  Bf16AllReduce(const Gradients& w, cudaStream_t) : fan_(w.io.gpus), comms_(w.io.gpus, ch04::kBandwidthCtas), packed_(w.io.gpus, w.io.n, 0) {}
  void operator()(const Gradients& w, cudaStream_t s) const {
    const auto& io = w.io;
    const int blocks = 132 * 8;  // grid-stride: a few waves of the largest GPU
    fan_.fork(s);
    for (size_t i = 0; i < io.size(); ++i) {
      ch04::OnDevice on(io.gpus[i]);
      to_bf16<<<blocks, 256, 0, fan_.stream(i, s)>>>(io.input(i), io.n, packed_[i]);
      BENCH_CHECK_LAUNCH();
    }
    ch04::all_reduce(comms_, fan_, io.size(), s, [&](size_t i) { return packed_[i]; },
                     [&](size_t i) { return packed_[i]; }, size_t(io.n), ncclBfloat16);
    for (size_t i = 0; i < io.size(); ++i) {
      ch04::OnDevice on(io.gpus[i]);
      to_f32<<<blocks, 256, 0, fan_.stream(i, s)>>>(packed_[i], io.n, io.output(i));
      BENCH_CHECK_LAUNCH();
    }
    fan_.join(s);
    io.check(s);
  }

 private:
  ch04::Fan fan_;
  ch04::Communicators comms_;
  ch04::PerGpu<unsigned short> packed_;  // BF16 bits on every GPU, GPU 0 included
};

void reference(const Gradients& w, bench::HostData& h) { w.io.expect_sum(h, "sum"); }

BENCH_EXAMPLE(ch04, gradient_compression, Gradients)
    .stateful<Fp32AllReduce>(bench::Role::baseline, "fp32_allreduce")
    .stateful<Bf16AllReduce>(bench::Role::optimized, "bf16_allreduce")
    .reference(reference)
    .tolerance(bench::allclose(ch04::kMaxGpus * 0x1p-8, 0))
    .min_gpus(2);

}  // namespace

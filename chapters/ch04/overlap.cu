// ch04/overlap: hiding a backward pass's gradient all-reduce behind the backward pass itself
// (32 layers, a 16 MiB FP32 gradient bucket each, N >= 2 GPUs).
//
// Lesson: a layer's gradient is final as soon as that layer's backward step ends, so its
// all-reduce can run while the earlier layers still compute; the step then costs about the larger
// of compute and communication instead of their sum.
//
// What the hardware does: NCCL's all-reduce is a kernel. Each of its thread blocks (one per
// channel) drives a share of the links and needs most of one SM's registers (NCCL builds with up
// to 96 registers a thread, 512+ threads a block), so while it runs, the SMs it holds do no
// arithmetic for the compute kernels beside it. Overlap therefore costs (SMs taken / all SMs) x
// communication time of compute, plus the last bucket's all-reduce, which nothing is left to hide.
// The knobs: how many blocks NCCL may take (ncclConfig_t::maxCTAs here, NCCL_MAX_CTAS or
// NCCL_MAX_NCHANNELS for a whole process), and stream priority, so a ready all-reduce gets SMs
// the moment compute blocks retire instead of queueing behind the next layer's thousands.
// Bucket size trades per-call cost (launch and synchronisation, a few tens of us, and the lower
// busbw of small messages) against overlap granularity (the first bucket cannot start before
// its layer ends, the last is exposed): PyTorch DDP's default is 25 MiB.
//
// What changes from baseline to optimized:
//   1. baseline (compute_then_allreduce): every layer's backward kernel, then one ncclAllReduce
//      over all 512 MiB of gradients, on at least 32 blocks (ch04::kBandwidthCtas, the block
//      count of ch04/allreduce: nothing else is running);
//   2. optimized (bucketed_overlap): after each layer's kernel an event hands its bucket to a
//      highest-priority communication stream, which all-reduces it (one call per bucket, a
//      communicator capped at kOverlapMaxCtas blocks) while the compute stream goes on to the
//      next layer; the compute stream waits for the communication stream only at the end.
// Same compute, same bytes reduced, in place, same sum on every GPU; every GPU is checked
// (multi_gpu.cuh). A layer's "backward" is kFmaPerElement dependent FMAs per gradient element
// (kernels::dependent_fma_chain of the activation): compute-bound like a real backward GEMM.
//
// Metrics (after the timed samples, each the mean of 5 back-to-back runs timed on GPU 0's stream
// across all GPUs' streams, see ch04::mean_us): compute_us (every layer's kernel, no all-reduce),
// comm_us (this variant's all-reduce(s) alone: one call for the baseline, the 32 bucket calls on
// the capped communicator for the optimized), total_us (both, as timed), and total_over_max =
// total_us / max(compute_us, comm_us): the target is <= 1.10.
// Declared: flops 2 x kFmaPerElement per element on each GPU (FP32 ceiling: the share of one
// GPU's arithmetic the whole step keeps) and busbw bytes 2(N-1)/N x 4 per element (`p2p`).
//
//   ./bench compare --chapter ch04 --example overlap
#include <algorithm>
#include <kernels/dependent_fma.cuh>

#include "multi_gpu.cuh"

namespace {

// Sized so that on 2 H200s the compute exceeds the bucketed all-reduce, so the optimized step
// approaches compute_us (the measured parts: the README's overlap metrics).
constexpr int kFmaPerElement = 1024;
// Blocks NCCL may take per all-reduce while compute runs (of 132 SMs): fewer leaves more SMs to
// compute, but each block moves a bounded share of the link's bandwidth.
constexpr int kOverlapMaxCtas = 16;
constexpr int kThreads = 256;

struct Backward {
  int64_t layers, bucket;  // bucket: gradient (and activation) elements of one layer
  ch04::Sharded io;        // per GPU: activations in, summed gradients out (layers x bucket)
  Backward(bench::Setup& s, const std::vector<int>& gpus)
      : layers(s.size("layers", 32, 5)),
        bucket(s.size("bucket", int64_t{1} << 22, 10'007)),
        io(s, gpus, layers * bucket, bench::uniform(-1, 1), "grad_sum") {
    s.param("fma_per_element", kFmaPerElement);
    s.flops(2.0 * kFmaPerElement * double(io.n));
    s.bytes(ch04::busbw_factor(gpus.size()) * double(io.n) * sizeof(float), "p2p_gbps");
  }
  explicit Backward(bench::Setup& s) : Backward(s, ch04::all_gpus()) {}
  void inputs_filled(cudaStream_t s) const { io.refresh(s); }
  const float* activations(size_t gpu, int64_t layer) const {
    return io.input(gpu) + layer * bucket;
  }
  float* gradient(size_t gpu, int64_t layer) const { return io.output(gpu) + layer * bucket; }
};

// One layer's backward step: each gradient element from its activation, FMA-bound.
__global__ void __launch_bounds__(kThreads)
    layer_backward(const float* __restrict__ activation, int64_t m, float* __restrict__ gradient) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < m) gradient[i] = kernels::dependent_fma_chain(activation[i], kFmaPerElement);
}

// What both variants share: streams on every GPU, a communicator, the compute, the timed call
// and the metrics. A variant is its `body`: the compute and/or the all-reduces, between the fork
// of every GPU's stream from the case's stream and their join back into it.
class Step {
 public:
  Step(const Backward& w, cudaStream_t s, ch04::CtaRange ctas)
      : w_(w), s_(s), fan_(w.io.gpus), comms_(w.io.gpus, ctas) {}
  virtual ~Step() = default;
  void operator()(const Backward& w, cudaStream_t s) const {
    enqueue(s, true, true);
    w.io.check(s);
  }
  std::vector<bench::Metric> metrics() const {
    auto mean_us = [this](bool compute, bool comm) {
      return ch04::mean_us(s_, 5, [&](cudaStream_t s) { enqueue(s, compute, comm); });
    };
    const double compute = mean_us(true, false), comm = mean_us(false, true);
    const double total = mean_us(true, true);
    return {{"compute_us", compute},
            {"comm_us", comm},
            {"total_us", total},
            {"total_over_max", total / std::max(compute, comm)}};
  }

 protected:
  virtual void body(cudaStream_t s, bool compute, bool comm) const = 0;
  void enqueue(cudaStream_t s, bool compute, bool comm) const {
    fan_.fork(s);
    body(s, compute, comm);
    fan_.join(s);
  }
  void compute_layer(int64_t layer, cudaStream_t s) const {
    const auto& io = w_.io;
    const unsigned blocks = unsigned((w_.bucket + kThreads - 1) / kThreads);
    for (size_t i = 0; i < io.size(); ++i) {
      ch04::OnDevice on(io.gpus[i]);
      layer_backward<<<blocks, kThreads, 0, fan_.stream(i, s)>>>(w_.activations(i, layer),
                                                                 w_.bucket, w_.gradient(i, layer));
      BENCH_CHECK_LAUNCH();
    }
  }
  const Backward& w_;
  cudaStream_t s_;
  ch04::Fan fan_;
  ch04::Communicators comms_;
};

class ComputeThenAllReduce : public Step {
 public:
  ComputeThenAllReduce(const Backward& w, cudaStream_t s) : Step(w, s, ch04::kBandwidthCtas) {}

 private:
  void body(cudaStream_t s, bool compute, bool comm) const override {
    const auto& io = w_.io;
    for (int64_t l = 0; compute && l < w_.layers; ++l) compute_layer(l, s);
    if (comm)  // all gradients at once, in place
      ch04::all_reduce(
          comms_, fan_, io.size(), s, [&](size_t i) { return io.output(i); },
          [&](size_t i) { return io.output(i); }, size_t(io.n), ncclFloat);
  }
};

class BucketedOverlap : public Step {
 public:
  BucketedOverlap(const Backward& w, cudaStream_t s)
      : Step(w, s, {.max = kOverlapMaxCtas}), comm_(w.io.gpus) {}

 private:
  void body(cudaStream_t s, bool compute, bool comm) const override {
    const size_t gpus = w_.io.size();
    for (int64_t l = 0; l < w_.layers; ++l) {
      if (compute) compute_layer(l, s);
      if (!comm) continue;
      for (size_t i = 0; i < gpus; ++i) comm_.follow(i, fan_.stream(i, s));  // bucket l is ready
      auto bucket = [&](size_t i) { return w_.gradient(i, l); };             // in place
      ch04::all_reduce_on(
          comms_, gpus, [&](size_t i) { return comm_[i]; }, bucket, bucket, size_t(w_.bucket),
          ncclFloat);
    }
    for (size_t i = 0; comm && i < gpus; ++i) comm_.join_into(i, fan_.stream(i, s));
  }
  ch04::SideStreams comm_;
};

// Element j of the sum on every GPU: sum over GPUs g of layer_backward(shard g's element j).
void reference(const Backward& w, bench::HostData& h) {
  auto in = h.input<float>("inputs");
  w.io.expect(h, "grad_sum", [&](size_t, int64_t j) {
    double acc = 0;
    for (size_t g = 0; g < w.io.size(); ++g)
      acc += kernels::dependent_fma_chain(double(in[g * w.io.n + j]), kFmaPerElement);
    return acc;
  });
}

// The same in double on GPU 0, from the harness's copy of every shard, for the timing size
// (the CPU would need minutes): the shared all-reduce reference with the chain applied to each
// element first.
struct LayerBackward {
  __device__ double operator()(double x) const {
    return kernels::dependent_fma_chain(x, kFmaPerElement);
  }
};
void device_reference(const Backward& w, cudaStream_t s) {
  w.io.device_expect_sum(s, LayerBackward{});
}

// Error bound, u = 2^-24: a chain step p*t + x0 has |p| <= 2, |t| <= 1/2 and rounds by <= 3u
// (2u fused); earlier errors shrink by |t| <= 1/2 a step, so a chain ends within 6u before its
// exact halving, 3u after. Summing N such terms (each in [-1/3, 1]) in FP32 in any order adds
// <= (N-1) u N, and the reference's own rounding to FP32 <= u N: N(N+3)u, 88u for N = 8.
BENCH_EXAMPLE(ch04, overlap, Backward)
    .stateful<ComputeThenAllReduce>(bench::Role::baseline, "compute_then_allreduce")
    .stateful<BucketedOverlap>(bench::Role::optimized, "bucketed_overlap")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::allclose(ch04::kMaxGpus*(ch04::kMaxGpus + 3) * 0x1p-24, 0))
    .min_gpus(2);

}  // namespace

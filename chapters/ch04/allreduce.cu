// ch04/allreduce: summing every GPU's FP32 gradient on every GPU (1 GiB per GPU, N >= 2 GPUs).
//
// Lesson: an all-reduce should keep every link busy in both directions at once. Funnelling the
// data through one GPU uses one GPU's links, one direction at a time; a ring (or tree) all-reduce
// makes each GPU send and receive 2(N-1)/N of the data concurrently, which is the least any
// all-reduce can move per GPU (nccl-tests' "bus bandwidth": busbw = algbw x 2(N-1)/N).
//
// What changes from baseline to optimized:
//   1. baseline (gather_reduce_broadcast): every peer copies its gradient to GPU 0 (the copies
//      run at once, but all of them land on GPU 0's links), GPU 0 sums the N gradients, then
//      every peer copies the sum back: (N-1) x n bytes in through one GPU, then (N-1) x n out;
//   2. optimized: one ncclAllReduce per GPU in a group: NCCL splits the buffer into chunks and
//      pipelines reduce-scatter then all-gather over all links at once, each GPU reducing its
//      chunk as it arrives, on 32 blocks below 16 MiB and 64 from there up (ch04::bandwidth_ctas:
//      NCCL's own choice left busbw unused at 1 GiB; 64 blocks gain from 64 MiB up and lose at
//      1-4 MiB: nccl_ctas.hpp), one communicator for each block count.
// Same inputs (shard i is GPU i's gradient), same result on every GPU, every GPU checked (see
// multi_gpu.cuh). Declared: only bytes, 2(N-1)/N x 4n per GPU against the `p2p` ceiling, so
// the report's GB/s is busbw and its % is of the peer link. The (N-1) x n additions are not
// declared as flops: a collective is bound by its links, and a flop count beside the bytes would
// have the report show a meaningless fraction of the FP32 peak instead (a fraction of a
// percent). Both variants also report a size sweep (4 KiB to 1 GiB) as metrics
// busbw_gbps_<size>: the README's table. Each point is a batch of calls back to back, as
// nccl-tests and PyTorch users time them (ch04::busbw_sweep); the scored time is one call.
// Messages of 1 MiB and less: ch04/allreduce_small.
// Timing joins every GPU's stream into the case's stream before the stop event (multi_gpu.cuh,
// Fan). Cold mode: 1 GiB takes milliseconds.
//
//   ./bench compare --chapter ch04 --example allreduce
#include "multi_gpu.cuh"

namespace {

struct AllReduce {
  ch04::Sharded io;
  AllReduce(bench::Setup& s, const std::vector<int>& gpus)
      : io(s, gpus, s.size("n", int64_t{1} << 28, 100'003), bench::uniform(-1, 1), "sum") {
    s.bytes(ch04::busbw_factor(gpus.size()) * double(io.n) * sizeof(float), "p2p_gbps");
  }
  explicit AllReduce(bench::Setup& s) : AllReduce(s, ch04::all_gpus()) {}
  void inputs_filled(cudaStream_t s) const { io.refresh(s); }
};

__global__ void sum_gradients(ch04::GpuPointers<const float> in, int gpus, int64_t n,
                              float* __restrict__ out) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float acc = in.p[0][i];
    for (int g = 1; g < gpus; ++g) acc += in.p[g][i];
    out[i] = acc;
  }
}

// What both variants share: the timed call (the whole buffer, then the check) and the busbw sweep,
// each over the variant's own enqueue(count, stream) or enqueue_calls(count, stream, calls).
template <class Variant>
class Sweep {
 public:
  explicit Sweep(const AllReduce& w, cudaStream_t s) : w_(w), s_(s), fan_(w.io.gpus) {}
  void operator()(const AllReduce& w, cudaStream_t s) const {
    variant().enqueue(w.io.n, s);
    w.io.check(s);
  }
  std::vector<bench::Metric> metrics() const {
    return ch04::busbw_sweep(s_, w_.io.size(), w_.io.n * int64_t(sizeof(float)),
                             [&](int64_t count, cudaStream_t s, int calls) {
                               variant().enqueue_calls(count, s, calls);
                             });
  }
  // `calls` all-reduces back to back, as nccl-tests times them. The baseline's forks and joins are
  // part of its algorithm (GPU 0 reduces only what every peer has delivered), so each call keeps
  // them; NcclAllReduce hides this with one fork and one join around all the calls.
  void enqueue_calls(int64_t count, cudaStream_t s, int calls) const {
    for (int c = 0; c < calls; ++c) variant().enqueue(count, s);
  }

 protected:
  const Variant& variant() const { return static_cast<const Variant&>(*this); }
  const AllReduce& w_;
  cudaStream_t s_;
  ch04::Fan fan_;
};

class GatherReduceBroadcast : public Sweep<GatherReduceBroadcast> {
 public:
  GatherReduceBroadcast(const AllReduce& w, cudaStream_t s) : Sweep(w, s), staged_((int64_t(w.io.size()) - 1) * w.io.n) {}
  void enqueue(int64_t count, cudaStream_t s) const {
    const auto& io = w_.io;
    ch04::GpuPointers<const float> in;
    in.p[0] = io.input(0);
    fan_.fork(s);
    for (size_t i = 1; i < io.size(); ++i) {  // gather: each peer pushes to GPU 0, all at once
      float* slot = staged_.data() + (i - 1) * io.n;
      BENCH_CUDA_CHECK(cudaMemcpyPeerAsync(slot, io.gpus[0], io.input(i), io.gpus[i], count * sizeof(float), fan_.stream(i, s)));
      in.p[i] = slot;
    }
    fan_.join(s);
    sum_gradients<<<132 * 8, 256, 0, s>>>(in, int(io.size()), count, io.result.data());  // reduce on GPU 0
    BENCH_CHECK_LAUNCH();
    fan_.fork(s);
    for (size_t i = 1; i < io.size(); ++i)  // broadcast: each peer pulls the sum
      BENCH_CUDA_CHECK(cudaMemcpyPeerAsync(io.output(i), io.gpus[i], io.result.data(), io.gpus[0], count * sizeof(float), fan_.stream(i, s)));
    fan_.join(s);
  }

 private:
  bench::DeviceBuffer<float> staged_;  // on GPU 0: the peers' gradients
};

class NcclAllReduce : public Sweep<NcclAllReduce> {
 public:
  NcclAllReduce(const AllReduce& w, cudaStream_t s)
      : Sweep(w, s), small_(w.io.gpus, ch04::kBandwidthCtas), large_(w.io.gpus, ch04::kLargeMessageCtas) {}
  void enqueue(int64_t count, cudaStream_t s) const { enqueue_calls(count, s, 1); }
  // Every GPU's stream joins the case's stream once, after the last call: NCCL orders its own
  // calls on each GPU's stream and across GPUs, so joins between them would only add bubbles.
  void enqueue_calls(int64_t count, cudaStream_t s, int calls) const {
    const auto& io = w_.io;
    const ch04::CtaRange blocks = ch04::bandwidth_ctas(count * int64_t(sizeof(float)));
    const ch04::Communicators& comms = blocks.min == ch04::kLargeMessageCtas.min ? large_ : small_;
    fan_.fork(s);
    for (int c = 0; c < calls; ++c)
      ch04::all_reduce(comms, fan_, io.size(), s, [&](size_t i) { return io.input(i); },
                       [&](size_t i) { return io.output(i); }, size_t(count), ncclFloat);
    fan_.join(s);
  }

 private:
  ch04::Communicators small_, large_;  // on kBandwidthCtas and kLargeMessageCtas blocks
};

void reference(const AllReduce& w, bench::HostData& h) { w.io.expect_sum(h, "sum"); }
void device_reference(const AllReduce& w, cudaStream_t s) { w.io.device_expect_sum(s); }

// N <= 8 terms in [-1, 1] summed in FP32, in whatever order NCCL's ring adds them: |error| <=
// (N-1) 2^-24 sum|x| <= 7 x 8 x 2^-24 (first order), plus the device reference's own rounding of
// the exact sum to FP32, <= 2^-24 |sum| <= 8 x 2^-24: N^2 2^-24 = 3.81e-6 for N = 8.
BENCH_EXAMPLE(ch04, allreduce, AllReduce)
    .stateful<GatherReduceBroadcast>(bench::Role::baseline, "gather_reduce_broadcast")
    .stateful<NcclAllReduce>(bench::Role::optimized, "ncclAllReduce")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::allclose(ch04::kAllReduceTolerance, 0))
    .min_gpus(2);

}  // namespace

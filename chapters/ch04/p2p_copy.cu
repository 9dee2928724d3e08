// ch04/p2p_copy: every GPU hands its 1 GiB shard to the next GPU of a ring, all at once (N >= 2).
//
// Lesson: GPUs joined by NVLink (or PCIe peer-to-peer) copy to each other directly; a copy that
// goes through host memory crosses the slow host link twice and caps every GPU at its PCIe
// bandwidth. The ring shift is the step ring collectives are built from: each link carries one
// shard in each direction, concurrently.
//
// What changes from baseline to optimized:
//   1. baseline (host_staged): GPU i copies its shard to pinned host memory, then that copy is
//      pushed from the host to GPU i+1 (all GPUs at once, each on its own stream): two PCIe
//      crossings, the second waiting for the first;
//   2. optimized: peer access enabled once (untimed) and one cudaMemcpyPeerAsync per GPU, GPU i
//      -> GPU i+1 mod N, on GPU i's stream: one crossing of the GPU-to-GPU link.
// Both leave shard i-1 on GPU i; every GPU is checked (multi_gpu.cuh). Declared bytes: one shard
// (4n) against the `p2p` ceiling: each GPU's link carries that many bytes each way, so the
// achieved GB/s is per-link bandwidth (ch02/memory_transfer_multigpu measures one pair, one way).
//
//   ./bench compare --chapter ch04 --example p2p_copy
#include "multi_gpu.cuh"

namespace {

struct RingShift {
  ch04::Sharded io;
  RingShift(bench::Setup& s, const std::vector<int>& gpus)
      : io(s, gpus, s.size("n", int64_t{1} << 28, 100'003), bench::uniform(-1, 1), "received") {
    s.bytes(double(io.n) * sizeof(float), "p2p_gbps");
    for (size_t i = 0; i < gpus.size(); ++i)  // each GPU writes to the next
      kernels::enable_peer_access(gpus[i], gpus[(i + 1) % gpus.size()]);
  }
  explicit RingShift(bench::Setup& s) : RingShift(s, ch04::all_gpus()) {}
  void inputs_filled(cudaStream_t s) const { io.refresh(s); }
  size_t next(size_t i) const { return (i + 1) % io.size(); }
};

class HostStaged {
 public:
  HostStaged(const RingShift& w, cudaStream_t) : fan_(w.io.gpus), staging_(w.io.size(), nullptr) {
    for (auto& p : staging_) BENCH_CUDA_CHECK(cudaMallocHost(&p, w.io.n * sizeof(float)));
  }
  HostStaged(const HostStaged&) = delete;
  HostStaged& operator=(const HostStaged&) = delete;
  ~HostStaged() {
    for (auto p : staging_) cudaFreeHost(p);
  }
  void operator()(const RingShift& w, cudaStream_t s) const {
    const auto& io = w.io;
    const size_t bytes = io.n * sizeof(float);
    fan_.fork(s);
    for (size_t i = 0; i < io.size(); ++i)  // down: GPU i -> host slot i, on GPU i's stream
      BENCH_CUDA_CHECK(cudaMemcpyAsync(staging_[i], io.input(i), bytes, cudaMemcpyDeviceToHost, fan_.stream(i, s)));
    fan_.join(s);  // every shard is on the host
    fan_.fork(s);
    for (size_t i = 0; i < io.size(); ++i)  // up: host slot i -> GPU i+1, on GPU i+1's stream
      BENCH_CUDA_CHECK(cudaMemcpyAsync(io.output(w.next(i)), staging_[i], bytes, cudaMemcpyHostToDevice,
                                       fan_.stream(w.next(i), s)));
    fan_.join(s);
    io.check(s);
  }

 private:
  ch04::Fan fan_;
  std::vector<float*> staging_;  // pinned, one shard per GPU
};

class PeerCopy {
 public:
  PeerCopy(const RingShift& w, cudaStream_t) : fan_(w.io.gpus) {}
  void operator()(const RingShift& w, cudaStream_t s) const {
    const auto& io = w.io;
    fan_.fork(s);
    for (size_t i = 0; i < io.size(); ++i) {
      const size_t to = w.next(i);
      BENCH_CUDA_CHECK(cudaMemcpyPeerAsync(io.output(to), io.gpus[to], io.input(i), io.gpus[i], io.n * sizeof(float),
                                           fan_.stream(i, s)));
    }
    fan_.join(s);
    io.check(s);
  }

 private:
  ch04::Fan fan_;
};

void reference(const RingShift& w, bench::HostData& h) {
  auto in = h.input<float>("inputs");
  const size_t gpus = w.io.size();
  w.io.expect(h, "received", [&](size_t i, int64_t j) { return double(in[((i + gpus - 1) % gpus) * w.io.n + j]); });
}

// GPU i receives GPU (i - 1)'s shard, on the device from the harness's copy of every shard.
void device_reference(const RingShift& w, cudaStream_t s) {
  const size_t gpus = w.io.size();
  w.io.device_expect_shards(s, [gpus](size_t i) { return (i + gpus - 1) % gpus; });
}

BENCH_EXAMPLE(ch04, p2p_copy, RingShift)
    .stateful<HostStaged>(bench::Role::baseline, "host_staged")
    .stateful<PeerCopy>(bench::Role::optimized, "cudaMemcpyPeerAsync")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::exact())
    .min_gpus(2);

}  // namespace

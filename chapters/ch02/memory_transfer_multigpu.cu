// ch02/memory_transfer_multigpu: moving 1 GiB from GPU 0 to GPU 1 (needs 2 GPUs).
//
// What changes from baseline to optimized:
//   1. baseline: staged through the host, as code that never asks about peer access does:
//      GPU 0 -> pinned host buffer over PCIe, then host -> GPU 1 over PCIe: the bytes cross the
//      host link twice, and the second copy waits for the first;
//   2. optimized: peer access enabled once (untimed) and one cudaMemcpyPeerAsync: the copy goes
//      GPU to GPU directly (NVLink where the GPUs have it, else PCIe peer-to-peer), once.
// Both leave the same bytes in the same buffer on GPU 1. That buffer is outside the harness, so
// both variants end with the same one-block kernel on GPU 0 that gathers 4099 evenly spaced
// elements of it, over peer access, into the harness output `sample` (microseconds, against
// copies of milliseconds). On one GPU the example is SKIPPED with the reason.
//
//   ./bench compare --chapter ch02 --example memory_transfer_multigpu
#include <bench/bench.hpp>
#include <kernels/peer_access.hpp>

#include <cstdint>

namespace {

constexpr int kPeer = 1;  // the harness runs on GPU 0
constexpr int kSamples = 4099;

struct Transfer {
  int64_t n;
  bench::DeviceSpan<const float> src;  // on GPU 0
  bench::DeviceSpan<float> sample;
  explicit Transfer(bench::Setup& s)
      : n(s.size("n", int64_t{1} << 28, 1'000'003)),
        src(s.input<float>("src", n, bench::uniform(-1, 1))),
        sample(s.output<float>("sample", kSamples)) {
    s.bytes(double(n) * sizeof(float), "p2p_gbps");
  }
};

__global__ void gather_samples(const float* __restrict__ from, int64_t n, float* __restrict__ sample) {
  for (int j = threadIdx.x; j < kSamples; j += blockDim.x) sample[j] = from[j * (n - 1) / (kSamples - 1)];
}

// What both variants own: the destination on GPU 1, and peer access from GPU 0 (for the check).
class OnPeer {
 public:
  explicit OnPeer(const Transfer& w) {
    BENCH_CUDA_CHECK(cudaGetDevice(&here_));
    kernels::enable_peer_access(here_, kPeer);  // GPU 0 reads GPU 1 (the check)
    kernels::enable_peer_access(kPeer, here_);
    dst_ = kernels::malloc_on<float>(kPeer, w.src.bytes());
  }
  OnPeer(const OnPeer&) = delete;
  OnPeer& operator=(const OnPeer&) = delete;
  ~OnPeer() { kernels::free_on(kPeer, dst_); }
  void check(const Transfer& w, cudaStream_t stream) const {
    gather_samples<<<1, 1024, 0, stream>>>(dst_, w.n, w.sample.data());
    BENCH_CHECK_LAUNCH();
  }
  float* dst() const { return dst_; }
  int here() const { return here_; }

 private:
  float* dst_ = nullptr;
  int here_ = 0;
};

// GPU 0 -> pinned host on the case's stream; host -> GPU 1 on a GPU-1 stream that waits for the
// first copy; the case's stream then waits for the second (fork and join with events).
class HostStaged {
 public:
  HostStaged(const Transfer& w, cudaStream_t) : peer_(w) {
    BENCH_CUDA_CHECK(cudaMallocHost(&staging_, w.src.bytes()));
    BENCH_CUDA_CHECK(cudaEventCreateWithFlags(&down_, cudaEventDisableTiming));
    BENCH_CUDA_CHECK(cudaSetDevice(kPeer));
    BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&peer_stream_, cudaStreamNonBlocking));
    BENCH_CUDA_CHECK(cudaEventCreateWithFlags(&up_, cudaEventDisableTiming));
    BENCH_CUDA_CHECK(cudaSetDevice(peer_.here()));
  }
  HostStaged(const HostStaged&) = delete;
  HostStaged& operator=(const HostStaged&) = delete;
  ~HostStaged() {
    cudaEventDestroy(up_);
    cudaStreamDestroy(peer_stream_);
    cudaEventDestroy(down_);
    cudaFreeHost(staging_);
  }
  void operator()(const Transfer& w, cudaStream_t stream) {
    BENCH_CUDA_CHECK(cudaMemcpyAsync(staging_, w.src.data(), w.src.bytes(), cudaMemcpyDeviceToHost, stream));
    BENCH_CUDA_CHECK(cudaEventRecord(down_, stream));
    BENCH_CUDA_CHECK(cudaStreamWaitEvent(peer_stream_, down_, 0));
    BENCH_CUDA_CHECK(cudaMemcpyAsync(peer_.dst(), staging_, w.src.bytes(), cudaMemcpyHostToDevice, peer_stream_));
    BENCH_CUDA_CHECK(cudaEventRecord(up_, peer_stream_));
    BENCH_CUDA_CHECK(cudaStreamWaitEvent(stream, up_, 0));
    peer_.check(w, stream);
  }

 private:
  OnPeer peer_;
  float* staging_ = nullptr;
  cudaEvent_t down_ = nullptr, up_ = nullptr;
  cudaStream_t peer_stream_ = nullptr;
};

class PeerToPeer {
 public:
  PeerToPeer(const Transfer& w, cudaStream_t) : peer_(w) {}
  void operator()(const Transfer& w, cudaStream_t stream) {
    BENCH_CUDA_CHECK(cudaMemcpyPeerAsync(peer_.dst(), kPeer, w.src.data(), peer_.here(), w.src.bytes(), stream));
    peer_.check(w, stream);
  }

 private:
  OnPeer peer_;
};

void reference(const Transfer& w, bench::HostData& h) {
  auto src = h.input<float>("src");
  auto sample = h.expected("sample");
  for (int64_t j = 0; j < kSamples; ++j) sample[j] = src[j * (w.n - 1) / (kSamples - 1)];
}

// The timing-size check (docs/validity.md row 2): one thread per sample reads it from the source
// on this GPU, with no second GPU and no transfer.
__global__ void reference_samples(const float* src, int64_t n, float* sample) {
  const int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (j < kSamples) sample[j] = src[j * (n - 1) / (kSamples - 1)];
}

void device_reference(const Transfer& w, cudaStream_t stream) {
  reference_samples<<<(kSamples + 255) / 256, 256, 0, stream>>>(w.src.data(), w.n, w.sample.data());
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch02, memory_transfer_multigpu, Transfer)
    .stateful<HostStaged>(bench::Role::baseline, "host_staged")
    .stateful<PeerToPeer>(bench::Role::optimized, "cudaMemcpyPeerAsync")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::exact())
    .min_gpus(2);

}  // namespace

// calibrate/host_links: host <-> device copy bandwidth (pinned and pageable) and GPU 0 -> GPU 1
// peer-to-peer. Host buffers belong to stateful variants (made once, untimed).
//   - H2D: the host buffer holds pattern(i), so the copied output is checked element by element.
//   - D2H and P2P: the data lands outside the harness's buffers, so after the copy a one-block
//     kernel (pageable: the host) gathers 4099 evenly spaced elements of the destination into
//     the output `sample`; that adds microseconds to copies of tens of milliseconds (< 0.1%).
// Pageable copies stage through the driver and block the host: host clock (Mode::host).
//
//   build/<preset>/calibrate/calibrate --benchmark_filter='h2d|d2h|p2p'
#include <bench/bench.hpp>
#include <kernels/peer_access.hpp>

#include <cstdint>
#include <vector>

namespace {

constexpr int64_t kLinkFloats = int64_t{1} << 27;  // 512 MiB per copy
constexpr int kSamples = 4099;

float pattern(int64_t i) {  // integers in [-32768, 32767]: exact in float, never all zero
  return static_cast<float>(static_cast<int>((static_cast<uint64_t>(i) * 2654435761u >> 7) & 0xFFFF) - 32768);
}
int64_t sample_index(int64_t j, int64_t n) { return j * (n - 1) / (kSamples - 1); }

// ---- host -> device --------------------------------------------------------------------------
struct Upload {
  int64_t n;
  bench::DeviceSpan<float> dst;
  Upload(bench::Setup& s, const char* ceiling) : n(s.size("n", kLinkFloats, 1'000'003)), dst(s.output<float>("dst", n)) {
    s.bytes(double(n) * sizeof(float), ceiling);
  }
};
struct UploadPinned : Upload {
  explicit UploadPinned(bench::Setup& s) : Upload(s, bench::ceiling::h2d_pinned) {}
};
struct UploadPageable : Upload {
  explicit UploadPageable(bench::Setup& s) : Upload(s, "h2d_pageable_gbps") {}
};

template <class W, bool Pinned>
class HostToDevice {
 public:
  HostToDevice(const W& w, cudaStream_t) {
    if constexpr (Pinned) {
      BENCH_CUDA_CHECK(cudaMallocHost(&host_, w.dst.bytes()));
    } else {
      pageable_.resize(static_cast<std::size_t>(w.n));
      host_ = pageable_.data();
    }
    for (int64_t i = 0; i < w.n; ++i) host_[i] = pattern(i);
  }
  HostToDevice(const HostToDevice&) = delete;
  HostToDevice& operator=(const HostToDevice&) = delete;
  ~HostToDevice() {
    if (Pinned) cudaFreeHost(host_);
  }
  void operator()(const W& w, cudaStream_t stream) {
    BENCH_CUDA_CHECK(cudaMemcpyAsync(w.dst.data(), host_, w.dst.bytes(), cudaMemcpyHostToDevice, stream));
  }

 private:
  float* host_ = nullptr;
  std::vector<float> pageable_;
};

template <class W>
void upload_reference(const W& w, bench::HostData& h) {
  auto dst = h.expected("dst");
  for (int64_t i = 0; i < w.n; ++i) dst[i] = pattern(i);
}

BENCH_EXAMPLE(calibrate, h2d_pinned_gbps, UploadPinned)
    .stateful<HostToDevice<UploadPinned, true>>(bench::Role::baseline, "cudaMemcpyAsync_pinned_h2d")
    .reference(upload_reference<UploadPinned>)
    .tolerance(bench::exact());

BENCH_EXAMPLE(calibrate, h2d_pageable_gbps, UploadPageable)
    .stateful<HostToDevice<UploadPageable, false>>(bench::Role::baseline, "cudaMemcpyAsync_pageable_h2d",
                                                   {.blocks_host = true})
    .reference(upload_reference<UploadPageable>)
    .tolerance(bench::exact())
    .mode(bench::Mode::host);

// ---- device -> host, device -> peer ----------------------------------------------------------
struct Download {
  int64_t n;
  bench::DeviceSpan<const float> src;
  bench::DeviceSpan<float> sample;
  Download(bench::Setup& s, int64_t timing_n, const char* ceiling)
      : n(s.size("n", timing_n, 1'000'003)),
        src(s.input<float>("src", n, bench::uniform(-1, 1))),
        sample(s.output<float>("sample", kSamples)) {
    s.bytes(double(n) * sizeof(float), ceiling);
  }
};
struct DownloadPinned : Download {
  explicit DownloadPinned(bench::Setup& s) : Download(s, kLinkFloats, bench::ceiling::d2h_pinned) {}
};
struct DownloadPageable : Download {
  explicit DownloadPageable(bench::Setup& s) : Download(s, kLinkFloats, "d2h_pageable_gbps") {}
};
struct PeerCopy : Download {  // 1 GiB: NVLink moves it in a few milliseconds
  explicit PeerCopy(bench::Setup& s) : Download(s, int64_t{1} << 28, "p2p_gbps") {}
};

// `from` is any memory this device can read: mapped pinned host memory or a peer's memory.
__global__ void gather_samples(const float* __restrict__ from, int64_t n, float* __restrict__ sample) {
  for (int j = threadIdx.x; j < kSamples; j += blockDim.x) sample[j] = from[j * (n - 1) / (kSamples - 1)];
}

template <class W>
void launch_gather(const W& w, const float* from, cudaStream_t stream) {
  gather_samples<<<1, 1024, 0, stream>>>(from, w.n, w.sample.data());
  BENCH_CHECK_LAUNCH();
}

class DeviceToPinned {
 public:
  DeviceToPinned(const DownloadPinned& w, cudaStream_t) { BENCH_CUDA_CHECK(cudaMallocHost(&host_, w.src.bytes())); }
  DeviceToPinned(const DeviceToPinned&) = delete;
  DeviceToPinned& operator=(const DeviceToPinned&) = delete;
  ~DeviceToPinned() { cudaFreeHost(host_); }
  void operator()(const DownloadPinned& w, cudaStream_t stream) {
    BENCH_CUDA_CHECK(cudaMemcpyAsync(host_, w.src.data(), w.src.bytes(), cudaMemcpyDeviceToHost, stream));
    launch_gather(w, host_, stream);  // pinned memory is mapped: the device reads it in place
  }

 private:
  float* host_ = nullptr;
};

class DeviceToPageable {
 public:
  DeviceToPageable(const DownloadPageable& w, cudaStream_t)
      : host_(static_cast<std::size_t>(w.n)), picked_(kSamples) {}
  void operator()(const DownloadPageable& w, cudaStream_t stream) {
    BENCH_CUDA_CHECK(cudaMemcpyAsync(host_.data(), w.src.data(), w.src.bytes(), cudaMemcpyDeviceToHost, stream));
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host reads what arrived
    for (int64_t j = 0; j < kSamples; ++j) picked_[j] = host_[sample_index(j, w.n)];
    BENCH_CUDA_CHECK(cudaMemcpyAsync(w.sample.data(), picked_.data(), w.sample.bytes(), cudaMemcpyHostToDevice, stream));
  }

 private:
  std::vector<float> host_, picked_;
};

class DeviceToPeer {
 public:
  static constexpr int kPeer = 1;
  DeviceToPeer(const PeerCopy& w, cudaStream_t) {
    BENCH_CUDA_CHECK(cudaGetDevice(&here_));
    kernels::enable_peer_access(here_, kPeer);
    kernels::enable_peer_access(kPeer, here_);
    peer_ = kernels::malloc_on<float>(kPeer, w.src.bytes());
  }
  DeviceToPeer(const DeviceToPeer&) = delete;
  DeviceToPeer& operator=(const DeviceToPeer&) = delete;
  ~DeviceToPeer() { kernels::free_on(kPeer, peer_); }
  void operator()(const PeerCopy& w, cudaStream_t stream) {
    BENCH_CUDA_CHECK(cudaMemcpyPeerAsync(peer_, kPeer, w.src.data(), here_, w.src.bytes(), stream));
    launch_gather(w, peer_, stream);  // peer access is on: GPU 0 reads GPU 1's memory
  }

 private:
  float* peer_ = nullptr;
  int here_ = 0;
};

template <class W>
void sample_reference(const W& w, bench::HostData& h) {
  auto src = h.input<float>("src");
  auto sample = h.expected("sample");
  for (int64_t j = 0; j < kSamples; ++j) sample[j] = src[sample_index(j, w.n)];
}

BENCH_EXAMPLE(calibrate, d2h_pinned_gbps, DownloadPinned)
    .stateful<DeviceToPinned>(bench::Role::baseline, "cudaMemcpyAsync_pinned_d2h")
    .reference(sample_reference<DownloadPinned>)
    .tolerance(bench::exact());

BENCH_EXAMPLE(calibrate, d2h_pageable_gbps, DownloadPageable)
    .stateful<DeviceToPageable>(bench::Role::baseline, "cudaMemcpyAsync_pageable_d2h", {.blocks_host = true})
    .reference(sample_reference<DownloadPageable>)
    .tolerance(bench::exact())
    .mode(bench::Mode::host);

BENCH_EXAMPLE(calibrate, p2p_gbps, PeerCopy)
    .stateful<DeviceToPeer>(bench::Role::baseline, "cudaMemcpyPeerAsync_0_to_1")
    .reference(sample_reference<PeerCopy>)
    .tolerance(bench::exact())
    .min_gpus(2);

}  // namespace

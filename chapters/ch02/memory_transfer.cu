// ch02/memory_transfer: uploading a 256 MiB host batch to the GPU.
//
// What changes from baseline to optimized:
//   1. baseline: the batch lives in ordinary (pageable) host memory and goes up with cudaMemcpy.
//      The DMA engines can only read page-locked memory, so the driver copies the batch, piece
//      by piece, through its own small pinned bounce buffer, and the calling thread waits for
//      every piece: a CPU memcpy in series with every DMA transfer;
//   2. optimized: the batch lives in pinned (page-locked) memory from cudaMallocHost and goes up
//      with cudaMemcpyAsync on the stream: one DMA straight from the batch at link speed, and the
//      host thread is free the moment the copy is queued.
// Both move the same bytes into the same device buffer (checked element by element). The host
// buffers belong to the variants (allocated and filled once, untimed). Timed with a host clock
// around copy + device synchronize (Mode::host), because the baseline's cost is on the host:
// device events would not see the staging it does before the DMA starts.
//
//   ./bench compare --chapter ch02 --example memory_transfer
#include <bench/bench.hpp>

#include <cstdint>
#include <vector>

#include <kernels/index_reference.cuh>

namespace {

struct Batch {
  int64_t n;
  bench::DeviceSpan<float> dst;
  explicit Batch(bench::Setup& s) : n(s.size("n", int64_t{1} << 26, 1'000'003)), dst(s.output<float>("dst", n)) {
    s.bytes(double(n) * sizeof(float), bench::ceiling::h2d_pinned);
  }
};

// The batch's contents: small integers, exact in float, so the copy is checked exactly.
__host__ __device__ float batch_value(int64_t i) {
  return static_cast<float>(static_cast<int>((static_cast<uint64_t>(i) * 2654435761u >> 9) & 0x3FFF) - 8192);
}
void fill_batch(float* host, int64_t n) {
  for (int64_t i = 0; i < n; ++i) host[i] = batch_value(i);
}

class PageableUpload {
 public:
  PageableUpload(const Batch& w, cudaStream_t) : host_(static_cast<std::size_t>(w.n)) { fill_batch(host_.data(), w.n); }
  void operator()(const Batch& w, cudaStream_t) {
    // The plain synchronous call, as most first versions write it; it runs on the legacy default
    // stream, which the case's (blocking) stream is ordered with.
    BENCH_CUDA_CHECK(cudaMemcpy(w.dst.data(), host_.data(), w.dst.bytes(), cudaMemcpyHostToDevice));
  }

 private:
  std::vector<float> host_;
};

class PinnedUpload {
 public:
  PinnedUpload(const Batch& w, cudaStream_t) {
    BENCH_CUDA_CHECK(cudaMallocHost(&host_, w.dst.bytes()));
    fill_batch(host_, w.n);
  }
  PinnedUpload(const PinnedUpload&) = delete;
  PinnedUpload& operator=(const PinnedUpload&) = delete;
  ~PinnedUpload() { cudaFreeHost(host_); }
  void operator()(const Batch& w, cudaStream_t stream) {
    BENCH_CUDA_CHECK(cudaMemcpyAsync(w.dst.data(), host_, w.dst.bytes(), cudaMemcpyHostToDevice, stream));
  }

 private:
  float* host_ = nullptr;
};

void reference(const Batch& w, bench::HostData& h) {
  auto dst = h.expected("dst");
  for (int64_t i = 0; i < w.n; ++i) dst[i] = batch_value(i);
}

// The timing-size check: the batch's values computed where they land (index_reference.cuh).
void device_reference(const Batch& w, cudaStream_t stream) {
  kernels::write_index_values<batch_value>(w.dst.data(), w.n, stream);
}

BENCH_EXAMPLE(ch02, memory_transfer, Batch)
    .stateful<PageableUpload>(bench::Role::baseline, "pageable_cudaMemcpy", {.blocks_host = true, .host_bound = true})
    .stateful<PinnedUpload>(bench::Role::optimized, "pinned_cudaMemcpyAsync")
    .reference(reference)
    .device_reference(device_reference)
    .tolerance(bench::exact())
    .mode(bench::Mode::host);

}  // namespace

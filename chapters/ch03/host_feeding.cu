// ch03/host_feeding: a training loop whose batches are prepared on the CPU (decode, normalise,
// shuffle), copied up and consumed by a GPU step, batch after batch.
//
// Per batch: 256 samples of 16 KiB, delta-encoded bytes (each byte the difference from the one
// before, as PNG's Sub filter stores rows). Preparing one: decode (a running sum of the bytes),
// normalise to float in [-1, 1], and write it at its shuffled place in the batch (a permutation per
// batch). The GPU step reads the prepared batch and reduces each sample to one number after a
// compute-bound chain per value (kernels::dependent_fma_chain): out[batch][place].
//   1. baseline: one host thread prepares batch i into a pinned buffer, queues its upload and the
//      step, waits for them, then starts batch i+1. The GPU idles while the CPU prepares, and the
//      CPU idles while the GPU runs;
//   2. optimized: a pool of worker threads prepares batch i+1 (each worker a share of its
//      samples) into the second of two pinned buffers while the GPU uploads and consumes batch i
//      from the first; an event per buffer says when its upload is done and it may be refilled.
//      Preparation, copy and compute overlap, and the GPU, the slowest stage once the CPU work is
//      split, runs back to back.
// Same samples, same transform, same kernel, same outputs (checked). Every variant reports
// `gpu_busy_pct` (the GPU's time on the batches' uploads and steps over the whole call, from
// events; the target is >= 90) and `samples_per_s`; the optimized side reports `workers`.
// Timed with a host clock (Mode::host). Both sides' time depends on the host's cores: host_bound.
//
//   ./bench compare --chapter ch03 --example host_feeding
#include <algorithm>
#include <bench/bench.hpp>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <kernels/dependent_fma.cuh>
#include <kernels/group_reduce.cuh>
#include <mutex>
#include <thread>
#include <vector>

namespace {

constexpr int kBlock = 256;

struct Feed {
  int64_t batches, samples, sample_bytes;
  int iters;
  bench::DeviceSpan<float> out;         // [batches][samples]
  bench::DeviceBuffer<float> prepared;  // one prepared batch on the device
  explicit Feed(bench::Setup& s)
      : batches(s.size("batches", 16, 3)),
        samples(s.size("samples", 256, 7)),
        sample_bytes(s.size("sample_bytes", 16384, 999)),
        iters(static_cast<int>(s.size("iters", 8192, 64))),
        out(s.output<float>("out", batches * samples)),
        prepared(samples * sample_bytes) {
    s.flops(2.0 * batches * samples * sample_bytes * iters);
  }
  int64_t batch_values() const { return samples * sample_bytes; }
};

// The dataset: delta-encoded bytes of every sample of every batch.
__host__ __device__ uint8_t encoded_byte(int64_t i) {
  return static_cast<uint8_t>((static_cast<uint64_t>(i) * 2654435761u) >> 17);
}
// Euclid's, for host and device alike. std::gcd is host code: called from the device reference
// (nvcc's relaxed constexpr lets it compile), libstdc++'s binary form never returned on the H100
// and the case hung until the watchdog ended it.
__host__ __device__ int64_t greatest_common_divisor(int64_t a, int64_t b) {
  while (b != 0) {
    const int64_t r = a % b;
    a = b;
    b = r;
  }
  return a;
}

// Batch b's shuffle: sample s goes to place (s * stride + offset) mod samples, stride coprime.
__host__ __device__ int64_t shuffled_place(int64_t b, int64_t s, int64_t samples) {
  int64_t stride = 2 * b + 1;
  while (greatest_common_divisor(stride, samples) != 1) stride += 2;
  return (s * stride + b * 7) % samples;
}

// Decode, normalise and place samples [first, last) of batch b into `batch` (pinned).
void prepare(const Feed& w, const std::vector<uint8_t>& dataset, int64_t b, int64_t first,
             int64_t last, float* batch) {
  for (int64_t s = first; s < last; ++s) {
    const uint8_t* in = dataset.data() + (b * w.samples + s) * w.sample_bytes;
    float* to = batch + shuffled_place(b, s, w.samples) * w.sample_bytes;
    uint8_t value = 0;
    for (int64_t j = 0; j < w.sample_bytes; ++j) {
      value = static_cast<uint8_t>(value + in[j]);
      to[j] = (static_cast<float>(value) - 127.5f) * (1.0f / 127.5f);
    }
  }
}

// The GPU step: one block per sample, the chain per value, a fixed-order sum.
__global__ void consume(const float* __restrict__ batch, int64_t sample_bytes, int iters,
                        float* __restrict__ out) {
  const float* sample = batch + blockIdx.x * sample_bytes;
  float sum = 0;
  for (int64_t j = threadIdx.x; j < sample_bytes; j += kBlock)
    sum += kernels::dependent_fma_chain(sample[j], iters);
  sum = kernels::group_reduce<kBlock>(sum, kernels::Sum{});
  if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

// What both sides share: the dataset, two pinned batch buffers, events around each batch's GPU
// work.
class FeedState {
 public:
  explicit FeedState(const Feed& w)
      : dataset(static_cast<size_t>(w.batches * w.batch_values())), marks_(2 * w.batches + 2) {
    for (size_t i = 0; i < dataset.size(); ++i) dataset[i] = encoded_byte(static_cast<int64_t>(i));
    for (int k = 0; k < 2; ++k) {
      BENCH_CUDA_CHECK(cudaMallocHost(&pinned[k], w.batch_values() * sizeof(float)));
      BENCH_CUDA_CHECK(cudaEventCreateWithFlags(&uploaded[k], cudaEventDisableTiming));
    }
    for (auto& e : marks_) BENCH_CUDA_CHECK(cudaEventCreate(&e));
  }
  FeedState(const FeedState&) = delete;
  FeedState& operator=(const FeedState&) = delete;
  ~FeedState() {
    cudaDeviceSynchronize();
    for (auto e : marks_) cudaEventDestroy(e);
    for (int k = 0; k < 2; ++k) {
      cudaEventDestroy(uploaded[k]);
      cudaFreeHost(pinned[k]);
    }
  }
  void begin_call(cudaStream_t s) { BENCH_CUDA_CHECK(cudaEventRecord(marks_[0], s)); }
  // Batch b's upload from pinned[k] and its step, bracketed by events.
  void enqueue(const Feed& w, int64_t b, int k, cudaStream_t s) {
    BENCH_CUDA_CHECK(cudaEventRecord(marks_[2 + 2 * b], s));
    BENCH_CUDA_CHECK(cudaMemcpyAsync(w.prepared.data(), pinned[k], w.batch_values() * sizeof(float),
                                     cudaMemcpyHostToDevice, s));
    BENCH_CUDA_CHECK(cudaEventRecord(uploaded[k], s));
    consume<<<static_cast<unsigned>(w.samples), kBlock, 0, s>>>(
        w.prepared.data(), w.sample_bytes, w.iters, w.out.data() + b * w.samples);
    BENCH_CHECK_LAUNCH();
    BENCH_CUDA_CHECK(cudaEventRecord(marks_[3 + 2 * b], s));
  }
  void end_call(cudaStream_t s) { BENCH_CUDA_CHECK(cudaEventRecord(marks_[1], s)); }
  std::vector<bench::Metric> metrics(const Feed& w) const {
    BENCH_CUDA_CHECK(cudaEventSynchronize(marks_[1]));
    float call_ms = 0, busy_ms = 0;
    BENCH_CUDA_CHECK(cudaEventElapsedTime(&call_ms, marks_[0], marks_[1]));
    for (int64_t b = 0; b < w.batches; ++b) {
      float ms = 0;
      BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, marks_[2 + 2 * b], marks_[3 + 2 * b]));
      busy_ms += ms;
    }
    return {{"gpu_busy_pct", 100.0 * busy_ms / call_ms},
            {"samples_per_s", w.batches * w.samples / (call_ms * 1e-3)}};
  }
  std::vector<uint8_t> dataset;
  float* pinned[2] = {};
  cudaEvent_t uploaded[2] = {};

 private:
  std::vector<cudaEvent_t> marks_;  // call begin, call end, then (begin, end) per batch
};

class OneThreadSerial {
 public:
  OneThreadSerial(const Feed& w, cudaStream_t) : state_(w), feed_(&w) {}
  void operator()(const Feed& w, cudaStream_t stream) {
    state_.begin_call(stream);
    for (int64_t b = 0; b < w.batches; ++b) {
      prepare(w, state_.dataset, b, 0, w.samples, state_.pinned[0]);
      state_.enqueue(w, b, 0, stream);
      BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));  // the loop waits for the step
    }
    state_.end_call(stream);
  }
  std::vector<bench::Metric> metrics() const { return state_.metrics(*feed_); }

 private:
  FeedState state_;
  const Feed* feed_;
};

// Persistent workers; run(n, task) calls task(worker, n) on each and returns when all are done.
class WorkerPool {
 public:
  explicit WorkerPool(int workers) {
    for (int i = 0; i < workers; ++i) threads_.emplace_back([this, i] { loop(i); });
  }
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;
  ~WorkerPool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    for (auto& t : threads_) t.join();
  }
  int size() const { return static_cast<int>(threads_.size()); }
  void run(const std::function<void(int worker, int workers)>& task) {
    std::unique_lock lock(mutex_);
    task_ = &task;
    pending_ = size();
    ++generation_;
    wake_.notify_all();
    done_.wait(lock, [this] { return pending_ == 0; });
  }

 private:
  void loop(int me) {
    uint64_t seen = 0;
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      const auto* task = task_;
      lock.unlock();
      (*task)(me, size());
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int, int)>* task_ = nullptr;
  uint64_t generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

int pool_size() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 2u, 9u) - 1);
}

class PooledDoubleBuffer {
 public:
  PooledDoubleBuffer(const Feed& w, cudaStream_t) : state_(w), pool_(pool_size()), feed_(&w) {}
  void operator()(const Feed& w, cudaStream_t stream) {
    state_.begin_call(stream);
    for (int64_t b = 0; b < w.batches; ++b) {
      const int k = static_cast<int>(b % 2);
      // Buffer k's previous batch (b - 2) must be uploaded before it is refilled; batch b - 1's
      // upload and step meanwhile keep the GPU busy.
      BENCH_CUDA_CHECK(cudaEventSynchronize(state_.uploaded[k]));
      pool_.run([&](int worker, int workers) {
        prepare(w, state_.dataset, b, w.samples * worker / workers,
                w.samples * (worker + 1) / workers, state_.pinned[k]);
      });
      state_.enqueue(w, b, k, stream);
    }
    state_.end_call(stream);
  }
  std::vector<bench::Metric> metrics() const {
    auto m = state_.metrics(*feed_);
    m.push_back({"workers", double(pool_.size())});
    return m;
  }

 private:
  FeedState state_;
  WorkerPool pool_;
  const Feed* feed_;
};

// The chain in closed form: p_{k+1} = p_k t + x0 from p_0 = x0 is x0 (1 - t^(k+1)) / (1 - t), with
// t = x0 / 2, and the chain returns half of it. A prepared value is one of 256 floats (a byte,
// normalised), so the reference tabulates the chain once per byte value and stays cheap at the
// timing size too. The kernel's FP32 chain contracts its rounding errors (|t| <= 1/2), so it lands
// within a few ulp of this; the per-sample sums are in double here, in FP32 on the GPU.
__host__ __device__ double chain_exact(double x0, int iters) {
  const double t = 0.5 * x0;
  return 0.5 * x0 * (1 - pow(t, double(iters + 1))) / (1 - t);
}

void reference(const Feed& w, bench::HostData& h) {
  auto out = h.expected("out");
  double chain_of_byte[256];
  for (int v = 0; v < 256; ++v)
    chain_of_byte[v] = chain_exact((static_cast<float>(v) - 127.5f) * (1.0f / 127.5f), w.iters);
  for (int64_t b = 0; b < w.batches; ++b)
    for (int64_t s = 0; s < w.samples; ++s) {
      uint8_t value = 0;
      double sum = 0;
      for (int64_t j = 0; j < w.sample_bytes; ++j) {
        value =
            static_cast<uint8_t>(value + encoded_byte((b * w.samples + s) * w.sample_bytes + j));
        sum += chain_of_byte[value];
      }
      out[b * w.samples + shuffled_place(b, s, w.samples)] = sum;
    }
}

constexpr bench::VariantOptions kHostSide{.blocks_host = true, .host_bound = true};

// The timing-size check (docs/validity.md row 2), with no host threads, no pinned buffers and no
// copies: each block tabulates the chain per byte value in shared memory (chain_exact, as the CPU
// reference), then one thread per (batch, sample) decodes its bytes from the dataset's definition
// and sums their chains in double, into the sample's shuffled place.
__global__ void reference_feed(float* out, int64_t batches, int64_t samples, int64_t sample_bytes, int iters) {
  __shared__ double chain_of_byte[256];
  for (int v = threadIdx.x; v < 256; v += blockDim.x)
    chain_of_byte[v] = chain_exact((static_cast<float>(v) - 127.5f) * (1.0f / 127.5f), iters);
  __syncthreads();
  const int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x;
  if (o >= batches * samples) return;
  const int64_t b = o / samples, s = o % samples;
  uint8_t value = 0;
  double sum = 0;
  for (int64_t j = 0; j < sample_bytes; ++j) {
    value = static_cast<uint8_t>(value + encoded_byte((b * samples + s) * sample_bytes + j));
    sum += chain_of_byte[value];
  }
  out[b * samples + shuffled_place(b, s, samples)] = static_cast<float>(sum);
}

void device_reference(const Feed& w, cudaStream_t stream) {
  const int64_t outputs = w.batches * w.samples;
  reference_feed<<<static_cast<unsigned>((outputs + 127) / 128), 128, 0, stream>>>(w.out.data(), w.batches, w.samples,
                                                                                  w.sample_bytes, w.iters);
  BENCH_CHECK_LAUNCH();
}

BENCH_EXAMPLE(ch03, host_feeding, Feed)
    .stateful<OneThreadSerial>(bench::Role::baseline, "one_thread_prepare_copy_compute", kHostSide)
    .stateful<PooledDoubleBuffer>(bench::Role::optimized, "worker_pool_pinned_double_buffer",
                                  kHostSide)
    .reference(reference)
    .device_reference(device_reference)
    .mode(bench::Mode::host);

}  // namespace

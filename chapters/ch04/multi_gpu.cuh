// ch04/multi_gpu.cuh: what every ch04 example shares, written for N GPUs (validated on 2).
//
// The harness runs a case on one GPU (index 0 here: the current device when the case starts),
// owns its buffers there and times it with events on one stream of that GPU. A multi-GPU case
// therefore needs three things this file provides:
//   1. Sharded: the inputs of all N GPUs are one harness input on GPU 0 (N shards, seeded and
//      checksummed by the harness); inputs_filled() copies shard i to GPU i, untimed, each time
//      the harness refills them, and poisons every peer's output with NaN. GPU 0's result is a
//      harness output (fully checked at every size); each peer's result stays on that peer, and
//      check() gathers evenly spaced elements of it into a second harness output: all of it at
//      the verification size, kPeerSamples elements at the timing size. Every GPU is verified.
//   2. Fan: a stream on every peer, forked from the case's stream by an event and joined back to
//      it: the case's stop event is recorded only after every GPU's work, so the timed region
//      spans all of them (cross-GPU cudaStreamWaitEvent; the harness's cold mode holds GPU 0's
//      stream behind its blocking kernel, and the fork holds the peers behind it too).
//   3. Communicators: one NCCL communicator per GPU in this process, created with NVLink
//      multicast (NVLS) forced off (NCCL_NVLS_ENABLE=0, overwriting any other value) and the
//      block count the example asks for (CtaRange).
//   4. LaunchThreads: Fan's fork and join with one launching thread per GPU (gpu_threads.hpp:
//      persistent workers for GPUs 1..N-1, the case's thread for GPU 0), for calls bound by how
//      fast one host thread can launch N GPUs' kernels one after another (ch04/allreduce_small).
// Beside them: SideStreams (a highest-priority stream on every GPU, for work that runs beside
// the main stream: overlap's all-reduces, gradient_compression's pipeline stages), the
// all_reduce helpers (one grouped call per GPU), mean_us (the metrics' timer) and busbw_sweep
// (the all-reduce examples' 4 KiB-and-up busbw metrics).
#pragma once

#include <nccl.h>

#include <algorithm>
#include <bench/bench.hpp>
#include <bench/parallel.hpp>
#include <cstdint>
#include <cstdlib>
#include <kernels/peer_access.hpp>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpu_threads.hpp"
#include "nccl_ctas.hpp"

namespace ch04 {

inline constexpr int kMaxGpus = 8;              // the tolerances below are derived for N <= 8
inline constexpr int64_t kPeerSamples = 4099;   // elements of each peer's result checked when timing
// An FP32 all-reduce of N <= kMaxGpus terms in [-1, 1], in any order, against the exact sum
// rounded once to FP32 (the device references below): (N-1) N 2^-24 for the sum (first order)
// and N 2^-24 for the reference's rounding, N^2 2^-24 in all (ch04/allreduce, allreduce_small).
inline constexpr double kAllReduceTolerance = kMaxGpus * kMaxGpus * 0x1p-24;

inline void check_nccl(ncclResult_t status, const char* call) {
  if (status != ncclSuccess) throw std::runtime_error(std::string(call) + ": " + ncclGetErrorString(status));
}

// NVLink multicast stays off on the machines this suite runs on; setenv(..., 0) would keep a "1"
// someone exported, so the value is forced. Call before any ncclCommInit*.
inline void force_nvls_off() { setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/1); }

// Every visible GPU, the harness's (current) one first. Up to kMaxGpus.
inline std::vector<int> all_gpus() {
  int count = 0, here = 0;
  BENCH_CUDA_CHECK(cudaGetDeviceCount(&count));
  BENCH_CUDA_CHECK(cudaGetDevice(&here));
  if (count > kMaxGpus) throw bench::Unsupported("ch04's error bounds are derived for at most 8 GPUs");
  std::vector<int> gpus{here};
  for (int d = 0; d < count; ++d)
    if (d != here) gpus.push_back(d);
  return gpus;
}

// Makes `device` current for a scope, then restores the previous one.
class OnDevice {
 public:
  explicit OnDevice(int device) {
    BENCH_CUDA_CHECK(cudaGetDevice(&saved_));
    BENCH_CUDA_CHECK(cudaSetDevice(device));
  }
  OnDevice(const OnDevice&) = delete;
  OnDevice& operator=(const OnDevice&) = delete;
  ~OnDevice() { cudaSetDevice(saved_); }

 private:
  int saved_ = 0;
};

// `count` elements of T on each GPU of `gpus` from index `first` on (slots before it are null).
template <class T>
class PerGpu {
 public:
  PerGpu(const std::vector<int>& gpus, int64_t count, size_t first = 1) : gpus_(gpus), ptr_(gpus.size(), nullptr) {
    for (size_t i = first; i < gpus.size(); ++i) ptr_[i] = kernels::malloc_on<T>(gpus[i], count * sizeof(T));
  }
  PerGpu(const PerGpu&) = delete;
  PerGpu& operator=(const PerGpu&) = delete;
  ~PerGpu() {
    for (size_t i = 0; i < ptr_.size(); ++i) kernels::free_on(gpus_[i], ptr_[i]);
  }
  T* operator[](size_t i) const { return ptr_[i]; }

 private:
  std::vector<int> gpus_;
  std::vector<T*> ptr_;
};

template <class T>
__global__ void fill_value(T* __restrict__ p, int64_t n, T value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    p[i] = value;
}

// One pointer per GPU (slot i: GPU i's buffer), passed to a kernel by value.
template <class T>
struct GpuPointers {
  T* p[kMaxGpus] = {};
};

// Element index(j) for k evenly spaced indices of [0, n) (every index when k == n).
__host__ __device__ inline int64_t sampled_index(int64_t j, int64_t k, int64_t n) {
  return k == n ? j : j * (n - 1) / (k - 1);
}
// to[(g - 1) k + j] = from.p[g][sampled_index(j)] for every peer g = blockIdx.y + 1: all peers
// in one launch, so the check a timed call ends with is one short kernel whatever N is.
static __global__ void gather_peer_samples(GpuPointers<const float> from, int64_t n,
                                           float* __restrict__ to, int64_t k) {
  const float* __restrict__ peer = from.p[blockIdx.y + 1];
  float* __restrict__ slot = to + blockIdx.y * k;
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < k; j += int64_t(gridDim.x) * blockDim.x)
    slot[j] = peer[sampled_index(j, k, n)];
}

// ---- device references (docs/validity.md row 2): GPU 0, from the harness's copy of every shard --
// They read only `inputs` (every shard, on GPU 0, checksummed by the harness) and write the two
// harness outputs, sharing no code with the variants (not their copies, NCCL or gather).
struct Identity {
  __device__ double operator()(double x) const { return x; }
};
// out[j] = sum over shards g of term(shard g's element sampled_index(j, k, n)), in double, rounded
// once to FP32: what an all-reduce of term(shard) leaves on every GPU.
template <class Term>
__global__ void expected_shard_sum(const float* __restrict__ shards, int gpus, int64_t n, int64_t k,
                                   float* __restrict__ out, Term term) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < k;
       j += int64_t(gridDim.x) * blockDim.x) {
    const int64_t e = sampled_index(j, k, n);
    double acc = 0;
    for (int g = 0; g < gpus; ++g) acc += term(double(shards[g * n + e]));
    out[j] = float(acc);
  }
}
// out[j] = shard `from`'s element sampled_index(j, k, n): a shard as it should arrive elsewhere.
static __global__ void expected_shard(const float* __restrict__ shards, int64_t from, int64_t n,
                                      int64_t k, float* __restrict__ out) {
  for (int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; j < k;
       j += int64_t(gridDim.x) * blockDim.x)
    out[j] = shards[from * n + sampled_index(j, k, n)];
}
inline unsigned reference_blocks(int64_t k) {
  return unsigned(std::min<int64_t>((k + 255) / 256, 1024));
}

// Per-GPU FP32 inputs (n each) and outputs (n each), as described at the top of this file.
struct Sharded {
  std::vector<int> gpus;
  int64_t n, k;
  bench::DeviceSpan<const float> inputs;  // N shards of n, on GPU 0; shard i is GPU i's input
  bench::DeviceSpan<float> result;        // GPU 0's output
  bench::DeviceSpan<float> peer_samples;  // (N - 1) x k: sampled outputs of GPUs 1..N-1
  PerGpu<float> peer_in, peer_out;

  Sharded(bench::Setup& s, const std::vector<int>& g, int64_t per_gpu, bench::Fill fill, const char* out_name)
      : gpus(g),
        n(per_gpu),
        k(s.verifying() ? n : std::min(n, kPeerSamples)),
        inputs(s.input<float>("inputs", int64_t(g.size()) * n, fill)),
        result(s.output<float>(out_name, n)),
        peer_samples(s.output<float>("peer_samples", (int64_t(g.size()) - 1) * k)),
        peer_in(g, n),
        peer_out(g, n) {
    s.param("gpus", int64_t(g.size()));
    for (size_t i = 1; i < g.size(); ++i) {  // GPU 0 copies to and reads from every peer
      kernels::enable_peer_access(g[0], g[i]);
      kernels::enable_peer_access(g[i], g[0]);
    }
  }
  size_t size() const { return gpus.size(); }
  const float* input(size_t i) const { return i == 0 ? inputs.data() : peer_in[i]; }
  float* output(size_t i) const { return i == 0 ? result.data() : peer_out[i]; }

  // Untimed, on the harness's stream (GPU 0), after the harness refilled `inputs`.
  void refresh(cudaStream_t s) const {
    for (size_t i = 1; i < size(); ++i) {
      BENCH_CUDA_CHECK(cudaMemcpyPeerAsync(peer_in[i], gpus[i], inputs.data() + i * n, gpus[0], n * sizeof(float), s));
      fill_value<<<264, 512, 0, s>>>(peer_out[i], n, std::numeric_limits<float>::quiet_NaN());  // over NVLink
      BENCH_CHECK_LAUNCH();
    }
  }
  // Timed (a few microseconds, one kernel on GPU 0): after the join, so it reads every peer's
  // finished result.
  void check(cudaStream_t s) const {
    GpuPointers<const float> from;
    for (size_t i = 1; i < size(); ++i) from.p[i] = peer_out[i];
    const dim3 grid(unsigned(std::min<int64_t>((k + 255) / 256, 1024)), unsigned(size() - 1));
    gather_peer_samples<<<grid, 256, 0, s>>>(from, n, peer_samples.data(), k);
    BENCH_CHECK_LAUNCH();
  }
  // For the CPU reference: fills `result` and `peer_samples` from value(gpu, index), which must
  // be safe to call from several threads (GPU 0's elements are split over the host's cores:
  // overlap's value is a 1024-FMA chain per shard).
  template <class F>
  void expect(bench::HostData& h, const char* out_name, F value) const {
    auto out = h.expected(out_name);
    bench::parallel_chunks(size_t(n), bench::parallel_parts(),
                           [&](size_t, size_t first, size_t last) {
                             for (size_t j = first; j < last; ++j)
                               out[j] = value(size_t{0}, int64_t(j));
                           });
    auto peers = h.expected("peer_samples");
    for (size_t i = 1; i < size(); ++i)
      for (int64_t j = 0; j < k; ++j) peers[(i - 1) * k + j] = value(i, sampled_index(j, k, n));
  }
  // The all-reduce's answer on every GPU: element j is the sum of shard g's element j over g.
  void expect_sum(bench::HostData& h, const char* out_name) const {
    auto in = h.input<float>("inputs");
    expect(h, out_name, [&](size_t, int64_t j) {
      double acc = 0;
      for (size_t g = 0; g < size(); ++g) acc += in[g * n + j];
      return acc;
    });
  }
  // The device references' forms of expect_sum (with a term applied to each element first) and of
  // a ring shift (GPU i holds shard from(i)), writing `result` and `peer_samples` on stream `s`
  // (GPU 0): at the timing size, where the CPU reference is too slow to check many samples.
  template <class Term = Identity>
  void device_expect_sum(cudaStream_t s, Term term = {}) const {
    expected_shard_sum<<<reference_blocks(n), 256, 0, s>>>(inputs.data(), int(size()), n, n,
                                                           result.data(), term);
    BENCH_CHECK_LAUNCH();
    for (size_t i = 1; i < size(); ++i) {
      expected_shard_sum<<<reference_blocks(k), 256, 0, s>>>(
          inputs.data(), int(size()), n, k, peer_samples.data() + (i - 1) * k, term);
      BENCH_CHECK_LAUNCH();
    }
  }
  template <class From>
  void device_expect_shards(cudaStream_t s, From from) const {
    expected_shard<<<reference_blocks(n), 256, 0, s>>>(inputs.data(), int64_t(from(size_t{0})), n,
                                                       n, result.data());
    BENCH_CHECK_LAUNCH();
    for (size_t i = 1; i < size(); ++i) {
      expected_shard<<<reference_blocks(k), 256, 0, s>>>(inputs.data(), int64_t(from(i)), n, k,
                                                         peer_samples.data() + (i - 1) * k);
      BENCH_CHECK_LAUNCH();
    }
  }
};

// A non-blocking stream on every peer (index 0 is the case's own stream), forked and joined.
class Fan {
 public:
  explicit Fan(const std::vector<int>& gpus) : gpus_(gpus), streams_(gpus.size()), done_(gpus.size()) {
    BENCH_CUDA_CHECK(cudaEventCreateWithFlags(&forked_, cudaEventDisableTiming));  // on GPU 0
    for (size_t i = 1; i < gpus.size(); ++i) {
      OnDevice on(gpus[i]);
      BENCH_CUDA_CHECK(cudaStreamCreateWithFlags(&streams_[i], cudaStreamNonBlocking));
      BENCH_CUDA_CHECK(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming));
    }
  }
  Fan(const Fan&) = delete;
  Fan& operator=(const Fan&) = delete;
  ~Fan() {
    for (size_t i = 1; i < streams_.size(); ++i) {
      cudaEventDestroy(done_[i]);
      cudaStreamDestroy(streams_[i]);
    }
    cudaEventDestroy(forked_);
  }
  cudaStream_t stream(size_t i, cudaStream_t s) const { return i == 0 ? s : streams_[i]; }
  // Every peer's stream waits for what is queued so far on the case's stream `s`.
  void fork(cudaStream_t s) const {
    record_fork(s);
    for (size_t i = 1; i < streams_.size(); ++i) follow_fork(i);
  }
  // `s` waits for everything queued on every peer's stream.
  void join(cudaStream_t s) const {
    for (size_t i = 1; i < streams_.size(); ++i) {
      OnDevice on(gpus_[i]);
      record_done(i);
    }
    wait_done(s);
  }
  // The steps of fork and join, for a caller that spreads them over threads (LaunchThreads):
  // record_fork before any follow_fork; record_done(i) with GPU i current, before wait_done.
  void record_fork(cudaStream_t s) const { BENCH_CUDA_CHECK(cudaEventRecord(forked_, s)); }
  void follow_fork(size_t i) const { BENCH_CUDA_CHECK(cudaStreamWaitEvent(streams_[i], forked_, 0)); }
  void record_done(size_t i) const { BENCH_CUDA_CHECK(cudaEventRecord(done_[i], streams_[i])); }
  void wait_done(cudaStream_t s) const {
    for (size_t i = 1; i < streams_.size(); ++i) BENCH_CUDA_CHECK(cudaStreamWaitEvent(s, done_[i], 0));
  }

 private:
  std::vector<int> gpus_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> done_;
  cudaEvent_t forked_ = nullptr;
};

// Fan's fork and join, with every GPU's work enqueued by a thread of its own (GpuThreads): one
// launching thread per GPU inside the process, as one process per GPU has (ch04_mpi). Where a
// call is many short kernels on every GPU (ch04/allreduce_small: 32 all-reduces, each a launch on
// each of N GPUs), one thread launching all of them sets the time and brings the host's
// scheduling jitter into every sample; N threads launch in parallel, and the GPUs' work sets the
// time again.
//
// operator()(s, enqueue) records a fork event on the case's stream `s`; worker i makes GPU i
// current, makes its own stream on GPU i wait for the fork, calls enqueue(i, its stream) and
// records its join event; meanwhile the calling thread runs enqueue(0, s) itself (GPU 0's work
// stays on the case's stream). Once every thread is done, `s` waits for every join event, so all
// the work ends before anything enqueued on `s` later (the harness's stop event). An exception
// in any enqueue (a CUDA or NCCL error names its call) is rethrown on the calling thread.
// NCCL allows this: each communicator is used by one thread at a time, with its device current.
class LaunchThreads {
 public:
  explicit LaunchThreads(const std::vector<int>& gpus) : gpus_(gpus), fan_(gpus), threads_(gpus.size()) {}

  // enqueue(i, stream) enqueues GPU i's work on `stream`, a stream of GPU i, which is current.
  template <class Enqueue>
  void operator()(cudaStream_t s, const Enqueue& enqueue) const {
    fan_.record_fork(s);  // before run: the workers' waits follow it
    threads_.run([&](size_t i) {
      if (i == 0) {
        OnDevice on(gpus_[0]);
        enqueue(i, s);
        return;
      }
      BENCH_CUDA_CHECK(cudaSetDevice(gpus_[i]));
      fan_.follow_fork(i);
      enqueue(i, fan_.stream(i, s));
      fan_.record_done(i);
    });
    fan_.wait_done(s);
  }

 private:
  std::vector<int> gpus_;
  Fan fan_;
  GpuThreads threads_;
};

// A highest-priority stream on every GPU beside that GPU's main stream, and the events between
// them: for work that runs while the main stream goes on (ch04/overlap's all-reduces, the
// stages of ch04/gradient_compression's pipeline).
class SideStreams {
 public:
  explicit SideStreams(const std::vector<int>& gpus)
      : gpus_(gpus), streams_(gpus.size()), ready_(gpus.size()), done_(gpus.size()) {
    for (size_t i = 0; i < gpus.size(); ++i) {
      OnDevice on(gpus[i]);
      int least = 0, greatest = 0;
      BENCH_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
      BENCH_CUDA_CHECK(cudaStreamCreateWithPriority(&streams_[i], cudaStreamNonBlocking, greatest));
      BENCH_CUDA_CHECK(cudaEventCreateWithFlags(&ready_[i], cudaEventDisableTiming));
      BENCH_CUDA_CHECK(cudaEventCreateWithFlags(&done_[i], cudaEventDisableTiming));
    }
  }
  SideStreams(const SideStreams&) = delete;
  SideStreams& operator=(const SideStreams&) = delete;
  ~SideStreams() {
    for (size_t i = 0; i < streams_.size(); ++i) {
      OnDevice on(gpus_[i]);
      cudaEventDestroy(done_[i]);
      cudaEventDestroy(ready_[i]);
      cudaStreamDestroy(streams_[i]);
    }
  }
  cudaStream_t operator[](size_t i) const { return streams_[i]; }
  // GPU i's side stream waits for what is queued so far on `from` (a stream of GPU i). The
  // event is re-recorded every time: a wait takes the record made just before it.
  void follow(size_t i, cudaStream_t from) const {
    OnDevice on(gpus_[i]);
    BENCH_CUDA_CHECK(cudaEventRecord(ready_[i], from));
    BENCH_CUDA_CHECK(cudaStreamWaitEvent(streams_[i], ready_[i], 0));
  }
  // `into` (a stream of GPU i) waits for everything queued on GPU i's side stream.
  void join_into(size_t i, cudaStream_t into) const {
    OnDevice on(gpus_[i]);
    BENCH_CUDA_CHECK(cudaEventRecord(done_[i], streams_[i]));
    BENCH_CUDA_CHECK(cudaStreamWaitEvent(into, done_[i], 0));
  }

 private:
  std::vector<int> gpus_;
  std::vector<cudaStream_t> streams_;
  std::vector<cudaEvent_t> ready_, done_;
};

// One NCCL communicator per GPU of this process, NVLink multicast off, each kernel using `ctas`
// blocks: kBandwidthCtas for a lone bandwidth-bound call; a max for work that must leave SMs to
// kernels running beside it.
class Communicators {
 public:
  explicit Communicators(const std::vector<int>& gpus, CtaRange ctas = {}) : comms_(gpus.size()) {
    force_nvls_off();
    OnDevice keep(gpus[0]);  // both initialisations switch devices
    if (ctas.min <= 0 && ctas.max <= 0) {
      check_nccl(ncclCommInitAll(comms_.data(), int(gpus.size()), gpus.data()), "ncclCommInitAll");
      return;
    }
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    if (ctas.min > 0 && ctas.max < ctas.min)
      throw std::invalid_argument("ch04::CtaRange: a min of " + std::to_string(ctas.min) + " blocks needs a max >= it");
    if (ctas.min > 0) config.minCTAs = ctas.min;
    if (ctas.max > 0) config.maxCTAs = ctas.max;
    ncclUniqueId id;
    check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    check_nccl(ncclGroupStart(), "ncclGroupStart");  // one thread creating every rank: a group
    for (size_t i = 0; i < gpus.size(); ++i) {
      BENCH_CUDA_CHECK(cudaSetDevice(gpus[i]));
      check_nccl(ncclCommInitRankConfig(&comms_[i], int(gpus.size()), id, int(i), &config), "ncclCommInitRankConfig");
    }
    check_nccl(ncclGroupEnd(), "ncclGroupEnd");
  }
  Communicators(const Communicators&) = delete;
  Communicators& operator=(const Communicators&) = delete;
  ~Communicators() {
    for (auto c : comms_)
      if (c) ncclCommDestroy(c);
  }
  ncclComm_t operator[](size_t i) const {
    if (!comms_[i]) throw std::runtime_error("ch04::Communicators: aborted after an earlier error");
    return comms_[i];
  }
  // After an error that left some GPUs' calls enqueued without their peers' (a thread per GPU
  // where one thread threw mid-way): their kernels would wait for the missing peers forever, and
  // so would ncclCommDestroy and any later synchronisation (the harness's, then its watchdog ends
  // the process). ncclCommAbort stops them. In one group: each call raises its communicator's
  // abort flag at once, and NCCL (>= 2.22) reclaims them together at ncclGroupEnd, so no
  // communicator's teardown waits on kernels of one not yet told to quit. The communicators are
  // unusable afterwards. Call it only while no other thread uses them.
  void abort() {
    ncclGroupStart();
    for (auto& c : comms_)
      if (c) ncclCommAbort(c);
    ncclGroupEnd();
    for (auto& c : comms_) c = nullptr;
  }

 private:
  std::vector<ncclComm_t> comms_;
};

// One all-reduce over every GPU, one call per GPU inside a group (one process drives them all).
// send(i)/recv(i) are GPU i's buffers; GPU i's call goes on stream(i).
template <class Stream, class Send, class Recv>
void all_reduce_on(const Communicators& comms, size_t gpus, Stream stream, Send send, Recv recv, size_t count,
                   ncclDataType_t type) {
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (size_t i = 0; i < gpus; ++i)
    check_nccl(ncclAllReduce(send(i), recv(i), count, type, ncclSum, comms[i], stream(i)), "ncclAllReduce");
  check_nccl(ncclGroupEnd(), "ncclGroupEnd");
}
// The same, each call on that GPU's stream of `fan`.
template <class Send, class Recv>
void all_reduce(const Communicators& comms, const Fan& fan, size_t gpus, cudaStream_t s, Send send, Recv recv,
                size_t count, ncclDataType_t type) {
  all_reduce_on(comms, gpus, [&](size_t i) { return fan.stream(i, s); }, send, recv, count, type);
}

// Mean microseconds of one enqueue(s), over `reps` back-to-back runs after one warm-up, timed by
// events on `s`: for the figures a stateful variant reports as metrics (outside the timed samples).
template <class Enqueue>
double mean_us(cudaStream_t s, int reps, Enqueue enqueue) {
  cudaEvent_t start, stop;
  BENCH_CUDA_CHECK(cudaEventCreate(&start));
  BENCH_CUDA_CHECK(cudaEventCreate(&stop));
  enqueue(s);
  BENCH_CUDA_CHECK(cudaEventRecord(start, s));
  for (int r = 0; r < reps; ++r) enqueue(s);
  BENCH_CUDA_CHECK(cudaEventRecord(stop, s));
  BENCH_CUDA_CHECK(cudaEventSynchronize(stop));
  float ms = 0;
  BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  cudaEventDestroy(stop);
  cudaEventDestroy(start);
  return 1e3 * double(ms) / reps;
}

// nccl-tests' figures for an all-reduce of `bytes` per GPU over `gpus` GPUs in `seconds`:
// algbw = bytes / time; busbw = algbw x 2(N-1)/N, the bytes each GPU's link must carry.
inline double busbw_factor(size_t gpus) { return 2.0 * double(gpus - 1) / double(gpus); }

// "4KiB", "16MiB", "1GiB": the suffix of a sweep's metric names.
inline std::string size_label(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return std::to_string(bytes >> 30) + "GiB";
  if (bytes >= (int64_t{1} << 20)) return std::to_string(bytes >> 20) + "MiB";
  return std::to_string(bytes >> 10) + "KiB";
}

// The busbw sweep every all-reduce variant reports as metrics busbw_gbps_<size>: FP32 messages
// of 4 KiB, 16 KiB, ... up to `max_bytes` per GPU, each point a batch of calls back to back (50
// up to 16 MiB, 10 above), as nccl-tests and PyTorch users time them, after one warm-up batch.
// enqueue_calls(count, s, calls) enqueues `calls` all-reduces of `count` floats; it forks the
// other GPUs from the case's stream `s` and joins them back as its algorithm needs.
template <class EnqueueCalls>
std::vector<bench::Metric> busbw_sweep(cudaStream_t s, size_t gpus, int64_t max_bytes,
                                       EnqueueCalls enqueue_calls) {
  std::vector<bench::Metric> out;
  for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    const int64_t count = bytes / int64_t(sizeof(float));
    const int calls = bytes <= (int64_t{16} << 20) ? 50 : 10;
    const double seconds =
        1e-6 * mean_us(s, 1, [&](cudaStream_t st) { enqueue_calls(count, st, calls); }) / calls;
    out.push_back(
        {"busbw_gbps_" + size_label(bytes), busbw_factor(gpus) * double(bytes) / seconds * 1e-9});
  }
  return out;
}

}  // namespace ch04

// One timed sample at a time. Cold samples follow the sequence
//   (persisting L2 lines reset) -> clock probe -> hold -> event -> launch -> event -> (host
//   releases; the hold's grid then reads 2x the L2, the flush, and ends)
// so every queued launch starts back-to-back once the host lets the hold go. The hold (the
// blocking kernel) fills every thread slot of every SM, and the host calls the variant's launch
// only once all of it runs: no kernel the launch queues on another stream of this GPU can start
// until the hold's last blocks finish their share of the flush, and a launch that waits on the
// host for one never returns until the hold times out, which fails the case (VALIDITY row 9).
// Copies, and work on other GPUs, are the work tracer's to catch (runner.cpp, trace_calls).
#include "sampler.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <vector>

#include "bench/stats.hpp"
#include "device_kernels.hpp"

namespace bench::detail {
namespace {
constexpr uint64_t kBlockingTimeoutNs = 2'000'000'000;  // a stuck blocking kernel gives up
constexpr long long kProbeCycles = 20'000;              // ~10 us at boost clock
constexpr double kHoldResidentSeconds = 1.0;            // the probe ahead of it takes ~10 us

template <class T>
void alloc_mapped(T** host, T** device) {
  BENCH_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(host), sizeof(T), cudaHostAllocMapped));
  BENCH_CUDA_CHECK(cudaHostGetDevicePointer(reinterpret_cast<void**>(device), *host, 0));
  **host = T{};
}
}  // namespace

double host_seconds() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

Sampler::Sampler(const DeviceInfo& device) {
  // At least twice the L2, so nothing a timed kernel reads can still be there (VALIDITY row 8).
  flush_bytes_ = std::max<std::size_t>(2 * static_cast<std::size_t>(device.l2_bytes), 64u << 20);
  // Except lines a kernel marked to persist (an L2::evict_last cache policy, or an access policy
  // window): up to the persisting set-aside, which a driver may size above 0 by default, they
  // outlive plain loads of any size. No set-aside, and persisting lines reset to normal before
  // each flush (reset_persisting_lines), so the flush reaches them too.
  int persisting_max = 0;
  BENCH_CUDA_CHECK(
      cudaDeviceGetAttribute(&persisting_max, cudaDevAttrMaxPersistingL2CacheSize, device.index));
  persisting_l2_ = persisting_max > 0;
  if (persisting_l2_) {
    // A context that may not size the set-aside has none to keep lines in, so its refusal is no
    // error; it is cleared from the runtime's last error, where a later check would find it.
    const cudaError_t e = cudaDeviceSetLimit(cudaLimitPersistingL2CacheSize, 0);
    if (e == cudaErrorNotSupported || e == cudaErrorUnsupportedLimit) {
      (void)cudaGetLastError();
      persisting_l2_ = false;
    } else {
      BENCH_CUDA_CHECK(e);
    }
  }
  BENCH_CUDA_CHECK(cudaMalloc(&flush_buffer_, flush_bytes_));
  BENCH_CUDA_CHECK(cudaMemset(flush_buffer_, 0x3c, flush_bytes_));
  BENCH_CUDA_CHECK(cudaMalloc(&flush_sink_, sizeof(unsigned int)));
  alloc_mapped(&release_host_, &release_device_);
  alloc_mapped(&timed_out_host_, &timed_out_device_);
  alloc_mapped(&running_host_, &running_device_);
  BENCH_CUDA_CHECK(cudaMalloc(&released_, sizeof(unsigned long long)));
  BENCH_CUDA_CHECK(cudaMemset(released_, 0, sizeof(unsigned long long)));
  BENCH_CUDA_CHECK(cudaMalloc(&arrived_, sizeof(unsigned)));
  hold_blocks_ = blocking_kernel_blocks(device.index);
  alloc_mapped(&mhz_host_, &mhz_device_);
  BENCH_CUDA_CHECK(cudaEventCreate(&start_));
  BENCH_CUDA_CHECK(cudaEventCreate(&first_));
  BENCH_CUDA_CHECK(cudaEventCreate(&stop_));
}

Sampler::~Sampler() {
  cudaEventDestroy(start_);
  cudaEventDestroy(first_);
  cudaEventDestroy(stop_);
  for (auto e : launch_events_) cudaEventDestroy(e);
  cudaFreeHost(release_host_);
  cudaFreeHost(timed_out_host_);
  cudaFreeHost(running_host_);
  cudaFree(released_);
  cudaFree(arrived_);
  cudaFreeHost(mhz_host_);
  cudaFree(flush_sink_);
  cudaFree(flush_buffer_);
}

void Sampler::probe_clock(cudaStream_t stream) {
  launch_clock_probe(kProbeCycles, mhz_device_, stream);
}

double Sampler::elapsed() {
  BENCH_CUDA_CHECK(cudaEventSynchronize(stop_));
  float ms = 0;
  BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, stop_));
  return ms * 1e-3;
}

double Sampler::timer_floor(cudaStream_t stream, bool use_blocking_kernel) {
  double& floor = timer_floor_[use_blocking_kernel ? 1 : 0];
  if (floor < 0) {
    const Launch empty = [](cudaStream_t s) { launch_empty(s); };
    // Loaded once outside any hold: a module's first load may synchronise the context.
    launch_empty(stream);
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<double> seconds;
    for (int i = 0; i < 5; ++i) cold_raw(empty, stream, use_blocking_kernel);  // warm-up
    for (int i = 0; i < 101; ++i)
      seconds.push_back(cold_raw(empty, stream, use_blocking_kernel).seconds);
    floor = stats::median(seconds);
  }
  return floor;
}

Sample Sampler::cold(const Launch& launch, cudaStream_t stream, bool use_blocking_kernel) {
  const double floor = timer_floor(stream, use_blocking_kernel);
  Sample s = cold_raw(launch, stream, use_blocking_kernel);
  s.seconds = std::max(s.seconds - floor, 0.0);
  return s;
}

void Sampler::reset_persisting_lines() {
  if (persisting_l2_) BENCH_CUDA_CHECK(cudaCtxResetPersistingL2Cache());
}

HoldFlags Sampler::flags() const {
  return {release_device_, released_, arrived_, running_device_, timed_out_device_};
}

unsigned long long Sampler::queue_hold(cudaStream_t stream, unsigned blocks, uint64_t timeout_ns,
                                       bool flush) {
  // Taken before the launch: a launch that throws (its own error, or one left by the variant
  // that cudaGetLastError reports here) may still have queued the hold, which is then released;
  // a ticket never used again cannot be mistaken for a later hold's.
  const unsigned long long ticket = ++tickets_;
  HoldFlags f = flags();
  if (flush) {
    f.flush = static_cast<const uint4*>(flush_buffer_);
    f.flush_count = flush_bytes_ / sizeof(uint4);
    f.flush_sink = flush_sink_;
  }
  try {
    launch_blocking_kernel(f, ticket, blocks, timeout_ns, stream);
  } catch (...) {
    release(ticket);
    throw;
  }
  return ticket;
}

// Releases hold `ticket` and every earlier one (tickets only grow).
void Sampler::release(unsigned long long ticket) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  *reinterpret_cast<volatile unsigned long long*>(release_host_) = ticket;
}

// Queues the hold on `stream` and returns its ticket once every block of it runs (the probe
// ahead of it done), so that no kernel of any stream can start until it is released; released,
// it flushes L2. Where its blocks cannot fill an SM exactly (blocking_kernel_blocks() is 0), a
// flush kernel and one block holding the case's stream only, as before the whole-GPU hold.
unsigned long long Sampler::hold(cudaStream_t stream) {
  if (hold_blocks_ == 0) {
    launch_l2_flush(flush_buffer_, flush_bytes_, flush_sink_, stream);
    return queue_hold(stream, 1, kBlockingTimeoutNs, false);
  }
  const unsigned long long ticket = queue_hold(stream, hold_blocks_, kBlockingTimeoutNs, true);
  const double start = host_seconds();
  while (*reinterpret_cast<volatile unsigned long long*>(running_host_) < ticket) {
    if (host_seconds() - start > kHoldResidentSeconds) {
      release(ticket);
      BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
      throw std::runtime_error(fmt::format(
          "the harness could not hold the GPU before a timed launch: its {} blocks did not all "
          "run within {} s (work of this process left running, or another process on this GPU)",
          hold_blocks_, kHoldResidentSeconds));
    }
  }
  return ticket;
}

void Sampler::held(const Launch& body, cudaStream_t stream, uint64_t timeout_ns) {
  const unsigned long long ticket = queue_hold(stream, 1, timeout_ns, false);
  try {
    body(stream);
  } catch (...) {
    release(ticket);
    throw;
  }
  release(ticket);
}

Sample Sampler::cold_raw(const Launch& launch, cudaStream_t stream, bool use_blocking_kernel) {
  reset_persisting_lines();
  probe_clock(stream);
  unsigned long long ticket = 0;
  if (use_blocking_kernel) {
    ticket = hold(stream);  // flushes L2 once released
  } else {
    // A launch that blocks the host is timed with its host latency anyway; the flush is waited
    // for, so that nothing the launch starts on another stream runs under it, before the start.
    launch_l2_flush(flush_buffer_, flush_bytes_, flush_sink_, stream);
    BENCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  try {
    BENCH_CUDA_CHECK(cudaEventRecord(start_, stream));
    launch(stream);
    BENCH_CUDA_CHECK(cudaEventRecord(stop_, stream));
  } catch (...) {
    if (use_blocking_kernel) release(ticket);  // else every SM waits out the hold's timeout
    throw;
  }
  if (use_blocking_kernel) release(ticket);
  Sample s;
  s.seconds = elapsed();
  s.sm_mhz = probed_mhz();
  if (use_blocking_kernel &&
      *reinterpret_cast<volatile unsigned long long*>(timed_out_host_) == ticket)
    throw std::runtime_error(
        "the variant blocked the host while the harness's blocking kernel held the stream; "
        "declare it with VariantOptions{.blocks_host = true} (under a profiler or sanitizer that "
        "serialises kernels, use `bench profile` or `bench sanitize`)");
  return s;
}

Sample Sampler::hot(const Launch& launch, cudaStream_t stream, int batch) {
  probe_clock(stream);
  BENCH_CUDA_CHECK(cudaEventRecord(start_, stream));
  for (int i = 0; i < batch; ++i) {
    launch(stream);
    if (i == 0 && batch > 1) BENCH_CUDA_CHECK(cudaEventRecord(first_, stream));
  }
  BENCH_CUDA_CHECK(cudaEventRecord(stop_, stream));
  Sample s;
  s.seconds = elapsed() / batch;
  if (batch > 1) {
    float ms = 0;
    BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, start_, first_));
    s.first_seconds = ms * 1e-3;
  }
  s.sm_mhz = probed_mhz();
  return s;
}

std::vector<double> Sampler::per_launch(const Launch& launch, cudaStream_t stream, int batch) {
  while (static_cast<int>(launch_events_.size()) < batch) {
    cudaEvent_t e = nullptr;
    BENCH_CUDA_CHECK(cudaEventCreate(&e));
    launch_events_.push_back(e);
  }
  BENCH_CUDA_CHECK(cudaEventRecord(start_, stream));
  for (int i = 0; i < batch; ++i) {
    launch(stream);
    BENCH_CUDA_CHECK(cudaEventRecord(launch_events_[i], stream));
  }
  BENCH_CUDA_CHECK(cudaEventSynchronize(launch_events_[batch - 1]));
  std::vector<double> seconds;
  cudaEvent_t before = start_;
  for (int i = 0; i < batch; ++i) {
    float ms = 0;
    BENCH_CUDA_CHECK(cudaEventElapsedTime(&ms, before, launch_events_[i]));
    seconds.push_back(ms * 1e-3);
    before = launch_events_[i];
  }
  return seconds;
}

Sample Sampler::host(const Launch& launch, cudaStream_t stream) {
  reset_persisting_lines();
  probe_clock(stream);
  launch_l2_flush(flush_buffer_, flush_bytes_, flush_sink_, stream);
  BENCH_CUDA_CHECK(cudaDeviceSynchronize());
  const double t0 = host_seconds();
  launch(stream);
  BENCH_CUDA_CHECK(cudaDeviceSynchronize());
  Sample s;
  s.seconds = host_seconds() - t0;
  s.sm_mhz = probed_mhz();
  return s;
}

double Sampler::wall_seconds(const Launch& launch, cudaStream_t stream, int launches,
                             double* event_seconds) {
  BENCH_CUDA_CHECK(cudaDeviceSynchronize());
  const double t0 = host_seconds();
  BENCH_CUDA_CHECK(cudaEventRecord(start_, stream));
  for (int i = 0; i < launches; ++i) launch(stream);
  BENCH_CUDA_CHECK(cudaEventRecord(stop_, stream));
  BENCH_CUDA_CHECK(cudaDeviceSynchronize());
  const double wall = host_seconds() - t0;
  *event_seconds = elapsed();
  return wall;
}

}  // namespace bench::detail

// Internal: taking one timed sample of a launch (cold, hot or host-timed), with the SM clock
// measured next to it.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "bench/bench.hpp"
#include "bench/device_info.hpp"
#include "device_kernels.hpp"

namespace bench::detail {

// Host steady clock in seconds: the harness's one wall clock (host-mode samples, the escaped-work
// check, stopping timeouts).
double host_seconds();

struct Sample {
  double seconds = 0;        // per launch
  float sm_mhz = 0;          // SM clock measured just before the sample
  double first_seconds = 0;  // hot: the batch's first launch alone (the only one on fresh inputs)
};

class Sampler {
 public:
  explicit Sampler(const DeviceInfo& device);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // L2 flushed, then the launch queued behind a blocking kernel so that host launch latency is
  // not counted. A variant that blocks the host must pass use_blocking_kernel = false.
  // The timer floor is subtracted (see timer_floor()).
  Sample cold(const Launch& launch, cudaStream_t stream, bool use_blocking_kernel);
  // What a cold sample of an empty kernel measures (median of many): the GPU's fixed cost of
  // dispatching one kernel between two events (docs/architecture.md). It is the same for every
  // variant and says nothing about the kernel, so cold samples report time above it.
  double timer_floor(cudaStream_t stream, bool use_blocking_kernel);
  // Whether the hold fills every SM here (else one block holds the case's stream only).
  bool holds_whole_gpu() const { return hold_blocks_ > 0; }
  // `batch` back-to-back launches between two events, divided by `batch`; with batch >= 2 an
  // event after the first launch also times that launch alone (Sample::first_seconds).
  Sample hot(const Launch& launch, cudaStream_t stream, int batch);
  // VALIDITY row 18's probe of hot batches: `batch` back-to-back launches with an event after
  // each, so every launch's own time comes back (the first on fresh inputs, the rest repeats).
  // Untimed for scoring: the events between launches are what a timed batch leaves out.
  std::vector<double> per_launch(const Launch& launch, cudaStream_t stream, int batch);
  // Host clock around launch + cudaDeviceSynchronize, L2 flushed first.
  Sample host(const Launch& launch, cudaStream_t stream);

  // VALIDITY row 9 in the traced calls: `body` queued behind a blocking kernel on `stream` (one
  // block, the case's stream only, so work the body starts elsewhere runs, early, where the
  // work tracer sees it), released when `body` returns or after `timeout_ns` (a call that blocks
  // the host, as cudaGraphLaunch of a conditional graph does while CUPTI is attached, then goes
  // on).
  void held(const Launch& body, cudaStream_t stream, uint64_t timeout_ns);

  // VALIDITY row 1: runs `launches` launches and returns the device-synchronised wall time;
  // *event_seconds receives the time the case's events saw for the same launches.
  double wall_seconds(const Launch& launch, cudaStream_t stream, int launches,
                      double* event_seconds);

 private:
  Sample cold_raw(const Launch& launch, cudaStream_t stream, bool use_blocking_kernel);
  void reset_persisting_lines();          // every line marked to persist in L2 back to normal
  // The blocking kernel queued, and running on every SM (where it can fill them); its ticket.
  unsigned long long hold(cudaStream_t stream);
  void probe_clock(cudaStream_t stream);  // result in probed_mhz() after the next sync
  float probed_mhz() const { return *reinterpret_cast<volatile float*>(mhz_host_); }
  double elapsed();  // seconds between start_ and stop_, once stop_ completes

  double timer_floor_[2] = {-1, -1};  // without and with the hold, measured on first use
  bool persisting_l2_ = false;  // the GPU has a persisting L2 set-aside (Ampere and later)
  std::size_t flush_bytes_ = 0;
  void* flush_buffer_ = nullptr;
  unsigned int* flush_sink_ = nullptr;
  // The hold's flags (device_kernels.hpp HoldFlags): mapped pinned memory, host and device views.
  unsigned long long* release_host_ = nullptr;  // the highest ticket released
  unsigned long long* release_device_ = nullptr;
  unsigned long long* running_host_ = nullptr;  // the last hold whose blocks all ran
  unsigned long long* running_device_ = nullptr;
  unsigned long long* timed_out_host_ = nullptr;  // the last hold that gave up waiting
  unsigned long long* timed_out_device_ = nullptr;
  unsigned long long* released_ =
      nullptr;                      // device: the release as the hold's block 0 passes it on
  unsigned* arrived_ = nullptr;     // device: blocks of the current hold running
  unsigned long long tickets_ = 0;  // holds queued so far
  unsigned hold_blocks_ = 0;  // blocks that fill every SM (blocking_kernel_blocks), or 0: one block
  HoldFlags flags() const;
  unsigned long long queue_hold(cudaStream_t stream, unsigned blocks, uint64_t timeout_ns,
                                bool flush);
  void release(unsigned long long ticket);
  float* mhz_host_ = nullptr;       // mapped pinned: the clock probe's result
  float* mhz_device_ = nullptr;
  cudaEvent_t start_ = nullptr, first_ = nullptr, stop_ = nullptr;
  std::vector<cudaEvent_t> launch_events_;  // per_launch(): one after each launch, made on first use
};

}  // namespace bench::detail

// Internal: VALIDITY row 1 without a margin. Every kernel, copy and memset a timed call starts,
// on any stream of any GPU, is recorded through CUPTI's activity API; a call leaves work running
// past its stop when one of them ends after a marker kernel the harness queues on the case's
// stream behind the call (that marker runs only once everything joined to the stream is done).
//
//   WorkTracer& t = WorkTracer::get();
//   if (t.available()) { t.start(); t.mark(s); launch(s); t.mark(s); ...; t.stop(); t.escaped(); }
//
// CUPTI is attached only between start() and stop(): the timed samples never run under it.
// CUPTI allows one activity client per process: under Nsight or compute-sanitizer it is taken,
// `available()` is false and `why_unavailable()` says so; the runner then falls back to the
// wall-clock ratio check and says that it did.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

namespace bench::detail {

// One kernel, copy or memset a traced call started, as CUPTI recorded it.
struct TracedActivity {
  std::string kind;  // "kernel", "copy", "peer copy" or "memset"
  std::string what;  // a kernel's name as CUPTI gives it (mangled), else "copy of 4096 bytes"...
  uint32_t device = 0, stream = 0;
  uint64_t start = 0, end = 0;  // ns on CUPTI's clock, one for every GPU
};

// A record as CUPTI hands it over: the activity, the correlation id of the API call that started
// it (what places it among the traced calls), and whether it is one of the runner's markers.
struct TracedRecord {
  TracedActivity activity;
  uint32_t correlation = 0;
  bool marker = false;
};

// What WorkTracer::stop() makes of the records: the calls are the pairs of markers in correlation
// order (a trailing unpaired marker is no call), each call's activities those whose correlation
// lies between its markers', in order of their start; `escaped` names the first of them, in call
// order, that ended after its call's closing marker started, and `ahead` the first that started
// before its call's opening marker did (on another GPU than the marker's, by more than 5 us;
// "" if none).
struct TracedCalls {
  std::vector<std::vector<TracedActivity>> calls;
  std::string escaped;
  std::string ahead;
};
TracedCalls split_traced_calls(std::vector<TracedRecord> records);

class WorkTracer {
 public:
  static WorkTracer& get();

  bool available() const { return available_; }
  const std::string& why_unavailable() const { return why_; }

  // Starts recording (kernels, copies, memsets of every context).
  void start();
  // Queues the marker kernel on `stream`. Calls alternate: the opening marker of a traced call,
  // then its closing one.
  void mark(cudaStream_t stream);
  // Synchronises the device, flushes the records and stops recording. Returns the number of
  // traced calls it saw (pairs of markers).
  int stop();
  // After stop(): empty, or what escaped ("kernel 'spin' (device 0, stream 13) ended 412.3 us
  // after the call's stop, in traced call 2 of 3").
  std::string escaped() const { return escaped_; }
  // After stop(): empty, or what started before its call's opening marker did ("kernel 'copy'
  // (device 0, stream 14) started 812.3 us before the call's start, in traced call 1 of 3"):
  // work not queued behind the case's stream, run while the harness held it.
  std::string ahead() const { return ahead_; }
  // After stop(): each traced call's activities, in order of their start (bench profile --tool
  // timeline reads them; the escaped-work check is over the same lists).
  const std::vector<std::vector<TracedActivity>>& calls() const { return calls_; }

 private:
  WorkTracer();
  void detach();  // cuptiFinalize: no CUPTI in the process until the next start()
  bool available_ = false;
  bool attached_ = true;
  bool stay_attached_ = false;
  std::string why_;
  std::string escaped_;
  std::string ahead_;
  std::vector<std::vector<TracedActivity>> calls_;
};

}  // namespace bench::detail

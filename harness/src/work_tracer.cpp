// The exact escaped-work check (work_tracer.hpp). CUPTI hands activity records over in buffers
// it asks the process for; they arrive complete after a flush, each with the correlation id of
// the API call that started the work, its device, stream and start/end timestamps (one clock for
// every GPU). The calls the runner traces are bracketed by two marker kernels on the case's
// stream: the work a traced call started is every record whose correlation id lies between its
// markers', and none of it may end after the closing marker has started.
#include "work_tracer.hpp"

#include <cupti.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "bench/check.hpp"
#include "device_kernels.hpp"

namespace bench::detail {
namespace {

// The newest record layouts of the toolkit in use (CUPTI fills those of its own version).
#if CUPTI_API_VERSION >= 130000
using KernelRecord = CUpti_ActivityKernel10;
using MemcpyRecord = CUpti_ActivityMemcpy6;
#else
using KernelRecord = CUpti_ActivityKernel9;
using MemcpyRecord = CUpti_ActivityMemcpy5;
#endif
using MemsetRecord = CUpti_ActivityMemset4;
using PeerCopyRecord = CUpti_ActivityMemcpyPtoP4;

// "kernel 'name'", "copy of 4096 bytes", ...: how the escaped-work message names an activity.
std::string describe(const TracedActivity& a) {
  return a.kind == "kernel" ? fmt::format("kernel '{}'", a.what) : a.what;
}

constexpr uint64_t kCrossDeviceSkewNs = 5'000;

std::mutex records_mutex;
std::vector<TracedRecord> records;
constexpr std::size_t kBufferBytes = 4 << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* record = nullptr;
  std::vector<TracedRecord> batch;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    TracedRecord a;
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* k = reinterpret_cast<const KernelRecord*>(record);
        a = {{"kernel", k->name ? k->name : "?", k->deviceId, k->streamId, k->start, k->end},
             k->correlationId};
        a.marker = k->name != nullptr && std::string_view(k->name).find(kTraceMarkerName) != std::string_view::npos;
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* m = reinterpret_cast<const MemcpyRecord*>(record);
        a = {{"copy", fmt::format("copy of {} bytes", m->bytes), m->deviceId, m->streamId, m->start,
              m->end},
             m->correlationId};
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY2: {
        const auto* m = reinterpret_cast<const PeerCopyRecord*>(record);
        a = {{"peer copy", fmt::format("peer copy of {} bytes", m->bytes), m->deviceId, m->streamId,
              m->start, m->end},
             m->correlationId};
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* m = reinterpret_cast<const MemsetRecord*>(record);
        a = {{"memset", fmt::format("memset of {} bytes", m->bytes), m->deviceId, m->streamId,
              m->start, m->end},
             m->correlationId};
        break;
      }
      default: continue;
    }
    batch.push_back(std::move(a));
  }
  std::free(buffer);
  std::lock_guard lock(records_mutex);
  records.insert(records.end(), batch.begin(), batch.end());
}

constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                         CUPTI_ACTIVITY_KIND_MEMCPY2, CUPTI_ACTIVITY_KIND_MEMSET};

std::string cupti_text(CUptiResult r) {
  const char* text = nullptr;
  cuptiGetResultString(r, &text);
  return text ? text : fmt::format("CUPTI error {}", static_cast<int>(r));
}

}  // namespace

WorkTracer& WorkTracer::get() {
  static WorkTracer tracer;
  return tracer;
}

WorkTracer::WorkTracer() {
  if (const char* off = std::getenv("BENCH_NO_CUPTI"); off != nullptr && *off != '\0' && *off != '0') {
    why_ = "BENCH_NO_CUPTI is set";
    return;
  }
  if (const CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS) {
    why_ = "CUPTI's activity API is not available (" + cupti_text(r) + ")";
    return;
  }
  // Probe once: under Nsight or compute-sanitizer enabling fails, as the tool holds CUPTI.
  for (const auto kind : kKinds) {
    if (const CUptiResult r = cuptiActivityEnable(kind); r != CUPTI_SUCCESS) {
      why_ = "CUPTI is held by another tool (" + cupti_text(r) + ")";
      for (const auto k : kKinds) cuptiActivityDisable(k);
      return;
    }
  }
  for (const auto kind : kKinds) cuptiActivityDisable(kind);
  available_ = true;
  stay_attached_ = std::getenv("BENCH_CUPTI_STAY_ATTACHED") != nullptr;
  detach();
}

// CUPTI stays attached only while calls are traced. Attached, even with every activity kind
// disabled, it changes how the driver launches work: a graph with a conditional node
// (ch12/conditional_graph) then blocks the host in cudaGraphLaunch until the stream is idle,
// which the sampler's blocking kernel reports as a variant that blocks the host. Detached, the
// timed samples run as they do without any tool. BENCH_CUPTI_STAY_ATTACHED=1 keeps it attached
// (the old behaviour), to compare the two.
void WorkTracer::detach() {
  if (stay_attached_) return;
  if (const CUptiResult r = cuptiFinalize(); r != CUPTI_SUCCESS)
    throw std::runtime_error("cuptiFinalize: " + cupti_text(r));
  attached_ = false;
}

void WorkTracer::start() {
  BENCH_CUDA_CHECK(cudaDeviceSynchronize());
  if (!attached_) {  // attaches CUPTI again (it initialises on its first call)
    if (const CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed); r != CUPTI_SUCCESS)
      throw std::runtime_error("cuptiActivityRegisterCallbacks: " + cupti_text(r));
    attached_ = true;
  }
  cuptiActivityFlushAll(1);
  {
    std::lock_guard lock(records_mutex);
    records.clear();
  }
  for (const auto kind : kKinds)
    if (const CUptiResult r = cuptiActivityEnable(kind); r != CUPTI_SUCCESS)
      throw std::runtime_error("cuptiActivityEnable: " + cupti_text(r));
}

void WorkTracer::mark(cudaStream_t stream) { launch_trace_marker(stream); }

int WorkTracer::stop() {
  BENCH_CUDA_CHECK(cudaDeviceSynchronize());
  cuptiActivityFlushAll(1);
  for (const auto kind : kKinds) cuptiActivityDisable(kind);
  detach();
  std::vector<TracedRecord> seen;
  {
    std::lock_guard lock(records_mutex);
    seen.swap(records);
  }
  TracedCalls split = split_traced_calls(std::move(seen));
  escaped_ = std::move(split.escaped);
  ahead_ = std::move(split.ahead);
  calls_ = std::move(split.calls);
  return static_cast<int>(calls_.size());
}

TracedCalls split_traced_calls(std::vector<TracedRecord> seen) {
  std::sort(seen.begin(), seen.end(), [](const TracedRecord& a, const TracedRecord& b) {
    return a.correlation < b.correlation;
  });
  std::vector<const TracedRecord*> markers;
  for (const auto& a : seen)
    if (a.marker) markers.push_back(&a);
  TracedCalls out;
  const int calls = static_cast<int>(markers.size() / 2);
  for (int call = 0; call < calls; ++call) {
    const TracedRecord& open = *markers[2 * call];
    const TracedRecord& close = *markers[2 * call + 1];
    auto& started = out.calls.emplace_back();
    for (const auto& a : seen) {
      if (a.marker || a.correlation <= open.correlation || a.correlation >= close.correlation)
        continue;
      started.push_back(a.activity);
      // The runner queues each call behind a hold of the case's stream: work that starts before
      // the opening marker does was queued behind nothing the case's stream does (row 9).
      // CUPTI's timestamps of two GPUs may differ by a few microseconds: work on another GPU
      // counts as ahead only by more than that.
      const uint64_t skew = a.activity.device == open.activity.device ? 0 : kCrossDeviceSkewNs;
      if (a.activity.start + skew < open.activity.start && out.ahead.empty())
        out.ahead = fmt::format(
            "{} (device {}, stream {}) started {:.1f} us before the call's start, in traced call "
            "{} of {}",
            describe(a.activity), a.activity.device, a.activity.stream,
            (open.activity.start - a.activity.start) * 1e-3, call + 1, calls);
      if (a.activity.end > close.activity.start && out.escaped.empty())
        out.escaped = fmt::format(
            "{} (device {}, stream {}) ended {:.1f} us after the call's stop, in traced call {} of "
            "{}",
            describe(a.activity), a.activity.device, a.activity.stream,
            (a.activity.end - close.activity.start) * 1e-3, call + 1, calls);
    }
    std::stable_sort(
        started.begin(), started.end(),
        [](const TracedActivity& a, const TracedActivity& b) { return a.start < b.start; });
  }
  return out;
}

}  // namespace bench::detail

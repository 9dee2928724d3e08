// ch04/gpu_threads.hpp: a thread per GPU index inside one process, with no CUDA in it, so its
// hand-offs are tested on a machine without a GPU (tests/unit/gpu_threads_test.cpp).
// ch04::LaunchThreads (multi_gpu.cuh) puts each GPU's launches on it.
//
// GpuThreads(n) starts n - 1 persistent workers; run(work) calls work(i) for every i in [0, n)
// at once: i = 0 on the calling thread, i >= 1 on worker i, always the same thread for the same
// i (so per-thread state such as CUDA's current device stays set). run returns after every
// work(i) has returned, so `work` may live on the caller's stack; an exception from any work(i) is
// rethrown there (the lowest i's first) once all have returned, and the pool stays usable.
//
// The hand-offs: run bumps an atomic generation counter (release: the job is published before
// it) and each worker counts itself done in an atomic count (release: its result, or its
// exception, is published before it). A waiting thread polls (yielding its core to any other
// runnable thread) for up to kSpin, then sleeps in std::atomic::wait until notified. kSpin is
// long because the gap it must bridge is the harness's between two timed samples, not between two
// calls of a batch: a hot batch is ~1 ms of GPU work, and after it the harness waits for it,
// refills and poisons the inputs and checks the outputs before the next sample, several ms in all.
// A worker asleep by then would start its GPU's share only after a futex wake-up (tens of us, and
// jittery), while GPU 0's share, launched by the caller, starts at once: the wake-up would land in
// every sample's time. Polling until the sampling is over costs N - 1 cores while it lasts; an
// idle pool still sleeps. The destructor wakes every worker to return and joins it; it must not
// run during run (one owner, one thread).
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <thread>
#include <vector>

namespace ch04 {

class GpuThreads {
 public:
  static constexpr std::chrono::milliseconds kSpin{250};

  explicit GpuThreads(size_t n) : errors_(n) {
    try {
      for (size_t i = 1; i < n; ++i) workers_.emplace_back([this, i] { serve(i); });
    } catch (...) {  // no thread left behind unjoined
      stop();
      throw;
    }
  }
  GpuThreads(const GpuThreads&) = delete;
  GpuThreads& operator=(const GpuThreads&) = delete;
  ~GpuThreads() { stop(); }

  size_t size() const { return errors_.size(); }

  // work(i) for every index at once, as described above. Not reentrant.
  template <class Work>
  void run(const Work& work) const {
    job_ = &work;
    run_job_ = [](const void* job, size_t i) { (*static_cast<const Work*>(job))(i); };
    for (auto& e : errors_) e = nullptr;
    pending_.store(int(workers_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    try {
      work(size_t{0});
    } catch (...) {
      errors_[0] = std::current_exception();
    }
    for (int left = int(workers_.size()); left != 0;) left = changed_from(pending_, left);
    for (auto& e : errors_)
      if (e) std::rethrow_exception(e);
  }

 private:
  // `a`'s value once it differs from `old`: polling for up to kSpin, then sleeping.
  template <class T>
  static T changed_from(const std::atomic<T>& a, T old) {
    const auto until = std::chrono::steady_clock::now() + kSpin;
    T now;
    while ((now = a.load(std::memory_order_acquire)) == old) {
      if (std::chrono::steady_clock::now() > until)
        a.wait(old, std::memory_order_acquire);
      else
        std::this_thread::yield();
    }
    return now;
  }
  void serve(size_t i) const {
    for (uint32_t seen = 0;;) {  // 0: generation_'s value before the first job
      seen = changed_from(generation_, seen);
      if (stopping_.load(std::memory_order_acquire)) return;
      try {
        run_job_(job_, i);
      } catch (...) {
        errors_[i] = std::current_exception();
      }
      pending_.fetch_sub(1, std::memory_order_release);  // publishes errors_[i] to run's wait
      pending_.notify_one();
    }
  }
  void stop() {
    stopping_.store(true, std::memory_order_release);
    generation_.fetch_add(1, std::memory_order_release);
    generation_.notify_all();
    for (auto& t : workers_) t.join();
    workers_.clear();
  }

  std::vector<std::thread> workers_;  // workers_[i - 1] serves index i
  // The job in progress: written by run before generation_ is bumped, read by the workers after.
  mutable const void* job_ = nullptr;
  mutable void (*run_job_)(const void*, size_t) = nullptr;
  mutable std::vector<std::exception_ptr> errors_;  // slot i: what work(i) threw in this job
  mutable std::atomic<uint32_t> generation_{0};     // bumped once per job, and by stop()
  mutable std::atomic<int> pending_{0};             // workers yet to finish this job
  std::atomic<bool> stopping_{false};
};

}  // namespace ch04

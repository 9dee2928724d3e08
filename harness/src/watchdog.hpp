// Internal: a time limit on each case, so a case that never ends names itself and ends the
// process instead of holding it (and ctest, or bench compare, which waits on it) until something
// outside kills it without a word. A GPU deadlock is the usual cause: a kernel waiting on a flag
// or barrier nothing will complete (ch10's stream-K did, on setmaxnreg), which no CUDA error
// reports, and which cudaDeviceSynchronize waits on forever.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace bench::detail {

// The harness's exit code for "a case did not finish in its time limit" (3 is a sticky CUDA
// error, 77 no device).
constexpr int kHungCaseExitCode = 4;

class CaseWatchdog {
 public:
  // Called on the watchdog's thread with the case's name and the limit, when a case outlives it.
  using OnExpiry = std::function<void(const std::string& name, double limit_s)>;
  // limit_s <= 0: no limit (watch() does nothing). The default action: print the case and the
  // limit to stderr and end the process with kHungCaseExitCode.
  explicit CaseWatchdog(double limit_s, OnExpiry on_expiry = {});
  ~CaseWatchdog();
  CaseWatchdog(const CaseWatchdog&) = delete;
  CaseWatchdog& operator=(const CaseWatchdog&) = delete;

  // Watches the case `name` until the returned guard goes out of scope.
  class Guard {
   public:
    ~Guard() {
      if (dog_) dog_->stop_watching();
    }
    Guard(Guard&& other) noexcept : dog_(other.dog_) { other.dog_ = nullptr; }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;

   private:
    friend class CaseWatchdog;
    explicit Guard(CaseWatchdog* dog) : dog_(dog) {}
    CaseWatchdog* dog_;
  };
  [[nodiscard]] Guard watch(const std::string& name);

 private:
  void stop_watching();
  void loop();

  const double limit_s_;
  const OnExpiry on_expiry_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::string name_;            // the case watched; empty: none
  unsigned long generation_ = 0;  // counts watch() calls, so a finished case's deadline is never applied to the next
  bool quit_ = false;
  std::thread thread_;          // started by the first watch()
};

}  // namespace bench::detail

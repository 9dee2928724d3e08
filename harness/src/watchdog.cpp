#include "watchdog.hpp"

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace bench::detail {

namespace {
void report_and_exit(const std::string& name, double limit_s) {
  std::fprintf(stderr,
               "FATAL: %s did not finish in %g s (--bench_case_timeout): a kernel that never ends? "
               "(a deadlock: a wait on a flag or barrier nothing completes). The process ends here.\n",
               name.c_str(), limit_s);
  std::fflush(stderr);
  std::fflush(stdout);
  // Not exit(): destructors and atexit handlers would synchronise with the hung GPU work.
  std::_Exit(kHungCaseExitCode);
}
}  // namespace

CaseWatchdog::CaseWatchdog(double limit_s, OnExpiry on_expiry)
    : limit_s_(limit_s), on_expiry_(on_expiry ? std::move(on_expiry) : OnExpiry(report_and_exit)) {}

CaseWatchdog::~CaseWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    quit_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

CaseWatchdog::Guard CaseWatchdog::watch(const std::string& name) {
  if (limit_s_ <= 0) return Guard(nullptr);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    name_ = name;
    ++generation_;
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  changed_.notify_all();
  return Guard(this);
}

void CaseWatchdog::stop_watching() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    name_.clear();
  }
  changed_.notify_all();
}

void CaseWatchdog::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!quit_) {
    if (name_.empty()) {
      changed_.wait(lock, [this] { return quit_ || !name_.empty(); });
      continue;
    }
    const unsigned long watched = generation_;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(limit_s_);
    // Wakes when the case ends (or another starts), or at its deadline.
    if (changed_.wait_until(lock, deadline, [&] { return quit_ || name_.empty() || generation_ != watched; }))
      continue;
    const std::string name = name_;
    lock.unlock();
    on_expiry_(name, limit_s_);  // the default never returns
    lock.lock();
    if (generation_ == watched) name_.clear();  // a test's action returns: watch nothing until the next case
  }
}

}  // namespace bench::detail

// harness/src/watchdog.cpp: a case that outlives its limit is named and ends the process; a case
// that ends in time never fires, and one case's deadline never carries over to the next.
#include "watchdog.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using bench::detail::CaseWatchdog;
using namespace std::chrono_literals;

// Records what fired instead of ending the process.
struct Fired {
  std::mutex mutex;
  std::vector<std::string> names;
  CaseWatchdog::OnExpiry action() {
    return [this](const std::string& name, double) {
      std::lock_guard<std::mutex> lock(mutex);
      names.push_back(name);
    };
  }
  std::vector<std::string> get() {
    std::lock_guard<std::mutex> lock(mutex);
    return names;
  }
};

TEST(CaseWatchdog, ACaseThatOutlivesItsLimitIsNamed) {
  Fired fired;
  CaseWatchdog dog(0.05, fired.action());
  {
    const auto watching = dog.watch("ch99/stuck/optimized");
    std::this_thread::sleep_for(300ms);
  }
  EXPECT_EQ(fired.get(), std::vector<std::string>{"ch99/stuck/optimized"});
}

TEST(CaseWatchdog, CasesThatEndInTimeNeverFire) {
  Fired fired;
  CaseWatchdog dog(0.2, fired.action());
  for (int i = 0; i < 50; ++i) {
    const auto watching = dog.watch("ch99/quick/" + std::to_string(i));
    std::this_thread::sleep_for(1ms);
  }
  std::this_thread::sleep_for(400ms);  // past every deadline, with nothing watched
  EXPECT_TRUE(fired.get().empty());
}

// Two cases of 0.3 s back to back under a 0.5 s limit: 0.6 s in all, but each case in time.
TEST(CaseWatchdog, EachCaseGetsItsOwnDeadline) {
  Fired fired;
  CaseWatchdog dog(0.5, fired.action());
  for (const char* name : {"ch99/a/baseline", "ch99/a/optimized"}) {
    const auto watching = dog.watch(name);
    std::this_thread::sleep_for(300ms);
  }
  std::this_thread::sleep_for(300ms);
  EXPECT_TRUE(fired.get().empty());
}

TEST(CaseWatchdog, NoLimitWatchesNothing) {
  Fired fired;
  CaseWatchdog dog(0, fired.action());
  {
    const auto watching = dog.watch("ch99/slow/optimized");
    std::this_thread::sleep_for(100ms);
  }
  EXPECT_TRUE(fired.get().empty());
}

// The real action: the case on stderr, the harness's exit code for a hung case.
TEST(CaseWatchdogDeathTest, TheDefaultActionNamesTheCaseAndExits) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        CaseWatchdog dog(0.05);
        const auto watching = dog.watch("ch99/stuck/optimized");
        std::this_thread::sleep_for(10s);  // the watchdog ends the process long before this
      },
      ::testing::ExitedWithCode(bench::detail::kHungCaseExitCode),
      "FATAL: ch99/stuck/optimized did not finish in 0.05 s");
}

}  // namespace

// Tests chapters/ch04/gpu_threads.hpp, the thread-per-GPU pool behind ch04/allreduce_small's
// launches, without a GPU: every index runs once per job on its own thread (index 0 on the
// caller's), all at once, and always on the same thread; an exception from any index reaches the
// caller only after every index has returned, and the pool goes on working; the destructor
// returns whether the workers are spinning or asleep.
#include "../../chapters/ch04/gpu_threads.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

TEST(GpuThreads, EveryIndexRunsOncePerJobOnItsOwnThreadIndexZeroOnTheCallers) {
  constexpr size_t kGpus = 4;
  constexpr int kJobs = 200;
  ch04::GpuThreads threads(kGpus);
  ASSERT_EQ(threads.size(), kGpus);
  std::vector<std::atomic<int>> runs(kGpus);
  std::vector<std::thread::id> first(kGpus);
  threads.run([&](size_t i) { first[i] = std::this_thread::get_id(); });
  EXPECT_EQ(first[0], std::this_thread::get_id());
  for (size_t i = 1; i < kGpus; ++i)
    for (size_t j = 0; j < i; ++j) EXPECT_NE(first[i], first[j]) << i << " and " << j;
  for (int job = 0; job < kJobs; ++job) {
    std::vector<std::thread::id> seen(kGpus);
    threads.run([&](size_t i) {
      ++runs[i];
      seen[i] = std::this_thread::get_id();
    });
    for (size_t i = 0; i < kGpus; ++i) {  // run returned: every index's writes are visible
      ASSERT_EQ(runs[i].load(), job + 1) << "index " << i << ", job " << job;
      ASSERT_EQ(seen[i], first[i]) << "index " << i << " moved thread in job " << job;
    }
  }
}

// Each index waits until every index has arrived: a pool that ran them one after another would
// never get past the first (the wait gives up after 10 s and the test fails instead of hanging).
TEST(GpuThreads, IndicesRunAtOnce) {
  constexpr size_t kGpus = 4;
  ch04::GpuThreads threads(kGpus);
  for (int job = 0; job < 20; ++job) {
    std::atomic<int> arrived{0};
    std::atomic<int> gave_up{0};
    threads.run([&](size_t) {
      ++arrived;
      const auto until = std::chrono::steady_clock::now() + 10s;
      while (arrived.load() < int(kGpus))
        if (std::chrono::steady_clock::now() > until) {
          ++gave_up;
          return;
        } else {
          std::this_thread::yield();
        }
    });
    ASSERT_EQ(gave_up.load(), 0) << "job " << job;
  }
}

TEST(GpuThreads, AWorkersExceptionReachesTheCallerAfterEveryIndexReturned) {
  constexpr size_t kGpus = 4;
  ch04::GpuThreads threads(kGpus);
  std::atomic<int> finished{0};
  try {
    threads.run([&](size_t i) {
      if (i == 2) throw std::runtime_error("ncclAllReduce: on GPU 2");
      std::this_thread::sleep_for(20ms);  // the others are still running when index 2 throws
      ++finished;
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "ncclAllReduce: on GPU 2");
  }
  EXPECT_EQ(finished.load(), int(kGpus) - 1);
  std::atomic<int> after{0};  // and the pool goes on: the error does not stick
  threads.run([&](size_t) { ++after; });
  EXPECT_EQ(after.load(), int(kGpus));
}

TEST(GpuThreads, TheCallersExceptionWaitsForTheWorkersAndTheLowestIndexWins) {
  constexpr size_t kGpus = 3;
  ch04::GpuThreads threads(kGpus);
  std::atomic<int> finished{0};
  try {
    threads.run([&](size_t i) {
      if (i == 0) throw std::runtime_error("index 0");
      std::this_thread::sleep_for(20ms);
      ++finished;
      throw std::runtime_error("index " + std::to_string(i));
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()), "index 0");
  }
  EXPECT_EQ(finished.load(), int(kGpus) - 1);
}

// Workers asleep (idle past kSpin) must wake for a job and for the destructor.
TEST(GpuThreads, SleepingWorkersWakeForAJobAndForTheDestructor) {
  constexpr size_t kGpus = 4;
  {
    ch04::GpuThreads never_used(kGpus);  // destroyed while its workers may not have started yet
  }
  auto threads = std::make_unique<ch04::GpuThreads>(kGpus);
  std::atomic<int> runs{0};
  for (int job = 0; job < 3; ++job) {
    std::this_thread::sleep_for(ch04::GpuThreads::kSpin * 2);
    threads->run([&](size_t) { ++runs; });
  }
  EXPECT_EQ(runs.load(), 3 * int(kGpus));
  std::this_thread::sleep_for(ch04::GpuThreads::kSpin * 2);
  threads.reset();  // returns: every worker woke and was joined
}

TEST(GpuThreads, OneGpuRunsOnTheCallerAlone) {
  ch04::GpuThreads threads(1);
  std::thread::id ran;
  threads.run([&](size_t i) {
    EXPECT_EQ(i, 0u);
    ran = std::this_thread::get_id();
  });
  EXPECT_EQ(ran, std::this_thread::get_id());
}

}  // namespace

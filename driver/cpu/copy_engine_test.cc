#include "driver/cpu/copy_engine.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "base/mutex.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

std::vector<std::byte> Pattern(size_t size, uint8_t seed) {
  std::vector<std::byte> bytes(size);
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>((i * 131 + seed) % 251);
  return bytes;
}

TEST(CopyEngineTest, EveryPartRunsExactlyOnce) {
  for (int helpers : {0, 1, 3}) {
    CopyEngine engine(helpers);
    for (size_t parts : {0, 1, 2, 7, 64}) {
      std::vector<std::atomic<int>> runs(parts);
      engine.Run(parts, [&](size_t part) { runs[part].fetch_add(1); });
      for (size_t part = 0; part < parts; ++part) {
        EXPECT_EQ(runs[part].load(), 1) << helpers << " helpers, part " << part << " of " << parts;
      }
    }
  }
}

TEST(CopyEngineTest, CopiesEqualAMemcpyWhetherSplitOrNot) {
  CopyEngine engine(2);
  for (uint64_t size : {uint64_t{0}, uint64_t{4097}, CopyEngine::kMinSplitBytes - 1,
                        CopyEngine::kMinSplitBytes, 3 * CopyEngine::kMinSplitBytes + 12345}) {
    std::vector<std::byte> from = Pattern(size, 7);
    std::vector<std::byte> to(size + 2, std::byte{0xEE});
    engine.Copy(to.data() + 1, from.data(), size);
    EXPECT_TRUE(std::equal(from.begin(), from.end(), to.begin() + 1)) << size;
    EXPECT_EQ(to.front(), std::byte{0xEE}) << "a byte before the target changed";
    EXPECT_EQ(to.back(), std::byte{0xEE}) << "a byte past the target changed";
  }
}

// An idle helper takes parts of a copy the caller is running: the first two parts each
// wait for the other to start, which only two threads working at once can satisfy.
TEST(CopyEngineTest, AnIdleHelperJoinsTheCopy) {
  CopyEngine engine(1);
  Mutex mutex;
  CondVar entered;
  std::set<std::thread::id> threads;
  bool met = true;
  engine.Run(8, [&](size_t part) {
    MutexLock lock(&mutex);
    threads.insert(std::this_thread::get_id());
    entered.NotifyAll();
    if (part < 2) {
      met = met && entered.AwaitUntil(&mutex, std::chrono::steady_clock::now() + std::chrono::seconds(30),
                                      [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return threads.size() == 2; });
    }
  });
  EXPECT_TRUE(met) << "no helper took a part";
  EXPECT_EQ(threads.size(), 2u);
}

// A helper never runs on the CPU its caller runs on (Note [Copies on several cores]): the
// caller, confined to one CPU, waits in its first part until a helper took one, and every
// part a helper ran records a CPU other than the caller's.
TEST(CopyEngineTest, HelpersRunOffTheCallersCpu) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  if (CPU_COUNT(&before) < 2) GTEST_SKIP() << "needs two CPUs";
  CopyEngine engine(1);  // its CPUs: all of this thread's
  int home = 0;
  while (!CPU_ISSET(home, &before)) ++home;
  cpu_set_t only_home;
  CPU_ZERO(&only_home);
  CPU_SET(home, &only_home);
  ASSERT_EQ(sched_setaffinity(0, sizeof(only_home), &only_home), 0);
  const pid_t caller = gettid();
  Mutex mutex;
  CondVar helped;
  std::vector<int> helper_cpus;
  bool met = true;
  engine.Run(16, [&](size_t) {
    const int cpu = sched_getcpu();
    MutexLock lock(&mutex);
    if (gettid() != caller) {
      helper_cpus.push_back(cpu);
      helped.NotifyAll();
      return;
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    met = met && helped.AwaitUntil(&mutex, deadline, [&]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
      return !helper_cpus.empty();
    });
  });
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);
  EXPECT_TRUE(met) << "no helper took a part";
  for (int cpu : helper_cpus) EXPECT_NE(cpu, home) << "a helper ran on its caller's CPU";
}

// A daemon confined to some CPUs (a service's CPUAffinity, a container's cpuset) starts
// helpers for those, not for the machine's.
TEST(CopyEngineTest, HelpersFollowTheCpusThisThreadMayUse) {
  cpu_set_t before;
  ASSERT_EQ(sched_getaffinity(0, sizeof(before), &before), 0);
  for (int allowed : {1, 2}) {
    if (CPU_COUNT(&before) < allowed) continue;
    cpu_set_t some;
    CPU_ZERO(&some);
    for (int cpu = 0, taken = 0; cpu < CPU_SETSIZE && taken < allowed; ++cpu) {
      if (CPU_ISSET(cpu, &before)) {
        CPU_SET(cpu, &some);
        ++taken;
      }
    }
    ASSERT_EQ(sched_setaffinity(0, sizeof(some), &some), 0);
    EXPECT_EQ(CopyEngine::HelpersForThisThread(), allowed - 1);
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(before), &before), 0);
  EXPECT_EQ(CopyEngine::HelpersForThisThread(), std::min(CPU_COUNT(&before) - 1, 3));
}

// Streams of a device copy at once through its one engine.
TEST(CopyEngineTest, ConcurrentCopiesShareTheHelpers) {
  constexpr int kCallers = 4;
  constexpr uint64_t kSize = CopyEngine::kMinSplitBytes + 3 * CopyEngine::kPartBytes + 5;
  CopyEngine engine(2);
  const std::vector<std::byte> from = Pattern(kSize, 3);
  std::vector<std::vector<std::byte>> targets(kCallers, std::vector<std::byte>(kSize));
  std::vector<std::thread> callers;
  for (int i = 0; i < kCallers; ++i) {
    callers.emplace_back([&, i] {
      for (int round = 0; round < 5; ++round) {
        std::memset(targets[i].data(), 0, kSize);
        engine.Copy(targets[i].data(), from.data(), kSize);
        EXPECT_TRUE(targets[i] == from) << "caller " << i << ", round " << round;
      }
    });
  }
  for (std::thread& caller : callers) caller.join();
}

}  // namespace
}  // namespace gpucmd

#include "base/lock_order_checks.h"

#include <csignal>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

// Two absl mutexes taken in both orders by one thread: a cycle in the lock-order graph,
// though nothing can deadlock.
void TakeInBothOrders() {
  absl::Mutex first;
  absl::Mutex second;
  {
    absl::MutexLock outer(&first);
    absl::MutexLock inner(&second);
  }
  absl::MutexLock outer(&second);
  absl::MutexLock inner(&first);
}

TEST(LockOrderChecksTest, AReversedLockOrderNoLongerEndsTheProcess) {
  EXPECT_EXIT(
      {
        StopAbseilLockOrderChecks();
        TakeInBothOrders();
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "");
}

// Why the call is needed: Debian 12's abseil, the one this project builds against,
// aborts on the same sequence.
TEST(LockOrderChecksTest, WithoutItAReversedLockOrderAborts) {
  EXPECT_EXIT(
      {
        TakeInBothOrders();
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGABRT), "potential deadlock");
}

}  // namespace
}  // namespace gpucmd

#include "base/batch_scheduling.h"

#include <sched.h>

#include <thread>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(BatchSchedulingTest, AppliesToTheCallingThreadAndTheThreadsItStarts) {
  const int before = sched_getscheduler(0);
  int inside = -1;
  int started_inside = -1;
  bool took = false;
  std::thread device_work([&] {
    took = ScheduleThisThreadAsBatchWork();
    inside = sched_getscheduler(0);
    std::thread child([&] { started_inside = sched_getscheduler(0); });
    child.join();
  });
  device_work.join();
  ASSERT_TRUE(took);
  EXPECT_EQ(inside, SCHED_BATCH);
  EXPECT_EQ(started_inside, SCHED_BATCH);
  EXPECT_EQ(sched_getscheduler(0), before);
}

}  // namespace
}  // namespace gpucmd

#include "driver/gpu/notice_thread.h"

#include <future>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "base/thread_name.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(NoticeThreadTest, ARelayedCallbackRunsOnTheNoticeThreadOnceReported) {
  NoticeThread notices("gpucmd-notices");
  std::promise<std::string> ran_on;
  absl::AnyInvocable<void()> report =
      notices.Relay([&ran_on] { ran_on.set_value(NameOfThisThread()); });
  std::future<std::string> ran = ran_on.get_future();
  EXPECT_EQ(ran.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "ran before its report";
  std::thread runtime([&report] { report(); });  // a runtime's own thread
  runtime.join();
  EXPECT_EQ(ran.get(), "gpucmd-notices");
}

TEST(NoticeThreadTest, CallbacksRunInTheOrderOfTheirReports) {
  std::vector<int> order;
  {
    NoticeThread notices("gpucmd-notices");
    std::vector<absl::AnyInvocable<void()>> reports;
    for (int i = 0; i < 3; ++i) {
      reports.push_back(notices.Relay([&order, i] { order.push_back(i); }));
    }
    reports[2]();
    reports[0]();
    reports[1]();
  }  // the destructor lets the queued callbacks run first
  EXPECT_EQ(order, (std::vector<int>{2, 0, 1}));
}

// A lost context's runtime may never report: the destructor runs what is left, and a
// report made after that runs nothing.
TEST(NoticeThreadTest, TheDestructorRunsWhatWasNeverReportedAndLaterReportsDoNothing) {
  int ran = 0;
  absl::AnyInvocable<void()> late;
  {
    NoticeThread notices("gpucmd-notices");
    late = notices.Relay([&ran] { ++ran; });
  }
  EXPECT_EQ(ran, 1);
  late();
  EXPECT_EQ(ran, 1);
}

TEST(NoticeThreadTest, ACallbackRunByTheDestructorMayRelayAnother) {
  std::vector<std::string> ran;
  auto notices = std::make_unique<NoticeThread>("gpucmd-notices");
  NoticeThread* stopping = notices.get();
  absl::AnyInvocable<void()> unused_report = notices->Relay([&ran, stopping] {
    ran.push_back("first");
    absl::AnyInvocable<void()> second = stopping->Relay([&ran] { ran.push_back("second"); });
  });
  notices.reset();
  EXPECT_EQ(ran, (std::vector<std::string>{"first", "second"}));
}

}  // namespace
}  // namespace gpucmd

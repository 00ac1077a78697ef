#include "server/core/device_queue.h"

#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

// The next task, waiting for one; nullopt once the queue is closed and empty.
template <typename Task>
std::optional<Task> Pop(DeviceQueue<Task>& queue) {
  if (!queue.AwaitWork()) return std::nullopt;
  return queue.TryPop();
}

using Queue = DeviceQueue<int>;

TEST(DeviceQueueTest, OneSessionIsFifo) {
  Queue queue(16, 16);
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(queue.Push(1, i).ok());
  for (int i = 0; i < 5; ++i) EXPECT_EQ(Pop(queue), i);
  EXPECT_EQ(queue.depth(), 0u);
}

// What the watchdog reads: since when queued tasks wait without one being taken.
TEST(DeviceQueueTest, WaitingSinceMovesWithEachTakeAndEndsWhenEmpty) {
  Queue queue(16, 16);
  EXPECT_FALSE(queue.waiting_since().has_value());
  ASSERT_TRUE(queue.Push(1, 1).ok());
  const auto first = queue.waiting_since();
  ASSERT_TRUE(first.has_value());
  ASSERT_TRUE(queue.Push(2, 2).ok());
  EXPECT_EQ(queue.waiting_since(), first) << "a later task does not restart the wait";
  ASSERT_EQ(queue.TryPop(), 1);
  ASSERT_TRUE(queue.waiting_since().has_value());
  EXPECT_GE(*queue.waiting_since(), *first);
  ASSERT_EQ(queue.TryPop(), 2);
  EXPECT_FALSE(queue.waiting_since().has_value());
}

TEST(DeviceQueueTest, SessionsAreServedRoundRobin) {
  Queue queue(16, 16);
  // Session 1 floods first; session 2 and 3 still get every other turn.
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(queue.Push(1, 10 + i).ok());
  ASSERT_TRUE(queue.Push(2, 20).ok());
  ASSERT_TRUE(queue.Push(2, 21).ok());
  ASSERT_TRUE(queue.Push(3, 30).ok());
  std::vector<int> order;
  for (int i = 0; i < 7; ++i) order.push_back(*Pop(queue));
  EXPECT_EQ(order, (std::vector<int>{10, 20, 30, 11, 21, 12, 13}));
}

TEST(DeviceQueueTest, FullQueueIsResourceExhaustedAndKeepsItsTasks) {
  Queue queue(2, 16);
  ASSERT_TRUE(queue.Push(1, 1).ok());
  ASSERT_TRUE(queue.Push(2, 2).ok());
  absl::Status full = queue.Push(3, 3);
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("limits.device_queue_capacity"), absl::string_view::npos)
      << full;
  EXPECT_EQ(queue.depth(), 2u);
  EXPECT_EQ(Pop(queue), 1);
  EXPECT_TRUE(queue.Push(3, 3).ok());
}

TEST(DeviceQueueTest, PerSessionLimitLeavesOtherSessionsRoom) {
  Queue queue(16, 2);
  ASSERT_TRUE(queue.Push(1, 1).ok());
  ASSERT_TRUE(queue.Push(1, 2).ok());
  absl::Status over = queue.Push(1, 3);
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(over.message().find("has 2 commands queued"), absl::string_view::npos) << over;
  EXPECT_NE(over.message().find("limits.session_queued_commands"), absl::string_view::npos)
      << over;
  EXPECT_TRUE(queue.Push(2, 4).ok());
  EXPECT_EQ(queue.session_depth(1), 2u);
  EXPECT_EQ(queue.session_depth(2), 1u);
}

TEST(DeviceQueueTest, CloseDrainsQueuedTasksThenEnds) {
  Queue queue(16, 16);
  ASSERT_TRUE(queue.Push(1, 7).ok());
  queue.Close();
  EXPECT_EQ(queue.Push(1, 8).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Pop(queue), 7);
  EXPECT_EQ(Pop(queue), std::nullopt);
}

TEST(DeviceQueueTest, ManyProducersOneConsumerLoseNothing) {
  constexpr int kProducers = 4;
  constexpr int kPerProducer = 2000;
  Queue queue(64, 64);
  std::vector<std::thread> producers;
  for (int p = 0; p < kProducers; ++p) {
    producers.emplace_back([&queue, p] {
      for (int i = 0; i < kPerProducer;) {
        if (queue.Push(p, p * kPerProducer + i).ok()) ++i;
        else std::this_thread::yield();
      }
    });
  }
  std::vector<int> last_seen(kProducers, -1);
  int received = 0;
  while (received < kProducers * kPerProducer) {
    int value = *Pop(queue);
    int producer = value / kPerProducer;
    EXPECT_GT(value, last_seen[producer]) << "a session's tasks must keep their order";
    last_seen[producer] = value;
    ++received;
  }
  for (std::thread& producer : producers) producer.join();
  EXPECT_EQ(queue.depth(), 0u);
}

}  // namespace
}  // namespace gpucmd

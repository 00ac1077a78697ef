#include "server/command/drop_queue.h"

#include <atomic>
#include <optional>
#include <thread>

#include "driver/cpu/cpu_stream.h"
#include "driver/cpu/stream_gate.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

Bytes Tracked(std::atomic<int>* released, size_t size = 16) {
  static std::byte storage[1 << 16];
  return Bytes(storage, size, [released] { ++*released; });
}

TEST(DropQueueTest, BytesLiveUntilAFenceAfterTheirCopyCompleted) {
  CpuStream stream(0);
  DropQueue<CpuStream> queue({});
  std::atomic<int> released{0};
  StreamGate gate;
  // The "copy" reading the staged bytes is stuck until the gate opens.
  gate.Block(stream);
  queue.Push(Tracked(&released));
  ASSERT_TRUE(queue.Flush(stream).ok());  // staged -> pending, fence after the copy
  EXPECT_EQ(released, 0);

  // The next flush must wait for that fence, i.e. for the copy. Run it on a helper
  // thread and check it has not freed anything while the copy is stuck.
  std::atomic<bool> flushed{false};
  std::thread flusher([&] {
    ASSERT_TRUE(queue.Flush(stream).ok());
    flushed = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(flushed);
  EXPECT_EQ(released, 0) << "staged bytes freed while their copy could still read them";
  gate.Open();
  flusher.join();
  EXPECT_EQ(released, 1);
}

TEST(DropQueueTest, SealNeverWaitsAndReleasesOnlyAfterTheFence) {
  CpuStream stream(0);
  DropQueue<CpuStream> queue({});
  std::atomic<int> released{0};
  StreamGate gate;
  gate.Block(stream);
  queue.Push(Tracked(&released));
  queue.Seal(stream);  // returns although the stream is stuck
  queue.Push(Tracked(&released));
  queue.Seal(stream);  // the first fence has not completed: both wait for a new one
  // Nothing staged: nothing to fence, and no event for the stream (an idle Synchronize
  // seals its streams' queues).
  queue.Seal(stream);
  EXPECT_EQ(queue.flushes(), 2u) << "a fence recorded with nothing to cover";
  queue.ReleaseCompleted();
  EXPECT_EQ(released, 0) << "staged bytes freed while their copy could still read them";
  EXPECT_EQ(queue.held_entries(), 2u);
  gate.Open();
  ASSERT_TRUE(stream.Synchronize().ok());
  queue.ReleaseCompleted();
  EXPECT_EQ(released, 2);
  EXPECT_EQ(queue.held_bytes(), 0u);
}

// Pushes behind a stuck stream never wait: past four times its thresholds the queue is
// full, and the fence it offers for room frees everything held once the stream passed it.
TEST(DropQueueTest, AQueueBehindAStuckStreamNeverWaitsAndIsFullAtFourTimesItsThresholds) {
  CpuStream stream(0);
  DropQueue<CpuStream> queue({.max_entries = 2, .max_bytes = 1 << 30});
  std::atomic<int> released{0};
  StreamGate gate;
  gate.Block(stream);
  for (int i = 0; i < 8; ++i) {  // due at 2, 4, 6 and 8 entries held: each time a Seal
    EXPECT_FALSE(queue.FenceForRoom(stream).has_value()) << i;
    queue.Push(Tracked(&released));
    queue.SealIfDue(stream);
  }
  EXPECT_EQ(queue.held_entries(), 8u) << "nothing may go while the stream is stuck";
  EXPECT_TRUE(queue.Full());
  std::optional<CpuStream::Event> fence = queue.FenceForRoom(stream);
  ASSERT_TRUE(fence.has_value());
  EXPECT_FALSE(fence->IsComplete());
  EXPECT_EQ(released, 0);
  gate.Open();
  ASSERT_TRUE(fence->Wait().ok());
  EXPECT_FALSE(queue.FenceForRoom(stream).has_value()) << "room once the stream passed it";
  EXPECT_EQ(released, 8);
  EXPECT_EQ(queue.held_entries(), 0u);
}

// Idle upkeep seals each write's bytes before the next arrives, so `staged` never passes
// the thresholds: the bound on what is held must hold all the same, and the fence for
// room covers what is staged too.
TEST(DropQueueTest, SealsBetweenPushesDoNotLiftTheBound) {
  CpuStream stream(0);
  DropQueue<CpuStream> queue({.max_entries = 1000, .max_bytes = 100});
  std::atomic<int> released{0};
  StreamGate gate;
  gate.Block(stream);
  for (int i = 0; i < 9; ++i) {  // 360 bytes held, under 400; never 100 staged
    queue.Push(Tracked(&released, 40));
    queue.SealIfDue(stream);
    queue.Seal(stream);  // what ReclaimWhenIdle does between commands
  }
  EXPECT_EQ(queue.held_bytes(), 360u);
  EXPECT_FALSE(queue.Full());
  queue.Push(Tracked(&released, 40));  // 400 held, 40 of them staged
  queue.SealIfDue(stream);
  EXPECT_TRUE(queue.Full()) << "a stream behind its copies let the queue grow past its bound";
  std::optional<CpuStream::Event> fence = queue.FenceForRoom(stream);
  ASSERT_TRUE(fence.has_value());
  EXPECT_EQ(queue.staged_entries(), 0u) << "the fence covers the staged bytes too";
  gate.Open();
  ASSERT_TRUE(fence->Wait().ok());
  queue.ReleaseCompleted();
  EXPECT_EQ(released, 10);
  EXPECT_EQ(queue.held_bytes(), 0u);
}

TEST(DropQueueTest, ThresholdsUseCountAndBytes) {
  DropQueue<CpuStream> by_count({.max_entries = 3, .max_bytes = 1 << 30});
  std::atomic<int> released{0};
  by_count.Push(Tracked(&released));
  by_count.Push(Tracked(&released));
  EXPECT_FALSE(by_count.ShouldFlush());
  by_count.Push(Tracked(&released));
  EXPECT_TRUE(by_count.ShouldFlush());

  DropQueue<CpuStream> by_bytes({.max_entries = 1000, .max_bytes = 100});
  by_bytes.Push(Tracked(&released, 60));
  EXPECT_FALSE(by_bytes.ShouldFlush());
  by_bytes.Push(Tracked(&released, 60));
  EXPECT_TRUE(by_bytes.ShouldFlush());
  EXPECT_EQ(by_bytes.held_bytes(), 120u);
}

TEST(DropQueueTest, DrainReleasesEverything) {
  CpuStream stream(0);
  DropQueue<CpuStream> queue({});
  std::atomic<int> released{0};
  for (int i = 0; i < 10; ++i) queue.Push(Tracked(&released));
  ASSERT_TRUE(queue.Drain(stream).ok());
  EXPECT_EQ(released, 10);
  EXPECT_EQ(queue.held_entries(), 0u);
  EXPECT_EQ(queue.flushes(), 2u);
}

}  // namespace
}  // namespace gpucmd

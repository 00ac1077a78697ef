#include "server/command/drop_queue.h"

#include <atomic>

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

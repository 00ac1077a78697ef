#include "server/core/batch.h"

#include <pthread.h>

#include <chrono>
#include <future>
#include <thread>

#include "absl/strings/match.h"
#include "driver/cpu/cpu_driver.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/command/command_factory.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;
constexpr SessionId kSession = 1;
const SessionInfo kSessionInfo{.id = kSession, .device = 0, .client_name = "batch-test"};

class BatchTest : public ::testing::Test {
 protected:
  BatchTest()
      : metrics_(1),
        worker_({.ordinal = 0},
                MakeCommandFactory<CpuDriver>(
                    [] { return CpuBackend::Create({.capacity_bytes = 16 * kMiB}); },
                    CommandOptions()),
                &metrics_) {}

  // Runs every command of `batch` in one device task and waits for the results.
  void RunAll(Batch& batch) {
    std::promise<void> done;
    absl::Status queued = batch.Run(
        worker_, kSessionInfo, 0, batch.size(), [] { return absl::OkStatus(); },
        [&done] { done.set_value(); });
    ASSERT_TRUE(queued.ok()) << queued;
    done.get_future().get();
  }

  static BatchCommand Command(uint64_t sequence, absl::string_view kind, Operation operation) {
    return BatchCommand{.sequence = sequence, .kind = kind, .operation = std::move(operation)};
  }

  static BufferRef Ref(size_t index) { return BufferRef{.batch_index = index}; }

  static WriteOp Write(BufferRef buffer, std::string data) {
    CopyLayout layout = CopyLayout::Contiguous(0, data.size());
    return WriteOp{.buffer = buffer, .layout = layout, .data = std::move(data)};
  }

  static ReadOp Read(BufferRef buffer, uint64_t size) {
    return ReadOp{.buffer = buffer, .layout = CopyLayout::Contiguous(0, size)};
  }

  static std::string Bytes(const OperationResult& result) {
    return result.read.has_value() ? result.read->bytes.ToString() : "";
  }

  Metrics metrics_;
  DeviceWorker worker_;
};

TEST_F(BatchTest, LaterCommandsUseTheBuffersOfEarlierAllocates) {
  std::vector<BatchCommand> commands;
  commands.push_back(Command(10, "allocate", AllocateOp{.size_bytes = 8}));
  commands.push_back(Command(11, "write", Write(Ref(0), "abcdefgh")));
  commands.push_back(Command(12, "read", Read(Ref(0), 8)));
  commands.push_back(Command(13, "free", FreeOp{.buffer = Ref(0)}));
  auto batch = std::make_shared<Batch>(std::move(commands));
  RunAll(*batch);
  for (size_t i = 0; i < batch->size(); ++i) {
    EXPECT_TRUE(batch->result(i).status.ok()) << i << ": " << batch->result(i).status;
  }
  EXPECT_NE(batch->result(0).allocated, 0u);
  EXPECT_EQ(batch->result(1).bytes_written, 8u);
  EXPECT_EQ(Bytes(batch->result(2)), "abcdefgh");
}

TEST_F(BatchTest, AFailedAllocateFailsItsDependentsAndNothingElse) {
  std::vector<BatchCommand> commands;
  commands.push_back(Command(1, "allocate", AllocateOp{.size_bytes = 1024 * kMiB}));  // too big
  commands.push_back(Command(2, "allocate", AllocateOp{.size_bytes = 4}));
  commands.push_back(Command(3, "write", Write(Ref(0), "lost")));
  commands.push_back(Command(4, "write", Write(Ref(1), "kept")));
  commands.push_back(Command(5, "read", Read(Ref(1), 4)));
  commands.push_back(Command(6, "free", FreeOp{.buffer = Ref(0)}));
  auto batch = std::make_shared<Batch>(std::move(commands));
  RunAll(*batch);
  EXPECT_EQ(batch->result(0).status.code(), absl::StatusCode::kResourceExhausted);
  for (size_t dependent : {2, 5}) {
    const absl::Status& status = batch->result(dependent).status;
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << dependent;
    EXPECT_THAT(status.message(), HasSubstr("depends on command 1 (allocate)"));
  }
  EXPECT_TRUE(batch->result(3).status.ok());
  EXPECT_EQ(Bytes(batch->result(4)), "kept");
}

TEST_F(BatchTest, ReadsOfABufferWhoseWriteFailedFailNamingIt) {
  std::vector<BatchCommand> commands;
  commands.push_back(Command(1, "allocate", AllocateOp{.size_bytes = 4}));
  WriteOp past_the_end = Write(Ref(0), "xy");
  past_the_end.layout.offset_bytes = 3;  // two bytes at offset 3 of a 4-byte buffer
  commands.push_back(Command(2, "write", std::move(past_the_end)));
  commands.push_back(Command(3, "read", Read(Ref(0), 4)));
  CopyOp copy{.source = Ref(0), .target = Ref(0), .layout = DeviceCopyLayout::Contiguous(0, 2, 2)};
  commands.push_back(Command(4, "copy", copy));
  commands.push_back(Command(5, "free", FreeOp{.buffer = Ref(0)}));
  auto batch = std::make_shared<Batch>(std::move(commands));
  RunAll(*batch);
  EXPECT_EQ(batch->result(1).status.code(), absl::StatusCode::kInvalidArgument);
  for (size_t dependent : {2, 3}) {
    const absl::Status& status = batch->result(dependent).status;
    EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << dependent;
    EXPECT_THAT(status.message(), HasSubstr("command 2 (write)"));
  }
  EXPECT_TRUE(batch->result(4).status.ok()) << "freeing does not read: it still runs";
}

TEST_F(BatchTest, RejectedCommandsAreAnsweredWithoutRunning) {
  std::vector<BatchCommand> commands;
  commands.push_back(BatchCommand{.sequence = 7,
                                  .kind = "allocate",
                                  .operation = absl::InvalidArgumentError("size_bytes")});
  commands.push_back(Command(8, "write", Write(Ref(0), "ab")));
  commands.push_back(Command(9, "synchronize", SynchronizeOp()));
  auto batch = std::make_shared<Batch>(std::move(commands));
  EXPECT_TRUE(batch->answered(0));
  RunAll(*batch);
  EXPECT_EQ(batch->result(0).status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(batch->result(1).status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(batch->result(1).status.message(), HasSubstr("command 7 (allocate)"));
  EXPECT_TRUE(batch->result(2).status.ok());
}

// Which thread ran a batch of `operation`: its task asks `abandoned` first.
std::thread::id ThreadThatRan(DeviceWorker& worker, Operation operation) {
  std::vector<BatchCommand> commands;
  commands.push_back(
      BatchCommand{.sequence = 1, .kind = "command", .operation = std::move(operation)});
  auto batch = std::make_shared<Batch>(std::move(commands));
  std::thread::id ran;
  std::promise<void> done;
  EXPECT_TRUE(batch
                  ->Run(
                      worker, kSessionInfo, 0, 1,
                      [&ran] {
                        ran = std::this_thread::get_id();
                        return absl::OkStatus();
                      },
                      [&done] { done.set_value(); })
                  .ok());
  done.get_future().get();
  EXPECT_TRUE(batch->result(0).status.ok()) << batch->result(0).status;
  return ran;
}

// Shared-memory bytes for SharedWrite: they outlive every worker (a drop queue holds a
// slice until its copy completed).
std::byte shared_bytes[4];

// A write of shared_bytes: from a slice the device copies from directly (`pinned`), or
// through staging.
WriteOp SharedWrite(BufferRef buffer, bool pinned) {
  Bytes slice(shared_bytes, sizeof(shared_bytes), nullptr);
  return WriteOp{.buffer = buffer,
                 .layout = CopyLayout::Contiguous(0, sizeof(shared_bytes)),
                 .shared = pinned ? std::move(slice).MarkPinned() : std::move(slice)};
}

// How many of `attempts` batches of `make()`, each submitted once nobody holds the device,
// ran on the calling thread. A reply may come while the device thread still finishes the
// task that queued it, and its idle upkeep may take the device at the moment a batch
// comes: such a batch is queued, as it should be.
template <typename MakeOperation>
int RanHereOf(DeviceWorker& worker, int attempts, MakeOperation make) {
  int ran_here = 0;
  for (int i = 0; i < attempts; ++i) {
    while (!worker.MakesProgress(std::chrono::nanoseconds(0))) std::this_thread::yield();
    ran_here += ThreadThatRan(worker, make()) == std::this_thread::get_id();
  }
  return ran_here;
}

TEST_F(BatchTest, CommandsThatOnlyEnqueueRunOnTheCallingThreadOfAnIdleDevice) {
  worker_.AwaitInitialised();
  std::vector<BatchCommand> setup;
  setup.push_back(Command(1, "allocate", AllocateOp{.size_bytes = 4}));
  setup.push_back(Command(2, "write", Write(Ref(0), "abcd")));
  setup.push_back(Command(3, "synchronize", SynchronizeOp()));
  setup.push_back(Command(4, "allocate", AllocateOp{.size_bytes = kMiB}));
  auto batch = std::make_shared<Batch>(std::move(setup));
  RunAll(*batch);
  const BufferRef buffer{.id = batch->result(0).allocated};
  const BufferRef big_buffer{.id = batch->result(3).allocated};
  EXPECT_GT(RanHereOf(worker_, 20, [&] { return Read(buffer, 4); }), 0)
      << "a read only queues a copy: it never waits for the device";
  EXPECT_GT(RanHereOf(worker_, 20, [&] { return SharedWrite(buffer, /*pinned=*/true); }), 0)
      << "a write from memory the device copies from directly only queues that copy";
  EXPECT_GT(RanHereOf(worker_, 20,
                      [&] {
                        return CopyOp{.source = buffer,
                                      .target = buffer,
                                      .layout = DeviceCopyLayout::Contiguous(0, 2, 2)};
                      }),
            0)
      << "a copy between buffers only queues that copy";
  EXPECT_GT(RanHereOf(worker_, 20, [&] { return Write(buffer, "wxyz"); }), 0)
      << "a small inline write stages its few bytes on the calling thread";
  EXPECT_EQ(RanHereOf(worker_, 5, [&] { return Write(big_buffer, std::string(kMiB, 'b')); }),
            0)
      << "an inline write of 1 MiB copies it: it runs on the device thread";
  EXPECT_EQ(RanHereOf(worker_, 5, [&] { return SharedWrite(buffer, /*pinned=*/false); }), 0)
      << "a write through pinned staging copies on its thread: it runs on the device thread";
}

// The name of the calling thread.
std::string ThisThreadName() {
  char name[16] = {};
  pthread_getname_np(pthread_self(), name, sizeof(name));
  return name;
}

// Note [Brief answers where the work ended]: a small read of a caller whose answer is
// brief, queued behind other work on its stream, is answered on the stream's worker that
// ran its copy (unless the copy ended before the task asked to be called back, as a
// stream's worker already awake may do); a large read, or a caller that does not say so,
// on a completion thread. (A small read that finds its stream idle runs its copy where it
// was queued, inside the task, and is answered off that thread: not what is checked here.)
TEST_F(BatchTest, SmallReadsOfBriefCallersAreAnsweredWhereTheirCopiesRan) {
  constexpr uint64_t kBusyBytes = 6 * kMiB;
  std::vector<BatchCommand> setup;
  setup.push_back(Command(1, "allocate", AllocateOp{.size_bytes = 2 * kMiB}));
  setup.push_back(Command(2, "allocate", AllocateOp{.size_bytes = 2 * kBusyBytes}));
  auto allocated = std::make_shared<Batch>(std::move(setup));
  RunAll(*allocated);
  const BufferRef buffer{.id = allocated->result(0).allocated};
  const BufferRef busy{.id = allocated->result(1).allocated};
  // How many of `attempts` reads of `size` bytes, each queued behind a copy of kBusyBytes
  // on the same stream, were answered on a stream's worker.
  auto answered_on_a_stream = [&](int attempts, uint64_t size,
                                  DeviceWorker::Answering answering) {
    int on_a_stream = 0;
    for (int i = 0; i < attempts; ++i) {
      std::vector<BatchCommand> copy;
      copy.push_back(
          Command(1, "copy",
                  CopyOp{.source = busy,
                         .target = busy,
                         .layout = DeviceCopyLayout::Contiguous(0, kBusyBytes, kBusyBytes)}));
      RunAll(*std::make_shared<Batch>(std::move(copy)));  // queued, not waited for
      std::vector<BatchCommand> commands;
      commands.push_back(Command(1, "read", Read(buffer, size)));
      auto batch = std::make_shared<Batch>(std::move(commands));
      std::promise<std::string> answered_on;
      EXPECT_TRUE(batch->Run(
                           worker_, kSessionInfo, 0, 1, [] { return absl::OkStatus(); },
                           [&answered_on] { answered_on.set_value(ThisThreadName()); },
                           /*queued=*/nullptr, answering)
                      .ok());
      const std::string name = answered_on.get_future().get();
      EXPECT_TRUE(batch->result(0).status.ok()) << batch->result(0).status;
      EXPECT_EQ(Bytes(batch->result(0)).size(), size);
      on_a_stream += absl::StartsWith(name, "gpucmd-stream");
    }
    return on_a_stream;
  };
  constexpr auto kBrief = DeviceWorker::Answering::kWhereWorkEnded;
  EXPECT_GT(answered_on_a_stream(20, 4096, kBrief), 0);
  EXPECT_EQ(answered_on_a_stream(5, 2 * kMiB, kBrief), 0) << "copying 2 MiB is not brief";
  EXPECT_EQ(answered_on_a_stream(5, 4096, DeviceWorker::Answering::kOnCompletionThread), 0);
}

TEST_F(BatchTest, AnAbandonedCallRunsNothing) {
  std::vector<BatchCommand> commands;
  commands.push_back(Command(1, "allocate", AllocateOp{.size_bytes = 4}));
  auto batch = std::make_shared<Batch>(std::move(commands));
  std::promise<void> done;
  ASSERT_TRUE(batch->Run(worker_, kSessionInfo, 0, 1,
                         [] { return absl::CancelledError("the client cancelled the call"); },
                         [&done] { done.set_value(); })
                  .ok());
  done.get_future().get();
  EXPECT_EQ(batch->result(0).status.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(worker_.usage().memory_used_bytes, 0u);
}

// Work of a session closed after it was converted (its reclaim may have run on the
// device already) runs nothing: it would hold memory for a session that is gone.
TEST_F(BatchTest, WorkOfAClosedSessionRunsNothing) {
  SessionInfo closed_session = kSessionInfo;
  closed_session.closed = std::make_shared<std::atomic<bool>>(true);
  std::vector<BatchCommand> commands;
  commands.push_back(Command(1, "allocate", AllocateOp{.size_bytes = 4}));
  commands.push_back(Command(2, "write", Write(Ref(0), "abcd")));
  auto batch = std::make_shared<Batch>(std::move(commands));
  std::promise<void> done;
  ASSERT_TRUE(batch->Run(worker_, closed_session, 0, 2, [] { return absl::OkStatus(); },
                         [&done] { done.set_value(); })
                  .ok());
  done.get_future().get();
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(batch->result(i).status.code(), absl::StatusCode::kNotFound) << i;
    EXPECT_THAT(std::string(batch->result(i).status.message()), HasSubstr("closed")) << i;
  }
  EXPECT_EQ(worker_.usage().memory_used_bytes, 0u);
}

}  // namespace
}  // namespace gpucmd

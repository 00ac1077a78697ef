#include "server/command/command.h"

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <set>
#include <thread>

#include "driver/cpu/cpu_driver.h"
#include "driver/cpu/stream_gate.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/random_bytes.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;
constexpr SessionId kSession = 1;
constexpr SessionId kOtherSession = 2;

// Hooks `notice`: ready once it called back (Note [Completions called back] in
// server/core/device_worker.h).
std::future<void> CalledBack(WorkEndNotice notice) {
  auto called = std::make_shared<std::promise<void>>();
  std::future<void> future = called->get_future();
  if (notice == nullptr) {
    ADD_FAILURE() << "no notice: the CPU driver's events call back";
    called->set_value();
  } else {
    std::move(notice)([called] { called->set_value(); });
  }
  return future;
}

class CommandTest : public ::testing::Test {
 protected:
  void SetUp() override { Reset(64 * kMiB, CommandOptions()); }

  void Reset(uint64_t capacity, CommandOptions options) {
    command_.reset();
    backend_.reset();
    auto backend = CpuBackend::Create({.capacity_bytes = capacity, .stream_count = 2});
    ASSERT_TRUE(backend.ok()) << backend.status();
    backend_ = *std::move(backend);
    options.memory.min_page_bytes = kMiB;
    options.memory.new_pages_zeroed = true;  // as the CPU driver's are
    command_ = std::make_unique<Command<CpuDriver>>(*backend_, options);
  }

  BufferId MustAllocate(uint64_t size, SessionId session = kSession) {
    absl::StatusOr<BufferId> id = command_->Allocate(session, size);
    EXPECT_TRUE(id.ok()) << id.status();
    return *id;
  }

  absl::StatusOr<std::string> ReadAll(BufferId id, uint64_t size, LogicalStream stream = 0,
                                      SessionId session = kSession) {
    ASSIGN_OR_RETURN(PendingRead read,
                     command_->Read(session, stream, id, CopyLayout::Contiguous(0, size)));
    RETURN_IF_ERROR(read.wait());
    return read.bytes.ToString();
  }

  std::unique_ptr<CpuBackend> backend_;
  std::unique_ptr<Command<CpuDriver>> command_;
};

TEST_F(CommandTest, WriteThenReadRoundTrips) {
  for (uint64_t size : {uint64_t{1}, uint64_t{4096}, 3 * kMiB}) {  // staged and in place
    BufferId id = MustAllocate(size);
    std::string data = testing::RandomBytes(size, static_cast<uint32_t>(size));
    ASSERT_TRUE(command_->Write(kSession, 0, id, CopyLayout::Contiguous(0, size), data).ok());
    EXPECT_EQ(ReadAll(id, size).value(), data) << size;
  }
}

TEST_F(CommandTest, PitchedWriteLeavesPaddingAlone) {
  constexpr uint64_t kWidth = 30, kHeight = 5, kStride = 48, kSize = 256;
  BufferId id = MustAllocate(kSize);
  std::string background(kSize, 'x');
  ASSERT_TRUE(command_->Write(kSession, 0, id, CopyLayout::Contiguous(0, kSize), background).ok());
  std::string rows = testing::RandomBytes(kWidth * kHeight, 7);
  CopyLayout pitched = CopyLayout::Pitched(8, kWidth, kHeight, kStride);
  ASSERT_TRUE(command_->Write(kSession, 0, id, pitched, rows).ok());
  std::string expected = background;
  for (uint64_t row = 0; row < kHeight; ++row) {
    expected.replace(8 + row * kStride, kWidth, rows.substr(row * kWidth, kWidth));
  }
  EXPECT_EQ(ReadAll(id, kSize).value(), expected);
  absl::StatusOr<PendingRead> read = command_->Read(kSession, 0, id, pitched);
  ASSERT_TRUE(read.ok());
  ASSERT_TRUE(read->wait().ok());
  EXPECT_EQ(read->bytes.ToString(), rows);
}

TEST_F(CommandTest, BadInputIsRejectedBeforeAnythingIsEnqueued) {
  BufferId id = MustAllocate(100);
  absl::Status out_of_bounds =
      command_->Write(kSession, 0, id, CopyLayout::Contiguous(90, 11), std::string(11, 'a'));
  EXPECT_EQ(out_of_bounds.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(out_of_bounds.message()), HasSubstr("out of bounds"));
  // The slice is 128 bytes: the slack past the buffer's size is out of bounds too.
  EXPECT_FALSE(command_->Read(kSession, 0, id, CopyLayout::Contiguous(100, 1)).ok());
  EXPECT_EQ(command_->Write(kSession, 0, id, CopyLayout::Pitched(0, 20, 2, 10),
                            std::string(40, 'a')).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(command_->Write(kSession, 0, id, CopyLayout::Contiguous(0, 10), "short").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(command_->Write(kOtherSession, 0, id, CopyLayout::Contiguous(0, 1), "a").code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(command_->Write(kSession, 0, 999, CopyLayout::Contiguous(0, 1), "a").code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(command_->Write(kSession, 0, id, CopyLayout::Contiguous(100, 0), "").ok());
  EXPECT_EQ(command_->Allocate(kSession, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(command_->Free(kOtherSession, id).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(command_->Free(kSession, id).ok());
  EXPECT_EQ(command_->Free(kSession, id).code(), absl::StatusCode::kNotFound);
}

TEST_F(CommandTest, WriteOnOneStreamIsSeenByAReadOnAnother) {
  BufferId id = MustAllocate(kMiB);
  // The session's first two logical streams land on device streams 0 and 1.
  ASSERT_TRUE(ReadAll(id, 1, 10).ok());
  ASSERT_TRUE(ReadAll(id, 1, 20).ok());
  StreamGate gate;
  gate.Block(backend_->stream(0));
  std::string data = testing::RandomBytes(kMiB, 3);
  ASSERT_TRUE(command_->Write(kSession, 10, id, CopyLayout::Contiguous(0, kMiB), data).ok());
  absl::StatusOr<PendingRead> read =
      command_->Read(kSession, 20, id, CopyLayout::Contiguous(0, kMiB));
  ASSERT_TRUE(read.ok());
  std::atomic<bool> done{false};
  std::thread reader([&] {
    EXPECT_TRUE(read->wait().ok());
    done = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(done) << "the read ran before the write it depends on";
  gate.Open();
  reader.join();
  EXPECT_EQ(read->bytes.ToString(), data);
}

// The notice of a session's work end covers the streams named, not the others: a read on
// one stream is called back while another of the session's streams is held; the notice
// for all of them waits for that one too.
TEST_F(CommandTest, TheNoticeOfWorkEndCoversTheStreamsItNames) {
  BufferId held = MustAllocate(kMiB);
  BufferId read_from = MustAllocate(kMiB);
  ASSERT_TRUE(ReadAll(held, 1, 10).ok());       // logical 10 -> stream 0
  ASSERT_TRUE(ReadAll(read_from, 1, 20).ok());  // logical 20 -> stream 1
  StreamGate gate;
  gate.Block(backend_->stream(0));
  ASSERT_TRUE(command_->Write(kSession, 10, held, CopyLayout::Contiguous(0, 4), "held").ok());
  absl::StatusOr<PendingRead> read =
      command_->Read(kSession, 20, read_from, CopyLayout::Contiguous(0, 4096));
  ASSERT_TRUE(read.ok());
  std::promise<void> read_ended, all_ended;
  std::atomic<bool> all_called{false};
  WorkEndNotice read_notice = command_->NoticeOfWorkEnd(kSession, std::vector<LogicalStream>{20});
  WorkEndNotice all_notice = command_->NoticeOfWorkEnd(kSession, std::nullopt);
  ASSERT_TRUE(read_notice != nullptr && all_notice != nullptr);
  std::move(read_notice)([&read_ended] { read_ended.set_value(); });
  std::move(all_notice)([&] {
    all_called = true;
    all_ended.set_value();
  });
  read_ended.get_future().wait();  // with stream 0 still held
  EXPECT_TRUE(read->wait().ok());
  EXPECT_FALSE(all_called) << "called back with the session's other stream held";
  gate.Open();
  all_ended.get_future().wait();
}

// LastWorkEnd is the end of the stream's last work: for a write queued behind a held
// stream it is a wait that returns once the gate opened and the bytes landed; there is
// none for a stream with nothing queued, nor for work that ended.
TEST_F(CommandTest, TheLastWorkEndOfAWriteReturnsOnceItLanded) {
  const BufferId id = MustAllocate(4096);
  ASSERT_TRUE(ReadAll(id, 16).ok());  // logical stream 0 -> device stream 0
  EXPECT_EQ(command_->LastWorkEnd(kSession, 7), nullptr) << "nothing was queued on it";
  EXPECT_EQ(command_->LastWorkEnd(kOtherSession, 0), nullptr) << "an unknown session";
  EXPECT_EQ(command_->LastWorkEnd(kSession, 0), nullptr) << "the read ended";
  StreamGate gate;
  gate.Block(backend_->stream(0));
  ASSERT_TRUE(command_->Write(kSession, 0, id, CopyLayout::Contiguous(0, 5), "gated").ok());
  PendingWait landed = command_->LastWorkEnd(kSession, 0);
  ASSERT_NE(landed, nullptr);
  std::future<absl::Status> waited =
      std::async(std::launch::async, [&landed] { return landed(); });
  const bool returned_behind_the_gate =
      waited.wait_for(std::chrono::milliseconds(50)) == std::future_status::ready;
  gate.Open();
  EXPECT_FALSE(returned_behind_the_gate) << "the wait returned before the copy ran";
  EXPECT_TRUE(waited.get().ok());
  EXPECT_EQ(command_->LastWorkEnd(kSession, 0), nullptr) << "the write ended";
  EXPECT_EQ(ReadAll(id, 5).value_or(""), "gated");
}

TEST_F(CommandTest, MemoryFreedWhileAnotherStreamReadsIsNotReusedEarly) {
  constexpr uint64_t kSize = 64 << 10;
  BufferId old_id = MustAllocate(kSize);
  ASSERT_TRUE(ReadAll(old_id, 1, 10).ok());  // logical 10 -> stream 0
  ASSERT_TRUE(ReadAll(old_id, 1, 20).ok());  // logical 20 -> stream 1
  std::string old_data = testing::RandomBytes(kSize, 4);
  ASSERT_TRUE(command_->Write(kSession, 10, old_id, CopyLayout::Contiguous(0, kSize), old_data).ok());
  ASSERT_TRUE(WaitFor(command_->Synchronize(kSession, 10)).ok());

  StreamGate gate;
  gate.Block(backend_->stream(1));  // the reader's stream is stuck
  absl::StatusOr<PendingRead> read =
      command_->Read(kSession, 20, old_id, CopyLayout::Contiguous(0, kSize));
  ASSERT_TRUE(read.ok());
  ASSERT_TRUE(command_->Free(kSession, old_id).ok());
  // A new buffer of the same class, written on the other stream at once.
  BufferId new_id = MustAllocate(kSize);
  ASSERT_TRUE(command_->Write(kSession, 10, new_id, CopyLayout::Contiguous(0, kSize),
                              testing::RandomBytes(kSize, 5)).ok());
  ASSERT_TRUE(WaitFor(command_->Synchronize(kSession, 10)).ok());
  gate.Open();
  ASSERT_TRUE(read->wait().ok());
  EXPECT_EQ(read->bytes.ToString(), old_data) << "the freed memory was reused under a reader";
}

// A new logical stream goes to an idle device stream before a busy one, however many
// logical streams share each: another session's long work does not hold it up.
TEST_F(CommandTest, ANewLogicalStreamGetsAnIdleStreamBeforeABusyOne) {
  constexpr SessionId kThirdSession = 3;
  ASSERT_TRUE(ReadAll(MustAllocate(4096), 4096).ok());  // logical 0 -> stream 0
  ASSERT_TRUE(ReadAll(MustAllocate(4096, kOtherSession), 4096, 0, kOtherSession).ok());  // 1
  StreamGate gate;
  gate.Block(backend_->stream(0));  // the first session's long kernel
  // Both streams have one user: round robin alone would hand out stream 0 next.
  BufferId id = MustAllocate(4096, kThirdSession);
  ASSERT_TRUE(command_->Write(kThirdSession, 0, id, CopyLayout::Contiguous(0, 4096),
                              std::string(4096, 't')).ok());
  std::future<absl::Status> synchronized = std::async(std::launch::async, [&] {
    return WaitFor(command_->Synchronize(kThirdSession, 0));
  });
  const bool finished_behind_the_gate =
      synchronized.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  gate.Open();
  EXPECT_TRUE(finished_behind_the_gate) << "the new session waited behind the busy stream";
  EXPECT_TRUE(synchronized.get().ok());
}

// Two sessions share device stream 0 (there are two device streams and three sessions);
// the other one's long kernel holds it up. The sharer's own work has ended, so its
// Synchronize does not wait, and its next work moves to the idle stream instead of
// queuing behind that kernel (Note [Logical streams]).
TEST_F(CommandTest, ASessionSharingABusyStreamWaitsOnlyForItsOwnWork) {
  constexpr SessionId kSharer = 3;
  ASSERT_TRUE(ReadAll(MustAllocate(4096), 4096).ok());  // logical 0 -> stream 0
  ASSERT_TRUE(ReadAll(MustAllocate(4096, kOtherSession), 4096, 0, kOtherSession).ok());  // 1
  BufferId id = MustAllocate(4096, kSharer);
  ASSERT_TRUE(ReadAll(id, 4096, 0, kSharer).ok());  // all idle: round robin gives stream 0
  StreamGate gate;
  gate.Block(backend_->stream(0));  // the first session's long kernel
  std::future<absl::Status> done = std::async(std::launch::async, [&]() -> absl::Status {
    RETURN_IF_ERROR(WaitFor(command_->Synchronize(kSharer, 0)));
    RETURN_IF_ERROR(command_->Write(kSharer, 0, id, CopyLayout::Contiguous(0, 4096),
                                    std::string(4096, 's')));
    RETURN_IF_ERROR(WaitFor(command_->Synchronize(kSharer, std::nullopt)));
    ASSIGN_OR_RETURN(std::string read, ReadAll(id, 4096, 0, kSharer));
    if (read != std::string(4096, 's')) return absl::DataLossError("read back other bytes");
    return absl::OkStatus();
  });
  const bool finished_behind_the_gate =
      done.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  gate.Open();
  EXPECT_TRUE(finished_behind_the_gate) << "the sharer waited for the other's kernel";
  EXPECT_EQ(done.get(), absl::OkStatus());
}

TEST_F(CommandTest, ABufferNeverShowsWhatItsSliceHeldBefore) {
  constexpr uint64_t kSize = 4096;
  BufferId secret = MustAllocate(kSize, kOtherSession);
  ASSERT_TRUE(command_->Write(kOtherSession, 0, secret, CopyLayout::Contiguous(0, kSize),
                              std::string(kSize, 's')).ok());
  ASSERT_TRUE(WaitFor(command_->Synchronize(kOtherSession, std::nullopt)).ok());
  ASSERT_TRUE(command_->Free(kOtherSession, secret).ok());
  command_->ReclaimFinished();
  BufferId reused = MustAllocate(kSize);  // the same size class: the freed slot
  EXPECT_EQ(ReadAll(reused, kSize).value(), std::string(kSize, '\0'))
      << "another session's bytes came back";
}

TEST_F(CommandTest, StagedBytesOutliveTheCopiesThatReadThem) {
  CommandOptions options;
  options.drop_queue = {.max_entries = 2, .max_bytes = 1 << 30};  // flush often
  Reset(64 * kMiB, options);
  BufferId id = MustAllocate(64 << 10);
  ASSERT_TRUE(ReadAll(id, 4096).ok());  // logical 0 -> stream 0, before the gate below

  // Drop queues free in push order, so the k-th release gives back the bytes of the
  // k-th write. Each write's copy is followed by an event recorded right after it; the
  // release is early unless that event (hence the copy) completed.
  constexpr int kWrites = 16;
  std::vector<CpuStream::Event> copied(kWrites);
  int releases = 0;
  int early_releases = 0;
  command_->pinned_pool().SetReleaseObserver([&](uint64_t) {
    if (!copied[releases++].IsComplete()) ++early_releases;
  });
  StreamGate gate;
  gate.Block(backend_->stream(0));
  // Flushes wait for the gated copies, so the gate opens from another thread.
  std::thread opener([&gate] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    gate.Open();
  });
  std::vector<std::string> written;
  for (int i = 0; i < kWrites; ++i) {  // staged in pinned memory; the queue flushes every 2
    written.push_back(testing::RandomBytes(4096, i));
    ASSERT_TRUE(command_->Write(kSession, 0, id, CopyLayout::Contiguous(i * 4096, 4096),
                                written.back()).ok());
    copied[i] = backend_->stream(0).RecordEvent();
  }
  ASSERT_TRUE(WaitFor(command_->Synchronize(kSession, 0)).ok());
  opener.join();
  command_->ReclaimFinished();  // the device thread's upkeep after the synchronize
  EXPECT_EQ(early_releases, 0) << "staged bytes were freed before their copy completed";
  EXPECT_EQ(releases, kWrites);
  EXPECT_EQ(command_->pinned_pool().outstanding_count(), 0u);
  command_->pinned_pool().SetReleaseObserver(nullptr);
  // Recycled staging memory would show up as another write's bytes.
  std::string contents = ReadAll(id, kWrites * 4096).value();
  for (int i = 0; i < kWrites; ++i) EXPECT_EQ(contents.substr(i * 4096, 4096), written[i]) << i;
}

TEST_F(CommandTest, RelocationMovesLiveBuffersAndKeepsHandlesAndContents) {
  // Fill two pages of the 4 KiB class, then free most of the first: it is fragmented.
  std::vector<BufferId> ids;
  for (int i = 0; i < 400; ++i) ids.push_back(MustAllocate(4096));
  std::map<BufferId, std::string> survivors;
  for (int i = 0; i < 400; ++i) {
    if (i % 16 == 0 || i >= 256) {
      survivors[ids[i]] = testing::RandomBytes(4096, i);
      ASSERT_TRUE(command_->Write(kSession, i % 2, ids[i], CopyLayout::Contiguous(0, 4096),
                                  survivors[ids[i]]).ok());
    } else {
      ASSERT_TRUE(command_->Free(kSession, ids[i]).ok());
    }
  }
  ASSERT_TRUE(command_->WantsRelocation());
  ASSERT_TRUE(WaitFor(command_->Synchronize(kSession, std::nullopt)).ok());
  uint64_t reserved_before = command_->Usage().memory_reserved_bytes;
  absl::StatusOr<RelocationReport> report = command_->Relocate();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->pages_relocated, 1u);
  EXPECT_EQ(report->allocations_moved, 16u);
  EXPECT_EQ(report->bytes_moved, 16u * 4096);
  EXPECT_LT(command_->Usage().memory_reserved_bytes, reserved_before);
  EXPECT_FALSE(command_->WantsRelocation());
  EXPECT_EQ(command_->Usage().relocations, 1u);
  for (const auto& [id, data] : survivors) {
    EXPECT_EQ(ReadAll(id, 4096).value(), data) << "buffer " << id;
  }
}

// Relocation waits for no stream: while one has work (another session's long kernel,
// say) it is put off and moves nothing, and it runs once the streams are idle.
TEST_F(CommandTest, RelocationIsPutOffWhileAStreamHasWork) {
  std::vector<BufferId> ids;
  for (int i = 0; i < 400; ++i) ids.push_back(MustAllocate(4096));
  const std::string kept = testing::RandomBytes(4096, 7);
  ASSERT_TRUE(command_->Write(kSession, 0, ids[0], CopyLayout::Contiguous(0, 4096), kept).ok());
  for (int i = 1; i < 256; ++i) ASSERT_TRUE(command_->Free(kSession, ids[i]).ok());
  ASSERT_TRUE(command_->WantsRelocation());
  StreamGate gate;
  gate.Block(backend_->stream(1));
  absl::StatusOr<RelocationReport> deferred = command_->Relocate();
  ASSERT_TRUE(deferred.ok()) << deferred.status();
  EXPECT_TRUE(deferred->deferred);
  EXPECT_EQ(deferred->pages_relocated, 0u);
  EXPECT_TRUE(command_->WantsRelocation());
  gate.Open();
  ASSERT_TRUE(backend_->stream(1).Synchronize().ok());
  ASSERT_TRUE(WaitFor(command_->Synchronize(kSession, std::nullopt)).ok());
  absl::StatusOr<RelocationReport> report = command_->Relocate();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->deferred);
  EXPECT_EQ(report->pages_relocated, 1u);
  EXPECT_FALSE(command_->WantsRelocation());
  EXPECT_EQ(ReadAll(ids[0], 4096).value(), kept);
}

// A full device whose free memory lies in other classes' pages: a small allocation takes
// a slot there, and relocation, which finds no page of the current size for the
// fragmented pages' slices, moves nothing (a slot of a larger class is no place to move
// to), leaves nothing behind, and is not wanted again until memory comes back.
TEST_F(CommandTest, AFullDeviceStillServesSmallRequestsAndRelocationLeavesNothingBehind) {
  Reset(16 * kMiB, CommandOptions());  // pages of 1 MiB
  std::vector<BufferId> kept;
  // A page of the 16 KiB class, then the rest of the device in 8 KiB slices.
  std::vector<BufferId> large;
  for (int i = 0; i < 64; ++i) large.push_back(MustAllocate(16 << 10));
  std::vector<BufferId> small_ones;
  for (absl::StatusOr<BufferId> id = command_->Allocate(kSession, 8 << 10); id.ok();
       id = command_->Allocate(kSession, 8 << 10)) {
    small_ones.push_back(*id);
  }
  ASSERT_EQ(command_->Usage().memory_reserved_bytes, 16 * kMiB);
  // Three quarters of the 16 KiB page stay (not fragmented, with free slots); one in 64
  // of the 8 KiB slices (their pages are).
  for (size_t i = 0; i < large.size(); ++i) {
    if (i % 4 == 0) {
      ASSERT_TRUE(command_->Free(kSession, large[i]).ok());
    } else {
      kept.push_back(large[i]);
    }
  }
  for (size_t i = 0; i < small_ones.size(); ++i) {
    if (i % 64 == 0) {
      kept.push_back(small_ones[i]);
    } else {
      ASSERT_TRUE(command_->Free(kSession, small_ones[i]).ok());
    }
  }
  // Slots given out again are cleared first: the frees wait for those clears.
  ASSERT_TRUE(WaitFor(command_->Synchronize(kSession, std::nullopt)).ok());
  absl::StatusOr<BufferId> small = command_->Allocate(kSession, 16);
  ASSERT_TRUE(small.ok()) << small.status();
  kept.push_back(*small);
  std::map<BufferId, std::string> contents;
  for (BufferId id : kept) {
    const uint64_t size = id == *small ? 16 : 8 << 10;  // (of the 16 KiB ones, the first 8)
    contents[id] = testing::RandomBytes(size, static_cast<uint32_t>(id));
    ASSERT_TRUE(
        command_->Write(kSession, 0, id, CopyLayout::Contiguous(0, size), contents[id]).ok());
  }
  ASSERT_TRUE(WaitFor(command_->Synchronize(kSession, std::nullopt)).ok());

  ASSERT_TRUE(command_->WantsRelocation());
  absl::StatusOr<RelocationReport> report = command_->Relocate();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->allocations_moved, 0u);
  EXPECT_FALSE(command_->WantsRelocation()) << "tried again before any memory came back";
  for (const auto& [id, data] : contents) {
    EXPECT_EQ(ReadAll(id, data.size()).value(), data) << "buffer " << id;
  }
  ASSERT_TRUE(command_->Free(kSession, kept.back()).ok());
  kept.pop_back();
  EXPECT_TRUE(command_->WantsRelocation());
  for (BufferId id : kept) ASSERT_TRUE(command_->Free(kSession, id).ok());
  EXPECT_EQ(command_->Usage().memory_used_bytes, 0u);
}

TEST_F(CommandTest, OutOfMemoryCleansUpAndRetries) {
  Reset(16 * kMiB, CommandOptions());
  std::vector<BufferId> small;
  while (true) {
    absl::StatusOr<BufferId> id = command_->Allocate(kSession, 256 << 10);
    if (!id.ok()) {
      EXPECT_EQ(id.status().code(), absl::StatusCode::kResourceExhausted);
      EXPECT_THAT(std::string(id.status().message()), HasSubstr("out of device memory"));
      break;
    }
    small.push_back(*id);
  }
  // Freed slices keep their pages cached; a large request needs them returned first.
  for (BufferId id : small) ASSERT_TRUE(command_->Free(kSession, id).ok());
  EXPECT_GT(command_->Usage().memory_reserved_bytes, 0u);
  absl::StatusOr<BufferId> large = command_->Allocate(kSession, 12 * kMiB);
  EXPECT_TRUE(large.ok()) << large.status();
}

// Note [Out of device memory]: a full device is answered at once, even while a freed
// buffer's memory waits for work still using it; MemoryBeingFreed is the wait for it,
// offered only when that memory could hold the request.
TEST_F(CommandTest, AFullDeviceAnswersAtOnceAndOffersTheWaitForFreedMemory) {
  Reset(16 * kMiB, CommandOptions());
  const BufferId kept = MustAllocate(kMiB);
  const BufferId held = MustAllocate(12 * kMiB);
  ASSERT_TRUE(ReadAll(held, 4096).ok());  // logical stream 0 -> device stream 0
  StreamGate gate;
  gate.Block(backend_->stream(0));  // the kernel that still reads `held`
  ASSERT_TRUE(command_->Write(kSession, 0, held, CopyLayout::Contiguous(0, 4096),
                              std::string(4096, 'h')).ok());
  EXPECT_EQ(command_->MemoryBeingFreed(12 * kMiB).wait, nullptr) << "nothing freed yet";
  ASSERT_TRUE(command_->Free(kSession, held).ok());
  std::future<absl::Status> refused = std::async(std::launch::async, [&] {
    return command_->Allocate(kOtherSession, 12 * kMiB).status();
  });
  const bool answered_behind_the_gate =
      refused.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!answered_behind_the_gate) gate.Open();
  ASSERT_TRUE(answered_behind_the_gate) << "the allocation waited for the stream";
  const absl::Status status = refused.get();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;
  EXPECT_THAT(std::string(status.message()), HasSubstr("return once the work"));
  // 3 MiB free and 12 MiB on their way: 16 MiB never fits even then.
  EXPECT_EQ(command_->MemoryBeingFreed(16 * kMiB).wait, nullptr);
  RoomWait freed = command_->MemoryBeingFreed(12 * kMiB);
  ASSERT_NE(freed.wait, nullptr);
  std::future<void> freed_notice = CalledBack(std::move(freed.notice));
  EXPECT_EQ(freed_notice.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  gate.Open();
  freed_notice.wait();
  EXPECT_TRUE(WaitFor(std::move(freed.wait)).ok());
  EXPECT_TRUE(command_->Allocate(kOtherSession, 12 * kMiB).ok());
  EXPECT_TRUE(ReadAll(kept, 16).ok());
}

// Note [Drop queue]: writes behind a stuck stream never wait on the device thread; once
// that stream's drop queue is full, StagingRoom is the wait for room, while another
// session's stream has room all along.
TEST_F(CommandTest, WritesBehindAStuckStreamAskForRoomInsteadOfWaiting) {
  CommandOptions options;
  options.drop_queue = {.max_entries = 2, .max_bytes = 1 << 30};  // full at 8 entries
  Reset(64 * kMiB, options);
  const BufferId id = MustAllocate(4096);
  ASSERT_TRUE(ReadAll(id, 16).ok());  // logical stream 0 -> device stream 0
  const BufferId other = MustAllocate(4096, kOtherSession);
  ASSERT_TRUE(ReadAll(other, 16, 0, kOtherSession).ok());  // -> device stream 1
  StreamGate gate;
  gate.Block(backend_->stream(0));
  std::future<absl::Status> writes = std::async(std::launch::async, [&]() -> absl::Status {
    for (int i = 0; i < 12; ++i) {
      RETURN_IF_ERROR(command_->Write(kSession, 0, id, CopyLayout::Contiguous(i, 1),
                                      std::string(1, static_cast<char>('a' + i))));
    }
    return absl::OkStatus();
  });
  const bool written_behind_the_gate =
      writes.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
  if (!written_behind_the_gate) gate.Open();
  ASSERT_TRUE(written_behind_the_gate) << "a write waited for the stuck stream";
  ASSERT_TRUE(writes.get().ok());
  RoomWait room = command_->StagingRoom(kSession, 0);
  ASSERT_NE(room.wait, nullptr);
  EXPECT_EQ(command_->StagingRoom(kOtherSession, 0).wait, nullptr);
  std::future<void> room_notice = CalledBack(std::move(room.notice));
  EXPECT_EQ(room_notice.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  gate.Open();
  room_notice.wait();
  EXPECT_TRUE(WaitFor(std::move(room.wait)).ok());
  EXPECT_EQ(command_->StagingRoom(kSession, 0).wait, nullptr);
  EXPECT_EQ(ReadAll(id, 12).value(), "abcdefghijkl");
}

// Note [Stream backpressure]: device copies and reads queued behind a stuck stream count
// against the session's limit with its launches; the one past it is refused at once,
// StreamRoom is the wait for room, and another session is not held to it.
TEST_F(CommandTest, CopiesAndReadsBehindAStuckStreamMeetTheQueuedLimit) {
  CommandOptions options;
  options.session_queued_on_streams = 3;
  Reset(64 * kMiB, options);
  const BufferId source = MustAllocate(4096);
  const BufferId target = MustAllocate(4096);
  ASSERT_TRUE(command_->Write(kSession, 0, source, CopyLayout::Contiguous(0, 4), "data").ok());
  ASSERT_TRUE(ReadAll(source, 4).ok());  // logical stream 0 -> device stream 0
  const BufferId other = MustAllocate(4096, kOtherSession);
  ASSERT_TRUE(ReadAll(other, 16, 0, kOtherSession).ok());  // -> device stream 1
  StreamGate gate;
  gate.Block(backend_->stream(0));
  ASSERT_TRUE(
      command_->Copy(kSession, 0, source, target, DeviceCopyLayout::Contiguous(0, 0, 4)).ok());
  ASSERT_TRUE(
      command_->Copy(kSession, 0, source, target, DeviceCopyLayout::Contiguous(0, 4, 4)).ok());
  absl::StatusOr<PendingRead> read =
      command_->Read(kSession, 0, target, CopyLayout::Contiguous(0, 8));
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(command_->Usage().sessions[kSession].queued_on_streams, 3);
  for (absl::Status refused :
       {command_->Copy(kSession, 0, source, target, DeviceCopyLayout::Contiguous(0, 8, 4)),
        command_->Read(kSession, 0, source, CopyLayout::Contiguous(0, 4)).status()}) {
    EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
    EXPECT_THAT(std::string(refused.message()), HasSubstr("limits.session_queued_commands"));
  }
  RoomWait room = command_->StreamRoom(kSession);
  ASSERT_NE(room.wait, nullptr);
  EXPECT_EQ(command_->StreamRoom(kOtherSession).wait, nullptr);
  EXPECT_TRUE(ReadAll(other, 16, 0, kOtherSession).ok());
  std::future<void> room_notice = CalledBack(std::move(room.notice));
  EXPECT_EQ(room_notice.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  gate.Open();
  room_notice.wait();
  EXPECT_TRUE(WaitFor(std::move(room.wait)).ok());
  ASSERT_TRUE(read->wait().ok());
  EXPECT_EQ(read->bytes.ToString(), "datadata");
  EXPECT_EQ(command_->StreamRoom(kSession).wait, nullptr);
  EXPECT_TRUE(
      command_->Copy(kSession, 0, source, target, DeviceCopyLayout::Contiguous(0, 8, 4)).ok());
}

TEST_F(CommandTest, WithoutAQueuedLimitAnyAmountOfWorkWaitsBehindAStuckStream) {
  CommandOptions options;
  options.session_queued_on_streams = 0;  // no limit
  Reset(64 * kMiB, options);
  const BufferId source = MustAllocate(4096);
  const BufferId target = MustAllocate(4096);
  ASSERT_TRUE(ReadAll(source, 4).ok());  // logical stream 0 -> device stream 0
  StreamGate gate;
  gate.Block(backend_->stream(0));
  constexpr int kCopies = 2000;
  for (int i = 0; i < kCopies; ++i) {
    ASSERT_TRUE(
        command_->Copy(kSession, 0, source, target, DeviceCopyLayout::Contiguous(0, 0, 4)).ok())
        << i;
  }
  EXPECT_EQ(command_->StreamRoom(kSession).wait, nullptr);
  EXPECT_EQ(command_->Usage().queued_on_streams, kCopies);
  gate.Open();
  EXPECT_TRUE(ReadAll(target, 4).ok());
  EXPECT_EQ(command_->Usage().queued_on_streams, 0);
}

// Note [Usage reported as it changes]: after a complete report, each report holds the
// sessions a command named since, those closed since (in `gone`), and those with work
// still queued on streams at the report before, whose count falls as the streams run.
TEST_F(CommandTest, UsageReportsHoldTheSessionsThatChanged) {
  constexpr SessionId kIdle = 7;
  constexpr SessionId kClosing = 8;
  const BufferId source = MustAllocate(4096);
  ASSERT_TRUE(ReadAll(source, 4).ok());  // logical stream 0 -> device stream 0
  MustAllocate(4096, kIdle);
  MustAllocate(4096, kClosing);
  auto sessions_of = [](const UsageUpdate& update) {
    std::set<SessionId> sessions;
    for (const auto& [id, unused] : update.usage.sessions) sessions.insert(id);
    return sessions;
  };
  UsageUpdate complete = command_->TakeUsageUpdate(/*complete=*/true);
  EXPECT_TRUE(complete.complete);
  EXPECT_EQ(sessions_of(complete), (std::set<SessionId>{kSession, kIdle, kClosing}));
  EXPECT_EQ(complete.usage.sessions[kIdle].buffers, 1u);
  EXPECT_TRUE(sessions_of(command_->TakeUsageUpdate(false)).empty()) << "nothing changed";

  StreamGate gate;
  gate.Block(backend_->stream(0));
  ASSERT_TRUE(
      command_->Copy(kSession, 0, source, source, DeviceCopyLayout::Contiguous(0, 8, 4)).ok());
  command_->CloseSession(kClosing);
  UsageUpdate changed = command_->TakeUsageUpdate(false);
  EXPECT_FALSE(changed.complete);
  EXPECT_EQ(sessions_of(changed), std::set<SessionId>{kSession});
  EXPECT_EQ(changed.gone, std::vector<SessionId>{kClosing});
  EXPECT_EQ(changed.usage.sessions[kSession].queued_on_streams, 1u);
  EXPECT_EQ(changed.usage.queued_on_streams, 1u);
  EXPECT_EQ(changed.usage.memory_used_bytes, command_->Usage().memory_used_bytes);

  UsageUpdate still_queued = command_->TakeUsageUpdate(false);  // no command since
  EXPECT_EQ(sessions_of(still_queued), std::set<SessionId>{kSession});
  EXPECT_TRUE(still_queued.gone.empty());
  gate.Open();
  ASSERT_TRUE(backend_->stream(0).Synchronize().ok());  // the stream ran; no command named it
  UsageUpdate ran = command_->TakeUsageUpdate(false);
  EXPECT_EQ(sessions_of(ran), std::set<SessionId>{kSession});
  EXPECT_EQ(ran.usage.sessions[kSession].queued_on_streams, 0u);
  EXPECT_EQ(ran.usage.queued_on_streams, 0u);
  EXPECT_TRUE(sessions_of(command_->TakeUsageUpdate(false)).empty());
}

TEST_F(CommandTest, NeverFitsNamesRequestedAndAvailable) {
  absl::Status status = command_->Allocate(kSession, 65 * kMiB).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(status.message()), HasSubstr("requested 68157440 bytes never fit"));
  EXPECT_THAT(std::string(status.message()), HasSubstr("available"));
  // Sizes whose slice (the next power of two) or page rounding overflows 64 bits.
  for (uint64_t huge : {(uint64_t{1} << 63) + 1, ~uint64_t{0}, ~uint64_t{0} - 4095}) {
    absl::Status refused = command_->Allocate(kSession, huge).status();
    EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << huge;
    EXPECT_THAT(std::string(refused.message()), HasSubstr("never fit")) << huge;
  }
}

TEST_F(CommandTest, SessionQuotaIsEnforced) {
  CommandOptions options;
  options.session_quota_bytes = kMiB;
  Reset(64 * kMiB, options);
  BufferId first = MustAllocate(kMiB / 2);
  MustAllocate(kMiB / 2);
  absl::Status over = command_->Allocate(kSession, 1).status();
  EXPECT_EQ(over.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.message()), HasSubstr("session quota"));
  EXPECT_TRUE(command_->Allocate(kOtherSession, kMiB / 2).ok());
  ASSERT_TRUE(command_->Free(kSession, first).ok());
  EXPECT_TRUE(command_->Allocate(kSession, 1).ok());
}

TEST_F(CommandTest, CopyBetweenBuffersAndOverlapRejected) {
  BufferId a = MustAllocate(1024);
  BufferId b = MustAllocate(1024);
  std::string data = testing::RandomBytes(1024, 9);
  ASSERT_TRUE(command_->Write(kSession, 0, a, CopyLayout::Contiguous(0, 1024), data).ok());
  ASSERT_TRUE(command_->Copy(kSession, 1, a, b, DeviceCopyLayout::Contiguous(100, 200, 500)).ok());
  std::string copied = ReadAll(b, 1024, 0).value();
  EXPECT_EQ(copied.substr(200, 500), data.substr(100, 500));
  EXPECT_EQ(command_->Copy(kSession, 0, a, a, DeviceCopyLayout::Contiguous(0, 100, 200)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(command_->Copy(kSession, 0, a, a, DeviceCopyLayout::Contiguous(0, 512, 512)).ok());
  EXPECT_EQ(command_->Copy(kSession, 0, a, b, DeviceCopyLayout::Contiguous(600, 0, 500)).code(),
            absl::StatusCode::kInvalidArgument);
}

// `height` rows of `width` bytes: source rows `source_stride` apart from `source_offset`,
// target rows `target_stride` apart from `target_offset`.
DeviceCopyLayout Rows(uint64_t source_offset, uint64_t source_stride, uint64_t target_offset,
                      uint64_t target_stride, uint64_t width, uint64_t height) {
  return {.source_offset_bytes = source_offset,
          .target_offset_bytes = target_offset,
          .width_bytes = width,
          .height = height,
          .source_stride_bytes = source_stride,
          .target_stride_bytes = target_stride};
}

// Pitched copies move each row between buffers of different strides, and between columns
// of one buffer, after the writes queued before them on another stream, leaving the
// padding alone. Rows that would read a byte they write, or run past a buffer's end,
// are refused before anything is queued.
TEST_F(CommandTest, PitchedCopiesMoveTheirRowsAndLeaveThePadding) {
  constexpr uint64_t kSize = 256;
  const BufferId a = MustAllocate(kSize);
  const BufferId b = MustAllocate(kSize);
  const std::string source = testing::RandomBytes(kSize, 21);
  std::string expected = testing::RandomBytes(kSize, 22);
  ASSERT_TRUE(command_->Write(kSession, 0, a, CopyLayout::Contiguous(0, kSize), source).ok());
  ASSERT_TRUE(command_->Write(kSession, 0, b, CopyLayout::Contiguous(0, kSize), expected).ok());
  ASSERT_TRUE(command_->Copy(kSession, 1, a, b, Rows(3, 20, 5, 32, 12, 4)).ok());
  for (int row = 0; row < 4; ++row)
    expected.replace(5 + 32 * row, 12, source.substr(3 + 20 * row, 12));
  EXPECT_EQ(ReadAll(b, kSize, /*stream=*/1).value(), expected);

  // Columns [0, 8) of eight 32-byte rows onto columns [16, 24) of the same rows.
  std::string within = source;
  ASSERT_TRUE(command_->Copy(kSession, 0, a, a, Rows(0, 32, 16, 32, 8, 8)).ok());
  for (int row = 0; row < 8; ++row) within.replace(16 + 32 * row, 8, source.substr(32 * row, 8));
  EXPECT_EQ(ReadAll(a, kSize, 0).value(), within);

  const absl::Status overlap = command_->Copy(kSession, 0, a, a, Rows(0, 32, 4, 32, 8, 4));
  EXPECT_EQ(overlap.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(overlap.message()),
              HasSubstr("4 rows of 8 bytes, 32 apart from 0 overlaps the target 4 rows of 8 "
                        "bytes, 32 apart from 4"));
  EXPECT_EQ(command_->Copy(kSession, 0, a, a, Rows(0, 32, 8, 64, 8, 4)).code(),
            absl::StatusCode::kInvalidArgument)
      << "rows of different strides whose spans meet";
  const absl::Status past = command_->Copy(kSession, 0, a, b, Rows(0, 16, 0, 32, 16, 9));
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(past.message()), HasSubstr("out of bounds of a 256-byte buffer"));
  EXPECT_EQ(command_->Copy(kSession, 0, a, b, Rows(0, 8, 0, 16, 16, 2)).code(),
            absl::StatusCode::kInvalidArgument)
      << "a source stride below the width";
  EXPECT_EQ(command_->Copy(kSession, 0, a, 999, Rows(0, 8, 0, 8, 8, 2)).code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(command_->Copy(kSession, 0, a, b, Rows(0, 8, 0, 8, 8, 0)).ok()) << "no rows";
  EXPECT_EQ(ReadAll(a, kSize, 0).value(), within) << "a refused copy wrote";
  EXPECT_EQ(ReadAll(b, kSize, 0).value(), expected) << "a refused copy wrote";
}

// Fills of 1-, 2- and 4-byte elements land after the write queued before them on another
// stream and touch only their range; a pattern, range or buffer they cannot take is
// refused before anything is queued.
TEST_F(CommandTest, FillsSetTheirRangeAfterEarlierWritesAndRefuseBadShapes) {
  constexpr uint64_t kSize = 64;
  BufferId id = MustAllocate(kSize);
  std::string expected = testing::RandomBytes(kSize, 12);
  ASSERT_TRUE(command_->Write(kSession, 0, id, CopyLayout::Contiguous(0, kSize), expected).ok());
  ASSERT_TRUE(
      command_
          ->Fill(kSession, 1, id, CopyLayout::Contiguous(8, 8), {.value = 0xab, .element_bytes = 1})
          .ok());
  ASSERT_TRUE(command_
                  ->Fill(kSession, 1, id, CopyLayout::Contiguous(16, 8),
                         {.value = 0x1234, .element_bytes = 2})
                  .ok());
  ASSERT_TRUE(command_
                  ->Fill(kSession, 0, id, CopyLayout::Contiguous(32, 16),
                         {.value = 0xdeadbeef, .element_bytes = 4})
                  .ok());
  EXPECT_TRUE(
      command_
          ->Fill(kSession, 0, id, CopyLayout::Contiguous(64, 0), {.value = 7, .element_bytes = 1})
          .ok())
      << "an empty fill at the end";
  expected.replace(8, 8, std::string(8, '\xab'));
  for (int i = 0; i < 4; ++i) expected.replace(16 + 2 * i, 2, "\x34\x12");
  for (int i = 0; i < 4; ++i) expected.replace(32 + 4 * i, 4, "\xef\xbe\xad\xde");
  EXPECT_EQ(ReadAll(id, kSize, /*stream=*/1).value(), expected);

  struct Refused {
    CopyLayout layout;
    FillPattern pattern;
    std::string says;
  };
  using L = CopyLayout;
  for (const Refused& bad : {
           Refused{L::Contiguous(0, 6), {.value = 0, .element_bytes = 3}, "1, 2 or 4 bytes"},
           Refused{L::Contiguous(0, 8), {.value = 0x100, .element_bytes = 1}, "fit in 1 bytes"},
           Refused{L::Contiguous(0, 8), {.value = 0x10000, .element_bytes = 2}, "fit in 2 bytes"},
           Refused{L::Contiguous(2, 8), {.value = 0, .element_bytes = 4}, "not multiples of 4"},
           Refused{L::Contiguous(0, 6), {.value = 0, .element_bytes = 4}, "not multiples of 4"},
           Refused{L::Contiguous(32, 40), {.value = 0, .element_bytes = 1}, "out of bounds"},
           Refused{L::Contiguous(~uint64_t{0} - 3, 8),
                   {.value = 0, .element_bytes = 4},
                   "out of bounds"},
           // Pitched: the stride is whole elements too, and the last row ends inside.
           Refused{L::Pitched(0, 8, 2, 10), {.value = 0, .element_bytes = 4}, "stride 10"},
           Refused{L::Pitched(0, 6, 2, 12), {.value = 0, .element_bytes = 4}, "row width 6"},
           Refused{L::Pitched(16, 8, 4, 16), {.value = 0, .element_bytes = 1}, "out of bounds"},
           Refused{L::Pitched(0, 16, 2, 8), {.value = 0, .element_bytes = 1}, "smaller"},
           Refused{L::Pitched(0, 8, 3, ~uint64_t{0} / 2),
                   {.value = 0, .element_bytes = 1},
                   "overflows"},
       }) {
    absl::Status refused = command_->Fill(kSession, 0, id, bad.layout, bad.pattern);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << bad.says;
    EXPECT_THAT(std::string(refused.message()), HasSubstr(bad.says));
  }
  EXPECT_EQ(command_->Fill(kOtherSession, 0, id, CopyLayout::Contiguous(0, 8), {}).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ReadAll(id, kSize).value(), expected) << "a refused fill changed the buffer";
}

// A pitched fill (cudaMemset2D) sets its rows' widths and leaves the padding between
// them, in each element size.
TEST_F(CommandTest, PitchedFillsSetTheirRowsAndLeaveThePadding) {
  constexpr uint64_t kSize = 128;
  BufferId id = MustAllocate(kSize);
  std::string expected = testing::RandomBytes(kSize, 13);
  ASSERT_TRUE(command_->Write(kSession, 0, id, CopyLayout::Contiguous(0, kSize), expected).ok());
  // Three rows of 6 bytes, 10 apart, from 2; three of 4 2-byte elements, 12 apart, from
  // 36; two of 2 4-byte elements, 24 apart, from 72.
  ASSERT_TRUE(command_
                  ->Fill(kSession, 1, id, CopyLayout::Pitched(2, 6, 3, 10),
                         {.value = 0x5a, .element_bytes = 1})
                  .ok());
  ASSERT_TRUE(command_
                  ->Fill(kSession, 1, id, CopyLayout::Pitched(36, 8, 3, 12),
                         {.value = 0xbeef, .element_bytes = 2})
                  .ok());
  ASSERT_TRUE(command_
                  ->Fill(kSession, 0, id, CopyLayout::Pitched(72, 8, 2, 24),
                         {.value = 0x01020304, .element_bytes = 4})
                  .ok());
  for (int row = 0; row < 3; ++row) expected.replace(2 + 10 * row, 6, std::string(6, '\x5a'));
  for (int row = 0; row < 3; ++row) {
    for (int i = 0; i < 4; ++i) expected.replace(36 + 12 * row + 2 * i, 2, "\xef\xbe");
  }
  for (int row = 0; row < 2; ++row) {
    for (int i = 0; i < 2; ++i) expected.replace(72 + 24 * row + 4 * i, 4, "\x04\x03\x02\x01");
  }
  EXPECT_EQ(ReadAll(id, kSize, /*stream=*/1).value(), expected);
  EXPECT_TRUE(command_->Fill(kSession, 0, id, CopyLayout::Pitched(0, 8, 0, 8), {}).ok())
      << "no rows";
}

// Note [Per-buffer stream ordering]: a freed buffer's memory comes back once its own
// accesses completed, whatever the order it was freed in and however many streams its
// accesses were on, and not before.
TEST_F(CommandTest, FreedMemoryComesBackAsEachBuffersOwnAccessesComplete) {
  Reset(64 * kMiB, CommandOptions());
  const BufferId early = MustAllocate(kMiB);  // accessed first, freed last
  const BufferId late = MustAllocate(kMiB);   // accessed later, freed first
  const BufferId both = MustAllocate(kMiB);   // accessed on two streams
  ASSERT_TRUE(ReadAll(early, 16).ok());       // logical 0 -> device stream 0
  ASSERT_TRUE(ReadAll(both, 16, 1).ok());     // logical 1 -> device stream 1 (idle, unused)
  auto write = [&](BufferId id, LogicalStream stream) {
    return command_->Write(kSession, stream, id, CopyLayout::Contiguous(0, 16),
                           std::string(16, 'w'));
  };
  StreamGate first;
  StreamGate second;
  StreamGate other;
  first.Block(backend_->stream(0));
  ASSERT_TRUE(write(early, 0).ok());
  second.Block(backend_->stream(0));
  ASSERT_TRUE(write(late, 0).ok());
  ASSERT_TRUE(write(both, 0).ok());
  other.Block(backend_->stream(1));
  absl::StatusOr<PendingRead> read_on_other =  // waits for the write on stream 0 as well
      command_->Read(kSession, 1, both, CopyLayout::Contiguous(0, 16));
  ASSERT_TRUE(read_on_other.ok()) << read_on_other.status();
  for (BufferId id : {late, both, early}) ASSERT_TRUE(command_->Free(kSession, id).ok());
  auto used_once_reclaimed = [&](uint64_t expected) {
    // Bounded: the stream's worker runs the copies the gates let through meanwhile.
    for (int i = 0; i < 10'000 && command_->Usage().memory_used_bytes != expected; ++i) {
      command_->ReclaimFinished();
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return command_->Usage().memory_used_bytes;
  };
  command_->ReclaimFinished();
  EXPECT_EQ(command_->Usage().memory_used_bytes, 3 * kMiB) << "freed before its write ran";
  // 61 MiB free and 3 on their way, once every access above completed.
  RoomWait all_freed = command_->MemoryBeingFreed(63 * kMiB);
  ASSERT_NE(all_freed.wait, nullptr);
  std::future<void> all_freed_notice = CalledBack(std::move(all_freed.notice));

  first.Open();  // `early`'s write runs; `late`'s waits behind the second gate
  EXPECT_EQ(used_once_reclaimed(2 * kMiB), 2 * kMiB)
      << "a buffer freed last waited for one freed before it";
  second.Open();  // `late` is written; `both` still has its read on stream 1 to run
  EXPECT_EQ(used_once_reclaimed(kMiB), kMiB);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  command_->ReclaimFinished();
  EXPECT_EQ(command_->Usage().memory_used_bytes, kMiB) << "freed while read on another stream";
  EXPECT_EQ(all_freed_notice.wait_for(std::chrono::seconds(0)), std::future_status::timeout)
      << "the wait for the freed memory ended before the read on stream 1";

  other.Open();
  all_freed_notice.wait();
  EXPECT_TRUE(WaitFor(std::move(all_freed.wait)).ok());
  EXPECT_EQ(used_once_reclaimed(0), 0u);
  EXPECT_TRUE(read_on_other->wait().ok());
}

TEST_F(CommandTest, ClosingASessionReclaimsEverything) {
  for (int i = 0; i < 10; ++i) MustAllocate(100 << 10);
  MustAllocate(4096, kOtherSession);
  DeviceUsage before = command_->Usage();
  EXPECT_EQ(before.sessions[kSession].buffers, 10u);
  uint64_t reclaimed = command_->CloseSession(kSession);
  EXPECT_EQ(reclaimed, 10u * (128 << 10));
  DeviceUsage after = command_->Usage();
  EXPECT_FALSE(after.sessions.contains(kSession));
  EXPECT_EQ(after.memory_used_bytes, 4096u);
}

TEST_F(CommandTest, AnIdleDeviceReleasesWhatClosedSessionsStagedOnceTheirWorkFinished) {
  StreamGate gate;
  gate.Block(backend_->stream(0));  // the copies wait behind earlier work
  StreamGate other_gate;
  other_gate.Block(backend_->stream(1));
  for (int i = 0; i < 4; ++i) {
    const SessionId session = kSession + i;
    BufferId id = MustAllocate(kMiB, session);
    ASSERT_TRUE(command_->Write(session, 0, id, CopyLayout::Contiguous(0, kMiB),
                                testing::RandomBytes(kMiB, i))
                    .ok());
    command_->CloseSession(session);
  }
  DeviceUsage held = command_->Usage();
  EXPECT_GT(held.drop_queue_bytes, 0u) << "the staged writes are still to be copied";
  EXPECT_GT(held.memory_used_bytes, 0u) << "the buffers are still being written";
  EXPECT_TRUE(command_->ReclaimWhenIdle()) << "held for unfinished work";
  EXPECT_GT(command_->Usage().drop_queue_bytes, 0u);

  gate.Open();
  other_gate.Open();
  // No command comes: the idle upkeep alone lets everything go once the copies ran.
  while (command_->ReclaimWhenIdle()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  DeviceUsage released = command_->Usage();
  EXPECT_EQ(released.drop_queue_bytes, 0u);
  EXPECT_EQ(released.drop_queue_entries, 0u);
  EXPECT_EQ(released.memory_used_bytes, 0u);
  EXPECT_TRUE(released.sessions.empty());
}

TEST_F(CommandTest, ASessionUsesAtMostItsLimitOfStreams) {
  CommandOptions options;
  options.session_max_streams = 8;
  Reset(64 * kMiB, options);
  BufferId id = MustAllocate(4096);
  const std::string bytes(16, 'x');
  for (LogicalStream stream = 0; stream < 8; ++stream) {
    ASSERT_TRUE(command_->Write(kSession, stream, id, CopyLayout::Contiguous(0, 16), bytes).ok())
        << stream;
  }
  absl::Status refused = command_->Write(kSession, 1000, id, CopyLayout::Contiguous(0, 16), bytes);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("limits.max_streams_per_session"));
  EXPECT_TRUE(command_->Write(kSession, 7, id, CopyLayout::Contiguous(0, 16), bytes).ok())
      << "streams in use stay usable";
  EXPECT_EQ(WaitFor(command_->Synchronize(kSession, 12345)), absl::OkStatus())
      << "synchronizing a stream never used waits for nothing and takes no place";
  BufferId other = MustAllocate(4096, kOtherSession);
  EXPECT_TRUE(
      command_->Write(kOtherSession, 1000, other, CopyLayout::Contiguous(0, 16), bytes).ok())
      << "the limit is per session";
}

// Launch rules that hold before any kernel runs (this backend has no executor).
class CommandLaunchTest : public CommandTest {
 protected:
  static KernelLaunch VectorAdd(absl::StatusOr<SharedKernelParams> params, BufferId a,
                                BufferId b, BufferId out) {
    KernelLaunch launch;
    launch.kernel = KernelId{"feedface"};
    launch.params = std::move(params);
    launch.grid = {1, 1, 1};
    launch.block = {4, 1, 1};
    launch.args = {{.kind = ParamKind::kBuffer, .buffer = a, .access = BufferAccess::kRead},
                   {.kind = ParamKind::kBuffer, .buffer = b, .access = BufferAccess::kRead},
                   {.kind = ParamKind::kBuffer, .buffer = out, .access = BufferAccess::kWrite},
                   {.kind = ParamKind::kScalar, .scalar = ScalarKind::kI32, .bits = 4}};
    return launch;
  }

  static SharedKernelParams VectorAddParams() {
    return ShareKernelParams({{ParamKind::kBuffer, ScalarKind::kNone, "const float* a"},
                              {ParamKind::kBuffer, ScalarKind::kNone, "const float* b"},
                              {ParamKind::kBuffer, ScalarKind::kNone, "float* out"},
                              {ParamKind::kScalar, ScalarKind::kI32, "int n"}});
  }
};

TEST_F(CommandLaunchTest, FailedCompileIsSkippedAndTaintsOnlyItsOutputs) {
  BufferId a = MustAllocate(16), b = MustAllocate(16), out = MustAllocate(16);
  ASSERT_TRUE(command_->Write(kSession, 0, a, CopyLayout::Contiguous(0, 16), "aaaaaaaaaaaaaaaa").ok());
  absl::Status skipped = command_->Launch(
      kSession, 0,
      VectorAdd(absl::FailedPreconditionError("kernel.cu:3: error: 'y' was not declared"), a, b,
                out));
  EXPECT_EQ(skipped.code(), absl::StatusCode::kFailedPrecondition);
  absl::Status read = ReadAll(out, 16).status();
  EXPECT_EQ(read.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(read.message()), HasSubstr("'y' was not declared"));
  EXPECT_EQ(ReadAll(a, 16).value(), "aaaaaaaaaaaaaaaa") << "inputs stay valid";
  // A copy from the tainted buffer is refused too; rewriting it whole clears the taint.
  EXPECT_EQ(command_->Copy(kSession, 0, out, b, DeviceCopyLayout::Contiguous(0, 0, 16)).code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(command_->Write(kSession, 0, out, CopyLayout::Contiguous(0, 16), "bbbbbbbbbbbbbbbb").ok());
  EXPECT_EQ(ReadAll(out, 16).value(), "bbbbbbbbbbbbbbbb");
}

// A fill of part of a tainted buffer leaves it tainted; a fill of all of it, as a whole
// write does, makes it fresh data.
TEST_F(CommandLaunchTest, AWholeFillClearsATaintAndAPartialOneDoesNot) {
  BufferId a = MustAllocate(16), b = MustAllocate(16), out = MustAllocate(16);
  ASSERT_EQ(command_->Launch(kSession, 0, VectorAdd(absl::FailedPreconditionError("no"), a, b, out))
                .code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(
      command_
          ->Fill(kSession, 0, out, CopyLayout::Contiguous(0, 8), {.value = 1, .element_bytes = 4})
          .ok());
  EXPECT_EQ(ReadAll(out, 16).status().code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(command_->Fill(kSession, 0, out, CopyLayout::Pitched(0, 4, 2, 12), {}).ok());
  EXPECT_EQ(ReadAll(out, 16).status().code(), absl::StatusCode::kFailedPrecondition)
      << "padded rows spanning the buffer leave bytes unwritten";
  ASSERT_TRUE(command_
                  ->Fill(kSession, 0, out, CopyLayout::Contiguous(0, 16),
                         {.value = 0x61, .element_bytes = 1})
                  .ok());
  EXPECT_EQ(ReadAll(out, 16).value(), std::string(16, 'a'));
}

TEST_F(CommandLaunchTest, ArgumentsAreCheckedBeforeAnythingIsResolved) {
  // Unknown buffers: a mismatch must be reported before any lookup would fail.
  KernelLaunch launch = VectorAdd(VectorAddParams(), 901, 902, 903);
  launch.args.pop_back();
  absl::Status count = command_->Launch(kSession, 0, launch);
  EXPECT_EQ(count.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(count.message()), HasSubstr("takes 4 arguments, the launch passes 3"));
  launch = VectorAdd(VectorAddParams(), 901, 902, 903);
  launch.args[3].scalar = ScalarKind::kF32;
  EXPECT_THAT(std::string(command_->Launch(kSession, 0, launch).message()), HasSubstr("int n"));
  launch = VectorAdd(VectorAddParams(), 901, 902, 903);
  launch.args[0].kind = ParamKind::kScalar;
  EXPECT_EQ(command_->Launch(kSession, 0, launch).code(), absl::StatusCode::kInvalidArgument);
  // With the right shape, the unknown buffers are what is wrong.
  EXPECT_EQ(command_->Launch(kSession, 0, VectorAdd(VectorAddParams(), 901, 902, 903)).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(CommandLaunchTest, ShapeLimitsAndZeroGrid) {
  BufferId a = MustAllocate(16), b = MustAllocate(16), out = MustAllocate(16);
  KernelLaunch launch = VectorAdd(VectorAddParams(), a, b, out);
  launch.block = {32, 64, 1};  // 2048 threads
  EXPECT_EQ(command_->Launch(kSession, 0, launch).code(), absl::StatusCode::kInvalidArgument);
  launch.block = {4, 1, 1};
  launch.dynamic_shared_memory_bytes = 1 << 20;
  EXPECT_EQ(command_->Launch(kSession, 0, launch).code(), absl::StatusCode::kInvalidArgument);
  launch.dynamic_shared_memory_bytes = 0;
  launch.grid = {0, 0, 0};
  // This backend has no executor: reaching the driver would fail, so OK proves the
  // zero grid returned first.
  EXPECT_TRUE(command_->Launch(kSession, 0, launch).ok());
  launch.grid = {1, 1, 1};
  absl::Status refused = command_->Launch(kSession, 0, launch);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReadAll(out, 16).status().code(), absl::StatusCode::kFailedPrecondition)
      << "a launch the driver refused taints its outputs";
}

// A launch with one tensor map over `matrix` (read) and one output buffer.
KernelLaunch TensorMapLaunch(BufferId matrix, BufferId out) {
  KernelLaunch launch;
  launch.kernel = KernelId{"feedface"};
  launch.params = ShareKernelParams(
      {{ParamKind::kTensorMap, ScalarKind::kNone, "const __grid_constant__ CUtensorMap map"},
       {ParamKind::kBuffer, ScalarKind::kNone, "float* out"}});
  launch.grid = {1, 1, 1};
  launch.block = {32, 1, 1};
  LaunchArgument map{.kind = ParamKind::kTensorMap, .buffer = matrix,
                     .access = BufferAccess::kRead};
  map.tensor_map = {.data_type = TensorDataType::kF32,
                    .global_dims = {64, 64},  // 64 rows of 512 bytes: twice the buffer
                    .global_strides_bytes = {512},
                    .box_dims = {32, 16},
                    .element_strides = {1, 1}};
  launch.args = {map, {.kind = ParamKind::kBuffer, .buffer = out,
                       .access = BufferAccess::kWrite}};
  return launch;
}

TEST_F(CommandLaunchTest, TensorMapsAreValidatedAgainstTheirBuffer) {
  CommandOptions options;
  options.launch.accepts_tensor_maps = true;  // as on the CUDA driver
  Reset(64 * kMiB, options);
  BufferId matrix = MustAllocate(512 * 32);
  BufferId out = MustAllocate(16);
  KernelLaunch launch = TensorMapLaunch(matrix, out);
  absl::Status too_big = command_->Launch(kSession, 0, launch);
  EXPECT_EQ(too_big.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(too_big.message()), HasSubstr("argument 0: tensor map"));
  EXPECT_THAT(std::string(too_big.message()), HasSubstr("buffer has 16384"));
}

TEST_F(CommandLaunchTest, TensorMapsAreRefusedBeforeAnythingWhereTheDriverHasNone) {
  BufferId matrix = MustAllocate(512 * 32);
  BufferId out = MustAllocate(16);
  ASSERT_TRUE(command_->Write(kSession, 0, out, CopyLayout::Contiguous(0, 16),
                              std::string(16, 'k')).ok());
  KernelLaunch launch = TensorMapLaunch(matrix, out);
  launch.args[0].tensor_map.global_dims = {64, 32};  // valid for the buffer
  absl::Status refused = command_->Launch(kSession, 0, launch);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("does not take tensor maps"));
  EXPECT_EQ(ReadAll(out, 16).value(), std::string(16, 'k'))
      << "a refused launch leaves its outputs untainted";
}

}  // namespace
}  // namespace gpucmd

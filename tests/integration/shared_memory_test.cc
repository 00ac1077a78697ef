// Shared-memory regions through the real daemon (Note [Shared-memory regions] in
// server/core/shared_memory.h): a memfd handed over on the descriptor socket and
// registered carries writes and receives reads (the unary WriteShared and ReadShared, the
// streaming Write and Read, and in Submit batches), for clients
// of other users too, with bounds, scoping, limits, what a client may hand over, and
// what a dying client leaves behind checked.

#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "client/client.h"
#include "client/submit_stream.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "server/descriptor_socket.h"
#include "tests/kernels/kernel_sources.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/huge_page_memfd.h"
#include "tests/testing/random_bytes.h"

namespace gpucmd {
namespace {

using ::gpucmd::testing::BackgroundCommand;
using ::gpucmd::testing::CommandResult;
using ::gpucmd::testing::DaemonProcess;
using ::gpucmd::testing::RunCommand;
using ::gpucmd::testing::RunfilePath;
using ::gpucmd::testing::StartCommand;
using ::gpucmd::testing::ShortTempDir;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;
constexpr int kMaxRegions = 3;
constexpr uint64_t kMaxRegisteredBytes = 8 * kMiB;
constexpr uint64_t kMaxMappedBytes = 16 * kMiB;

class SharedMemoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = ShortTempDir();
    std::string config = directory_ + "/gpucmdd.textproto";
    std::ofstream(config) << "socket_mode: 438\n"  // 0666: a client of another user
                          << "cpu { memory_bytes_per_device: " << 64 * kMiB << " }\n"
                          << "limits { session_lease_grace_seconds: 1"
                          << " max_shared_memory_regions: " << kMaxRegions
                          << " max_registered_shared_memory_bytes: " << kMaxRegisteredBytes
                          << " max_shared_memory_bytes: " << kMaxMappedBytes
                          << " }\n";
    absl::StatusOr<DaemonProcess> daemon =
        DaemonProcess::Start({"--listen=unix:" + directory_ + "/gpucmdd.sock",
                              "--http_listen=127.0.0.1:0", "--config=" + config});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_.emplace(*std::move(daemon));
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon_->grpc_target());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    absl::StatusOr<Session> session = client_->OpenSession(0, "shared-memory-test");
    ASSERT_TRUE(session.ok()) << session.status();
    session_.emplace(*std::move(session));
  }

  SharedMemoryRegion MustCreate(Session& session, uint64_t size) {
    absl::StatusOr<SharedMemoryRegion> region = SharedMemoryRegion::Create(session, size);
    EXPECT_TRUE(region.ok()) << region.status();
    return *std::move(region);
  }

  Buffer MustAllocate(uint64_t size) {
    absl::StatusOr<Buffer> buffer = session_->Allocate(size);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    return *std::move(buffer);
  }

  // Registers what `fd` is, handed over as a client of its own would.
  absl::Status RegisterDescriptor(int fd, uint64_t size) {
    absl::StatusOr<std::string> token = HandOverDescriptor(daemon_->grpc_target(), fd);
    if (!token.ok()) return token.status();
    return RegisterToken(*token, size);
  }

  // Registers the handoff `token` for `session` (the test's session when empty).
  absl::Status RegisterToken(const std::string& token, uint64_t size,
                             const std::string& session = "") {
    grpc::ClientContext context;
    v1::RegisterSharedMemoryRequest request;
    request.set_session(session.empty() ? session_->token() : session);
    request.set_handoff(token);
    request.set_size_bytes(size);
    v1::RegisterSharedMemoryResponse response;
    return FromGrpcStatus(client_->stub().RegisterSharedMemory(&context, request, &response));
  }

  uint64_t RegionsOpen() {
    absl::StatusOr<v1::GetStatsResponse> stats = client_->GetStats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats->shared_memory_regions();
  }

  std::string directory_;
  std::optional<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  std::optional<Session> session_;
};

TEST_F(SharedMemoryTest, WritesAndReadsGoThroughTheRegion) {
  constexpr uint64_t kSize = 3 * kMiB + 17;
  SharedMemoryRegion region = MustCreate(*session_, 2 * kSize);
  EXPECT_TRUE(region.direct_device_access()) << "the CPU driver reaches host memory directly";
  const std::string data = testing::RandomBytes(kSize, 7);
  std::memcpy(region.data(), data.data(), kSize);
  Buffer buffer = MustAllocate(kSize);
  ASSERT_TRUE(session_->Write(buffer, 0, RegionSlice{region, 0, kSize}).ok());
  EXPECT_EQ(session_->Read(buffer, 0, kSize).value_or(""), data) << "the region's bytes landed";
  ASSERT_TRUE(session_->Read(buffer, 5, RegionSlice{region, kSize, kSize - 5}).ok());
  EXPECT_EQ(std::string(region.data() + kSize, kSize - 5), data.substr(5))
      << "the read landed in the region";
  absl::StatusOr<v1::GetStatsResponse> stats = session_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->session().shared_memory_regions(), 1u);
  EXPECT_EQ(stats->shared_memory_bytes(), 2 * kSize);
}

TEST_F(SharedMemoryTest, TheStreamingWriteAndReadTakeSlicesToo) {
  SharedMemoryRegion region = MustCreate(*session_, 8192);
  std::memcpy(region.data(), "streamed slices!", 16);
  Buffer buffer = MustAllocate(16);
  {
    grpc::ClientContext context;
    v1::WriteResponse response;
    auto writer = client_->stub().Write(&context, &response);
    v1::WriteRequest request;
    v1::WriteHeader* header = request.mutable_header();
    header->set_session(session_->token());
    header->set_buffer(buffer.id());
    header->mutable_shared_memory()->set_region(region.id());
    header->mutable_shared_memory()->set_size_bytes(16);
    writer->WriteLast(request, grpc::WriteOptions());
    ASSERT_TRUE(writer->Finish().ok());
    EXPECT_EQ(response.bytes_written(), 16u);
  }
  ASSERT_TRUE(session_->Synchronize().ok()) << "a streaming write returns once queued";
  grpc::ClientContext context;
  v1::ReadRequest request;
  request.set_session(session_->token());
  request.set_buffer(buffer.id());
  request.set_size_bytes(16);
  request.mutable_shared_memory()->set_region(region.id());
  request.mutable_shared_memory()->set_offset_bytes(4096);
  request.mutable_shared_memory()->set_size_bytes(16);
  auto reader = client_->stub().Read(&context, request);
  v1::ReadResponse response;
  ASSERT_TRUE(reader->Read(&response));
  EXPECT_EQ(response.total_bytes(), 16u);
  EXPECT_TRUE(response.data().empty()) << "the bytes went to the region";
  EXPECT_FALSE(reader->Read(&response)) << "one message";
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(std::string(region.data() + 4096, 16), "streamed slices!");
}

// A write answered once copied (WriteShared, or the streaming Write or a Submit command
// whose header asks for it) lets the client refill its slice on the answer, even while
// the copy waits behind a kernel on its stream.
TEST_F(SharedMemoryTest, AWriteAnsweredOnceCopiedReturnsOnceItsBytesLeftTheRegion) {
  absl::StatusOr<v1::CompileResponse> spin = session_->Compile(kernels::kSpin, "spin");
  ASSERT_TRUE(spin.ok()) << spin.status();
  SharedMemoryRegion region = MustCreate(*session_, 4096);
  Buffer buffer = MustAllocate(16);
  auto header_of_copy = [&] {
    v1::WriteHeader header;
    header.set_session(session_->token());
    header.set_buffer(buffer.id());
    header.mutable_shared_memory()->set_region(region.id());
    header.mutable_shared_memory()->set_size_bytes(16);
    header.set_answer_when_copied(true);
    return header;
  };
  const std::vector<std::pair<std::string, std::function<absl::Status()>>> writes = {
      {"WriteShared", [&] { return session_->Write(buffer, 0, RegionSlice{region, 0, 16}); }},
      {"streaming Write",
       [&] {
         grpc::ClientContext context;
         v1::WriteResponse response;
         auto writer = client_->stub().Write(&context, &response);
         v1::WriteRequest request;
         *request.mutable_header() = header_of_copy();
         writer->WriteLast(request, grpc::WriteOptions());
         return FromGrpcStatus(writer->Finish());
       }},
      {"Submit",
       [&] {
         v1::SubmitRequest batch;
         v1::Command* command = batch.add_commands();
         *command->mutable_write()->mutable_header() = header_of_copy();
         grpc::ClientContext context;
         auto stream = client_->stub().Submit(&context);
         v1::SubmitResponse replies;
         if (!stream->Write(batch) || !stream->Read(&replies) || replies.replies_size() != 1) {
           return absl::InternalError("no reply to the batch");
         }
         stream->WritesDone();
         if (grpc::Status finished = stream->Finish(); !finished.ok()) {
           return FromGrpcStatus(finished);
         }
         return absl::Status(static_cast<absl::StatusCode>(replies.replies(0).status().code()),
                             replies.replies(0).status().message());
       }},
  };
  for (const auto& [way, write] : writes) {
    std::memcpy(region.data(), "the first bytes!", 16);
    // The write's copy waits behind a 300 ms kernel on its stream, and the write for it.
    ASSERT_TRUE(session_
                    ->Launch(spin->kernel_id(), {MakeDim3(1), MakeDim3(1)},
                             {Int64Argument(300'000'000)})
                    .ok());
    ASSERT_TRUE(write().ok()) << way;
    std::memcpy(region.data(), "refilled at once", 16);
    EXPECT_EQ(session_->Read(buffer, 0, 16).value_or(""), "the first bytes!")
        << way << ": refilling the region after the write returned changed what it wrote";
  }
}

TEST_F(SharedMemoryTest, PitchedRowsComeFromAndGoToTheRegion) {
  // Three rows of 5 bytes, 8 bytes apart in the buffer, packed in the region.
  SharedMemoryRegion region = MustCreate(*session_, 4096);
  Buffer buffer = MustAllocate(24);
  ASSERT_TRUE(session_->Write(buffer, 0, std::string(24, '.')).ok());
  std::memcpy(region.data(), "row0.row1.row2.", 15);
  const Pitched rows{5, 3, 8};
  ASSERT_TRUE(session_->Write(buffer, 0, RegionSlice{region, 0, 15}, /*stream=*/0, rows).ok());
  EXPECT_EQ(session_->Read(buffer, 0, 24).value_or(""), "row0....row1....row2....");
  ASSERT_TRUE(session_->Read(buffer, 0, RegionSlice{region, 100, 15}, /*stream=*/0, rows).ok());
  EXPECT_EQ(std::string(region.data() + 100, 15), "row0.row1.row2.");
  // A slice that is not exactly the rows' bytes is refused, and nothing moves.
  for (uint64_t size : {14, 16}) {
    absl::Status refused =
        session_->Write(buffer, 0, RegionSlice{region, 200, size}, /*stream=*/0, rows);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    refused = session_->Read(buffer, 0, RegionSlice{region, 200, size}, /*stream=*/0, rows);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  }
  EXPECT_EQ(session_->Read(buffer, 0, 24).value_or(""), "row0....row1....row2....");
  EXPECT_EQ(std::string(region.data() + 200, 16), std::string(16, '\0'));

  // The same in one Submit batch: rows in from the region's start, out to its end.
  std::memcpy(region.data(), "ROW0.ROW1.ROW2.", 15);
  SubmitBatch batch(*session_);
  batch.Write(buffer, 0, RegionSlice{region, 0, 15}, /*stream=*/0, rows);
  batch.Read(buffer, 0, RegionSlice{region, 4096 - 15, 15}, /*stream=*/0, rows);
  absl::StatusOr<SubmitStream> stream = SubmitStream::Open(*session_);
  ASSERT_TRUE(stream.ok()) << stream.status();
  absl::StatusOr<BatchReplies> replies = stream->Run(batch);
  ASSERT_TRUE(replies.ok()) << replies.status();
  EXPECT_TRUE(replies->FirstError().ok()) << replies->FirstError();
  EXPECT_EQ(std::string(region.data() + 4096 - 15, 15), "ROW0.ROW1.ROW2.");
  EXPECT_EQ(session_->Read(buffer, 0, 24).value_or(""), "ROW0....ROW1....ROW2....");
}

TEST_F(SharedMemoryTest, TheUnaryCopiesTakeASliceAndNothingElse) {
  SharedMemoryRegion region = MustCreate(*session_, 4096);
  Buffer buffer = MustAllocate(16);
  auto write_shared = [&](const v1::WriteHeader& header) {
    grpc::ClientContext context;
    v1::WriteResponse response;
    return FromGrpcStatus(client_->stub().WriteShared(&context, header, &response));
  };
  auto read_shared = [&](const v1::ReadRequest& request) {
    grpc::ClientContext context;
    v1::ReadResponse response;
    return FromGrpcStatus(client_->stub().ReadShared(&context, request, &response));
  };
  v1::WriteHeader inline_write;
  inline_write.set_session(session_->token());
  inline_write.set_buffer(buffer.id());
  inline_write.set_inline_size_bytes(16);
  absl::Status refused = write_shared(inline_write);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("shared_memory"));
  v1::ReadRequest inline_read;
  inline_read.set_session(session_->token());
  inline_read.set_buffer(buffer.id());
  inline_read.set_size_bytes(16);
  refused = read_shared(inline_read);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("shared_memory"));

  v1::WriteHeader by_reference = inline_write;
  by_reference.set_buffer_ref(1);
  by_reference.mutable_shared_memory()->set_region(region.id());
  by_reference.mutable_shared_memory()->set_size_bytes(16);
  EXPECT_EQ(write_shared(by_reference).code(), absl::StatusCode::kInvalidArgument)
      << "a batch reference outside a batch";
  v1::WriteHeader unknown_region = by_reference;
  unknown_region.set_buffer(buffer.id());
  unknown_region.mutable_shared_memory()->set_region(region.id() + 100);
  EXPECT_EQ(write_shared(unknown_region).code(), absl::StatusCode::kNotFound);
  inline_read.mutable_shared_memory()->set_region(region.id() + 100);
  inline_read.mutable_shared_memory()->set_size_bytes(16);
  EXPECT_EQ(read_shared(inline_read).code(), absl::StatusCode::kNotFound);
  v1::WriteHeader unknown_session = unknown_region;
  unknown_session.set_session("not-a-session");
  EXPECT_EQ(write_shared(unknown_session).code(), absl::StatusCode::kNotFound);
  inline_read.set_session("not-a-session");
  EXPECT_EQ(read_shared(inline_read).code(), absl::StatusCode::kNotFound);
}

TEST_F(SharedMemoryTest, ARegionInHugePagesCarriesCopiesBothWays) {
  testing::ScopedHugePages pages(2);
  if (!pages.available()) GTEST_SKIP() << "no huge pages free, and not root to add them";
  constexpr uint64_t kSize = 3 * kMiB + 5;  // two huge pages
  absl::StatusOr<SharedMemoryRegion> region =
      SharedMemoryRegion::Create(*session_, kSize, {.huge_pages = true});
  ASSERT_TRUE(region.ok()) << region.status();
  const std::string data = testing::RandomBytes(kSize / 2, 11);
  std::memcpy(region->data(), data.data(), data.size());
  Buffer buffer = MustAllocate(data.size());
  ASSERT_TRUE(session_->Write(buffer, 0, RegionSlice{*region, 0, data.size()}).ok());
  EXPECT_EQ(session_->Read(buffer, 0, data.size()).value_or(""), data);
  ASSERT_TRUE(session_->Read(buffer, 0, RegionSlice{*region, kSize - data.size(), data.size()})
                  .ok());
  EXPECT_EQ(std::string(region->data() + kSize - data.size(), data.size()), data);
  absl::StatusOr<v1::GetStatsResponse> stats = session_->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->shared_memory_bytes(), 2 * testing::kHugePageBytes) << "whole pages mapped";
  absl::Status past_end = session_->Write(buffer, 0, RegionSlice{*region, kSize, 1});
  EXPECT_EQ(past_end.code(), absl::StatusCode::kInvalidArgument)
      << "the region ends at its size, not at its last page's end";
}

// Note [Faults in client memory]: a hole punched in a hugetlbfs region, with no huge page
// free to fill it, turns the daemon's next copy into it into SIGBUS.
TEST_F(SharedMemoryTest, ARegionWhosePagesGoAwayCannotBringTheDaemonDown) {
  testing::ScopedHugePages pages(1);
  if (!pages.available()) GTEST_SKIP() << "no huge pages free, and not root to add them";
  const int memfd = testing::MakeHugePageMemfd(testing::kHugePageBytes);
  ASSERT_GE(memfd, 0);
  absl::StatusOr<std::string> token = HandOverDescriptor(daemon_->grpc_target(), memfd);
  ASSERT_TRUE(token.ok()) << token.status();
  v1::RegisterSharedMemoryRequest request;
  request.set_session(session_->token());
  request.set_handoff(*token);
  request.set_size_bytes(testing::kHugePageBytes);
  v1::RegisterSharedMemoryResponse registered;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(client_->stub().RegisterSharedMemory(&context, request, &registered).ok());
  }
  Buffer buffer = MustAllocate(4096);
  auto copy = [&](bool into_region) {
    grpc::ClientContext context;
    v1::SharedMemorySlice slice;
    slice.set_region(registered.region());
    slice.set_size_bytes(4096);
    if (into_region) {
      v1::ReadRequest read;
      read.set_session(session_->token());
      read.set_buffer(buffer.id());
      read.set_size_bytes(4096);
      *read.mutable_shared_memory() = slice;
      v1::ReadResponse response;
      return client_->stub().ReadShared(&context, read, &response);
    }
    v1::WriteHeader write;
    write.set_session(session_->token());
    write.set_buffer(buffer.id());
    *write.mutable_shared_memory() = slice;
    v1::WriteResponse response;
    return client_->stub().WriteShared(&context, write, &response);
  };
  ASSERT_TRUE(copy(/*into_region=*/true).ok()) << "the page is faulted in, and whole";
  ASSERT_EQ(fallocate(memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                      testing::kHugePageBytes),
            0)
      << strerror(errno);
  // Every free huge page reserved here: none is left to fill the hole.
  std::vector<void*> reserved;
  for (void* page = nullptr; reserved.size() < 64; reserved.push_back(page)) {
    page = mmap(nullptr, testing::kHugePageBytes, PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
    if (page == MAP_FAILED) break;
  }
  EXPECT_TRUE(copy(/*into_region=*/true).ok()) << "the copy completes, on zero pages";
  grpc::Status lost = copy(/*into_region=*/false);
  EXPECT_EQ(lost.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << lost.error_message();
  EXPECT_THAT(lost.error_message(), HasSubstr("lost its memory"));
  EXPECT_TRUE(client_->ListDevices().ok()) << "the daemon serves on";
  for (void* page : reserved) munmap(page, testing::kHugePageBytes);
  close(memfd);
}

// A hole punched in an ordinary (tmpfs) memfd gives the region fresh zero pages, as the
// client sees them too: copies go on, and carry those zeros.
TEST_F(SharedMemoryTest, AHolePunchedInATmpfsRegionReadsAsZeros) {
  constexpr uint64_t kSize = 256 << 10;
  constexpr uint64_t kHole = 64 << 10;
  SharedMemoryRegion region = MustCreate(*session_, kSize);
  const std::string data = testing::RandomBytes(kSize, 11);
  std::memcpy(region.data(), data.data(), kSize);
  Buffer buffer = MustAllocate(kSize);
  ASSERT_TRUE(session_->Write(buffer, 0, RegionSlice{region, 0, kSize}).ok());
  // MADV_REMOVE on a shared mapping punches the hole in the memfd behind it.
  ASSERT_EQ(madvise(region.data(), kHole, MADV_REMOVE), 0) << strerror(errno);
  absl::Status written = session_->Write(buffer, 0, RegionSlice{region, 0, kSize});
  ASSERT_TRUE(written.ok()) << written;
  std::string expected = data;
  std::fill_n(expected.begin(), kHole, '\0');
  EXPECT_EQ(session_->Read(buffer, 0, kSize).value_or(""), expected)
      << "the hole's zeros, then the region's bytes";
  std::memset(region.data(), 0xff, kSize);
  absl::Status read = session_->Read(buffer, 0, RegionSlice{region, 0, kSize});
  ASSERT_TRUE(read.ok()) << read;
  EXPECT_EQ(std::string(region.data(), kSize), expected) << "a read lands in the region";
}

// Past limits.max_registered_shared_memory_bytes a region is not registered with the
// device: its copies are staged through pinned chunks (Note [Staging through pinned
// chunks]), with the same bytes; the limit frees up as registered regions go.
TEST_F(SharedMemoryTest, RegionsPastTheRegistrationLimitAreStagedAndWorkAlike) {
  std::optional<SharedMemoryRegion> first(MustCreate(*session_, 6 * kMiB));
  EXPECT_TRUE(first->direct_device_access());
  SharedMemoryRegion staged = MustCreate(*session_, 5 * kMiB);
  EXPECT_FALSE(staged.direct_device_access()) << "6 + 5 MiB pass the 8 MiB limit";
  constexpr uint64_t kSize = (4 * kMiB) + 4099;  // two pinned chunks and a tail
  const std::string data = testing::RandomBytes(kSize, 31);
  std::memcpy(staged.data(), data.data(), kSize);
  Buffer buffer = MustAllocate(kSize + 100);
  ASSERT_TRUE(session_->Write(buffer, 100, RegionSlice{staged, 0, kSize}).ok());
  EXPECT_EQ(session_->Read(buffer, 100, kSize).value_or(""), data);
  std::memset(staged.data(), 0, 5 * kMiB);
  ASSERT_TRUE(session_->Read(buffer, 100, RegionSlice{staged, 7, kSize}).ok());
  EXPECT_EQ(std::string(staged.data() + 7, kSize), data) << "the read landed in the region";

  first.reset();  // unregistered, and no copy holds it
  ASSERT_TRUE(session_->Synchronize().ok());
  SharedMemoryRegion again = MustCreate(*session_, 5 * kMiB);
  EXPECT_TRUE(again.direct_device_access()) << "the first region's registration ended";
}

TEST_F(SharedMemoryTest, ABatchWritesAndReadsThroughTheRegion) {
  SharedMemoryRegion region = MustCreate(*session_, 8192);
  std::memcpy(region.data(), "batched bytes!!!", 16);
  v1::SubmitRequest batch;
  auto add = [&](uint64_t sequence) {
    v1::Command* command = batch.add_commands();
    command->set_sequence(sequence);
    return command;
  };
  v1::AllocateRequest* allocate = add(1)->mutable_allocate();
  allocate->set_session(session_->token());
  allocate->set_size_bytes(16);
  v1::WriteHeader* write = add(2)->mutable_write()->mutable_header();
  write->set_session(session_->token());
  write->set_buffer_ref(1);
  write->mutable_shared_memory()->set_region(region.id());
  write->mutable_shared_memory()->set_size_bytes(16);
  v1::ReadRequest* read = add(3)->mutable_read();
  read->set_session(session_->token());
  read->set_buffer_ref(1);
  read->set_size_bytes(16);
  read->mutable_shared_memory()->set_region(region.id());
  read->mutable_shared_memory()->set_offset_bytes(4096);
  read->mutable_shared_memory()->set_size_bytes(16);
  grpc::ClientContext context;
  auto stream = client_->stub().Submit(&context);
  ASSERT_TRUE(stream->Write(batch));
  v1::SubmitResponse replies;
  ASSERT_TRUE(stream->Read(&replies));
  stream->WritesDone();
  ASSERT_TRUE(stream->Finish().ok());
  ASSERT_EQ(replies.replies_size(), 3);
  for (const v1::CommandReply& reply : replies.replies()) {
    EXPECT_EQ(reply.status().code(), 0) << reply.sequence() << ": " << reply.status().message();
  }
  EXPECT_EQ(replies.replies(2).read().total_bytes(), 16u);
  EXPECT_TRUE(replies.replies(2).read().data().empty()) << "the bytes went to the region";
  EXPECT_EQ(std::string(region.data() + 4096, 16), "batched bytes!!!");
}

TEST_F(SharedMemoryTest, SlicesAreCheckedAndRegionsScopedToTheirSession) {
  SharedMemoryRegion region = MustCreate(*session_, 4096);
  Buffer buffer = MustAllocate(8192);
  absl::Status past_end = session_->Write(buffer, 0, RegionSlice{region, 4000, 97});
  EXPECT_EQ(past_end.code(), absl::StatusCode::kInvalidArgument) << past_end;
  EXPECT_THAT(std::string(past_end.message()), HasSubstr("outside shared-memory region"));
  EXPECT_EQ(session_->Read(buffer, 0, RegionSlice{region, 1, 4096}).code(),
            absl::StatusCode::kInvalidArgument);

  absl::StatusOr<Session> other = client_->OpenSession(0, "other");
  ASSERT_TRUE(other.ok());
  absl::StatusOr<Buffer> theirs = other->Allocate(16);
  ASSERT_TRUE(theirs.ok());
  absl::Status foreign = other->Write(*theirs, 0, RegionSlice{region, 0, 16});
  EXPECT_EQ(foreign.code(), absl::StatusCode::kNotFound) << "another session's region";
  SharedMemoryRegion unknown = MustCreate(*other, 4096);
  EXPECT_EQ(other->Close().code(), absl::StatusCode::kOk);
  EXPECT_EQ(RegionsOpen(), 1u) << "the closed session's region went with it";
}

// Connects to the descriptor socket beside the daemon's gRPC socket.
int ConnectToDescriptorSocket(const std::string& directory) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string path = directory + "/gpucmdd.sock.fds";
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  int connection = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  EXPECT_EQ(connect(connection, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  return connection;
}

TEST_F(SharedMemoryTest, TheDescriptorSocketRefusesMessagesWithoutADescriptor) {
  int connection = ConnectToDescriptorSocket(directory_);
  ASSERT_EQ(send(connection, "R", 1, MSG_NOSIGNAL), 1);
  char reply[512];
  ssize_t size = recv(connection, reply, sizeof(reply), 0);
  ASSERT_GT(size, 0);
  EXPECT_EQ(reply[0], kRefusedInvalid);
  EXPECT_THAT(std::string(reply + 1, size - 1), HasSubstr("exactly one descriptor"));
  close(connection);
  EXPECT_TRUE(SharedMemoryRegion::Create(*session_, 4096).ok()) << "the socket serves on";
}

// True while the daemon holds `connection` open without having answered it.
bool WaitsUnanswered(int connection) {
  char byte;
  return recv(connection, &byte, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

TEST_F(SharedMemoryTest, SilentConnectionsDelayNoOtherHandoff) {
  std::vector<int> silent;
  for (int i = 0; i < 4; ++i) silent.push_back(ConnectToDescriptorSocket(directory_));
  int memfd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(memfd, 4096), 0);
  ASSERT_EQ(fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  absl::StatusOr<std::string> token = HandOverDescriptor(daemon_->grpc_target(), memfd);
  ASSERT_TRUE(token.ok()) << token.status();
  for (int connection : silent) {
    EXPECT_TRUE(WaitsUnanswered(connection))
        << "the handoff was answered while the silent connections before it still waited, "
           "not after each of them was dropped";
    close(connection);
  }
  EXPECT_TRUE(RegisterToken(*token, 4096).ok());
  close(memfd);
}

TEST_F(SharedMemoryTest, AUsersSilentConnectionsAreLimited) {
  std::vector<int> silent;
  for (size_t i = 0; i < DescriptorSocketServer::Limits().max_waiting_per_user; ++i) {
    silent.push_back(ConnectToDescriptorSocket(directory_));
  }
  int one_more = ConnectToDescriptorSocket(directory_);
  timeval timeout{.tv_sec = 10, .tv_usec = 0};
  ASSERT_EQ(setsockopt(one_more, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout)), 0);
  char reply[512];
  const ssize_t size = recv(one_more, reply, sizeof(reply), 0);
  ASSERT_GT(size, 0) << "answered at once, not dropped after a wait";
  EXPECT_EQ(reply[0], kRefusedAtLimit);
  EXPECT_THAT(std::string(reply + 1, size - 1), HasSubstr("this user's 8 connections"));
  EXPECT_TRUE(WaitsUnanswered(silent.front()));
  close(one_more);
  for (int connection : silent) close(connection);
}

TEST_F(SharedMemoryTest, AUsersUnregisteredHandoffsAreLimited) {
  const int memfd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(memfd, 4096), 0);
  ASSERT_EQ(fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  constexpr int kPerUser = 32;  // the daemon's share per user, in the README
  std::vector<std::string> tokens;
  for (int i = 0; i < kPerUser; ++i) {
    absl::StatusOr<std::string> token = HandOverDescriptor(daemon_->grpc_target(), memfd);
    ASSERT_TRUE(token.ok()) << i << ": " << token.status();
    tokens.push_back(*std::move(token));
  }
  absl::Status refused = HandOverDescriptor(daemon_->grpc_target(), memfd).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("at most 32 per user"));
  EXPECT_TRUE(RegisterToken(tokens.front(), 4096).ok()) << "a token registered frees a place";
  EXPECT_TRUE(HandOverDescriptor(daemon_->grpc_target(), memfd).ok());
  close(memfd);
}

// Descriptors that cannot be regions are refused as they arrive, INVALID_ARGUMENT, and
// hold none of the user's places meanwhile.
TEST_F(SharedMemoryTest, DescriptorsThatAreNotSealedMemfdsAreRefusedAndHoldNoPlace) {
  const std::string path = directory_ + "/regular-file";
  const int file = open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  ASSERT_EQ(ftruncate(file, 4096), 0);
  int pipe_ends[2];
  ASSERT_EQ(pipe2(pipe_ends, O_CLOEXEC), 0);
  const int unsealed = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(unsealed, 4096), 0);
  for (int i = 0; i < 40; ++i) {  // more than the 32 a user's handoffs may wait
    for (int fd : {file, pipe_ends[0], pipe_ends[1], unsealed}) {
      absl::Status refused = HandOverDescriptor(daemon_->grpc_target(), fd).status();
      EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
    }
  }
  for (int fd : {file, pipe_ends[0], pipe_ends[1], unsealed}) close(fd);
  absl::StatusOr<SharedMemoryRegion> region = SharedMemoryRegion::Create(*session_, 4096);
  EXPECT_TRUE(region.ok()) << "a sealed memfd still has its place: " << region.status();
}

// A registration refused for its session (unknown, or closed since the handoff) takes
// its handoff along, instead of leaving it to hold one of the user's places until it
// expires.
TEST_F(SharedMemoryTest, ARegistrationForAGoneSessionTakesItsHandoffAlong) {
  const int memfd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(memfd, 4096), 0);
  ASSERT_EQ(fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  absl::StatusOr<Session> gone = client_->OpenSession(0, "gone");
  ASSERT_TRUE(gone.ok()) << gone.status();
  const std::string token = gone->token();
  ASSERT_TRUE(gone->Close().ok());
  for (int i = 0; i < 40; ++i) {  // more than the 32 a user's handoffs may wait
    absl::StatusOr<std::string> handoff = HandOverDescriptor(daemon_->grpc_target(), memfd);
    ASSERT_TRUE(handoff.ok()) << i << ": " << handoff.status();
    absl::Status registered = RegisterToken(*handoff, 4096, token);
    EXPECT_EQ(registered.code(), absl::StatusCode::kNotFound) << registered;
  }
  close(memfd);
}

TEST_F(SharedMemoryTest, OnlySealedMemfdsAreAcceptedAndTokensServeOnce) {
  int memfd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_EQ(ftruncate(memfd, 4096), 0);
  absl::Status unsealed = RegisterDescriptor(memfd, 4096);
  EXPECT_EQ(unsealed.code(), absl::StatusCode::kInvalidArgument) << unsealed;
  EXPECT_THAT(std::string(unsealed.message()), HasSubstr("F_SEAL_SHRINK"));
  ASSERT_EQ(fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  EXPECT_EQ(RegisterDescriptor(memfd, 8192).code(), absl::StatusCode::kInvalidArgument)
      << "larger than the memfd";
  absl::StatusOr<std::string> token = HandOverDescriptor(daemon_->grpc_target(), memfd);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_TRUE(RegisterToken(*token, 4096).ok());
  absl::Status reused = RegisterToken(*token, 4096);
  EXPECT_EQ(reused.code(), absl::StatusCode::kInvalidArgument) << reused;
  EXPECT_THAT(std::string(reused.message()), HasSubstr("already registered"));
  EXPECT_EQ(RegisterToken("0123456789abcdef0123456789abcdef", 4096).code(),
            absl::StatusCode::kInvalidArgument);
  close(memfd);

  std::string path = directory_ + "/regular-file";
  int file = open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0600);
  ASSERT_EQ(ftruncate(file, 4096), 0);
  absl::Status regular = RegisterDescriptor(file, 4096);
  EXPECT_EQ(regular.code(), absl::StatusCode::kInvalidArgument) << regular;
  EXPECT_THAT(std::string(regular.message()), HasSubstr("memfd"));
  close(file);
}

// The installed service runs as its own user and its clients as theirs: shared memory
// works across users, and a token proves possession only for the user who handed the
// memfd over.
TEST_F(SharedMemoryTest, AClientOfAnotherUserSharesMemoryAndItsTokenProvesNothingToOthers) {
  if (geteuid() != 0) GTEST_SKIP() << "becoming another user needs root";
  constexpr uid_t kNobody = 65534;
  constexpr gid_t kNogroup = 65534;
  ASSERT_EQ(chmod(directory_.c_str(), 0755), 0);  // for nobody; the sockets are 0666
  CommandResult run = RunCommand({RunfilePath("tests/integration/shared_memory_peer"),
                                  daemon_->grpc_target(), std::to_string(kNobody),
                                  std::to_string(kNogroup)});
  ASSERT_EQ(run.exit_code, 0) << run.stdout_text << run.stderr_text;
  EXPECT_THAT(run.stdout_text, HasSubstr("round_trip=ok\n"));
  const size_t at = run.stdout_text.find("token=");
  ASSERT_NE(at, std::string::npos) << run.stdout_text;
  const std::string token(absl::StripAsciiWhitespace(run.stdout_text.substr(at + 6)));
  absl::Status stolen = RegisterToken(token, 4096);
  EXPECT_EQ(stolen.code(), absl::StatusCode::kInvalidArgument) << stolen;
  EXPECT_THAT(std::string(stolen.message()), HasSubstr("handed over by another user"));
  EXPECT_EQ(RegionsOpen(), 0u);
}

// Whether gpucmdd (`pid`) maps any client region (the client library names its memfds
// "gpucmd-region").
bool MapsAClientRegion(pid_t pid) {
  std::ifstream maps("/proc/" + std::to_string(pid) + "/maps");
  std::string line;
  while (std::getline(maps, line)) {
    if (line.find("memfd:gpucmd-region") != std::string::npos) return true;
  }
  return false;
}

TEST_F(SharedMemoryTest, AClientThatDiesLosesItsRegionsWithItsSession) {
  BackgroundCommand holder = StartCommand(
      {RunfilePath("tests/integration/shared_memory_peer"), daemon_->grpc_target(),
       std::to_string(geteuid()), std::to_string(getegid()), "hold"});
  ASSERT_GT(holder.pid, 0);
  std::string said;
  char chunk[256];
  ssize_t got;
  while (said.find('\n') == std::string::npos &&
         (got = read(holder.stdout_fd, chunk, sizeof(chunk))) > 0) {
    said.append(chunk, got);
  }
  close(holder.stdout_fd);
  ASSERT_EQ(said, "holding\n");
  EXPECT_EQ(RegionsOpen(), 1u);
  EXPECT_TRUE(MapsAClientRegion(daemon_->pid()));

  kill(holder.pid, SIGKILL);
  waitpid(holder.pid, nullptr, 0);
  // The lease's grace is a second.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (RegionsOpen() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(RegionsOpen(), 0u);
  EXPECT_FALSE(MapsAClientRegion(daemon_->pid())) << "nothing stays mapped";
}

// A session closed while one of its regions registers: whichever lands first, once
// both ended the session holds no region and nothing stays mapped (the regions' own
// objects still live, so their unregistering on destruction cannot hide one).
TEST_F(SharedMemoryTest, ARegionRegisteringWhileItsSessionClosesStaysNowhere) {
  std::mt19937 pick(1);
  std::deque<absl::StatusOr<SharedMemoryRegion>> regions;  // kept until the end
  for (int i = 0; i < 150; ++i) {
    absl::StatusOr<Session> session = client_->OpenSession(0, "closing");
    ASSERT_TRUE(session.ok()) << session.status();
    std::thread registering(
        [&] { regions.push_back(SharedMemoryRegion::Create(*session, 64 << 10)); });
    std::this_thread::sleep_for(std::chrono::microseconds(pick() % 1500));
    grpc::ClientContext context;
    v1::CloseSessionRequest request;
    request.set_session(session->token());
    v1::CloseSessionResponse response;
    const grpc::Status closed = client_->stub().CloseSession(&context, request, &response);
    registering.join();
    ASSERT_TRUE(closed.ok()) << closed.error_message();
    if (!regions.back().ok()) {
      EXPECT_EQ(regions.back().status().code(), absl::StatusCode::kNotFound)
          << regions.back().status();
    }
  }
  EXPECT_EQ(RegionsOpen(), 0u);
  EXPECT_FALSE(MapsAClientRegion(daemon_->pid())) << "nothing stays mapped";
}

// A region stays registered while its session moves, and unregisters through it; one
// that outlives its session only unmaps.
TEST_F(SharedMemoryTest, RegionsStayValidWhenTheirSessionMoves) {
  absl::StatusOr<Session> opened = client_->OpenSession(0, "moved");
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::optional<SharedMemoryRegion> region(MustCreate(*opened, 4096));
  std::optional<SharedMemoryRegion> outliving(MustCreate(*opened, 4096));
  std::vector<Session> sessions;
  sessions.push_back(*std::move(opened));
  opened = absl::UnknownError("moved from");  // the Session it came from is gone
  EXPECT_EQ(RegionsOpen(), 2u);
  absl::StatusOr<Buffer> buffer = sessions[0].Allocate(4);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  std::memcpy(region->data(), "abcd", 4);
  ASSERT_TRUE(sessions[0].Write(*buffer, 0, RegionSlice{*region, 0, 4}).ok());
  EXPECT_EQ(sessions[0].Read(*buffer, 0, 4).value_or(""), "abcd");
  region.reset();
  EXPECT_EQ(RegionsOpen(), 1u) << "unregistered through the moved session";
  sessions.clear();
  EXPECT_EQ(RegionsOpen(), 0u);
  outliving.reset();
}

TEST_F(SharedMemoryTest, RegionsPerSessionAreLimited) {
  std::vector<SharedMemoryRegion> regions;
  for (int i = 0; i < kMaxRegions; ++i) regions.push_back(MustCreate(*session_, 4096));
  absl::StatusOr<SharedMemoryRegion> one_more = SharedMemoryRegion::Create(*session_, 4096);
  EXPECT_EQ(one_more.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(one_more.status().message()),
              HasSubstr("limits.max_shared_memory_regions"));
  regions.pop_back();  // unregisters
  EXPECT_TRUE(SharedMemoryRegion::Create(*session_, 4096).ok());
}

TEST_F(SharedMemoryTest, BytesMappedForAllSessionsAreLimited) {
  std::optional<SharedMemoryRegion> mine(MustCreate(*session_, 12 * kMiB));
  absl::StatusOr<Session> other = client_->OpenSession(0, "other");
  ASSERT_TRUE(other.ok()) << other.status();
  absl::StatusOr<SharedMemoryRegion> theirs = SharedMemoryRegion::Create(*other, 8 * kMiB);
  EXPECT_EQ(theirs.status().code(), absl::StatusCode::kResourceExhausted) << theirs.status();
  EXPECT_THAT(std::string(theirs.status().message()),
              HasSubstr("limits.max_shared_memory_bytes"));
  EXPECT_TRUE(SharedMemoryRegion::Create(*other, 4 * kMiB).ok()) << "what fits still maps";
  mine.reset();  // unregisters, unmapping its 12 MiB
  EXPECT_TRUE(SharedMemoryRegion::Create(*other, 8 * kMiB).ok());
}

}  // namespace
}  // namespace gpucmd

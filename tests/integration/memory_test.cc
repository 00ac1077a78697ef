// Device memory through the real daemon: sessions, allocate/free, staged writes and
// reads (chunked beyond the message limit, pitched), copies, synchronization, stats,
// and every kind of bad input a client can send.

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/client.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_process.h"
#include "tests/testing/random_bytes.h"
#include "tests/testing/raw_call.h"

namespace gpucmd {
namespace {

using ::gpucmd::testing::CommandResult;
using ::gpucmd::testing::DaemonProcess;
using ::gpucmd::testing::RunCommand;
using ::gpucmd::testing::RunfilePath;
using ::gpucmd::testing::ShortTempDir;
using ::testing::HasSubstr;

constexpr uint64_t kMiB = 1 << 20;
constexpr uint64_t kDeviceBytes = 64 * kMiB;
constexpr int kMaxMessageBytes = 1 << 20;


class MemoryTest : public ::testing::Test {
 protected:
  void SetUp() override { StartDaemon(kMaxMessageBytes); }

  // (Re)starts the daemon with messages of at most `max_message_bytes`, and connects.
  void StartDaemon(uint64_t max_message_bytes) {
    TearDown();
    daemon_.reset();
    std::string directory = ShortTempDir();
    std::string config = directory + "/gpucmdd.textproto";
    // A payload cache of 1 MiB: payloads of megabytes go through the pool's spare, in
    // lazily released memory (Note [Payload pool]).
    std::ofstream(config) << "cpu { memory_bytes_per_device: " << kDeviceBytes << " }\n"
                          << "limits { max_message_bytes: " << max_message_bytes
                          << " session_lease_grace_seconds: 1 payload_cache_bytes: " << kMiB
                          << " }\n";
    absl::StatusOr<DaemonProcess> daemon =
        DaemonProcess::Start({"--listen=unix:" + directory + "/gpucmdd.sock",
                              "--http_listen=127.0.0.1:0", "--config=" + config});
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_.emplace(*std::move(daemon));
    ClientOptions options;
    options.max_message_bytes = static_cast<int>(max_message_bytes);
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect(daemon_->grpc_target(), options);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    absl::StatusOr<Session> session = client_->OpenSession(0, "memory-test");
    ASSERT_TRUE(session.ok()) << session.status();
    session_.emplace(*std::move(session));
  }

  void TearDown() override {
    session_.reset();
    client_.reset();
  }

  Buffer MustAllocate(uint64_t size) {
    absl::StatusOr<Buffer> buffer = session_->Allocate(size);
    EXPECT_TRUE(buffer.ok()) << buffer.status();
    return *std::move(buffer);
  }

  uint64_t DeviceUsedBytes() {
    absl::StatusOr<v1::GetStatsResponse> stats = client_->GetStats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats->devices(0).memory_used_bytes();
  }

  std::optional<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  std::optional<Session> session_;
};

// 20 MiB and more: the device's copies are split between threads (Note [Copies on
// several cores] in driver/cpu/copy_engine.h).
// Each size answered once queued and answered once copied (WriteHeader.answer_when_copied).
TEST_F(MemoryTest, WriteThenReadRoundTripsSmallAndChunkedPayloads) {
  for (WriteReturns returns : {WriteReturns::kWhenQueued, WriteReturns::kWhenCopied}) {
    for (uint64_t size : {uint64_t{1}, uint64_t{4096}, 5 * kMiB + 123, 20 * kMiB + 4099}) {
      Buffer buffer = MustAllocate(size);
      std::string data = testing::RandomBytes(size, static_cast<uint32_t>(size));
      ASSERT_TRUE(session_->Write(buffer, 0, data, 0, std::nullopt, returns).ok());
      absl::StatusOr<std::string> read = session_->Read(buffer, 0, size);
      ASSERT_TRUE(read.ok()) << read.status();
      EXPECT_EQ(*read, data) << size << " bytes";
    }
  }
}

// A read into the caller's memory lands the same bytes as a read that returns them, at
// an offset and across several answers (messages of at most 1 MiB here), and leaves the
// caller's bytes around it alone.
TEST_F(MemoryTest, AReadIntoTheCallersMemoryLandsInPlace) {
  for (uint64_t size : {uint64_t{1}, uint64_t{4096}, 3 * kMiB + 77}) {
    Buffer buffer = MustAllocate(size + 100);
    const std::string data = testing::RandomBytes(size + 100, static_cast<uint32_t>(size));
    ASSERT_TRUE(session_->Write(buffer, 0, data).ok());
    std::vector<std::byte> memory(size + 2, std::byte{0xEE});
    absl::Status read = session_->Read(buffer, 100, absl::MakeSpan(memory).subspan(1, size));
    ASSERT_TRUE(read.ok()) << read;
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(memory.data()) + 1, size),
              data.substr(100))
        << size << " bytes";
    EXPECT_EQ(memory.front(), std::byte{0xEE}) << "a byte before the target changed";
    EXPECT_EQ(memory.back(), std::byte{0xEE}) << "a byte past the target changed";
  }
}

// A read into the caller's memory is refused as any read is: past the buffer's end, or
// of another session's buffer; the daemon serves on.
TEST_F(MemoryTest, AReadIntoTheCallersMemoryIsCheckedLikeAnyRead) {
  Buffer buffer = MustAllocate(4096);
  std::vector<std::byte> memory(4097);
  EXPECT_EQ(session_->Read(buffer, 0, absl::MakeSpan(memory)).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session_->Read(buffer, 4096, absl::MakeSpan(memory).first(1)).code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<Session> other = client_->OpenSession(0, "other");
  ASSERT_TRUE(other.ok());
  absl::StatusOr<Buffer> theirs = other->Allocate(64);
  ASSERT_TRUE(theirs.ok());
  EXPECT_EQ(session_->Read(*theirs, 0, absl::MakeSpan(memory).first(16)).code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(session_->Write(buffer, 0, std::string(4096, 'k')).ok());
  ASSERT_TRUE(session_->Read(buffer, 0, absl::MakeSpan(memory).first(4096)).ok());
  EXPECT_EQ(memory[4095], std::byte{'k'});
}

// A write answered once copied is refused as any write is, before anything is queued,
// and an empty one (which queues nothing) answers at once, whatever runs on its stream.
TEST_F(MemoryTest, AWriteAnsweredOnceCopiedIsCheckedLikeAnyWrite) {
  constexpr WriteReturns kCopied = WriteReturns::kWhenCopied;
  Buffer buffer = MustAllocate(16);
  absl::Status past_the_end = session_->Write(buffer, 8, "sixteen bytes...", 0, std::nullopt,
                                              kCopied);
  EXPECT_EQ(past_the_end.code(), absl::StatusCode::kInvalidArgument) << past_the_end;
  ASSERT_TRUE(session_->Write(buffer, 0, "sixteen bytes!!!", 0, std::nullopt, kCopied).ok());
  Buffer freed = MustAllocate(16);
  ASSERT_TRUE(freed.Free().ok());
  EXPECT_EQ(session_->Write(freed, 0, "x", 0, std::nullopt, kCopied).code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(session_->Write(buffer, 16, "", 0, std::nullopt, kCopied).ok());
  EXPECT_EQ(session_->Read(buffer, 0, 16).value_or(""), "sixteen bytes!!!");
}

// Payload memory is pooled and reused (Note [Payload pool]): transfers of growing and
// shrinking sizes, in one message and in several, never mix one payload's bytes into
// another's.
TEST_F(MemoryTest, ReusedPayloadMemoryNeverMixesPayloads) {
  Buffer buffer = MustAllocate(4 * kMiB);
  uint32_t seed = 1;
  for (uint64_t size : {3 * kMiB + 5, 900 * uint64_t{1024}, 700 * uint64_t{1024}, 4 * kMiB,
                        300 * uint64_t{1024}, 2 * kMiB + 1}) {
    std::string data = testing::RandomBytes(size, ++seed);
    ASSERT_TRUE(session_->Write(buffer, 0, data).ok()) << size;
    absl::StatusOr<std::string> read = session_->Read(buffer, 0, size);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_TRUE(*read == data) << size << " bytes came back altered";
  }
}

// Large writes in Submit batches parse into pooled memory (Note [A batch's writes parsed
// into pooled memory] in server/rpc/batch_request.h), strings an earlier payload used:
// batches of writes of growing and shrinking sizes, each read back, never mix one
// payload's bytes into another's.
TEST_F(MemoryTest, BatchedWritesInPooledMemoryNeverMixPayloads) {
  Buffer buffer = MustAllocate(4 * kMiB);
  grpc::ClientContext context;
  auto stream = v1::GpuCommand::NewStub(grpc::CreateChannel(
                    daemon_->grpc_target(), grpc::InsecureChannelCredentials()))
                    ->Submit(&context);
  uint32_t seed = 40;
  for (uint64_t size : {3 * kMiB / 4, 300 * uint64_t{1024}, 700 * uint64_t{1024},
                        900 * uint64_t{1024}, 256 * uint64_t{1024}}) {
    const std::string data = testing::RandomBytes(size, ++seed);
    v1::SubmitRequest batch;
    v1::WriteRequest* write = batch.add_commands()->mutable_write();
    write->mutable_header()->set_session(session_->token());
    write->mutable_header()->set_buffer(buffer.id());
    write->mutable_header()->set_inline_size_bytes(size);
    write->set_data(data);
    batch.add_commands()->mutable_synchronize()->set_session(session_->token());
    ASSERT_TRUE(stream->Write(batch));
    v1::SubmitResponse answer;
    ASSERT_TRUE(stream->Read(&answer));
    ASSERT_EQ(answer.replies_size(), 2);
    EXPECT_EQ(answer.replies(0).status().code(), 0) << answer.replies(0).status().message();
    EXPECT_EQ(answer.replies(0).write().bytes_written(), size);
    absl::StatusOr<std::string> read = session_->Read(buffer, 0, size);
    ASSERT_TRUE(read.ok()) << read.status();
    EXPECT_TRUE(*read == data) << size << " bytes came back altered";
  }
  stream->WritesDone();
  grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// A stub of its own for `session_`'s reads, on a channel whose window does not grow:
// the daemon's answers wait in its transport until they are read.
std::unique_ptr<v1::GpuCommand::Stub> SlowReaderStub(const DaemonProcess& daemon,
                                                     uint64_t max_message_bytes) {
  grpc::ChannelArguments arguments;
  arguments.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  arguments.SetMaxReceiveMessageSize(static_cast<int>(max_message_bytes));
  return v1::GpuCommand::NewStub(grpc::CreateCustomChannel(
      daemon.grpc_target(), grpc::InsecureChannelCredentials(), arguments));
}

// Has `other` write and read `busy` three times over with bytes of its own, taking memory
// of the same size from the payload pool.
void TakePooledMemory(Session& other, const Buffer& busy, uint64_t size, uint32_t seed) {
  for (uint32_t i = 0; i < 3; ++i) {
    std::string other_data = testing::RandomBytes(size, seed + i);
    ASSERT_TRUE(other.Write(busy, 0, other_data).ok());
    EXPECT_TRUE(other.Read(busy, 0, size).value_or("") == other_data);
  }
}

// A read's chunks are sent from its own pooled bytes (Note [Read chunks sent from the
// read's bytes] in server/rpc/read_chunks.h), which go back to the pool only once gRPC
// let go of them: reads whose client holds off reading their answers while another
// session's writes and reads of the same size take memory from the pool still receive
// exactly what the buffer held. Reads above the staging threshold (1 MiB) land in pooled
// memory: in one message (8 MiB allowed) and in several.
TEST_F(MemoryTest, AReadsBytesAreNotReusedWhileItsAnswersAreSent) {
  constexpr uint64_t kLargeMessageBytes = 8 * kMiB;
  ASSERT_NO_FATAL_FAILURE(StartDaemon(kLargeMessageBytes));
  absl::StatusOr<Session> other = client_->OpenSession(0, "other");
  ASSERT_TRUE(other.ok()) << other.status();
  std::unique_ptr<v1::GpuCommand::Stub> stub = SlowReaderStub(*daemon_, kLargeMessageBytes);
  for (uint64_t size : {3 * kMiB + 5, 20 * kMiB + 77}) {
    Buffer held = MustAllocate(size);
    const std::string held_data = testing::RandomBytes(size, 11);
    ASSERT_TRUE(session_->Write(held, 0, held_data).ok());
    absl::StatusOr<Buffer> busy = other->Allocate(size);
    ASSERT_TRUE(busy.ok()) << busy.status();
    v1::ReadRequest request;
    request.set_session(session_->token());
    request.set_buffer(held.id());
    request.set_size_bytes(size);
    for (uint32_t round = 0; round < 3; ++round) {
      grpc::ClientContext context;
      std::unique_ptr<grpc::ClientReader<v1::ReadResponse>> reader =
          stub->Read(&context, request);
      // Unread, the answer waits in gRPC's buffers while other transfers take pooled memory.
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      ASSERT_NO_FATAL_FAILURE(TakePooledMemory(*other, *busy, size, 100 + 10 * round));
      std::string received;
      for (v1::ReadResponse response; reader->Read(&response);) received += response.data();
      grpc::Status status = reader->Finish();
      ASSERT_TRUE(status.ok()) << status.error_message();
      EXPECT_TRUE(received == held_data) << size << " bytes, round " << round << ": altered";
    }
  }
}

// The same for reads in a Submit batch, whose replies are sent from the reads' bytes
// (Note [A batch's reads sent from their bytes] in server/rpc/submit_replies.h): a batch
// of a large read, a small one and another large one, answered in two responses (8 MiB
// allowed), each read receives what its buffer held.
TEST_F(MemoryTest, ABatchsReadBytesAreNotReusedWhileItsAnswersAreSent) {
  constexpr uint64_t kLargeMessageBytes = 8 * kMiB;
  ASSERT_NO_FATAL_FAILURE(StartDaemon(kLargeMessageBytes));
  absl::StatusOr<Session> other = client_->OpenSession(0, "other");
  ASSERT_TRUE(other.ok()) << other.status();
  const std::vector<uint64_t> sizes = {3 * kMiB + 5, 1000, 6 * kMiB + 77};
  v1::SubmitRequest batch;
  std::vector<std::string> held_data;
  std::vector<Buffer> held;
  for (size_t i = 0; i < sizes.size(); ++i) {
    held.push_back(MustAllocate(sizes[i]));
    held_data.push_back(testing::RandomBytes(sizes[i], static_cast<uint32_t>(20 + i)));
    ASSERT_TRUE(session_->Write(held[i], 0, held_data[i]).ok());
    v1::Command* command = batch.add_commands();
    command->set_sequence(i + 1);
    v1::ReadRequest* read = command->mutable_read();
    read->set_session(session_->token());
    read->set_buffer(held[i].id());
    read->set_size_bytes(sizes[i]);
  }
  absl::StatusOr<Buffer> busy = other->Allocate(sizes.back());
  ASSERT_TRUE(busy.ok()) << busy.status();
  std::unique_ptr<v1::GpuCommand::Stub> stub = SlowReaderStub(*daemon_, kLargeMessageBytes);
  grpc::ClientContext context;
  auto stream = stub->Submit(&context);
  for (uint32_t round = 0; round < 3; ++round) {
    ASSERT_TRUE(stream->Write(batch));
    // Unread, the answers wait in gRPC's buffers while other transfers take pooled memory.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    for (uint64_t size : {sizes[0], sizes[2]}) {
      ASSERT_NO_FATAL_FAILURE(TakePooledMemory(*other, *busy, size, 200 + 10 * round));
    }
    std::vector<v1::CommandReply> replies;
    for (v1::SubmitResponse response; stream->Read(&response);) {
      replies.insert(replies.end(), response.replies().begin(), response.replies().end());
      if (response.batch_done()) break;
    }
    ASSERT_EQ(replies.size(), sizes.size()) << "round " << round;
    for (size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_EQ(replies[i].status().code(), 0) << replies[i].status().message();
      EXPECT_EQ(replies[i].read().total_bytes(), sizes[i]);
      EXPECT_TRUE(replies[i].read().data() == held_data[i])
          << sizes[i] << " bytes, round " << round << ": altered";
    }
  }
  stream->WritesDone();
  grpc::Status status = stream->Finish();
  EXPECT_TRUE(status.ok()) << status.error_message();
}

// Continuation messages of a Write are read as protobuf reads them, whatever shape a
// client's encoder gives them: an unknown field after the bytes is ignored, a `data`
// field sent twice counts once (the last), an empty message adds nothing; a header in a
// continuation is refused.
TEST_F(MemoryTest, WriteContinuationsParseAsProtobufDoes) {
  Buffer buffer = MustAllocate(12);
  auto header_message = [&](uint64_t size, const std::string& data) {
    v1::WriteRequest request;
    request.mutable_header()->set_session(session_->token());
    request.mutable_header()->set_buffer(buffer.id());
    request.mutable_header()->set_inline_size_bytes(size);
    request.set_data(data);
    return request.SerializeAsString();
  };
  auto data_message = [](const std::string& data) {
    v1::WriteRequest request;
    request.set_data(data);
    return request.SerializeAsString();
  };
  v1::WriteRequest with_unknown_field;
  with_unknown_field.set_data("CD");
  with_unknown_field.GetReflection()->MutableUnknownFields(&with_unknown_field)->AddVarint(99, 7);
  std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(
      GrpcTarget(daemon_->grpc_target()), grpc::InsecureChannelCredentials());
  const std::string kWrite = "/gpucmd.v1.GpuCommand/Write";

  grpc::Status written = testing::CallWithRawBodies(
      channel, kWrite,
      {header_message(12, "AB"), with_unknown_field.SerializeAsString(),
       data_message("xxxxxxxx") + data_message("EF"), std::string(),
       data_message("GHIJKL")});
  ASSERT_TRUE(written.ok()) << written.error_message();
  absl::StatusOr<std::string> read = session_->Read(buffer, 0, 12);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "ABCDEFGHIJKL");
  // A header with no bytes, then only continuations.
  written = testing::CallWithRawBodies(
      channel, kWrite, {header_message(12, ""), data_message("abcdef"), data_message("ghijkl")});
  ASSERT_TRUE(written.ok()) << written.error_message();
  read = session_->Read(buffer, 0, 12);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "abcdefghijkl");

  // A header without bytes before megabytes of continuations: the payload gets its whole
  // room at the header, and every continuation lands in it.
  Buffer large = MustAllocate(6 * kMiB);
  const std::string bytes = testing::RandomBytes(6 * kMiB, 17);
  std::vector<std::string> bodies;
  {
    v1::WriteRequest request;
    request.mutable_header()->set_session(session_->token());
    request.mutable_header()->set_buffer(large.id());
    request.mutable_header()->set_inline_size_bytes(bytes.size());
    bodies.push_back(request.SerializeAsString());
  }
  for (size_t offset = 0; offset < bytes.size(); offset += kMiB / 2) {
    bodies.push_back(data_message(bytes.substr(offset, kMiB / 2)));
  }
  written = testing::CallWithRawBodies(channel, kWrite, bodies);
  ASSERT_TRUE(written.ok()) << written.error_message();
  EXPECT_EQ(session_->Read(large, 0, bytes.size()).value(), bytes);

  grpc::Status second_header = testing::CallWithRawBodies(
      channel, kWrite, {header_message(4, "zz"), header_message(4, "zz")});
  EXPECT_EQ(second_header.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(second_header.error_message(), HasSubstr("only the first message has a header"));
  grpc::Status too_many = testing::CallWithRawBodies(
      channel, kWrite, {header_message(4, "zz"), data_message("zzz")});
  EXPECT_EQ(too_many.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(too_many.error_message(), HasSubstr("more than the 4 bytes it declared"));
  // Continuations whose `data` length claims more than the message holds (the tag of
  // `data`, a length, two bytes): past the message's own length, within it but past its
  // end (two of the three bytes are there), and past 2^31.
  for (const std::string& lying_length :
       {std::string("\x12\x08zz", 4), std::string("\x12\x03zz", 4),
        std::string("\x12\x80\x80\x80\x80\x08zz", 8)}) {
    grpc::Status malformed = testing::CallWithRawBodies(
        channel, kWrite, {header_message(12, "zz"), lying_length});
    EXPECT_EQ(malformed.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(malformed.error_message(), HasSubstr("could not be parsed"));
  }
  read = session_->Read(buffer, 0, 12);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(*read, "abcdefghijkl") << "refused writes wrote nothing";
}

TEST_F(MemoryTest, PitchedWriteAndRead) {
  Buffer buffer = MustAllocate(4096);
  ASSERT_TRUE(session_->Write(buffer, 0, std::string(4096, '.')).ok());
  Pitched pitched{.width_bytes = 100, .height = 10, .stride_bytes = 256};
  std::string rows = testing::RandomBytes(1000, 11);
  ASSERT_TRUE(session_->Write(buffer, 64, rows, 0, pitched).ok());
  EXPECT_EQ(session_->ReadPitched(buffer, 64, pitched).value(), rows);
  std::string whole = session_->Read(buffer, 0, 4096).value();
  EXPECT_EQ(whole.substr(0, 64), std::string(64, '.'));
  EXPECT_EQ(whole.substr(64 + 100, 156), std::string(156, '.')) << "padding was overwritten";
  EXPECT_EQ(whole.substr(64 + 256, 100), rows.substr(100, 100));
}

TEST_F(MemoryTest, CrossStreamWriteThenReadAndCopy) {
  Buffer a = MustAllocate(2 * kMiB);
  Buffer b = MustAllocate(2 * kMiB);
  std::string data = testing::RandomBytes(2 * kMiB, 5);
  ASSERT_TRUE(session_->Write(a, 0, data, /*stream=*/1).ok());
  ASSERT_TRUE(session_->Copy(a, 0, b, 0, 2 * kMiB, /*stream=*/2).ok());
  EXPECT_EQ(session_->Read(b, 0, 2 * kMiB, /*stream=*/3).value(), data);
  EXPECT_TRUE(session_->Synchronize().ok());
  EXPECT_TRUE(session_->Synchronize(2).ok());
}

// Fill sets a range on the device in 1-, 2- and 4-byte elements, ordered after a write
// on another stream; its bad shapes, foreign buffers and unknown sessions get the right
// status and leave the buffer as it was.
TEST_F(MemoryTest, FillSetsARangeOnTheDeviceAndRefusesWhatItCannotTake) {
  constexpr uint64_t kSize = 3 * kMiB;
  Buffer buffer = MustAllocate(kSize);
  std::string expected = testing::RandomBytes(kSize, 21);
  ASSERT_TRUE(session_->Write(buffer, 0, expected, /*stream=*/1).ok());
  ASSERT_TRUE(session_->Fill(buffer, 0, kMiB, 0, 1, /*stream=*/2).ok());
  ASSERT_TRUE(session_->Fill(buffer, kMiB, 1000, 0xabcd, 2, /*stream=*/2).ok());
  ASSERT_TRUE(session_->Fill(buffer, 2 * kMiB, 4096, 0x3f800000, 4).ok());  // 1.0f
  std::fill_n(expected.begin(), kMiB, '\0');
  for (uint64_t i = 0; i < 500; ++i) expected.replace(kMiB + 2 * i, 2, "\xcd\xab");
  for (uint64_t i = 0; i < 1024; ++i)
    expected.replace(2 * kMiB + 4 * i, 4, std::string("\0\0\x80\x3f", 4));
  EXPECT_EQ(session_->Read(buffer, 0, kSize, /*stream=*/3).value(), expected);
  // element_bytes 0 reads as 1, as the proto says.
  ASSERT_TRUE(session_->Fill(buffer, 3, 5, 0x5a, /*element_bytes=*/0).ok());
  expected.replace(3, 5, std::string(5, '\x5a'));
  EXPECT_EQ(session_->Read(buffer, 0, 16).value(), expected.substr(0, 16));

  EXPECT_EQ(session_->Fill(buffer, kSize - 4, 8, 0, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session_->Fill(buffer, 0, 8, 0x100, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session_->Fill(buffer, 0, 6, 0, 4).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session_->Fill(buffer, 0, 6, 0, 3).code(), absl::StatusCode::kInvalidArgument);
  absl::Status overflow = session_->Fill(buffer, ~uint64_t{0} - 3, 8, 0, 4);
  EXPECT_EQ(overflow.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(overflow.message()), HasSubstr("overflow"));
  absl::StatusOr<Session> other = client_->OpenSession(0, "other");
  ASSERT_TRUE(other.ok());
  absl::StatusOr<Buffer> theirs = other->Allocate(64);
  ASSERT_TRUE(theirs.ok());
  EXPECT_EQ(session_->Fill(*theirs, 0, 8, 0).code(), absl::StatusCode::kNotFound);
  grpc::ClientContext context;
  v1::FillRequest unknown_session;
  unknown_session.set_session("0123456789abcdef0123456789abcdef");
  unknown_session.set_buffer(buffer.id());
  unknown_session.set_size_bytes(8);
  v1::FillResponse filled;
  EXPECT_EQ(client_->stub().Fill(&context, unknown_session, &filled).error_code(),
            grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(session_->Read(buffer, 0, kSize).value(), expected) << "a refused fill wrote";
  EXPECT_EQ(other->Read(*theirs, 0, 64).value(), std::string(64, '\0'));
}

// A pitched fill (cudaMemset2D) sets each row's width and leaves the padding between
// rows; the pitched shapes it cannot take are refused, naming what is wrong, and write
// nothing.
TEST_F(MemoryTest, PitchedFillSetsItsRowsAndLeavesThePadding) {
  constexpr uint64_t kWidth = 3000, kHeight = 300, kStride = 4096, kOffset = 8192;
  constexpr uint64_t kSize = kOffset + kHeight * kStride;
  Buffer buffer = MustAllocate(kSize);
  std::string expected = testing::RandomBytes(kSize, 22);
  ASSERT_TRUE(session_->Write(buffer, 0, expected, /*stream=*/1).ok());
  ASSERT_TRUE(
      session_->Fill(buffer, kOffset, Pitched{kWidth, kHeight, kStride}, 0xfeed, 2, /*stream=*/2)
          .ok());
  for (uint64_t row = 0; row < kHeight; ++row) {
    for (uint64_t i = 0; i < kWidth / 2; ++i) {
      expected.replace(kOffset + row * kStride + 2 * i, 2, "\xed\xfe");
    }
  }
  EXPECT_EQ(session_->Read(buffer, 0, kSize, /*stream=*/3).value(), expected);

  struct Refused {
    uint64_t offset;
    Pitched rows;
    uint32_t element_bytes;
    std::string says;
  };
  for (const Refused& bad : {
           Refused{0, {8, 3, 10}, 4, "stride 10"},
           Refused{0, {6, 3, 8}, 4, "row width 6"},
           Refused{0, {16, 3, 8}, 1, "smaller than width_bytes"},
           Refused{kSize - 4096, {8, 2, 4096}, 1, "out of bounds"},
           Refused{0, {8, 3, ~uint64_t{0} / 2}, 1, "overflows"},
       }) {
    absl::Status refused = session_->Fill(buffer, bad.offset, bad.rows, 0, bad.element_bytes);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << bad.says;
    EXPECT_THAT(std::string(refused.message()), HasSubstr(bad.says));
  }
  // A size and a layout together name no one range.
  v1::FillRequest both;
  both.set_session(session_->token());
  both.set_buffer(buffer.id());
  both.set_size_bytes(16);
  both.mutable_pitched()->set_width_bytes(8);
  both.mutable_pitched()->set_height(2);
  both.mutable_pitched()->set_stride_bytes(8);
  grpc::ClientContext context;
  v1::FillResponse filled;
  const grpc::Status refused = client_->stub().Fill(&context, both, &filled);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("not both"));
  EXPECT_EQ(session_->Read(buffer, 0, kSize).value(), expected) << "a refused fill wrote";
}

// A pitched device-to-device copy through the daemon: a column block of one matrix into
// another of a different pitch, and between the columns of one buffer; each refusal
// names what is wrong and writes nothing.
TEST_F(MemoryTest, PitchedCopyMovesItsRowsAndLeavesThePadding) {
  constexpr uint64_t kWidth = 3000, kHeight = 300, kSourceStride = 4096, kTargetStride = 3072;
  constexpr uint64_t kSize = kHeight * kSourceStride;
  Buffer source = MustAllocate(kSize);
  Buffer target = MustAllocate(kSize);
  std::string from = testing::RandomBytes(kSize, 23);
  std::string expected = testing::RandomBytes(kSize, 24);
  ASSERT_TRUE(session_->Write(source, 0, from, /*stream=*/1).ok());
  ASSERT_TRUE(session_->Write(target, 0, expected, /*stream=*/1).ok());
  ASSERT_TRUE(session_
                  ->Copy(source, 96, target, 40,
                         CopyRows{kWidth, kHeight - 1, kSourceStride, kTargetStride},
                         /*stream=*/2)
                  .ok());
  for (uint64_t row = 0; row + 1 < kHeight; ++row) {
    expected.replace(40 + row * kTargetStride, kWidth, from, 96 + row * kSourceStride, kWidth);
  }
  EXPECT_EQ(session_->Read(target, 0, kSize, /*stream=*/3).value(), expected);

  // Columns [0, 1024) of each row onto columns [2048, 3072) of the same rows.
  ASSERT_TRUE(
      session_->Copy(source, 0, source, 2048, CopyRows{1024, kHeight, kSourceStride, kSourceStride})
          .ok());
  for (uint64_t row = 0; row < kHeight; ++row) {
    from.replace(2048 + row * kSourceStride, 1024, from, row * kSourceStride, 1024);
  }
  EXPECT_EQ(session_->Read(source, 0, kSize).value(), from);

  struct Refused {
    const Buffer* to;
    uint64_t target_offset;
    CopyRows rows;
    std::string says;
  };
  for (const Refused& bad : {
           Refused{&source, 512, {1024, 4, kSourceStride, kSourceStride}, "overlaps the target"},
           Refused{&source, 1024, {1024, 4, kSourceStride, 2 * kSourceStride}, "overlaps"},
           Refused{&target, 0, {16, 3, 8, 16}, "source_stride_bytes 8 is smaller"},
           Refused{&target, kSize - 4096, {8, 2, 8, 4096}, "out of bounds"},
           Refused{&target, 0, {8, 3, 8, ~uint64_t{0} / 2}, "overflows"},
       }) {
    absl::Status refused = session_->Copy(source, 0, *bad.to, bad.target_offset, bad.rows);
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << bad.says;
    EXPECT_THAT(std::string(refused.message()), HasSubstr(bad.says));
  }
  v1::CopyRequest both;
  both.set_session(session_->token());
  both.set_source_buffer(source.id());
  both.set_target_buffer(target.id());
  both.set_size_bytes(16);
  both.mutable_pitched()->set_width_bytes(8);
  both.mutable_pitched()->set_height(2);
  both.mutable_pitched()->set_source_stride_bytes(8);
  both.mutable_pitched()->set_target_stride_bytes(8);
  grpc::ClientContext context;
  v1::CopyResponse copied;
  const grpc::Status refused = client_->stub().Copy(&context, both, &copied);
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(refused.error_message(), HasSubstr("not both"));
  EXPECT_EQ(session_->Read(source, 0, kSize).value(), from) << "a refused copy wrote";
  EXPECT_EQ(session_->Read(target, 0, kSize).value(), expected) << "a refused copy wrote";
}

TEST_F(MemoryTest, StatsShowTheSessionAndDevice) {
  Buffer buffer = MustAllocate(3 * kMiB);
  absl::StatusOr<v1::GetStatsResponse> stats = session_->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->session().client_name(), "memory-test");
  EXPECT_EQ(stats->session().buffers(), 1u);
  EXPECT_GE(stats->session().memory_used_bytes(), 3 * kMiB);
  EXPECT_GE(stats->devices(0).memory_used_bytes(), 3 * kMiB);
  EXPECT_GE(stats->devices(0).memory_reserved_bytes(), stats->devices(0).memory_used_bytes());
  EXPECT_EQ(stats->sessions_open(), 1u);

  CommandResult ctl = RunCommand({RunfilePath("client/gpucmdctl"),
                                  "--target=" + daemon_->grpc_target(), "stats"});
  EXPECT_EQ(ctl.exit_code, 0) << ctl.stderr_text;
  EXPECT_THAT(ctl.stdout_text, HasSubstr("1 session(s) open"));
  EXPECT_THAT(ctl.stdout_text, HasSubstr("64.0 MiB"));

  absl::StatusOr<testing::HttpResponse> metrics =
      testing::HttpGet(daemon_->http_host(), daemon_->http_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(metrics->body, HasSubstr("gpucmd_memory_used_bytes{device=\"0\"} 3145728"))
      << "a 3 MiB buffer gets a page of its own, exactly 3 MiB";
  EXPECT_THAT(metrics->body, HasSubstr("gpucmd_memory_reserved_bytes{device=\"0\"}"));
}

TEST_F(MemoryTest, DefragmentKeepsBuffersIntact) {
  std::vector<Buffer> buffers;
  std::vector<std::string> data;
  for (int i = 0; i < 300; ++i) buffers.push_back(MustAllocate(4096));
  for (int i = 0; i < 300; i += 30) {
    data.push_back(testing::RandomBytes(4096, i));
    ASSERT_TRUE(session_->Write(buffers[i], 0, data.back()).ok());
  }
  for (int i = 0; i < 300; ++i) {
    if (i % 30 != 0) {
      ASSERT_TRUE(buffers[i].Free().ok());
    }
  }
  grpc::ClientContext context;
  v1::DefragmentRequest request;
  v1::DefragmentResponse response;
  ASSERT_TRUE(client_->stub().Defragment(&context, request, &response).ok());
  for (int i = 0, k = 0; i < 300; i += 30, ++k) {
    EXPECT_EQ(session_->Read(buffers[i], 0, 4096).value(), data[k]) << "buffer " << i;
  }
}

TEST_F(MemoryTest, BadInputGetsTheRightStatusAndTheDaemonServesOn) {
  Buffer buffer = MustAllocate(1000);
  // Out of bounds: offset, size, and a pitched extent.
  EXPECT_EQ(session_->Write(buffer, 999, "ab").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session_->Read(buffer, 1001, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(session_->Read(buffer, 0, 1001).status().code(), absl::StatusCode::kInvalidArgument);
  // Rows at stride 300 from offset 1 end one byte past the buffer.
  EXPECT_EQ(session_->Write(buffer, 1, std::string(400, 'x'), 0,
                            Pitched{.width_bytes = 100, .height = 4, .stride_bytes = 300})
                .code(),
            absl::StatusCode::kInvalidArgument);
  // A stride smaller than the width.
  absl::Status stride = session_->Write(buffer, 0, std::string(200, 'x'), 0,
                                        Pitched{.width_bytes = 100, .height = 2, .stride_bytes = 50});
  EXPECT_EQ(stride.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(stride.message()), HasSubstr("smaller than width_bytes"));
  // Zero sizes: allocating nothing is an error, moving nothing is a no-op.
  EXPECT_EQ(session_->Allocate(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(session_->Write(buffer, 1000, "").ok());
  EXPECT_EQ(session_->Read(buffer, 1000, 0).value(), "");
  // Unknown and foreign handles.
  absl::StatusOr<Session> other = client_->OpenSession(0, "other");
  ASSERT_TRUE(other.ok());
  absl::StatusOr<Buffer> theirs = other->Allocate(64);
  ASSERT_TRUE(theirs.ok());
  EXPECT_EQ(session_->Read(*theirs, 0, 8).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(session_->Write(*theirs, 0, "x").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(session_->Copy(buffer, 0, *theirs, 0, 8).code(), absl::StatusCode::kNotFound);
  // Freeing twice.
  uint64_t id = buffer.id();
  ASSERT_TRUE(buffer.Free().ok());
  grpc::ClientContext free_context;
  v1::FreeRequest free_again;
  free_again.set_session(session_->token());
  free_again.set_buffer(id);
  v1::FreeResponse freed;
  EXPECT_EQ(client_->stub().Free(&free_context, free_again, &freed).error_code(),
            grpc::StatusCode::NOT_FOUND);
  // An unknown session.
  grpc::ClientContext allocate_context;
  v1::AllocateRequest allocate;
  allocate.set_session("0123456789abcdef0123456789abcdef");
  allocate.set_size_bytes(8);
  v1::AllocateResponse allocated;
  EXPECT_EQ(client_->stub().Allocate(&allocate_context, allocate, &allocated).error_code(),
            grpc::StatusCode::NOT_FOUND);
  // More than the device holds: RESOURCE_EXHAUSTED naming requested and available.
  absl::Status too_big = session_->Allocate(kDeviceBytes + 1).status();
  EXPECT_EQ(too_big.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(too_big.message()), HasSubstr("requested 67108865 bytes"));
  EXPECT_THAT(std::string(too_big.message()), HasSubstr("available"));
  // Still serving, data intact.
  Buffer fine = MustAllocate(16);
  ASSERT_TRUE(session_->Write(fine, 0, "0123456789abcdef").ok());
  EXPECT_EQ(session_->Read(fine, 0, 16).value(), "0123456789abcdef");
}

TEST_F(MemoryTest, FillingTheDeviceIsResourceExhaustedThenRecovers) {
  std::vector<Buffer> held;
  absl::Status full;
  while (full.ok()) {
    absl::StatusOr<Buffer> buffer = session_->Allocate(4 * kMiB);
    if (buffer.ok()) {
      held.push_back(*std::move(buffer));
    } else {
      full = buffer.status();
    }
    ASSERT_LE(held.size(), kDeviceBytes / (4 * kMiB));
  }
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(full.message()), HasSubstr("out of device memory"));
  held.clear();
  EXPECT_TRUE(session_->Allocate(32 * kMiB).ok());
}

TEST_F(MemoryTest, ClosingASessionReturnsItsMemory) {
  uint64_t baseline = DeviceUsedBytes();
  absl::StatusOr<Session> other = client_->OpenSession(0, "short-lived");
  ASSERT_TRUE(other.ok());
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(other->Allocate(kMiB).value().Release() > 0);
  EXPECT_GE(DeviceUsedBytes(), baseline + 4 * kMiB);
  ASSERT_TRUE(other->Close().ok());
  EXPECT_EQ(DeviceUsedBytes(), baseline);
}

TEST_F(MemoryTest, ClientThatDisconnectsMidStreamGetsItsMemoryReclaimed) {
  uint64_t baseline = DeviceUsedBytes();
  {
    // A client on its own connection, using the raw stubs so it can die abruptly.
    std::shared_ptr<grpc::Channel> channel = grpc::CreateChannel(
        GrpcTarget(daemon_->grpc_target()), grpc::InsecureChannelCredentials());
    std::unique_ptr<v1::GpuCommand::Stub> stub = v1::GpuCommand::NewStub(channel);
    grpc::ClientContext open_context;
    v1::OpenSessionRequest open;
    v1::OpenSessionResponse opened;
    ASSERT_TRUE(stub->OpenSession(&open_context, open, &opened).ok());

    grpc::ClientContext lease_context;
    auto lease = stub->KeepAlive(&lease_context);
    v1::KeepAliveRequest hello;
    hello.set_session(opened.session());
    v1::KeepAliveResponse ack;
    ASSERT_TRUE(lease->Write(hello) && lease->Read(&ack));

    grpc::ClientContext allocate_context;
    v1::AllocateRequest allocate;
    allocate.set_session(opened.session());
    allocate.set_size_bytes(8 * kMiB);
    v1::AllocateResponse allocated;
    ASSERT_TRUE(stub->Allocate(&allocate_context, allocate, &allocated).ok());
    EXPECT_GE(DeviceUsedBytes(), baseline + 8 * kMiB);

    // Half of a declared write, then the client vanishes.
    grpc::ClientContext write_context;
    v1::WriteResponse written;
    auto writer = stub->Write(&write_context, &written);
    v1::WriteRequest first;
    first.mutable_header()->set_session(opened.session());
    first.mutable_header()->set_buffer(allocated.buffer());
    first.mutable_header()->set_inline_size_bytes(2 * kMiB);
    first.set_data(std::string(kMiB / 2, 'x'));
    ASSERT_TRUE(writer->Write(first));
    write_context.TryCancel();
    lease_context.TryCancel();
  }
  // The lease broke: after its grace (1 s here) the session's memory comes back.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (DeviceUsedBytes() != baseline && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(DeviceUsedBytes(), baseline);
  EXPECT_EQ(client_->GetStats()->sessions_open(), 1u) << "only this test's session is left";
  EXPECT_TRUE(session_->Allocate(16).ok()) << "the daemon serves on";
}

TEST_F(MemoryTest, ManySessionsConcurrently) {
  constexpr int kClients = 6;
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  for (int c = 0; c < kClients; ++c) {
    threads.emplace_back([&, c] {
      absl::StatusOr<Session> session = client_->OpenSession(0, "worker");
      if (!session.ok()) {
        ++failures;
        return;
      }
      for (int i = 0; i < 10; ++i) {
        uint64_t size = 10000 + 1000 * i + c;
        absl::StatusOr<Buffer> buffer = session->Allocate(size);
        std::string data = testing::RandomBytes(size, c * 100 + i);
        if (!buffer.ok() || !session->Write(*buffer, 0, data, i % 3).ok() ||
            session->Read(*buffer, 0, size, (i + 1) % 3).value_or("") != data) {
          ++failures;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(failures, 0);
}

// Sessions that end with a write still staged leave nothing behind: an idle daemon
// releases the staged bytes and the memory once the copies ran, with no further command.
TEST_F(MemoryTest, EndedSessionsLeaveNoStagedBytesOrMemory) {
  session_.reset();  // only the sessions below
  for (int i = 0; i < 40; ++i) {
    absl::StatusOr<Session> session = client_->OpenSession(0, "short-lived");
    ASSERT_TRUE(session.ok()) << session.status();
    absl::StatusOr<Buffer> buffer = session->Allocate(kMiB);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    ASSERT_TRUE(session->Write(*buffer, 0, testing::RandomBytes(kMiB, i)).ok());
    ASSERT_TRUE(session->Close().ok());
  }
  uint64_t staged = 0, used = 0;
  for (auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(30);
       std::chrono::steady_clock::now() < give_up;
       std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    absl::StatusOr<v1::GetStatsResponse> stats = client_->GetStats();
    ASSERT_TRUE(stats.ok()) << stats.status();
    staged = stats->devices(0).drop_queue_bytes();
    used = stats->devices(0).memory_used_bytes();
    if (staged == 0 && used == 0) break;
  }
  EXPECT_EQ(staged, 0u) << "staged bytes held after every session ended";
  EXPECT_EQ(used, 0u) << "device memory held after every session ended";
  auto metrics = testing::HttpGet(daemon_->http_host(), daemon_->http_port(), "/metrics");
  ASSERT_TRUE(metrics.ok()) << metrics.status();
  EXPECT_THAT(metrics->body, HasSubstr("gpucmd_drop_queue_bytes{device=\"0\"} 0\n"));
  EXPECT_THAT(metrics->body, HasSubstr("gpucmd_stream_queued_commands{device=\"0\"} 0\n"));
  EXPECT_THAT(metrics->body, HasSubstr("gpucmd_memory_used_bytes{device=\"0\"} 0\n"));
}

// A batch's replies that together pass the message limit come in several responses,
// each under it (the client's limit is the daemon's), the last saying batch_done; a read
// that cannot fit one response is INVALID_ARGUMENT naming the limit, and the batch's
// other commands still run. (Once, one such batch ended the whole call.)
TEST_F(MemoryTest, BatchRepliesComeUnderTheMessageLimit) {
  constexpr uint64_t kReadBytes = 600 << 10;
  Buffer buffer = MustAllocate(kMiB);
  const std::string bytes = testing::RandomBytes(kMiB, 21);
  ASSERT_TRUE(session_->Write(buffer, 0, bytes).ok());
  for (bool stream_replies : {false, true}) {
    v1::SubmitRequest batch;
    batch.set_stream_replies(stream_replies);
    for (int i = 0; i < 5; ++i) {
      v1::Command* command = batch.add_commands();
      command->set_sequence(i);
      command->mutable_read()->set_session(session_->token());
      command->mutable_read()->set_buffer(buffer.id());
      command->mutable_read()->set_offset_bytes(i * 1000);
      command->mutable_read()->set_size_bytes(kReadBytes);
    }
    v1::Command* whole = batch.add_commands();
    whole->set_sequence(5);
    *whole->mutable_read() = batch.commands(0).read();
    whole->mutable_read()->set_size_bytes(kMiB);  // a message's worth: no room for framing
    v1::Command* allocate = batch.add_commands();
    allocate->set_sequence(6);
    allocate->mutable_allocate()->set_session(session_->token());
    allocate->mutable_allocate()->set_size_bytes(64);

    grpc::ClientContext context;
    auto stream = client_->stub().Submit(&context);
    ASSERT_TRUE(stream->Write(batch));
    stream->WritesDone();
    std::vector<v1::CommandReply> replies;
    int responses = 0;
    bool done = false;
    v1::SubmitResponse response;
    while (stream->Read(&response)) {
      ++responses;
      EXPECT_FALSE(done) << "a response after the one that said batch_done";
      done = response.batch_done();
      replies.insert(replies.end(), response.replies().begin(), response.replies().end());
    }
    grpc::Status finished = stream->Finish();
    ASSERT_TRUE(finished.ok()) << finished.error_message();
    EXPECT_TRUE(done);
    EXPECT_GE(responses, 3) << "five reads of 600 KiB in responses of at most 1 MiB";
    ASSERT_EQ(replies.size(), 7u);
    for (int i = 0; i < 5; ++i) {
      EXPECT_EQ(replies[i].sequence(), static_cast<uint64_t>(i));
      EXPECT_EQ(replies[i].status().code(), 0) << replies[i].status().message();
      EXPECT_TRUE(replies[i].read().data() == bytes.substr(i * 1000, kReadBytes)) << i;
    }
    EXPECT_EQ(replies[5].status().code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_THAT(replies[5].status().message(), HasSubstr("limits.max_message_bytes"));
    EXPECT_EQ(replies[6].status().code(), 0) << replies[6].status().message();
    EXPECT_NE(replies[6].allocate().buffer(), 0u);
  }
}

// Note [Replies the client does not read]: a client that sends batches and never reads
// their answers stops getting batches run once a few answers wait, instead of the daemon
// running all of them and holding every answer.
TEST_F(MemoryTest, BatchesWhoseAnswersAreNotReadWaitForTheirReader) {
  constexpr int kBatches = 200;
  Buffer buffer = MustAllocate(kMiB);
  grpc::ClientContext context;
  auto stream = client_->stub().Submit(&context);
  std::thread sender([&] {
    for (int i = 0; i < kBatches; ++i) {
      // An allocation to count the batches that ran, and a read that fills the answer.
      v1::SubmitRequest batch;
      v1::Command* allocate = batch.add_commands();
      allocate->set_sequence(0);
      allocate->mutable_allocate()->set_session(session_->token());
      allocate->mutable_allocate()->set_size_bytes(4096);
      v1::Command* read = batch.add_commands();
      read->set_sequence(1);
      read->mutable_read()->set_session(session_->token());
      read->mutable_read()->set_buffer(buffer.id());
      read->mutable_read()->set_size_bytes(900 << 10);
      if (!stream->Write(batch)) return;  // cancelled below
    }
  });
  // Until the number of buffers stops growing.
  uint64_t buffers = 0;
  for (int settled = 0; settled < 10;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    absl::StatusOr<v1::GetStatsResponse> stats = client_->GetStats(session_->token());
    ASSERT_TRUE(stats.ok()) << stats.status();
    settled = stats->session().buffers() == buffers ? settled + 1 : 0;
    buffers = stats->session().buffers();
  }
  EXPECT_LT(buffers, 1u + kBatches / 2) << "batches ran with nobody reading their answers";
  context.TryCancel();
  sender.join();
  stream->Finish();
  Buffer fine = MustAllocate(16);
  ASSERT_TRUE(session_->Write(fine, 0, "0123456789abcdef").ok());
  EXPECT_EQ(session_->Read(fine, 0, 16).value(), "0123456789abcdef");
}

// A session may move (into a struct, a container) while its buffers are in use; a buffer
// that outlives its session, and a call on a closed session, are no crash.
TEST_F(MemoryTest, BuffersStayValidWhenTheirSessionMoves) {
  absl::StatusOr<Session> opened = client_->OpenSession(0, "moved");
  ASSERT_TRUE(opened.ok()) << opened.status();
  absl::StatusOr<Buffer> buffer = opened->Allocate(4096);
  ASSERT_TRUE(buffer.ok()) << buffer.status();
  absl::StatusOr<Buffer> outliving = opened->Allocate(4096);
  ASSERT_TRUE(outliving.ok()) << outliving.status();
  const std::string token = opened->token();
  std::vector<Session> sessions;
  sessions.push_back(*std::move(opened));
  opened = absl::UnknownError("moved from");  // the Session it came from is gone
  ASSERT_TRUE(sessions[0].Write(*buffer, 0, "abcd").ok());
  EXPECT_EQ(sessions[0].Read(*buffer, 0, 4).value(), "abcd");
  ASSERT_TRUE(buffer->Free().ok());
  EXPECT_EQ(client_->GetStats(token)->session().buffers(), 1u) << "the free went nowhere";

  ASSERT_TRUE(sessions[0].Close().ok());
  EXPECT_EQ(sessions[0].Allocate(16).status().code(), absl::StatusCode::kNotFound);
  sessions.clear();
  EXPECT_TRUE(outliving->Free().ok()) << "gone with its session: nothing left to free";
}

// A session and its buffers may outlive the Client that opened them (a struct declaring
// its client after its session destroys them in that order): they share its connection.
TEST_F(MemoryTest, ASessionMayOutliveTheClientThatOpenedIt) {
  std::optional<Session> session;
  std::optional<Buffer> buffer;
  {
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon_->grpc_target());
    ASSERT_TRUE(client.ok()) << client.status();
    absl::StatusOr<Session> opened = (*client)->OpenSession(0, "outliving");
    ASSERT_TRUE(opened.ok()) << opened.status();
    session.emplace(*std::move(opened));
    absl::StatusOr<Buffer> allocated = session->Allocate(16);
    ASSERT_TRUE(allocated.ok()) << allocated.status();
    buffer.emplace(*std::move(allocated));
  }
  ASSERT_TRUE(session->Write(*buffer, 0, "0123456789abcdef").ok());
  EXPECT_EQ(session->Read(*buffer, 0, 16).value_or(""), "0123456789abcdef");
  const std::string token = session->token();
  EXPECT_TRUE(buffer->Free().ok());
  EXPECT_EQ(client_->GetStats(token)->session().buffers(), 0u);
  session.reset();
  EXPECT_EQ(client_->GetStats(token).status().code(), absl::StatusCode::kNotFound)
      << "destroying the session closed it";
}

uint64_t ResidentBytes(pid_t pid) {
  uint64_t size = 0, resident = 0;
  std::ifstream("/proc/" + std::to_string(pid) + "/statm") >> size >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

// Note [Freed memory goes back]: the memory of a burst (here the answers of several
// clients that stopped reading, then cancelled) goes back to the system once the daemon
// is quiet, instead of staying in malloc's heaps at its peak. What stays is the device's
// cache of staging memory (CommandOptions::max_cached_pinned_bytes, 64 MiB).
TEST_F(MemoryTest, TheMemoryOfABurstGoesBackOnceQuiet) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer's allocator holds freed memory in its quarantine";
#endif
  constexpr int kClients = 4;
  constexpr int kBatches = 8;
  constexpr int kReadsPerBatch = 64;
  constexpr uint64_t kStagingCacheBytes = 64 * kMiB;
  struct Reader {
    Session session;
    Buffer buffer;
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReaderWriter<v1::SubmitRequest, v1::SubmitResponse>> stream;
  };
  std::vector<std::unique_ptr<Reader>> readers;
  for (int i = 0; i < kClients; ++i) {
    absl::StatusOr<Session> session = client_->OpenSession(0, "burst");
    ASSERT_TRUE(session.ok()) << session.status();
    absl::StatusOr<Buffer> buffer = session->Allocate(kMiB);
    ASSERT_TRUE(buffer.ok()) << buffer.status();
    readers.push_back(std::unique_ptr<Reader>(new Reader{*std::move(session), *std::move(buffer)}));
  }
  const uint64_t quiet_bytes = ResidentBytes(daemon_->pid());
  for (auto& reader : readers) {
    reader->stream = client_->stub().Submit(&reader->context);
    for (int i = 0; i < kBatches; ++i) {
      v1::SubmitRequest batch;
      for (int j = 0; j < kReadsPerBatch; ++j) {
        v1::Command* read = batch.add_commands();
        read->set_sequence(j);
        read->mutable_read()->set_session(reader->session.token());
        read->mutable_read()->set_buffer(reader->buffer.id());
        read->mutable_read()->set_size_bytes(900 << 10);
      }
      ASSERT_TRUE(reader->stream->Write(batch));
    }
  }
  // Until the daemon stops growing: the batches it ran hold their answers.
  uint64_t peak_bytes = 0;
  for (int settled = 0; settled < 5;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const uint64_t now = ResidentBytes(daemon_->pid());
    settled = now > peak_bytes ? 0 : settled + 1;
    peak_bytes = std::max(peak_bytes, now);
  }
  for (auto& reader : readers) {
    reader->context.TryCancel();
    reader->stream->Finish();
  }
  const uint64_t kept_bytes = quiet_bytes + kStagingCacheBytes + 32 * kMiB;
  ASSERT_GT(peak_bytes, kept_bytes + 128 * kMiB) << "no burst to give back";
  // The daemon looks every 5 s, and gives back at the second look in a row.
  uint64_t after_bytes = peak_bytes;
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       std::chrono::steady_clock::now() < deadline && after_bytes > kept_bytes;
       std::this_thread::sleep_for(std::chrono::milliseconds(200))) {
    after_bytes = ResidentBytes(daemon_->pid());
  }
  EXPECT_LE(after_bytes, kept_bytes) << "of a burst to " << (peak_bytes >> 20) << " MiB, "
                                     << ((after_bytes - quiet_bytes) >> 20) << " MiB stayed";
  for (auto& reader : readers) {
    EXPECT_TRUE(reader->session.Read(reader->buffer, 0, 16).ok());
  }
}

}  // namespace
}  // namespace gpucmd

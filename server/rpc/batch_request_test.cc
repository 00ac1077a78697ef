#include "server/rpc/batch_request.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "grpcpp/support/byte_buffer.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "gtest/gtest.h"
#include "server/rpc/raw_messages.h"

namespace gpucmd {
namespace {

constexpr size_t kLarge = PayloadPool::kMinCachedBytes;

// `wire` as gRPC may hand it over: in slices of `first_bytes` up to `first_end`, then of
// 4 KiB (the last shorter).
grpc::ByteBuffer InSlices(const std::string& wire, size_t first_bytes, size_t first_end) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < wire.size();) {
    const size_t size = std::min(at < first_end ? first_bytes : 4096, wire.size() - at);
    slices.emplace_back(wire.data() + at, size);
    at += size;
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

// Parses `wire` with ParseBatch (from a pool that holds one large string) and with
// protobuf; expects both to agree on whether it parses and on what it holds. The wire
// comes in one slice, in 4 KiB slices, and in 7-byte slices over its first `tiny_end`
// bytes (where the commands under test are; tiny slices across a whole large batch would
// make the test slow under sanitizers).
void ExpectParsesAsProtobufDoes(const std::string& wire, const std::string& what,
                                size_t tiny_end = SIZE_MAX) {
  struct Slicing {
    size_t first_bytes, first_end;
  };
  for (const Slicing& slicing :
       {Slicing{wire.size() + 1, SIZE_MAX}, Slicing{4096, 0}, Slicing{7, tiny_end}}) {
    const size_t slice_bytes = slicing.first_bytes;
    PayloadPool payloads(16 * kLarge);
    payloads.Give(std::string(2 * kLarge, 'p'));
    grpc::ByteBuffer buffer = InSlices(wire, slice_bytes, slicing.first_end);
    v1::SubmitRequest parsed;
    const absl::Status status = ParseBatch(&buffer, payloads, &parsed);
    v1::SubmitRequest expected;
    const bool expected_ok = expected.ParseFromString(wire);
    ASSERT_EQ(status.ok(), expected_ok)
        << what << ", slices of " << slice_bytes << ": " << status;
    if (!expected_ok) {
      EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << what;
      continue;
    }
    expected.GetReflection()->MutableUnknownFields(&expected)->Clear();  // dropped on top
    EXPECT_TRUE(parsed.SerializeAsString() == expected.SerializeAsString())
        << what << ", slices of " << slice_bytes;
  }
}

v1::Command Write(uint64_t sequence, size_t size) {
  v1::Command command;
  command.set_sequence(sequence);
  command.mutable_write()->mutable_header()->set_session("s");
  command.mutable_write()->mutable_header()->set_inline_size_bytes(size);
  command.mutable_write()->set_data(std::string(size, static_cast<char>('a' + sequence % 26)));
  return command;
}

v1::Command Launch(uint64_t sequence) {
  v1::Command command;
  command.set_sequence(sequence);
  command.mutable_launch()->set_session("s");
  command.mutable_launch()->set_kernel_id(std::string(64, 'k'));
  return command;
}

// Commands of every shape a large command may take, between small ones.
v1::SubmitRequest Shapes() {
  v1::SubmitRequest batch;
  *batch.add_commands() = Launch(1);
  *batch.add_commands() = Write(2, 100);
  *batch.add_commands() = Write(3, kLarge);
  *batch.add_commands() = Write(4, 3 * kLarge + 5);  // more than the pooled string holds
  v1::Command* compile = batch.add_commands();       // large, not a write
  compile->set_sequence(5);
  compile->mutable_compile()->set_source(std::string(kLarge, 's'));
  v1::Command* header_only = batch.add_commands();  // large, a write without data
  header_only->set_sequence(6);
  header_only->mutable_write()->mutable_header()->set_session(std::string(kLarge, 't'));
  v1::Command* data_only = batch.add_commands();  // large, a write without a header
  data_only->set_sequence(7);
  data_only->mutable_write()->set_data(std::string(kLarge, 'd'));
  *batch.add_commands() = Launch(8);
  batch.set_stream_replies(true);
  return batch;
}

TEST(BatchRequestTest, BatchesParseAsProtobufParsesThem) {
  ExpectParsesAsProtobufDoes("", "an empty batch");
  ExpectParsesAsProtobufDoes(Shapes().SerializeAsString(), "every shape");

  // A large command that names no kind (its bytes an unknown field), and one whose write
  // comes before a launch that replaces it: protobuf's last kind wins.
  v1::Command no_kind;
  no_kind.set_sequence(9);
  no_kind.GetReflection()->MutableUnknownFields(&no_kind)->AddLengthDelimited(
      99, std::string(kLarge, 'u'));
  v1::Command write_then_launch = Write(10, kLarge);
  std::string replaced = write_then_launch.SerializeAsString() +
                         Launch(10).SerializeAsString();
  v1::SubmitRequest odd;
  *odd.add_commands() = no_kind;
  std::string wire = odd.SerializeAsString();
  wire += '\x0a';  // commands, length-delimited
  google::protobuf::io::StringOutputStream out(&wire);
  {
    google::protobuf::io::CodedOutputStream coded(&out);
    coded.WriteVarint32(static_cast<uint32_t>(replaced.size()));
    coded.WriteRaw(replaced.data(), static_cast<int>(replaced.size()));
  }
  wire += std::string("\x18\x01", 2);  // an unknown varint field on top: dropped
  ExpectParsesAsProtobufDoes(wire, "odd large commands");
}

TEST(BatchRequestTest, WhatDoesNotParseIsRefusedAsProtobufRefusesIt) {
  const std::string wire = Shapes().SerializeAsString();
  ExpectParsesAsProtobufDoes(wire.substr(0, wire.size() - 1), "cut short by a byte");
  ExpectParsesAsProtobufDoes(wire.substr(0, 3 * kLarge), "cut inside a large write");
  ExpectParsesAsProtobufDoes(std::string("\x02\x00", 2) + wire, "field number 0");
  ExpectParsesAsProtobufDoes(std::string("\x0c", 1) + wire, "an end-group tag");
  ExpectParsesAsProtobufDoes(wire + std::string("\x0a\xff\xff\xff\xff\x0f", 6),
                             "a command longer than the rest");
  ExpectParsesAsProtobufDoes(wire + std::string("\0", 1), "a tag of 0 at the end");
  ExpectParsesAsProtobufDoes(wire + std::string("\x80", 1), "a tag cut short at the end");
  for (const std::string& ending : {std::string("\0", 1), std::string("\x0c", 1),
                                    std::string("\0\x08\x05", 3)}) {
    // A command that ends early, at its last byte or before; the next command is whole.
    std::string command = Launch(3).SerializeAsString() + ending;
    v1::SubmitRequest first;
    *first.add_commands() = Write(2, kLarge);
    std::string ended_early = first.SerializeAsString() + '\x0a' +
                              static_cast<char>(command.size()) + command +
                              Shapes().SerializeAsString();
    ExpectParsesAsProtobufDoes(ended_early, "a command that ends early");
  }
  // Bytes changed, dropped and doubled at random among small commands and a large
  // write's head (a batch large enough to be read command by command): whatever protobuf
  // makes of them, so does ParseBatch.
  std::mt19937 random(12);
  v1::SubmitRequest commands;
  for (uint64_t i = 0; i < 4; ++i) *commands.add_commands() = i % 2 ? Launch(i) : Write(i, 9);
  const size_t mutable_bytes = commands.ByteSizeLong() + 16;
  *commands.add_commands() = Write(4, kLarge);
  const std::string small = commands.SerializeAsString();
  const std::string interesting = std::string("\0\x0c\x80\xff\x08\x0a\x12", 7);
  for (int round = 0; round < 800; ++round) {
    std::string mutated = small;
    for (int i = 0; i < 1 + round % 4; ++i) {
      const size_t at = random() % mutable_bytes;
      switch (random() % 4) {
        case 0: mutated[at] = static_cast<char>(random()); break;
        case 1: mutated[at] = interesting[random() % interesting.size()]; break;
        case 2: mutated.erase(at, 1); break;
        default: mutated.insert(at, 1, mutated[at]); break;
      }
    }
    ExpectParsesAsProtobufDoes(mutated, "mutated, round " + std::to_string(round),
                               2 * mutable_bytes);
  }
}

TEST(BatchRequestTest, ALargeWritesBytesLandInPooledMemory) {
  PayloadPool payloads(16 * kLarge);
  std::string pooled(2 * kLarge, 'p');
  const char* pooled_memory = pooled.data();
  payloads.Give(std::move(pooled));
  v1::SubmitRequest batch;
  *batch.add_commands() = Launch(1);
  *batch.add_commands() = Write(2, kLarge + 3);
  grpc::ByteBuffer buffer = InSlices(batch.SerializeAsString(), 4096, 0);
  v1::SubmitRequest parsed;
  ASSERT_TRUE(ParseBatch(&buffer, payloads, &parsed).ok());
  ASSERT_EQ(parsed.commands_size(), 2);
  EXPECT_EQ(parsed.commands(1).write().data(), batch.commands(1).write().data());
  EXPECT_EQ(parsed.commands(1).write().data().data(), pooled_memory);
  EXPECT_EQ(payloads.cached_bytes(), 0u) << "the pooled string was taken";
}

}  // namespace
}  // namespace gpucmd

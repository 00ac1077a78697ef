#include "client/read_messages.h"

#include <string>
#include <vector>

#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

// `wire` as gRPC may hand it over: cut into slices of at most `slice_bytes`.
grpc::ByteBuffer Received(const std::string& wire, size_t slice_bytes) {
  std::vector<grpc::Slice> slices;
  for (size_t at = 0; at < wire.size(); at += slice_bytes) {
    slices.emplace_back(wire.substr(at, slice_bytes));
  }
  return grpc::ByteBuffer(slices.data(), slices.size());
}

std::string Bytes(size_t size, int seed) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i * 13 + seed);
  return bytes;
}

TEST(ReadMessagesTest, TheDataOfEachAnswerIsAppendedAsParsingWouldGiveIt) {
  for (size_t slice_bytes : {size_t{1}, size_t{7}, size_t{4096}, size_t{1} << 30}) {
    std::string result = "kept";
    std::string expected = "kept";
    for (size_t size : {size_t{0}, size_t{1}, size_t{300}, size_t{70000}}) {
      v1::ReadResponse answer;
      answer.set_data(Bytes(size, static_cast<int>(size)));
      answer.set_total_bytes(size == 0 ? 70301 : 0);
      expected += answer.data();
      grpc::ByteBuffer message = Received(answer.SerializeAsString(), slice_bytes);
      ASSERT_TRUE(AppendReadMessage(message, size == 0, result).ok()) << size;
    }
    EXPECT_EQ(result, expected) << "slices of " << slice_bytes;
  }
}

TEST(ReadMessagesTest, FieldsInAnyOrderUnknownOnesAndRepeatedDataParseAsProtobufDoes) {
  // total_bytes (2) before data (1), an unknown varint field (9), then data again: the
  // last occurrence of a singular field wins.
  std::string wire;
  wire += std::string("\x10\x05", 2);                 // total_bytes = 5
  wire += std::string("\x0a\x03", 2) + "old";         // data = "old"
  wire += std::string("\x48\x96\x01", 3);             // field 9 = 150
  wire += std::string("\x0a\x05", 2) + "fresh";       // data = "fresh"
  v1::ReadResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  std::string result;
  grpc::ByteBuffer message = Received(wire, 3);
  ASSERT_TRUE(AppendReadMessage(message, true, result).ok());
  EXPECT_EQ(result, parsed.data());
  EXPECT_GE(result.capacity(), parsed.total_bytes());
}

TEST(ReadMessagesTest, AMessageThatDoesNotParseLeavesTheResultAsItWas) {
  v1::ReadResponse answer;
  answer.set_data(Bytes(1000, 3));
  const std::string wire = answer.SerializeAsString();
  for (size_t cut : {size_t{1}, size_t{2}, size_t{500}, wire.size() - 1}) {
    std::string result = "kept";
    grpc::ByteBuffer message = Received(wire.substr(0, cut), 64);
    absl::Status appended = AppendReadMessage(message, true, result);
    EXPECT_EQ(appended.code(), absl::StatusCode::kInternal) << cut;
    EXPECT_EQ(result, "kept") << cut;
  }
}

TEST(ReadMessagesTest, TheDataOfEachAnswerLandsInPlaceAsParsingWouldGiveIt) {
  for (size_t slice_bytes : {size_t{1}, size_t{7}, size_t{4096}, size_t{1} << 30}) {
    std::string expected;
    std::vector<grpc::ByteBuffer> messages;
    for (size_t size : {size_t{0}, size_t{1}, size_t{300}, size_t{70000}}) {
      v1::ReadResponse answer;
      answer.set_data(Bytes(size, static_cast<int>(size)));
      answer.set_total_bytes(size == 0 ? 70301 : 0);
      expected += answer.data();
      messages.push_back(Received(answer.SerializeAsString(), slice_bytes));
    }
    std::vector<std::byte> memory(expected.size() + 1, std::byte{0xEE});
    const absl::Span<std::byte> into = absl::MakeSpan(memory).first(expected.size());
    size_t filled = 0;
    for (grpc::ByteBuffer& message : messages) {
      ASSERT_TRUE(CopyReadMessage(message, into, filled).ok()) << filled;
    }
    EXPECT_EQ(filled, expected.size());
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(memory.data()), expected.size()),
              expected)
        << "slices of " << slice_bytes;
    EXPECT_EQ(memory.back(), std::byte{0xEE}) << "a byte past the target changed";
  }
}

TEST(ReadMessagesTest, OfRepeatedDataTheLastLandsAsInParsing) {
  std::string wire;
  wire += std::string("\x0a\x05", 2) + "stale";   // data = "stale"
  wire += std::string("\x48\x96\x01", 3);        // field 9 = 150
  wire += std::string("\x0a\x03", 2) + "new";     // data = "new"
  v1::ReadResponse parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  std::vector<std::byte> memory(8);
  size_t filled = 2;
  grpc::ByteBuffer message = Received(wire, 3);
  ASSERT_TRUE(CopyReadMessage(message, absl::MakeSpan(memory), filled).ok());
  EXPECT_EQ(filled, 2 + parsed.data().size());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(memory.data()) + 2, 3), parsed.data());
}

TEST(ReadMessagesTest, AnswerThatDoesNotParseOrFitLeavesWhatWasFilled) {
  v1::ReadResponse answer;
  answer.set_data(Bytes(1000, 3));
  const std::string wire = answer.SerializeAsString();
  std::vector<std::byte> memory(1000);
  for (size_t cut : {size_t{1}, size_t{2}, size_t{500}, wire.size() - 1}) {
    size_t filled = 0;
    grpc::ByteBuffer message = Received(wire.substr(0, cut), 64);
    EXPECT_EQ(CopyReadMessage(message, absl::MakeSpan(memory), filled).code(),
              absl::StatusCode::kInternal)
        << cut;
    EXPECT_EQ(filled, 0u) << cut;
  }
  // One byte more than the room left: refused before anything is copied past it.
  std::vector<std::byte> small(1001, std::byte{0xEE});
  size_t filled = 2;
  grpc::ByteBuffer message = Received(wire, 64);
  EXPECT_EQ(CopyReadMessage(message, absl::MakeSpan(small).first(1001), filled).code(),
            absl::StatusCode::kInternal);
  EXPECT_EQ(filled, 2u);
  EXPECT_EQ(small[2], std::byte{0xEE});
}

TEST(ReadMessagesTest, TheMethodIsTheServicesRead) {
  EXPECT_EQ(ReadMethodName(), "/gpucmd.v1.GpuCommand/Read");
}

}  // namespace
}  // namespace gpucmd

#include "client/write_messages.h"

#include <string>
#include <vector>

#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "grpcpp/support/proto_buffer_reader.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

// What the daemon parses out of `message`.
v1::WriteRequest Parsed(grpc::ByteBuffer message) {
  v1::WriteRequest request;
  grpc::ProtoBufferReader reader(&message);
  EXPECT_TRUE(request.ParseFromZeroCopyStream(&reader));
  return request;
}

TEST(WriteMessagesTest, TheBytesAreThoseOfTheSerializedRequest) {
  v1::WriteHeader header;
  header.set_session("0123456789abcdef0123456789abcdef");
  header.set_buffer(7);
  header.set_offset_bytes(uint64_t{1} << 40);
  header.set_inline_size_bytes(5 << 20);
  header.mutable_pitched()->set_width_bytes(3);
  // Lengths whose varints take one, two, three and four bytes.
  for (size_t size : {size_t{0}, size_t{1}, size_t{127}, size_t{128}, size_t{20000},
                      size_t{5} << 20}) {
    std::string chunk(size, '\0');
    for (size_t i = 0; i < size; ++i) chunk[i] = static_cast<char>(i * 7 + size);
    const v1::WriteHeader* const headers[] = {&header, nullptr};
    for (const v1::WriteHeader* with : headers) {
      v1::WriteRequest expected;
      if (with != nullptr) *expected.mutable_header() = *with;
      expected.set_data(chunk);
      grpc::ByteBuffer message = WriteMessage(with, chunk);
      std::vector<grpc::Slice> slices;
      ASSERT_TRUE(message.Dump(&slices).ok());
      std::string wire;
      for (const grpc::Slice& slice : slices) {
        wire.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
      }
      EXPECT_EQ(wire, expected.SerializeAsString()) << size;
      v1::WriteRequest parsed = Parsed(WriteMessage(with, chunk));
      EXPECT_EQ(parsed.has_header(), with != nullptr);
      EXPECT_EQ(parsed.header().SerializeAsString(), expected.header().SerializeAsString());
      EXPECT_EQ(parsed.data(), chunk) << size;
    }
  }
}

TEST(WriteMessagesTest, TheChunkIsSentFromWhereItIs) {
  const std::string chunk(4096, 'c');
  grpc::ByteBuffer message = WriteMessage(nullptr, chunk);
  std::vector<grpc::Slice> slices;
  ASSERT_TRUE(message.Dump(&slices).ok());
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(reinterpret_cast<const char*>(slices[1].begin()), chunk.data());
}

TEST(WriteMessagesTest, TheMethodIsTheServicesWrite) {
  EXPECT_EQ(WriteMethodName(), "/gpucmd.v1.GpuCommand/Write");
}

}  // namespace
}  // namespace gpucmd

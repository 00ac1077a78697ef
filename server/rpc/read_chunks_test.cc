#include "server/rpc/read_chunks.h"

#include <string>
#include <vector>

#include "gpucmd/v1/gpucmd.grpc.pb.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

// `size` bytes counting up from `seed`, released by setting `*released`.
Bytes Counting(std::vector<std::byte>& memory, size_t size, bool* released) {
  memory.resize(size);
  for (size_t i = 0; i < size; ++i) memory[i] = static_cast<std::byte>(i * 7 + 3);
  return Bytes(memory.data(), size, [released] { *released = true; });
}

std::vector<grpc::Slice> SlicesOf(const grpc::ByteBuffer& message) {
  std::vector<grpc::Slice> slices;
  EXPECT_TRUE(message.Dump(&slices).ok());
  return slices;
}

v1::ReadResponse Parsed(const grpc::ByteBuffer& message) {
  std::string wire;
  for (const grpc::Slice& slice : SlicesOf(message)) {
    wire.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  v1::ReadResponse parsed;
  EXPECT_TRUE(parsed.ParseFromString(wire));
  return parsed;
}

TEST(ReadChunksTest, AChunkParsesAsTheReadResponseItStandsFor) {
  std::vector<std::byte> memory;
  bool released = false;
  const size_t size = 3 * kSharedChunkMinBytes;
  std::shared_ptr<const Bytes> bytes = ShareReadBytes(Counting(memory, size, &released), nullptr);
  const std::string all(reinterpret_cast<const char*>(memory.data()), size);
  struct Chunk {
    uint64_t offset, size;
    std::optional<uint64_t> total;
  };
  for (const Chunk& chunk : {Chunk{0, 0, 0}, Chunk{0, 0, std::nullopt}, Chunk{0, 0, 1ull << 40},
                             Chunk{0, 1, size}, Chunk{5, 300, std::nullopt},
                             Chunk{7, kSharedChunkMinBytes, size},
                             Chunk{1, size - 1, std::nullopt}}) {
    v1::ReadResponse parsed = Parsed(ReadChunkMessage(bytes, chunk.offset, chunk.size, chunk.total));
    EXPECT_EQ(parsed.data(), all.substr(chunk.offset, chunk.size)) << chunk.offset;
    EXPECT_EQ(parsed.total_bytes(), chunk.total.value_or(0)) << chunk.offset;
  }
}

TEST(ReadChunksTest, ALargeChunkSharesTheReadsBytesUntilItsLastMessageDies) {
  std::vector<std::byte> memory;
  bool released = false;
  auto keep_alive = std::make_shared<int>(1);
  std::weak_ptr<int> kept = keep_alive;
  std::shared_ptr<const Bytes> bytes = ShareReadBytes(
      Counting(memory, 2 * kSharedChunkMinBytes, &released), std::move(keep_alive));
  auto message = std::make_unique<grpc::ByteBuffer>(
      ReadChunkMessage(bytes, 10, kSharedChunkMinBytes, std::nullopt));
  grpc::ByteBuffer copy = *message;
  std::vector<grpc::Slice> slices = SlicesOf(copy);
  ASSERT_EQ(slices.size(), 2u);
  EXPECT_EQ(static_cast<const void*>(slices[1].begin()), memory.data() + 10);
  slices.clear();

  bytes.reset();
  message.reset();
  EXPECT_FALSE(released) << "a copy of the message still names the bytes";
  EXPECT_FALSE(kept.expired());
  copy.Clear();
  EXPECT_TRUE(released);
  EXPECT_TRUE(kept.expired());
}

TEST(ReadChunksTest, SmallChunksAndPinnedBytesAreCopied) {
  std::vector<std::byte> memory;
  bool released = false;
  std::shared_ptr<const Bytes> bytes =
      ShareReadBytes(Counting(memory, 2 * kSharedChunkMinBytes, &released), nullptr);
  std::vector<grpc::Slice> slices =
      SlicesOf(ReadChunkMessage(bytes, 0, kSharedChunkMinBytes - 1, std::nullopt));
  EXPECT_NE(static_cast<const void*>(slices.back().begin()), memory.data());

  std::vector<std::byte> pinned_memory;
  bool pinned_released = false;
  std::shared_ptr<const Bytes> pinned = ShareReadBytes(
      Counting(pinned_memory, 2 * kSharedChunkMinBytes, &pinned_released).MarkPinned(), nullptr);
  grpc::ByteBuffer message = ReadChunkMessage(pinned, 0, 2 * kSharedChunkMinBytes, 5);
  pinned.reset();
  EXPECT_TRUE(pinned_released) << "pinned bytes go back while the message lives";
  EXPECT_EQ(Parsed(message).data().size(), 2 * kSharedChunkMinBytes);
}

}  // namespace
}  // namespace gpucmd

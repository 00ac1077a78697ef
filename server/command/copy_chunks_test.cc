#include "server/command/copy_chunks.h"

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

// Every host byte is covered once, in order, and lands where the whole layout puts it.
void ExpectCovers(const CopyLayout& whole, const std::vector<CopyChunk>& chunks,
                  uint64_t chunk_bytes) {
  uint64_t host = 0;
  for (const CopyChunk& chunk : chunks) {
    EXPECT_EQ(chunk.host_offset_bytes, host);
    EXPECT_LE(chunk.layout.host_bytes(), std::max(chunk_bytes, whole.width_bytes));
    EXPECT_GT(chunk.layout.host_bytes(), 0u);
    host += chunk.layout.host_bytes();
  }
  EXPECT_EQ(host, whole.host_bytes());
}

TEST(SplitCopyTest, ContiguousSplitsIntoFullChunksAndARemainder) {
  const CopyLayout whole = CopyLayout::Contiguous(100, 10'000);
  std::vector<CopyChunk> chunks = SplitCopy(whole, 4096);
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[0].layout.offset_bytes, 100u);
  EXPECT_EQ(chunks[1].layout.offset_bytes, 100u + 4096);
  EXPECT_EQ(chunks[2].layout.offset_bytes, 100u + 8192);
  EXPECT_EQ(chunks[2].layout.host_bytes(), 10'000u - 8192);
  ExpectCovers(whole, chunks, 4096);
}

TEST(SplitCopyTest, UnpaddedRowsSplitAsOneLinearCopy) {
  const CopyLayout whole = CopyLayout::Pitched(0, 1000, 10, 1000);
  std::vector<CopyChunk> chunks = SplitCopy(whole, 3000);
  ASSERT_EQ(chunks.size(), 4u);
  for (const CopyChunk& chunk : chunks) EXPECT_TRUE(chunk.layout.is_contiguous());
  ExpectCovers(whole, chunks, 3000);
}

TEST(SplitCopyTest, PitchedSplitsBetweenRows) {
  const CopyLayout whole = CopyLayout::Pitched(64, 100, 25, 256);
  std::vector<CopyChunk> chunks = SplitCopy(whole, 1000);  // 10 rows a chunk
  ASSERT_EQ(chunks.size(), 3u);
  EXPECT_EQ(chunks[1].layout.offset_bytes, 64u + 10 * 256);
  EXPECT_EQ(chunks[1].layout.height, 10u);
  EXPECT_EQ(chunks[1].layout.stride_bytes, 256u);
  EXPECT_EQ(chunks[2].layout.height, 5u);
  EXPECT_EQ(chunks[2].host_offset_bytes, 2000u);
  ExpectCovers(whole, chunks, 1000);
}

TEST(SplitCopyTest, ARowWiderThanAChunkIsAChunkOfItsOwn) {
  const CopyLayout whole = CopyLayout::Pitched(0, 5000, 3, 8192);
  std::vector<CopyChunk> chunks = SplitCopy(whole, 1024);
  ASSERT_EQ(chunks.size(), 3u);
  for (const CopyChunk& chunk : chunks) EXPECT_EQ(chunk.layout.height, 1u);
  ExpectCovers(whole, chunks, 1024);
}

TEST(SplitCopyTest, AnEmptyLayoutHasNoChunks) {
  EXPECT_TRUE(SplitCopy(CopyLayout::Contiguous(0, 0), 4096).empty());
  EXPECT_TRUE(SplitCopy(CopyLayout::Pitched(0, 0, 4, 16), 4096).empty());
}

}  // namespace
}  // namespace gpucmd

#include "driver/types.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(CopyLayoutTest, ContiguousAndPitchedExtents) {
  CopyLayout contiguous = CopyLayout::Contiguous(16, 100);
  EXPECT_TRUE(contiguous.is_contiguous());
  EXPECT_EQ(contiguous.host_bytes(), 100u);
  EXPECT_EQ(contiguous.device_extent(), 100u);

  CopyLayout pitched = CopyLayout::Pitched(0, 10, 3, 16);
  EXPECT_FALSE(pitched.is_contiguous());
  EXPECT_EQ(pitched.host_bytes(), 30u);
  EXPECT_EQ(pitched.device_extent(), 42u);  // two full strides and one last row

  EXPECT_TRUE(CopyLayout::Pitched(0, 16, 3, 16).is_contiguous());
}

TEST(CheckLayoutBoundsTest, AcceptsExactFit) {
  EXPECT_TRUE(CheckLayoutBounds(CopyLayout::Contiguous(0, 64), 64).ok());
  EXPECT_TRUE(CheckLayoutBounds(CopyLayout::Pitched(22, 10, 3, 16), 64).ok());
}

TEST(CheckLayoutBoundsTest, RejectsOneByteTooMany) {
  absl::Status status = CheckLayoutBounds(CopyLayout::Contiguous(1, 64), 64);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckLayoutBounds(CopyLayout::Pitched(23, 10, 3, 16), 64).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CheckLayoutBoundsTest, RejectsStrideBelowWidthAndOverflow) {
  EXPECT_EQ(CheckLayoutBounds(CopyLayout::Pitched(0, 16, 2, 8), 1024).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckLayoutBounds(CopyLayout::Pitched(0, 1, 3, UINT64_MAX / 2 + 1), 1024).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckLayoutBounds(CopyLayout::Contiguous(UINT64_MAX, 2), 1024).code(),
            absl::StatusCode::kInvalidArgument);
}

// The bytes `layout` spans that its rows cover, in a resource of `size` bytes.
std::vector<bool> RowBytes(const CopyLayout& layout, uint64_t size) {
  std::vector<bool> covered(size, false);
  for (uint64_t row = 0; row < layout.height; ++row) {
    for (uint64_t i = 0; i < layout.width_bytes; ++i) {
      covered[layout.offset_bytes + row * layout.stride_bytes + i] = true;
    }
  }
  return covered;
}

// Against the bytes themselves, over random copies within one 256-byte resource: rows of
// equal strides overlap exactly when a byte is both read and written; rows of different
// strides whenever their spans meet (never less than the bytes say).
TEST(CopyRowsOverlapTest, AgreesWithTheBytesEachSideCovers) {
  constexpr uint64_t kSize = 256;
  std::mt19937_64 random(7);
  int checked = 0;
  int overlapping = 0;
  while (checked < 20000) {
    DeviceCopyLayout copy{.source_offset_bytes = random() % kSize,
                          .target_offset_bytes = random() % kSize,
                          .width_bytes = random() % 12,
                          .height = random() % 9,
                          .source_stride_bytes = random() % 24,
                          .target_stride_bytes = random() % 24};
    if (random() % 2 == 0) copy.target_stride_bytes = copy.source_stride_bytes;
    if (!CheckLayoutBounds(copy.source(), kSize).ok() ||
        !CheckLayoutBounds(copy.target(), kSize).ok()) {
      continue;
    }
    ++checked;
    const std::vector<bool> read = RowBytes(copy.source(), kSize);
    const std::vector<bool> written = RowBytes(copy.target(), kSize);
    bool shared = false;
    for (uint64_t i = 0; i < kSize; ++i) shared |= read[i] && written[i];
    const bool strides_matter = copy.height > 1;
    const bool exact = !strides_matter || copy.source_stride_bytes == copy.target_stride_bytes ||
                       copy.size_bytes() == 0;
    if (exact) {
      EXPECT_EQ(CopyRowsOverlap(copy), shared)
          << DescribeRows(copy.source()) << " -> " << DescribeRows(copy.target());
    } else if (shared) {
      EXPECT_TRUE(CopyRowsOverlap(copy))
          << DescribeRows(copy.source()) << " -> " << DescribeRows(copy.target());
    }
    overlapping += shared;
  }
  EXPECT_GT(overlapping, 1000) << "the random copies should often overlap";
}

TEST(CopyRowsOverlapTest, InterleavedColumnsOfOneMatrixDoNotOverlap) {
  // Columns [0, 8) of 16 rows copied onto columns [8, 16) of the same rows.
  EXPECT_FALSE(CopyRowsOverlap({.source_offset_bytes = 0,
                                .target_offset_bytes = 8,
                                .width_bytes = 8,
                                .height = 16,
                                .source_stride_bytes = 32,
                                .target_stride_bytes = 32}));
  EXPECT_TRUE(CopyRowsOverlap({.source_offset_bytes = 0,
                               .target_offset_bytes = 7,
                               .width_bytes = 8,
                               .height = 16,
                               .source_stride_bytes = 32,
                               .target_stride_bytes = 32}));
  // Rows of different strides whose spans meet are refused even where no byte is shared.
  EXPECT_TRUE(CopyRowsOverlap({.source_offset_bytes = 0,
                               .target_offset_bytes = 8,
                               .width_bytes = 8,
                               .height = 4,
                               .source_stride_bytes = 32,
                               .target_stride_bytes = 64}));
}

TEST(DescribeRowsTest, NamesRangesAndRows) {
  EXPECT_EQ(DescribeRows(CopyLayout::Contiguous(16, 32)), "[16, +32)");
  EXPECT_EQ(DescribeRows(CopyLayout::Pitched(4, 8, 3, 16)), "3 rows of 8 bytes, 16 apart from 4");
}

}  // namespace
}  // namespace gpucmd

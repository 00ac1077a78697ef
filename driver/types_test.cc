#include "driver/types.h"

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

}  // namespace
}  // namespace gpucmd

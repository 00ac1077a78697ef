#include "driver/bytes.h"

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(BytesTest, ReleaseRunsOnceWhenTheLastOwnerDies) {
  int releases = 0;
  std::byte storage[8];
  {
    Bytes first(storage, sizeof(storage), [&releases] { ++releases; });
    Bytes second = std::move(first);
    EXPECT_EQ(second.size(), 8u);
    EXPECT_EQ(first.size(), 0u);  // NOLINT(bugprone-use-after-move): checking the move
    EXPECT_EQ(releases, 0);
  }
  EXPECT_EQ(releases, 1);
}

TEST(BytesTest, AssignmentReleasesTheOldBytes) {
  int releases = 0;
  std::byte storage[4];
  Bytes bytes(storage, 4, [&releases] { ++releases; });
  bytes = Bytes::FromString("abc");
  EXPECT_EQ(releases, 1);
  EXPECT_EQ(bytes.ToString(), "abc");
}

}  // namespace
}  // namespace gpucmd

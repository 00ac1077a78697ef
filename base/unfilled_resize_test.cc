#include "base/unfilled_resize.h"

#include <string>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(UnfilledResizeTest, GrowingKeepsTheContentsAndLeavesTheMemoryAsItWas) {
  std::string payload(4096, 'x');
  // Shrinking writes only the terminator at 16: the memory past it still holds 'x'.
  payload.resize(16);
  ResizeUnfilled(payload, 4096);
  ASSERT_EQ(payload.size(), 4096u);
  EXPECT_EQ(payload.substr(0, 16), std::string(16, 'x'));
  EXPECT_EQ(payload.substr(17), std::string(4096 - 17, 'x'))
      << "a zero-filled resize would have 0s past 16";
  ResizeUnfilled(payload, 3);
  EXPECT_EQ(payload, "xxx");
  ResizeUnfilled(payload, 1 << 20);  // past the capacity: a new allocation
  EXPECT_EQ(payload.size(), size_t{1} << 20);
  EXPECT_EQ(payload.substr(0, 3), "xxx");
}

}  // namespace
}  // namespace gpucmd

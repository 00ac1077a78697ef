#include "base/status_macros.h"

#include <string>

#include "gtest/gtest.h"

namespace {

absl::Status FailIfNegative(int value) {
  if (value < 0) return absl::InvalidArgumentError("negative");
  return absl::OkStatus();
}

absl::StatusOr<int> Twice(int value) {
  RETURN_IF_ERROR(FailIfNegative(value));
  return 2 * value;
}

absl::StatusOr<std::string> Describe(int value) {
  ASSIGN_OR_RETURN(int doubled, Twice(value));
  return std::to_string(doubled);
}

TEST(StatusMacrosTest, ValuesPassThrough) {
  EXPECT_EQ(*Describe(21), "42");
}

TEST(StatusMacrosTest, ErrorsPropagateUnchanged) {
  absl::StatusOr<std::string> result = Describe(-1);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(result.status().message(), "negative");
}

}  // namespace

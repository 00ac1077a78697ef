#include "server/core/descriptor_handoffs.h"

#include <fcntl.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using Clock = DescriptorHandoffs::Clock;

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

TEST(DescriptorHandoffsTest, ATokenIsTakenOnce) {
  DescriptorHandoffs handoffs(std::chrono::seconds(30), 4);
  int fd = dup(0);
  absl::StatusOr<std::string> token = handoffs.Put(fd);
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(token->size(), 32u);
  EXPECT_EQ(handoffs.Take("0123456789abcdef0123456789abcdef").status().code(),
            absl::StatusCode::kNotFound);
  absl::StatusOr<int> taken = handoffs.Take(*token);
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(*taken, fd);
  EXPECT_EQ(handoffs.Take(*token).status().code(), absl::StatusCode::kNotFound);
  close(fd);
}

TEST(DescriptorHandoffsTest, UntakenDescriptorsExpireAndCapacityHolds) {
  DescriptorHandoffs handoffs(std::chrono::seconds(30), 2);
  const Clock::time_point now = Clock::now();
  int first = dup(0);
  absl::StatusOr<std::string> token = handoffs.Put(first, now);
  ASSERT_TRUE(handoffs.Put(dup(0), now).ok());
  int third = dup(0);
  EXPECT_EQ(handoffs.Put(third, now).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(IsOpen(third)) << "a refused descriptor is closed";
  const Clock::time_point later = now + std::chrono::seconds(31);
  EXPECT_EQ(handoffs.Take(*token, later).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(IsOpen(first)) << "an expired descriptor is closed";
  EXPECT_TRUE(handoffs.Put(dup(0), later).ok()) << "expired ones make room";
}

}  // namespace
}  // namespace gpucmd

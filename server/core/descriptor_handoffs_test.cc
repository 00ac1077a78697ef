#include "server/core/descriptor_handoffs.h"

#include <fcntl.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using Clock = DescriptorHandoffs::Clock;

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

constexpr char kOwner[] = "uid:1000";

TEST(DescriptorHandoffsTest, ATokenIsTakenOnceByItsOwner) {
  DescriptorHandoffs handoffs(std::chrono::seconds(30), 4, 4);
  int fd = dup(0);
  absl::StatusOr<std::string> token = handoffs.Put(fd, kOwner);
  ASSERT_TRUE(token.ok());
  EXPECT_EQ(token->size(), 32u);
  absl::Status unknown = handoffs.Take("0123456789abcdef0123456789abcdef", kOwner).status();
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  absl::Status foreign = handoffs.Take(*token, "uid:1001").status();
  EXPECT_EQ(foreign.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(foreign.message(), unknown.message()) << "another owner's token reads as unknown";
  EXPECT_EQ(handoffs.Take(*token, "").status().code(), absl::StatusCode::kInvalidArgument)
      << "an anonymous caller";
  EXPECT_TRUE(IsOpen(fd)) << "refused callers leave the descriptor to its owner";
  absl::StatusOr<int> taken = handoffs.Take(*token, kOwner);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(*taken, fd);
  absl::Status again = handoffs.Take(*token, kOwner).status();
  EXPECT_EQ(again.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(again.message(), unknown.message());
  close(fd);
}

TEST(DescriptorHandoffsTest, ADescriptorFromNoIdentifiedPeerIsRefused) {
  DescriptorHandoffs handoffs(std::chrono::seconds(30), 4, 4);
  int fd = dup(0);
  EXPECT_EQ(handoffs.Put(fd, "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(IsOpen(fd)) << "a refused descriptor is closed";
}

TEST(DescriptorHandoffsTest, UntakenDescriptorsExpireAndCapacityHolds) {
  DescriptorHandoffs handoffs(std::chrono::seconds(30), 2, 2);
  const Clock::time_point now = Clock::now();
  int first = dup(0);
  absl::StatusOr<std::string> token = handoffs.Put(first, kOwner, now);
  ASSERT_TRUE(handoffs.Put(dup(0), kOwner, now).ok());
  int third = dup(0);
  EXPECT_EQ(handoffs.Put(third, kOwner, now).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(IsOpen(third)) << "a refused descriptor is closed";
  const Clock::time_point later = now + std::chrono::seconds(31);
  EXPECT_EQ(handoffs.Take(*token, kOwner, later).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(IsOpen(first)) << "an expired descriptor is closed";
  EXPECT_TRUE(handoffs.Put(dup(0), kOwner, later).ok()) << "expired ones make room";
}

TEST(DescriptorHandoffsTest, CloseExpiredClosesWhatOutlivedItsLifetimeAndSaysWhenTheNextEnds) {
  DescriptorHandoffs handoffs(std::chrono::seconds(30), 4, 4);
  const Clock::time_point now = Clock::now();
  EXPECT_EQ(handoffs.CloseExpired(now), Clock::time_point::max()) << "none waits";
  const int first = dup(0);
  const int second = dup(0);
  ASSERT_TRUE(handoffs.Put(first, kOwner, now).ok());
  ASSERT_TRUE(handoffs.Put(second, kOwner, now + std::chrono::seconds(10)).ok());
  EXPECT_EQ(handoffs.CloseExpired(now), now + std::chrono::seconds(30));
  EXPECT_TRUE(IsOpen(first));
  EXPECT_EQ(handoffs.CloseExpired(now + std::chrono::seconds(30)), now + std::chrono::seconds(40));
  EXPECT_FALSE(IsOpen(first)) << "closed by CloseExpired alone, with no Put or Take";
  EXPECT_TRUE(IsOpen(second));
  EXPECT_EQ(handoffs.CloseExpired(now + std::chrono::seconds(40)), Clock::time_point::max());
  EXPECT_FALSE(IsOpen(second));
}

TEST(DescriptorHandoffsTest, OneOwnerHoldsAtMostItsShare) {
  DescriptorHandoffs handoffs(std::chrono::seconds(30), 4, 2);
  ASSERT_TRUE(handoffs.Put(dup(0), kOwner).ok());
  ASSERT_TRUE(handoffs.Put(dup(0), kOwner).ok());
  int third = dup(0);
  absl::Status refused = handoffs.Put(third, kOwner).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_NE(refused.message().find("at most 2 per user"), absl::string_view::npos) << refused;
  EXPECT_FALSE(IsOpen(third)) << "a refused descriptor is closed";
  EXPECT_TRUE(handoffs.Put(dup(0), "uid:1001").ok()) << "another owner still has room";
}

}  // namespace
}  // namespace gpucmd

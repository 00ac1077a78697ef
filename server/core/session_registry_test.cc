#include "server/core/session_registry.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using Clock = SessionRegistry::Clock;
using std::chrono::seconds;

TEST(SessionRegistryTest, TokensAreUnguessableAndScoped) {
  SessionRegistry registry(seconds(60), seconds(5));
  Clock::time_point now = Clock::now();
  std::string a = *registry.Open(0, "a", "", now);
  std::string b = *registry.Open(1, "b", "", now);
  EXPECT_EQ(a.size(), 32u);
  EXPECT_NE(a, b);
  EXPECT_EQ(registry.Touch(a, now)->client_name, "a");
  EXPECT_EQ(registry.Touch(b, now)->device, 1u);
  EXPECT_NE(registry.Touch(a, now)->id, registry.Touch(b, now)->id);
  EXPECT_EQ(registry.Touch("not-a-token", now).status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(registry.Close(a).has_value());
  EXPECT_FALSE(registry.Close(a).has_value());
  EXPECT_EQ(registry.Touch(a, now).status().code(), absl::StatusCode::kNotFound);
}

TEST(SessionRegistryTest, ADrainingRegistryRefusesNewWorkButStillCloses) {
  SessionRegistry registry(seconds(60), seconds(5));
  Clock::time_point now = Clock::now();
  std::string token = *registry.Open(0, "a", "", now);
  registry.RefuseNewWork(absl::UnavailableError("daemon shutting down"));
  EXPECT_EQ(registry.Touch(token, now).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(registry.Open(0, "b", "", now).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(registry.Close(token).has_value());
  EXPECT_EQ(registry.size(), 0u);
}

TEST(SessionRegistryTest, IdleSessionsExpire) {
  SessionRegistry registry(seconds(60), seconds(5));
  Clock::time_point start = Clock::now();
  std::string idle = *registry.Open(0, "idle", "", start);
  std::string busy = *registry.Open(0, "busy", "", start);
  ASSERT_TRUE(registry.Touch(busy, start + seconds(50)).ok());
  std::vector<SessionInfo> expired = registry.TakeExpired(start + seconds(61));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].client_name, "idle");
  EXPECT_TRUE(registry.Touch(busy, start + seconds(61)).ok());
}

TEST(SessionRegistryTest, WhatWasHandedOutOfASessionSaysWhenItClosedOrExpired) {
  SessionRegistry registry(seconds(60), seconds(5));
  auto start = SessionRegistry::Clock::now();
  std::string closing = *registry.Open(0, "closing", "", start);
  std::string idle = *registry.Open(0, "idle", "", start);
  SessionInfo closing_info = *registry.Touch(closing, start);
  SessionInfo idle_info = *registry.Touch(idle, start);
  ASSERT_NE(closing_info.closed, nullptr);
  EXPECT_FALSE(closing_info.closed->load());
  ASSERT_TRUE(registry.Close(closing).has_value());
  EXPECT_TRUE(closing_info.closed->load());
  EXPECT_FALSE(idle_info.closed->load());
  EXPECT_EQ(registry.TakeExpired(start + seconds(61)).size(), 1u);
  EXPECT_TRUE(idle_info.closed->load());
}

TEST(SessionRegistryTest, LeasedSessionsLiveUntilTheLeaseBreaksPlusGrace) {
  SessionRegistry registry(seconds(60), seconds(5));
  Clock::time_point start = Clock::now();
  std::string token = *registry.Open(0, "leased", "", start);
  ASSERT_TRUE(registry.LeaseOpened(token, start));
  EXPECT_TRUE(registry.TakeExpired(start + seconds(3600)).empty()) << "a held lease keeps it";
  registry.LeaseClosed(token, start + seconds(3600));
  EXPECT_TRUE(registry.TakeExpired(start + seconds(3604)).empty()) << "grace period";
  EXPECT_EQ(registry.TakeExpired(start + seconds(3605)).size(), 1u);
  EXPECT_EQ(registry.size(), 0u);
}

TEST(SessionRegistryTest, ReopenedLeaseCancelsExpiry) {
  SessionRegistry registry(seconds(60), seconds(5));
  Clock::time_point start = Clock::now();
  std::string token = *registry.Open(0, "flaky", "", start);
  ASSERT_TRUE(registry.LeaseOpened(token, start));
  registry.LeaseClosed(token, start + seconds(1));
  ASSERT_TRUE(registry.LeaseOpened(token, start + seconds(2)));
  EXPECT_TRUE(registry.TakeExpired(start + seconds(30)).empty());
  EXPECT_FALSE(registry.LeaseOpened("unknown", start));
}

TEST(SessionRegistryTest, SessionLimitsInAllAndPerClientName) {
  SessionRegistry registry(seconds(60), seconds(5),
                           {.max_sessions = 5, .max_sessions_per_client = 3});
  Clock::time_point now = Clock::now();
  std::vector<std::string> tokens;
  for (int i = 0; i < 3; ++i) tokens.push_back(*registry.Open(0, "greedy", "", now));
  absl::StatusOr<std::string> fourth = registry.Open(0, "greedy", "", now);
  EXPECT_EQ(fourth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(fourth.status().message()),
              ::testing::HasSubstr("limits.max_sessions_per_client"));
  ASSERT_TRUE(registry.Open(0, "other", "", now).ok());
  ASSERT_TRUE(registry.Open(0, "third", "", now).ok());
  absl::StatusOr<std::string> sixth = registry.Open(0, "fourth", "", now);
  EXPECT_EQ(sixth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(sixth.status().message()), ::testing::HasSubstr("limits.max_sessions"));

  // Closed and expired sessions give their places back.
  ASSERT_TRUE(registry.Close(tokens[0]).has_value());
  EXPECT_TRUE(registry.Open(0, "greedy", "", now).ok());
  EXPECT_EQ(registry.TakeExpired(now + seconds(61)).size(), 5u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(registry.Open(0, "greedy", "", now).ok()) << i;
}

// A known owner (a Unix user, a certificate) is one client whatever names its sessions
// carry; owners do not share a quota with each other or with anonymous names.
TEST(SessionRegistryTest, SessionsPerClientCountByOwnerWhenKnown) {
  SessionRegistry registry(seconds(60), seconds(5), {.max_sessions_per_client = 2});
  Clock::time_point now = Clock::now();
  ASSERT_TRUE(registry.Open(0, "first", "uid:1000", now).ok());
  ASSERT_TRUE(registry.Open(0, "second", "uid:1000", now).ok());
  absl::StatusOr<std::string> third = registry.Open(0, "third", "uid:1000", now);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(third.status().message()), ::testing::HasSubstr("uid:1000 has 2"));
  std::string other = *registry.Open(0, "first", "uid:1001", now);
  EXPECT_TRUE(registry.Open(0, "uid:1000", "", now).ok()) << "a name is not an owner";
  std::optional<SessionInfo> closed = registry.Close(other);
  ASSERT_TRUE(closed.has_value());
  EXPECT_EQ(closed->owner, "uid:1001");
  EXPECT_EQ(closed->opened, now);
}

TEST(SessionRegistryTest, ClientNamesHaveALengthLimit) {
  SessionRegistry registry(seconds(60), seconds(5), {.max_client_name_bytes = 8});
  EXPECT_TRUE(registry.Open(0, "12345678", "", Clock::now()).ok());
  absl::StatusOr<std::string> long_name = registry.Open(0, std::string(1 << 20, 'n'), "", Clock::now());
  EXPECT_EQ(long_name.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(long_name.status().message()),
              ::testing::HasSubstr("limits.max_client_name_bytes"));
  EXPECT_EQ(registry.size(), 1u);
}

}  // namespace
}  // namespace gpucmd

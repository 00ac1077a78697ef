#include "server/core/session_registry.h"

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using Clock = SessionRegistry::Clock;
using std::chrono::seconds;

TEST(SessionRegistryTest, TokensAreUnguessableAndScoped) {
  SessionRegistry registry(seconds(60), seconds(5));
  Clock::time_point now = Clock::now();
  std::string a = registry.Open(0, "a", now);
  std::string b = registry.Open(1, "b", now);
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

TEST(SessionRegistryTest, IdleSessionsExpire) {
  SessionRegistry registry(seconds(60), seconds(5));
  Clock::time_point start = Clock::now();
  std::string idle = registry.Open(0, "idle", start);
  std::string busy = registry.Open(0, "busy", start);
  ASSERT_TRUE(registry.Touch(busy, start + seconds(50)).ok());
  std::vector<SessionInfo> expired = registry.TakeExpired(start + seconds(61));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].client_name, "idle");
  EXPECT_TRUE(registry.Touch(busy, start + seconds(61)).ok());
}

TEST(SessionRegistryTest, LeasedSessionsLiveUntilTheLeaseBreaksPlusGrace) {
  SessionRegistry registry(seconds(60), seconds(5));
  Clock::time_point start = Clock::now();
  std::string token = registry.Open(0, "leased", start);
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
  std::string token = registry.Open(0, "flaky", start);
  ASSERT_TRUE(registry.LeaseOpened(token, start));
  registry.LeaseClosed(token, start + seconds(1));
  ASSERT_TRUE(registry.LeaseOpened(token, start + seconds(2)));
  EXPECT_TRUE(registry.TakeExpired(start + seconds(30)).empty());
  EXPECT_FALSE(registry.LeaseOpened("unknown", start));
}

}  // namespace
}  // namespace gpucmd

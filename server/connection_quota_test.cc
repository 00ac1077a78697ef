#include "server/connection_quota.h"

#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

// The daemon's end of a new connection (the peer's end is closed: the quota looks only
// at the descriptor it was given).
int NewConnection() {
  int ends[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends) != 0) return -1;
  close(ends[1]);
  return ends[0];
}

class ConnectionQuotaTest : public ::testing::Test {
 protected:
  ~ConnectionQuotaTest() override {
    for (int connection : connections_) close(connection);
  }

  // Admits a new connection of `user`; the connection stays open until the test ends
  // unless closed with CloseConnection.
  absl::Status AdmitNew(const std::string& user, bool* first_refusal) {
    int connection = NewConnection();
    EXPECT_GE(connection, 0);
    connections_.push_back(connection);
    return quota_.Admit(connection, user, first_refusal);
  }

  void CloseConnection(size_t index) {
    close(connections_[index]);
    connections_.erase(connections_.begin() + index);
  }

  ConnectionQuota quota_{2};
  std::vector<int> connections_;
};

TEST_F(ConnectionQuotaTest, RefusesAUsersConnectionBeyondTheLimitNamingIt) {
  bool first_refusal = true;
  ASSERT_TRUE(AdmitNew("uid:1000", &first_refusal).ok());
  EXPECT_FALSE(first_refusal);
  ASSERT_TRUE(AdmitNew("uid:1000", &first_refusal).ok());
  absl::Status refused = AdmitNew("uid:1000", &first_refusal);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("uid:1000 has 2 connections open"), std::string::npos)
      << refused;
  EXPECT_NE(refused.message().find("limits.max_connections_per_client"), std::string::npos);
  EXPECT_TRUE(first_refusal);
  EXPECT_EQ(AdmitNew("uid:1000", &first_refusal).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_FALSE(first_refusal) << "only the first refusal of a run is reported as such";
}

TEST_F(ConnectionQuotaTest, UsersHaveQuotasOfTheirOwn) {
  bool first_refusal;
  ASSERT_TRUE(AdmitNew("uid:1000", &first_refusal).ok());
  ASSERT_TRUE(AdmitNew("uid:1000", &first_refusal).ok());
  EXPECT_TRUE(AdmitNew("uid:1001", &first_refusal).ok());
  EXPECT_TRUE(AdmitNew("", &first_refusal).ok());
}

TEST_F(ConnectionQuotaTest, AnEndedConnectionGivesItsPlaceBackEvenWhenItsDescriptorIsReused) {
  bool first_refusal;
  ASSERT_TRUE(AdmitNew("uid:1000", &first_refusal).ok());
  ASSERT_TRUE(AdmitNew("uid:1000", &first_refusal).ok());
  ASSERT_FALSE(AdmitNew("uid:1000", &first_refusal).ok());
  CloseConnection(2);  // the refused one: the daemon closes it
  const int reused = connections_[0];
  CloseConnection(0);  // gRPC closed it when the connection ended
  // Another user's connection takes the ended one's descriptor number.
  ASSERT_TRUE(AdmitNew("uid:1001", &first_refusal).ok());
  ASSERT_EQ(connections_.back(), reused);
  EXPECT_TRUE(AdmitNew("uid:1000", &first_refusal).ok());
  EXPECT_EQ(AdmitNew("uid:1000", &first_refusal).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(first_refusal) << "an admission ends a run of refusals";
}

}  // namespace
}  // namespace gpucmd

// Who sees which sessions (Note [Peer identity] in server/rpc/peer_identity.h): a
// client of another Unix user (tests/integration/session_peer, run as "nobody") sees
// only its own sessions unless it belongs to the admin group; root sees everyone's;
// limits.max_sessions_per_client counts per user. Needs root to become another user.

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_process.h"

namespace gpucmd {
namespace {

using ::gpucmd::testing::CommandResult;
using ::gpucmd::testing::DaemonProcess;
using ::gpucmd::testing::RunCommand;
using ::gpucmd::testing::RunfilePath;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr uid_t kNobody = 65534;
constexpr gid_t kNogroup = 65534;

class SessionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "becoming another user needs root";
  }

  // A daemon whose socket anyone may reach, with `config` added, and a session of
  // root's ("root-work").
  void StartDaemon(const std::string& config) {
    absl::StatusOr<DaemonProcess> daemon =
        DaemonProcess::StartWithConfig(absl::StrCat("socket_mode: 438\n", config));  // 0666
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_.emplace(*std::move(daemon));
    const std::string socket = daemon_->grpc_target().substr(std::string("unix:").size());
    chmod(socket.substr(0, socket.rfind('/')).c_str(), 0755);  // the directory, for nobody
    absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon_->grpc_target());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
    absl::StatusOr<Session> root_work = client_->OpenSession(0, "root-work");
    ASSERT_TRUE(root_work.ok()) << root_work.status();
    root_work_.emplace(*std::move(root_work));
  }

  // What session_peer prints, run as nobody:nogroup and opening a session named `name`.
  std::string AsNobody(const std::string& name) {
    CommandResult run =
        RunCommand({RunfilePath("tests/integration/session_peer"), daemon_->grpc_target(),
                    std::to_string(kNobody), std::to_string(kNogroup), name});
    EXPECT_EQ(run.exit_code, 0) << run.stdout_text << run.stderr_text;
    return run.stdout_text;
  }

  std::optional<DaemonProcess> daemon_;
  std::unique_ptr<Client> client_;
  std::optional<Session> root_work_;
};

TEST_F(SessionsTest, OthersSeeTheirOwnSessionsAndRootSeesEveryClients) {
  StartDaemon("");
  const std::string nobody = AsNobody("nobody-work");
  EXPECT_THAT(nobody, HasSubstr("caller=uid:65534 all_clients=0\n"));
  EXPECT_THAT(nobody, HasSubstr("nobody-work uid:65534\n"));
  EXPECT_THAT(nobody, Not(HasSubstr("root-work")));

  absl::StatusOr<v1::ListSessionsResponse> all = client_->ListSessions();
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_TRUE(all->all_clients());
  EXPECT_EQ(all->caller(), "uid:0");
  ASSERT_EQ(all->sessions_size(), 2);
  EXPECT_EQ(all->sessions(0).client_name(), "root-work");
  EXPECT_EQ(all->sessions(0).owner(), "uid:0");
  EXPECT_EQ(all->sessions(1).client_name(), "nobody-work");
  EXPECT_EQ(all->sessions(1).owner(), "uid:65534");

  // gpucmdctl says whose sessions it shows; its JSON is the response.
  CommandResult listed = RunCommand({RunfilePath("client/gpucmdctl"),
                                     "--target=" + daemon_->grpc_target(), "sessions"});
  ASSERT_EQ(listed.exit_code, 0) << listed.stderr_text;
  EXPECT_THAT(listed.stdout_text, HasSubstr("2 session(s); shown: every client"));
  EXPECT_THAT(listed.stdout_text, ::testing::ContainsRegex("nobody-work +0 +uid:65534"));
}

TEST_F(SessionsTest, AdminGroupMembersSeeEveryClientsSessions) {
  const group* nogroup = getgrgid(kNogroup);
  ASSERT_NE(nogroup, nullptr);
  StartDaemon(absl::StrCat("admin { group: \"", nogroup->gr_name, "\" }\n"));
  const std::string nobody = AsNobody("nobody-admin");
  EXPECT_THAT(nobody, HasSubstr("caller=uid:65534 all_clients=1\n"));
  EXPECT_THAT(nobody, HasSubstr("root-work uid:0\n"));
}

TEST_F(SessionsTest, SessionsPerClientAreCountedPerUserWhateverTheNames) {
  StartDaemon("limits { max_sessions_per_client: 3 }\n");  // root-work is one
  absl::StatusOr<Session> first = client_->OpenSession(0, "a");
  absl::StatusOr<Session> second = client_->OpenSession(0, "b");
  ASSERT_TRUE(first.ok() && second.ok());
  absl::StatusOr<Session> fourth = client_->OpenSession(0, "c");
  EXPECT_EQ(fourth.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(fourth.status().message()),
              HasSubstr("uid:0 has 3 sessions open, its limit (limits.max_sessions_per_client)"));
  // Another user has a quota of its own.
  EXPECT_THAT(AsNobody("c"), HasSubstr("c uid:65534\n"));
}

// However many sessions there are, the listing fits a message: those it has no room
// for are counted, not sent.
TEST_F(SessionsTest, AListingFitsTheMessageLimit) {
  StartDaemon("limits { max_message_bytes: 65536 }\n");
  constexpr int kSessions = 400;  // ~300 bytes each listed: past 64 KiB
  for (int i = 0; i < kSessions; ++i) {
    grpc::ClientContext context;
    v1::OpenSessionRequest request;
    request.set_client_name(std::string(200, 'a' + i % 26));
    v1::OpenSessionResponse response;
    ASSERT_TRUE(client_->stub().OpenSession(&context, request, &response).ok()) << i;
  }
  absl::StatusOr<v1::ListSessionsResponse> listed = client_->ListSessions();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_GT(listed->omitted(), 0u);
  EXPECT_EQ(listed->sessions_size() + listed->omitted(), kSessions + 1u) << "root-work too";
  EXPECT_LE(listed->ByteSizeLong(), 65536u);
  EXPECT_EQ(listed->sessions(0).client_name(), "root-work") << "oldest first";
}

TEST(SessionsStartupTest, AMissingAdminGroupIsRefusedAtStart) {
  absl::StatusOr<DaemonProcess> daemon =
      DaemonProcess::StartWithConfig("admin { group: \"gpucmd-no-such-admins\" }\n");
  ASSERT_FALSE(daemon.ok());
  EXPECT_THAT(std::string(daemon.status().message()), HasSubstr("gpucmd-no-such-admins"));
}

}  // namespace
}  // namespace gpucmd

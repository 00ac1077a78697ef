#include "server/rpc/peer_identity.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

TEST(PeerIdentityTest, AUnixConnectionNamesTheUserAndGroupsOfItsPeer) {
  int ends[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ends), 0);
  PeerIdentity peer = IdentifyUnixPeer(ends[0]);
  EXPECT_EQ(peer.kind, PeerIdentity::Kind::kUnixUser);
  EXPECT_EQ(peer.uid, getuid());
  ASSERT_FALSE(peer.groups.empty());
  EXPECT_EQ(peer.groups.front(), getgid());
  EXPECT_EQ(peer.Key(), "uid:" + std::to_string(getuid()));
  close(ends[0]);
  close(ends[1]);
}

TEST(PeerIdentityTest, OtherDescriptorsAreAnonymous) {
  int tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int pipe_ends[2];
  ASSERT_EQ(pipe2(pipe_ends, O_CLOEXEC), 0);
  for (int fd : {tcp, pipe_ends[0], -1, 100000}) {
    PeerIdentity peer = IdentifyUnixPeer(fd);
    EXPECT_EQ(peer.kind, PeerIdentity::Kind::kAnonymous) << fd;
    EXPECT_EQ(peer.Key(), "") << fd;
  }
  close(tcp);
  close(pipe_ends[0]);
  close(pipe_ends[1]);
}

TEST(PeerIdentityTest, AdministratorsAreRootTheAdminGroupAndListedSubjects) {
  const AdminPolicy policy{.group = 4242, .subjects = {"CN=ops,O=example"}};
  auto user = [](uid_t uid, std::vector<gid_t> groups) {
    return PeerIdentity{.kind = PeerIdentity::Kind::kUnixUser, .uid = uid, .groups = groups};
  };
  auto certificate = [](std::string subject) {
    return PeerIdentity{.kind = PeerIdentity::Kind::kCertificate, .subject = subject};
  };
  EXPECT_TRUE(policy.IsAdmin(user(0, {0})));
  EXPECT_TRUE(policy.IsAdmin(user(1000, {1000, 27, 4242})));
  EXPECT_TRUE(policy.IsAdmin(user(1000, {4242})));
  EXPECT_FALSE(policy.IsAdmin(user(1000, {1000, 27})));
  EXPECT_TRUE(policy.IsAdmin(certificate("CN=ops,O=example")));
  EXPECT_FALSE(policy.IsAdmin(certificate("CN=ops,O=example2")));
  EXPECT_FALSE(policy.IsAdmin(PeerIdentity()));
  EXPECT_FALSE(AdminPolicy().IsAdmin(user(1000, {4242}))) << "no admin group configured";
  EXPECT_TRUE(AdminPolicy{.daemon_user = 999}.IsAdmin(user(999, {999}))) << "the daemon's user";
  EXPECT_FALSE(AdminPolicy{.daemon_user = 999}.IsAdmin(user(1000, {999})));
  EXPECT_EQ(certificate("CN=ops").Key(), "x509:CN=ops");
}

}  // namespace
}  // namespace gpucmd

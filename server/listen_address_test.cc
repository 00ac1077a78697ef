#include "server/listen_address.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using ::testing::HasSubstr;

// Socket paths must fit sockaddr_un (108 bytes), which TEST_TMPDIR can exceed.
std::string TempPath(const std::string& name) {
  static const std::string* const kDirectory = [] {
    char pattern[] = "/tmp/gpucmd-test-XXXXXX";
    return new std::string(mkdtemp(pattern));
  }();
  return *kDirectory + "/" + name;
}

// Binds a Unix socket at `path`; listens when `listen` (a live daemon), else closes it
// again, leaving a stale socket file. Returns the fd (-1 when closed).
int BindSocket(const std::string& path, bool listen) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  if (listen) {
    EXPECT_EQ(::listen(fd, 1), 0);
    return fd;
  }
  close(fd);
  return -1;
}

TEST(IsLoopbackHostTest, OnlyThisMachine) {
  for (const char* host : {"localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"0.0.0.0", "::", "10.0.0.1", "example.com", "128.0.0.1", ""}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

TEST(ParseListenAddressTest, UnixAndTcp) {
  absl::StatusOr<ListenAddress> unix_address = ParseListenAddress("unix:/run/g.sock");
  ASSERT_TRUE(unix_address.ok());
  EXPECT_EQ(unix_address->kind, ListenAddress::Kind::kUnix);
  EXPECT_EQ(unix_address->GrpcUri(), "unix:/run/g.sock");

  absl::StatusOr<ListenAddress> tcp = ParseListenAddress("tcp:127.0.0.1:0");
  ASSERT_TRUE(tcp.ok());
  EXPECT_EQ(tcp->kind, ListenAddress::Kind::kTcp);
  EXPECT_EQ(tcp->GrpcUri(), "127.0.0.1:0");

  absl::StatusOr<ListenAddress> v6 = ParseListenAddress("tcp:[::1]:8080");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host_port.host, "::1");
  EXPECT_EQ(v6->GrpcUri(), "[::1]:8080");
}

TEST(ParseListenAddressTest, RejectsMalformed) {
  EXPECT_FALSE(ParseListenAddress("/run/g.sock").ok());
  EXPECT_FALSE(ParseListenAddress("unix:").ok());
  EXPECT_FALSE(ParseListenAddress("tcp:host").ok());
  EXPECT_FALSE(ParseListenAddress("tcp:host:70000").ok());
  EXPECT_FALSE(ParseListenAddress("unix:/" + std::string(200, 'x')).ok());
}

TEST(ClaimUnixSocketPathTest, FreePathIsFine) {
  EXPECT_TRUE(ClaimUnixSocketPath(TempPath("free.sock")).ok());
}

TEST(ClaimUnixSocketPathTest, StaleSocketIsRemoved) {
  std::string path = TempPath("stale.sock");
  BindSocket(path, /*listen=*/false);
  ASSERT_EQ(access(path.c_str(), F_OK), 0);
  EXPECT_TRUE(ClaimUnixSocketPath(path).ok());
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

TEST(ClaimUnixSocketPathTest, LiveSocketIsRefusedAndKept) {
  std::string path = TempPath("live.sock");
  int fd = BindSocket(path, /*listen=*/true);
  absl::Status status = ClaimUnixSocketPath(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("in use"));
  EXPECT_EQ(access(path.c_str(), F_OK), 0);
  close(fd);
  unlink(path.c_str());
}

TEST(ClaimUnixSocketPathTest, RegularFileIsNeverRemoved) {
  std::string path = TempPath("not-a-socket");
  std::ofstream(path) << "precious";
  absl::Status status = ClaimUnixSocketPath(path);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("not a socket"));
  EXPECT_EQ(access(path.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace gpucmd

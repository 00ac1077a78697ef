#include "server/unix_listener.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <future>
#include <string>

#include "gtest/gtest.h"

namespace gpucmd {
namespace {

std::string TempPath(const std::string& name) {
  char pattern[] = "/tmp/unix-listener-test-XXXXXX";
  return std::string(mkdtemp(pattern)) + "/" + name;
}

sockaddr_un AddressOf(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

// Connects to `path` and sends one byte; the connection, or -1.
int ConnectAndSend(const std::string& path, char byte) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address = AddressOf(path);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      send(fd, &byte, 1, MSG_NOSIGNAL) != 1) {
    close(fd);
    return -1;
  }
  return fd;
}

// A handler that reads the first byte of the first connection into a future.
struct FirstByte {
  std::promise<char> promise;
  bool set = false;
  UnixListener::Handler Handler() {
    return [this](int connection) {
      char byte = 0;
      if (recv(connection, &byte, 1, 0) == 1 && !set) {
        set = true;
        promise.set_value(byte);
      }
      close(connection);
    };
  }
};

TEST(UnixListenerTest, BoundSocketHandsConnectionsOverAndIsRemovedAtTheEnd) {
  const std::string path = TempPath("bound.sock");
  FirstByte first;
  std::future<char> received = first.promise.get_future();
  absl::StatusOr<std::unique_ptr<UnixListener>> listener =
      UnixListener::Bind(path, SOCK_STREAM, first.Handler());
  ASSERT_TRUE(listener.ok()) << listener.status();
  struct stat info;
  ASSERT_EQ(stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u) << "no access for others until the caller sets it";
  int client = ConnectAndSend(path, 'x');
  ASSERT_GE(client, 0);
  EXPECT_EQ(received.get(), 'x');
  close(client);
  EXPECT_FALSE((*listener)->adopted());
  listener->reset();
  EXPECT_NE(stat(path.c_str(), &info), 0) << "the path is removed";
}

TEST(UnixListenerTest, ABoundPathIsNotBoundTwice) {
  const std::string path = TempPath("twice.sock");
  absl::StatusOr<std::unique_ptr<UnixListener>> first =
      UnixListener::Bind(path, SOCK_STREAM, [](int connection) { close(connection); });
  ASSERT_TRUE(first.ok());
  absl::StatusOr<std::unique_ptr<UnixListener>> second =
      UnixListener::Bind(path, SOCK_STREAM, [](int connection) { close(connection); });
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(UnixListener::Bind(std::string(200, 'p'), SOCK_STREAM, nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(UnixListenerTest, AnAdoptedSocketIsServedAndLeftInPlace) {
  const std::string path = TempPath("adopted.sock");
  int passed = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address = AddressOf(path);
  ASSERT_EQ(bind(passed, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(passed, 8), 0);
  int early = ConnectAndSend(path, 'e');  // waits in the backlog until accepted
  ASSERT_GE(early, 0);
  FirstByte first;
  std::future<char> received = first.promise.get_future();
  absl::StatusOr<std::unique_ptr<UnixListener>> listener =
      UnixListener::Adopt(passed, path, first.Handler());
  ASSERT_TRUE(listener.ok());
  EXPECT_TRUE((*listener)->adopted());
  EXPECT_EQ(received.get(), 'e');
  close(early);
  listener->reset();
  struct stat info;
  EXPECT_EQ(stat(path.c_str(), &info), 0) << "the service manager's socket stays";
}

TEST(UnixListenerTest, StopEndsAcceptingAtOnce) {
  const std::string path = TempPath("stop.sock");
  int handled = 0;
  absl::StatusOr<std::unique_ptr<UnixListener>> listener =
      UnixListener::Bind(path, SOCK_STREAM, [&handled](int connection) {
        ++handled;
        close(connection);
      });
  ASSERT_TRUE(listener.ok());
  (*listener)->Stop();
  (*listener)->Stop();
  int late = ConnectAndSend(path, 'l');  // the backlog takes it; nobody accepts
  listener->reset();
  EXPECT_EQ(handled, 0);
  if (late >= 0) close(late);
}

}  // namespace
}  // namespace gpucmd

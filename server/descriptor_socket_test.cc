#include "server/descriptor_socket.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "base/send_descriptor.h"
#include "gtest/gtest.h"

namespace gpucmd {
namespace {

using Limits = DescriptorSocketServer::Limits;

// A connection as the server sees it (`server`, handed to Serve) and its client end.
struct Connection {
  int server = -1;
  int client = -1;
};

Connection Connect() {
  int ends[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, ends), 0);
  timeval timeout{.tv_sec = 10, .tv_usec = 0};
  setsockopt(ends[1], SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  return Connection{ends[0], ends[1]};
}

// Sends a memfd sealed against shrinking, as a region's must be.
void SendMemfd(int client) {
  const int memfd = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  EXPECT_EQ(fcntl(memfd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
  EXPECT_TRUE(SendDescriptor(client, memfd).ok());
  close(memfd);
}

// How many descriptors this process has open.
size_t OpenDescriptors() {
  return static_cast<size_t>(std::distance(std::filesystem::directory_iterator("/proc/self/fd"),
                                           std::filesystem::directory_iterator()));
}

// The server's answer (its kind, then its text: Note [Descriptor socket answers]); empty
// when it closed the connection unanswered.
std::string Answer(int client) {
  char reply[512];
  const ssize_t size = recv(client, reply, sizeof(reply), 0);
  EXPECT_GE(size, 0) << "no answer within the receive timeout";
  return size > 0 ? std::string(reply, size) : std::string();
}

bool WaitsUnanswered(int client) {
  char byte;
  return recv(client, &byte, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

class DescriptorSocketServerTest : public ::testing::Test {
 protected:
  void StartServer(Limits limits) {
    absl::StatusOr<std::unique_ptr<DescriptorSocketServer>> server =
        DescriptorSocketServer::Start(&handoffs_, limits);
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }

  // `count` connections handed to the server that send nothing.
  std::vector<Connection> ServeSilentConnections(int count) {
    std::vector<Connection> silent;
    for (int i = 0; i < count; ++i) {
      silent.push_back(Connect());
      server_->Serve(silent.back().server);
    }
    return silent;
  }

  // One connection more while `waiting` silent ones wait: refused at once, its answer
  // saying `words`.
  void ExpectRefusedAtLimit(int waiting, const std::string& words) {
    std::vector<Connection> silent = ServeSilentConnections(waiting);
    Connection one_more = Connect();
    server_->Serve(one_more.server);
    const std::string answer = Answer(one_more.client);
    ASSERT_FALSE(answer.empty());
    EXPECT_EQ(answer[0], kRefusedAtLimit);
    EXPECT_NE(answer.find(words), std::string::npos) << answer;
    for (const Connection& connection : silent) close(connection.client);
    close(one_more.client);
  }

  DescriptorHandoffs handoffs_{std::chrono::seconds(30), 64, 64};
  std::unique_ptr<DescriptorSocketServer> server_;
};

TEST_F(DescriptorSocketServerTest, AMessageAlreadyThereIsAnsweredWithAToken) {
  StartServer(Limits());
  Connection connection = Connect();
  SendMemfd(connection.client);
  server_->Serve(connection.server);
  const std::string answer = Answer(connection.client);
  ASSERT_FALSE(answer.empty());
  EXPECT_EQ(answer[0], kToken) << answer;
  close(connection.client);
}

TEST_F(DescriptorSocketServerTest, SilentConnectionsWaitBesideALaterMessage) {
  StartServer(Limits{.silence = std::chrono::seconds(30)});
  std::vector<Connection> silent = ServeSilentConnections(3);
  Connection late = Connect();
  server_->Serve(late.server);
  // Sent after Serve returned.
  SendMemfd(late.client);
  const std::string answer = Answer(late.client);
  ASSERT_FALSE(answer.empty());
  EXPECT_EQ(answer[0], kToken) << answer;
  for (const Connection& connection : silent) {
    EXPECT_TRUE(WaitsUnanswered(connection.client));
    close(connection.client);
  }
  close(late.client);
}

TEST_F(DescriptorSocketServerTest, AConnectionSilentPastItsTimeIsClosed) {
  StartServer(Limits{.silence = std::chrono::milliseconds(20)});
  Connection connection = Connect();
  server_->Serve(connection.server);
  EXPECT_EQ(Answer(connection.client), "");
  close(connection.client);
}

TEST_F(DescriptorSocketServerTest, AMessageWithoutOneDescriptorIsRefused) {
  StartServer(Limits());
  Connection connection = Connect();
  server_->Serve(connection.server);
  ASSERT_EQ(send(connection.client, "R", 1, MSG_NOSIGNAL), 1);
  const std::string answer = Answer(connection.client);
  ASSERT_FALSE(answer.empty());
  EXPECT_EQ(answer[0], kRefusedInvalid);
  EXPECT_NE(answer.find("exactly one descriptor"), std::string::npos) << answer;
  close(connection.client);
}

// What a region cannot be is refused as it arrives and not held: the server's copy of
// a pipe's read end is closed by the time the answer comes, so the write end breaks.
TEST_F(DescriptorSocketServerTest, ADescriptorThatIsNotASealedMemfdIsRefusedAndClosedAtOnce) {
  StartServer(Limits());
  auto refused = [&](int fd, const std::string& words) {
    Connection connection = Connect();
    EXPECT_TRUE(SendDescriptor(connection.client, fd).ok());
    server_->Serve(connection.server);
    const std::string answer = Answer(connection.client);
    close(connection.client);
    EXPECT_EQ(answer.substr(0, 1), std::string(1, kRefusedInvalid)) << answer;
    EXPECT_NE(answer.find(words), std::string::npos) << answer;
  };
  int pipe_ends[2];
  ASSERT_EQ(pipe2(pipe_ends, O_CLOEXEC), 0);
  refused(pipe_ends[0], "not one");
  close(pipe_ends[0]);
  signal(SIGPIPE, SIG_IGN);
  EXPECT_EQ(write(pipe_ends[1], "x", 1), -1) << "the server still holds the read end";
  EXPECT_EQ(errno, EPIPE);
  close(pipe_ends[1]);
  const int unsealed = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  refused(unsealed, "F_SEAL_SHRINK");
  close(unsealed);
  const int unsealable = memfd_create("test", MFD_CLOEXEC);
  refused(unsealable, "F_SEAL_SHRINK");
  close(unsealable);
  const int device = open("/dev/null", O_RDWR | O_CLOEXEC);
  refused(device, "not one");
  close(device);
}

// A handoff nobody registers is closed when its lifetime ends, with no other handoff or
// registration coming to have it noticed.
TEST_F(DescriptorSocketServerTest, AHandoffNobodyRegistersIsClosedWhenItsLifetimeEnds) {
  DescriptorHandoffs brief(std::chrono::milliseconds(50), 4, 4);
  absl::StatusOr<std::unique_ptr<DescriptorSocketServer>> server =
      DescriptorSocketServer::Start(&brief, Limits());
  ASSERT_TRUE(server.ok()) << server.status();
  const size_t before = OpenDescriptors();
  Connection connection = Connect();
  SendMemfd(connection.client);
  (*server)->Serve(connection.server);
  const std::string answer = Answer(connection.client);
  close(connection.client);
  ASSERT_EQ(answer.substr(0, 1), std::string(1, kToken)) << answer;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (OpenDescriptors() > before && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(OpenDescriptors(), before) << "the expired handoff is still held";
}

TEST_F(DescriptorSocketServerTest, AUsersWaitingConnectionsAreLimited) {
  StartServer(Limits{.silence = std::chrono::seconds(30), .max_waiting_per_user = 2});
  ExpectRefusedAtLimit(2, "this user's 2 connections");
}

TEST_F(DescriptorSocketServerTest, AllUsersWaitingConnectionsAreLimited) {
  StartServer(Limits{.silence = std::chrono::seconds(30), .max_waiting = 3});
  ExpectRefusedAtLimit(3, "at most 3 from all users");
}

TEST_F(DescriptorSocketServerTest, StoppingClosesTheConnectionsStillWaiting) {
  StartServer(Limits{.silence = std::chrono::seconds(30)});
  Connection connection = Connect();
  server_->Serve(connection.server);
  server_.reset();
  EXPECT_EQ(Answer(connection.client), "");
  close(connection.client);
}

}  // namespace
}  // namespace gpucmd

#include "server/descriptor_socket.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
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

void SendMemfd(int client) {
  const int memfd = memfd_create("test", MFD_CLOEXEC);
  EXPECT_TRUE(SendDescriptor(client, memfd).ok());
  close(memfd);
}

// The server's answer ("T..." or "E..."); empty when it closed the connection unanswered.
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
  EXPECT_EQ(answer[0], 'T') << answer;
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
  EXPECT_EQ(answer[0], 'T') << answer;
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
  EXPECT_EQ(answer[0], 'E');
  EXPECT_NE(answer.find("exactly one descriptor"), std::string::npos) << answer;
  close(connection.client);
}

TEST_F(DescriptorSocketServerTest, AUsersWaitingConnectionsAreLimited) {
  StartServer(Limits{.silence = std::chrono::seconds(30), .max_waiting_per_user = 2});
  std::vector<Connection> silent = ServeSilentConnections(2);
  Connection one_more = Connect();
  server_->Serve(one_more.server);
  const std::string answer = Answer(one_more.client);
  ASSERT_FALSE(answer.empty());
  EXPECT_EQ(answer[0], 'E');
  EXPECT_NE(answer.find("too many"), std::string::npos) << answer;
  for (const Connection& connection : silent) close(connection.client);
  close(one_more.client);
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

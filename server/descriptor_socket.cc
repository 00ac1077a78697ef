#include "server/descriptor_socket.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/rpc/peer_identity.h"

namespace gpucmd {
namespace {

constexpr int kMaxDescriptorsPerMessage = 4;

void Reply(int connection, char kind, const std::string& text) {
  std::string message = std::string(1, kind) + text;
  send(connection, message.data(), message.size(), MSG_NOSIGNAL);
}

void ServeConnection(int connection, DescriptorHandoffs& handoffs) {
  timeval timeout{.tv_sec = 1, .tv_usec = 0};
  setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  char payload[64];
  iovec data{.iov_base = payload, .iov_len = sizeof(payload)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxDescriptorsPerMessage)];
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  if (recvmsg(connection, &message, MSG_CMSG_CLOEXEC) < 0) return;
  std::vector<int> received;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      received.push_back(fd);
    }
  }
  if (received.size() != 1 || (message.msg_flags & MSG_CTRUNC) != 0) {
    for (int fd : received) close(fd);
    Reply(connection, 'E', "send exactly one descriptor (SCM_RIGHTS) per connection");
    return;
  }
  absl::StatusOr<std::string> token =
      handoffs.Put(received.front(), IdentifyUnixPeer(connection).Key());
  if (token.ok()) {
    Reply(connection, 'T', *token);
  } else {
    Reply(connection, 'E', std::string(token.status().message()));
  }
}

}  // namespace

std::string DescriptorSocketPathFor(const std::string& grpc_socket_path) {
  return grpc_socket_path + ".fds";
}

void ServeDescriptorHandoff(int connection, DescriptorHandoffs& handoffs) {
  ServeConnection(connection, handoffs);
  close(connection);
}

}  // namespace gpucmd

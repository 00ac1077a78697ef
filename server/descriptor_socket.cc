#include "server/descriptor_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"

namespace gpucmd {
namespace {

constexpr int kMaxDescriptorsPerMessage = 4;

void Reply(int connection, char kind, const std::string& text) {
  std::string message = std::string(1, kind) + text;
  send(connection, message.data(), message.size(), MSG_NOSIGNAL);
}

}  // namespace

std::string DescriptorSocket::PathFor(const std::string& grpc_socket_path) {
  return grpc_socket_path + ".fds";
}

absl::StatusOr<std::unique_ptr<DescriptorSocket>> DescriptorSocket::Listen(
    const std::string& path, DescriptorHandoffs* handoffs) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  int listener = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (listener < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  unlink(path.c_str());  // the gRPC socket's path was claimed already; this is its sibling
  const mode_t umask_before = umask(0177);
  const int bound = bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  umask(umask_before);
  int stop[2];
  if (bound != 0 || listen(listener, 64) != 0 || pipe2(stop, O_CLOEXEC) != 0) {
    const int error = errno;
    close(listener);
    return absl::UnavailableError(absl::StrCat("cannot listen on ", path, ": ", strerror(error)));
  }
  return std::unique_ptr<DescriptorSocket>(
      new DescriptorSocket(path, listener, stop[0], stop[1], handoffs));
}

DescriptorSocket::DescriptorSocket(std::string path, int listener, int stop_read,
                                   int stop_write, DescriptorHandoffs* handoffs)
    : path_(std::move(path)),
      listener_(listener),
      stop_read_(stop_read),
      stop_write_(stop_write),
      handoffs_(handoffs),
      thread_([this] { Serve(); }) {}

DescriptorSocket::~DescriptorSocket() {
  close(stop_write_);  // the serving thread sees the pipe's end
  thread_.join();
  close(stop_read_);
  close(listener_);
  unlink(path_.c_str());
}

void DescriptorSocket::Serve() {
  while (true) {
    pollfd ready[2] = {{.fd = listener_, .events = POLLIN, .revents = 0},
                       {.fd = stop_read_, .events = POLLIN, .revents = 0}};
    if (poll(ready, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (ready[1].revents != 0) return;
    int connection = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) continue;
    ServeConnection(connection);
    close(connection);
  }
}

void DescriptorSocket::ServeConnection(int connection) {
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
  absl::StatusOr<std::string> token = handoffs_->Put(received.front());
  if (token.ok()) {
    Reply(connection, 'T', *token);
  } else {
    Reply(connection, 'E', std::string(token.status().message()));
  }
}

}  // namespace gpucmd

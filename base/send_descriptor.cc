#include "base/send_descriptor.h"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace gpucmd {

absl::Status SendDescriptor(int connection, int fd, char tag) {
  iovec data{.iov_base = &tag, .iov_len = 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  cmsghdr* header = CMSG_FIRSTHDR(&message);
  header->cmsg_level = SOL_SOCKET;
  header->cmsg_type = SCM_RIGHTS;
  header->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(header), &fd, sizeof(int));
  if (sendmsg(connection, &message, MSG_NOSIGNAL) != 1) {
    return absl::UnavailableError(
        absl::StrCat("cannot send the descriptor: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace gpucmd

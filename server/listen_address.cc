#include "server/listen_address.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/string_view.h"
#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace gpucmd {

bool IsLoopbackHost(absl::string_view host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  in_addr address{};
  std::string text(host);
  return inet_pton(AF_INET, text.c_str(), &address) == 1 &&
         (ntohl(address.s_addr) >> 24) == 127;
}

absl::StatusOr<HostPort> ParseHostPort(absl::string_view text) {
  size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not HOST:PORT"));
  }
  HostPort result;
  result.host = std::string(text.substr(0, colon));
  if (result.host.front() == '[' && result.host.back() == ']') {
    result.host = result.host.substr(1, result.host.size() - 2);
  }
  if (!absl::SimpleAtoi(text.substr(colon + 1), &result.port) || result.port < 0 ||
      result.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" has no valid port (0..65535)"));
  }
  return result;
}

std::string ListenAddress::GrpcUri() const {
  if (kind == Kind::kUnix) return absl::StrCat("unix:", path);
  if (absl::StrContains(host_port.host, ':')) {
    return absl::StrCat("[", host_port.host, "]:", host_port.port);
  }
  return absl::StrCat(host_port.host, ":", host_port.port);
}

absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text) {
  ListenAddress address;
  if (absl::ConsumePrefix(&text, "unix:")) {
    if (text.empty()) return absl::InvalidArgumentError("unix: address without a path");
    if (text.size() >= sizeof(sockaddr_un::sun_path)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unix socket path \"", text, "\" is longer than ",
                       sizeof(sockaddr_un::sun_path) - 1, " bytes"));
    }
    address.kind = ListenAddress::Kind::kUnix;
    address.path = std::string(text);
    return address;
  }
  if (absl::ConsumePrefix(&text, "tcp:")) {
    absl::StatusOr<HostPort> host_port = ParseHostPort(text);
    if (!host_port.ok()) return host_port.status();
    address.kind = ListenAddress::Kind::kTcp;
    address.host_port = *std::move(host_port);
    return address;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", text, "\" must start with unix: or tcp:"));
}

absl::Status ClaimUnixSocketPath(const std::string& path, int type) {
  struct stat info;
  if (lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat("cannot inspect socket path ", path, ": ", std::strerror(errno)));
  }
  if (!S_ISSOCK(info.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a socket; refusing to replace it"));
  }
  int probe = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (probe < 0) {
    return absl::InternalError(absl::StrCat("socket(): ", std::strerror(errno)));
  }
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  bool live = connect(probe, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
  int connect_errno = errno;
  close(probe);
  if (live) {
    return absl::FailedPreconditionError(absl::StrCat(
        "socket ", path, " is in use by a live process (another gpucmdd?); refusing to "
        "take it over"));
  }
  if (connect_errno != ECONNREFUSED && connect_errno != ENOENT) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot probe socket ", path, ": ", std::strerror(connect_errno)));
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot remove stale socket ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace gpucmd

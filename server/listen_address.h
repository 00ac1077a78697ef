#ifndef GPUCMDD_SERVER_LISTEN_ADDRESS_H_
#define GPUCMDD_SERVER_LISTEN_ADDRESS_H_

// Listener addresses of the daemon: "unix:PATH" and "tcp:HOST:PORT" for gRPC,
// "HOST:PORT" for the HTTP endpoint.

#include <sys/socket.h>

#include <string>
#include <string_view>

#include "absl/strings/string_view.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpucmd {

struct HostPort {
  std::string host;
  int port = 0;  // 0: the kernel picks a free port.
};

// True for hosts only this machine reaches: localhost, 127.0.0.0/8 and ::1.
bool IsLoopbackHost(absl::string_view host);

// Parses "HOST:PORT" (IPv6 hosts in brackets). INVALID_ARGUMENT when malformed.
absl::StatusOr<HostPort> ParseHostPort(absl::string_view text);

struct ListenAddress {
  enum class Kind { kUnix, kTcp };
  Kind kind = Kind::kUnix;
  std::string path;    // kUnix
  HostPort host_port;  // kTcp

  // The address in gRPC's URI syntax ("unix:/path", "host:port").
  std::string GrpcUri() const;
};

// Parses "unix:PATH" (PATH absolute or relative) or "tcp:HOST:PORT".
absl::StatusOr<ListenAddress> ParseListenAddress(absl::string_view text);

// Makes `path` free for a new Unix listener of socket `type` (SOCK_STREAM,
// SOCK_SEQPACKET): a stale socket file (nobody accepts on it) is removed; a socket a
// live process accepts on is FAILED_PRECONDITION ("in use"); a path that exists but is
// not a socket is FAILED_PRECONDITION too. Nothing is removed in the error cases.
absl::Status ClaimUnixSocketPath(const std::string& path, int type = SOCK_STREAM);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_LISTEN_ADDRESS_H_

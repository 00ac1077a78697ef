#ifndef GPUCMDD_SERVER_RPC_PEER_IDENTITY_H_
#define GPUCMDD_SERVER_RPC_PEER_IDENTITY_H_

// Who is calling, as far as the transport proves it.
//
// Note [Peer identity]
// ~~~~~~~~~~~~~~~~~~~~
// gRPC's own Unix-socket listener tells a handler nothing about the peer. So the daemon
// accepts Unix connections itself (server/unix_listener.h) and hands each to gRPC by
// descriptor (grpc::AddInsecureChannelFromFd): a call's peer() then names that
// descriptor, "fd:N", and the kernel's SO_PEERCRED and SO_PEERGROUPS on it give the
// uid, gid and groups of the process that connected. On TCP with client certificates
// (tls.client_ca_file) the verified certificate's subject names the caller. Anything
// else (plaintext TCP, the in-process channel) is anonymous.
//
// The identity owns sessions (a caller lists only its own unless it is an
// administrator) and is what limits.max_sessions_per_client counts. A descriptor is
// reused only once gRPC has closed its connection, so a call can be misattributed only
// after its connection is gone, when its reply reaches nobody.
//
// Thread-safety: free functions; AdminPolicy is immutable after construction.

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "grpcpp/server_context.h"

namespace gpucmd {

struct PeerIdentity {
  enum class Kind { kAnonymous, kUnixUser, kCertificate };
  Kind kind = Kind::kAnonymous;
  uid_t uid = 0;               // kUnixUser
  std::vector<gid_t> groups;   // kUnixUser: its primary group first
  std::string subject;         // kCertificate

  // What sessions are owned by: "uid:1000", "x509:CN=...", or "" when anonymous.
  std::string Key() const;
};

// The identity behind a call's connection (Note [Peer identity]).
PeerIdentity IdentifyPeer(const grpc::ServerContextBase& context);

// The Unix user connected on `connection`; anonymous when it is not a Unix socket.
PeerIdentity IdentifyUnixPeer(int connection);

// Who may see every session: uid 0, the daemon's own user (who can read its memory
// anyway; e.g. an operator in the daemon's container), members of `group`, and TLS
// clients whose certificate subject is one of `subjects`.
struct AdminPolicy {
  std::optional<uid_t> daemon_user;
  std::optional<gid_t> group;
  std::vector<std::string> subjects;

  bool IsAdmin(const PeerIdentity& peer) const;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RPC_PEER_IDENTITY_H_

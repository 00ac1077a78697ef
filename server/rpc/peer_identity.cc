#include "server/rpc/peer_identity.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/strings/string_view.h"
#include "grpc/grpc_security_constants.h"

namespace gpucmd {

std::string PeerIdentity::Key() const {
  switch (kind) {
    case Kind::kUnixUser:
      return absl::StrCat("uid:", uid);
    case Kind::kCertificate:
      return absl::StrCat("x509:", subject);
    case Kind::kAnonymous:
      break;
  }
  return "";
}

PeerIdentity IdentifyUnixPeer(int connection) {
  PeerIdentity peer;
  int domain = 0;
  socklen_t length = sizeof(domain);
  if (getsockopt(connection, SOL_SOCKET, SO_DOMAIN, &domain, &length) != 0 ||
      domain != AF_UNIX) {
    return peer;
  }
  ucred credentials{};
  length = sizeof(credentials);
  if (getsockopt(connection, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return peer;
  peer.kind = PeerIdentity::Kind::kUnixUser;
  peer.uid = credentials.uid;
  peer.groups = {credentials.gid};
  std::vector<gid_t> supplementary(64);
  length = static_cast<socklen_t>(supplementary.size() * sizeof(gid_t));
  int listed = getsockopt(connection, SOL_SOCKET, SO_PEERGROUPS, supplementary.data(), &length);
  if (listed != 0 && errno == ERANGE) {  // `length` now says how many there are
    supplementary.resize(length / sizeof(gid_t));
    listed = getsockopt(connection, SOL_SOCKET, SO_PEERGROUPS, supplementary.data(), &length);
  }
  if (listed == 0) {
    supplementary.resize(length / sizeof(gid_t));
    peer.groups.insert(peer.groups.end(), supplementary.begin(), supplementary.end());
  }
  return peer;
}

PeerIdentity IdentifyPeer(const grpc::ServerContextBase& context) {
  const std::string peer_string = context.peer();
  absl::string_view peer_name = peer_string;
  int connection = -1;
  if (absl::ConsumePrefix(&peer_name, "fd:") && absl::SimpleAtoi(peer_name, &connection)) {
    return IdentifyUnixPeer(connection);
  }
  PeerIdentity peer;
  const std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth != nullptr && auth->IsPeerAuthenticated()) {
    const std::vector<grpc::string_ref> subjects =
        auth->FindPropertyValues(GRPC_X509_SUBJECT_PROPERTY_NAME);
    if (!subjects.empty()) {
      peer.kind = PeerIdentity::Kind::kCertificate;
      peer.subject.assign(subjects.front().data(), subjects.front().size());
    }
  }
  return peer;
}

bool AdminPolicy::IsAdmin(const PeerIdentity& peer) const {
  switch (peer.kind) {
    case PeerIdentity::Kind::kUnixUser:
      return peer.uid == 0 || peer.uid == daemon_user ||
             (group.has_value() &&
              std::find(peer.groups.begin(), peer.groups.end(), *group) != peer.groups.end());
    case PeerIdentity::Kind::kCertificate:
      return std::find(subjects.begin(), subjects.end(), peer.subject) != subjects.end();
    case PeerIdentity::Kind::kAnonymous:
      break;
  }
  return false;
}

}  // namespace gpucmd

#ifndef GPUCMDD_SERVER_CONNECTION_QUOTA_H_
#define GPUCMDD_SERVER_CONNECTION_QUOTA_H_

// Note [Connections per client]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// Every open gRPC connection costs the daemon a descriptor and some tens of KiB, and
// limits.max_calls_per_connection bounds only what one connection may hold: a client
// that opened connections without end would exhaust the daemon's descriptors (refusing
// every other user) and multiply what its calls may hold. So the daemon admits at most
// limits.max_connections_per_client Unix connections per user at once; one more is
// closed as soon as it is accepted (the client sees UNAVAILABLE) and logged, the first
// refusal of a run of refusals at warning level, later ones at debug.
//
// gRPC owns an admitted connection and closes it when it ends without telling anyone.
// So the quota remembers the descriptor of each and which socket it was (device and
// inode), and counts a user's connections again only when the user reaches the limit:
// a connection whose descriptor no longer names the same socket has ended. A descriptor
// is reused only after its close, and a socket's inode is not another live socket's, so
// an ended connection is never counted as open.
//
// Thread-safety: Admit may be called from any thread (each Unix listener accepts on its
// own, and a user's connections to all of them count together).

#include <sys/types.h>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "base/mutex.h"

namespace gpucmd {

class ConnectionQuota {
 public:
  explicit ConnectionQuota(size_t max_per_user) : max_per_user_(max_per_user) {}

  // Counts `connection`, accepted from `user` (a PeerIdentity key), against the user's
  // quota: OK when admitted, else RESOURCE_EXHAUSTED naming the limit (the caller then
  // closes it). `first_refusal` is set when this refusal starts a run of refusals.
  absl::Status Admit(int connection, const std::string& user, bool* first_refusal);

 private:
  struct Connection {
    int descriptor;
    dev_t device;
    ino_t inode;
  };
  struct UserConnections {
    std::vector<Connection> open;
    bool refusing = false;
  };

  const size_t max_per_user_;
  Mutex mutex_;
  std::map<std::string, UserConnections> users_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CONNECTION_QUOTA_H_

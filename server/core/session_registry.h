#ifndef GPUCMDD_SERVER_CORE_SESSION_REGISTRY_H_
#define GPUCMDD_SERVER_CORE_SESSION_REGISTRY_H_

// The daemon's open sessions, by token. A token is 128 random bits in hex: knowing
// another session's numeric id gets a client nothing. The registry also tracks each
// session's liveness so abandoned sessions are reclaimed:
//   - a session with a lease stream (KeepAlive) lives while the stream is open; when it
//     breaks (the client died), the session expires after `lease_grace`;
//   - a session without a lease expires after `idle_timeout` without a request.
//
// Thread-safety: all methods may be called from any thread.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "server/command/ids.h"

namespace gpucmd {

struct SessionInfo {
  SessionId id = 0;
  uint32_t device = 0;
  std::string client_name;
  // Who opened it (PeerIdentity::Key in server/rpc/peer_identity.h); empty: anonymous.
  std::string owner;
  std::chrono::steady_clock::time_point opened;
  // True from the moment the registry forgets the session (closed or expired), which is
  // before its reclaim is queued on its device: work of it that reaches the device after
  // the reclaim is refused instead of holding memory for a session that is gone
  // (Batch::Run). Null for a session no registry opened (tests): never closed.
  std::shared_ptr<const std::atomic<bool>> closed;
};

struct SessionLimits {
  uint32_t max_sessions = 4096;
  // By owner; by client name for anonymous owners.
  uint32_t max_sessions_per_client = 1024;
  uint32_t max_client_name_bytes = 256;
};

class SessionRegistry {
 public:
  using Clock = std::chrono::steady_clock;

  SessionRegistry(Clock::duration idle_timeout, Clock::duration lease_grace,
                  SessionLimits limits = SessionLimits())
      : idle_timeout_(idle_timeout), lease_grace_(lease_grace), limits_(limits) {}

  // Registers a new session of `owner` (empty: anonymous); returns its token.
  // RESOURCE_EXHAUSTED naming the limit when the daemon or the client (the owner, else
  // the client name) has as many sessions open as it may; INVALID_ARGUMENT for a client
  // name past its limit.
  absl::StatusOr<std::string> Open(uint32_t device, std::string client_name, std::string owner,
                                   Clock::time_point now);
  // The session behind `token`, marking it active. NOT_FOUND for unknown tokens.
  absl::StatusOr<SessionInfo> Touch(const std::string& token, Clock::time_point now);
  // Removes the session; nullopt when unknown.
  std::optional<SessionInfo> Close(const std::string& token);

  // A lease stream opened or closed for the session; false for unknown tokens.
  bool LeaseOpened(const std::string& token, Clock::time_point now);
  void LeaseClosed(const std::string& token, Clock::time_point now);

  // From now on Open and Touch answer `status` (the daemon is draining): calls that
  // passed Touch before finish, new ones end at once with it.
  void RefuseNewWork(absl::Status status);

  // Removes and returns the sessions that expired by `now`.
  std::vector<SessionInfo> TakeExpired(Clock::time_point now);

  size_t size() const;
  // How long a session without a lease lives after its last request.
  Clock::duration idle_timeout() const { return idle_timeout_; }
  // Every open session.
  std::vector<SessionInfo> Snapshot() const;

 private:
  struct Entry {
    SessionInfo info;
    std::shared_ptr<std::atomic<bool>> closed;  // info.closed
    Clock::time_point last_active;
    int open_leases = 0;
    std::optional<Clock::time_point> lease_lost;
  };

  // Forgets `it`'s session.
  void EraseLocked(absl::flat_hash_map<std::string, Entry>::iterator it)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const Clock::duration idle_timeout_;
  const Clock::duration lease_grace_;
  const SessionLimits limits_;
  mutable Mutex mutex_;
  SessionId next_id_ ABSL_GUARDED_BY(mutex_) = 1;
  absl::flat_hash_map<std::string, Entry> sessions_ ABSL_GUARDED_BY(mutex_);
  // By ClientKey.
  absl::flat_hash_map<std::string, uint32_t> sessions_per_client_ ABSL_GUARDED_BY(mutex_);
  absl::Status refusal_ ABSL_GUARDED_BY(mutex_);  // not OK once the daemon drains
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_SESSION_REGISTRY_H_

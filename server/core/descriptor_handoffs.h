#ifndef GPUCMDD_SERVER_CORE_DESCRIPTOR_HANDOFFS_H_
#define GPUCMDD_SERVER_CORE_DESCRIPTOR_HANDOFFS_H_

// Descriptors a client handed over on the descriptor socket (server/descriptor_socket.h)
// and has not yet registered (Note [Shared-memory regions] in shared_memory.h): each
// waits under an unguessable token that the client then names in RegisterSharedMemory,
// bound to who handed it over (the peer's identity key, server/rpc/peer_identity.h): a
// token is the proof of possession only in the hands of that same peer. A token is taken
// once; a descriptor not taken within its lifetime is closed (CloseExpired); at most
// `capacity` wait at a time, at most `capacity_per_owner` of them from one owner (so that
// one user cannot hold every place and keep the others from registering).
//
// Thread-safety: every method may be called from any thread.

#include <chrono>
#include <cstddef>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"

namespace gpucmd {

class DescriptorHandoffs {
 public:
  using Clock = std::chrono::steady_clock;

  DescriptorHandoffs(std::chrono::milliseconds lifetime, size_t capacity,
                     size_t capacity_per_owner)
      : lifetime_(lifetime), capacity_(capacity), capacity_per_owner_(capacity_per_owner) {}
  ~DescriptorHandoffs();
  DescriptorHandoffs(const DescriptorHandoffs&) = delete;
  DescriptorHandoffs& operator=(const DescriptorHandoffs&) = delete;

  // Keeps `fd` (taken: closed on error), handed over by `owner` (not empty), and returns
  // its token. RESOURCE_EXHAUSTED when `capacity` descriptors wait already, or
  // `capacity_per_owner` of `owner`'s.
  absl::StatusOr<std::string> Put(int fd, std::string owner, Clock::time_point now = Clock::now());

  // The descriptor under `token`, now the caller's to close, when `caller` is the owner
  // it was put with. INVALID_ARGUMENT, with the same words whichever it is, for a token
  // that is unknown, taken, expired or another owner's; another owner's stays for its own.
  absl::StatusOr<int> Take(const std::string& token, const std::string& caller,
                           Clock::time_point now = Clock::now());

  // Closes the descriptors whose lifetime ended by `now` (Put and Take do too) and returns
  // when the next of those still waiting will end: Clock::time_point::max() when none
  // waits. The owner of this registry calls it by then, so that a descriptor nobody
  // registers is closed when its lifetime ends, not whenever the next handoff comes.
  Clock::time_point CloseExpired(Clock::time_point now = Clock::now());

 private:
  struct Waiting {
    int fd;
    std::string owner;
    Clock::time_point expires;
  };
  void CloseExpiredLocked(Clock::time_point now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  const std::chrono::milliseconds lifetime_;
  const size_t capacity_;
  const size_t capacity_per_owner_;
  Mutex mutex_;
  absl::flat_hash_map<std::string, Waiting> waiting_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_DESCRIPTOR_HANDOFFS_H_

#ifndef GPUCMDD_SERVER_CORE_SHARED_MEMORY_H_
#define GPUCMDD_SERVER_CORE_SHARED_MEMORY_H_

// Note [Shared-memory regions]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A client that shares memory with the daemon moves bytes without sending them: it
// creates a memfd, seals it against shrinking (F_SEAL_SHRINK), hands the descriptor to
// the daemon over the descriptor socket (server/descriptor_socket.h; SCM_RIGHTS, so it
// works whichever user the client runs as, and no path is ever opened), and registers
// it for its session. Writes then name (region, offset, size) as their source and reads
// as their destination: one copy between the region and device memory.
//
// Only sealed memfds are accepted (tmpfs, or hugetlbfs where the client asked for huge
// pages: mapped in whole huge pages; shared_memory_object.h), checked as the descriptor
// arrives and again when it is registered: a file the client could shrink would turn the
// daemon's next access into SIGBUS. Each region is mapped once, shared, for reading and
// writing; every slice is bounds-checked; regions belong to one session (another
// session's region is NOT_FOUND, as an unknown one is) and go when it ends. A Slice
// holds its region mapped, so a region unregistered while a copy still uses it stays
// mapped until that copy has completed and released it. Regions per session and mapped
// bytes in all are limited. A region whose pages go away while mapped (a hole punched
// in a hugetlbfs memfd) cannot bring the daemon down: Note [Faults in client memory] in
// region_fault_guard.h.
//
// On a GPU a region is also registered with the device (page-locked for DMA): the
// server attaches the registration once the session's device made it, and from then on
// slices say they are pinned, so copies go straight between the client's pages and the
// device. A region the driver would not register still works, staged through pinned
// memory (Note [Staging through pinned chunks] in server/command/command.h). The
// registration ends before the region is unmapped.
//
// Thread-safety: every method may be called from any thread.

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "driver/bytes.h"
#include "driver/types.h"
#include "server/command/ids.h"

namespace gpucmd {

using RegionId = uint64_t;

class SharedMemoryTable {
 public:
  struct Limits {
    uint32_t max_regions_per_session = 64;
    uint64_t max_mapped_bytes = uint64_t{64} << 30;
    // Registered with the device (page-locked) at once, all regions together.
    uint64_t max_registered_bytes = uint64_t{8} << 30;
  };

  struct Usage {
    uint64_t regions = 0;
    uint64_t mapped_bytes = 0;
  };

  explicit SharedMemoryTable(Limits limits) : limits_(limits) {}
  ~SharedMemoryTable();
  SharedMemoryTable(const SharedMemoryTable&) = delete;
  SharedMemoryTable& operator=(const SharedMemoryTable&) = delete;

  // Maps the first `size_bytes` of `fd` (taken: closed whatever happens) for `session`.
  // INVALID_ARGUMENT when it is not a memfd sealed against shrinking, or smaller than
  // `size_bytes`; RESOURCE_EXHAUSTED naming the limit.
  absl::StatusOr<RegionId> Register(SessionId session, int fd, uint64_t size_bytes);

  // Registers the whole of `session`'s `region` with its device through `register_host`
  // when the registered bytes stay within the limit, and keeps the registration until
  // the region is unmapped: later slices are pinned(). False (the region still works,
  // staged) past the limit, when `register_host` fails, or when the region has gone.
  bool RegisterWithDevice(
      SessionId session, RegionId region,
      absl::FunctionRef<absl::StatusOr<HostRegistration>(const HostResource&)> register_host);

  // NOT_FOUND for an unknown or foreign region.
  absl::Status Unregister(SessionId session, RegionId region);

  // [offset, offset + size) of the session's region, which stays mapped (and
  // registered) while the returned Bytes lives; pinned() once a registration is
  // attached. NOT_FOUND as above; INVALID_ARGUMENT past the region's end;
  // FAILED_PRECONDITION once the region lost its memory (Note [Faults in client memory]).
  absl::StatusOr<Bytes> Slice(SessionId session, RegionId region, uint64_t offset_bytes,
                              uint64_t size_bytes) const;

  // Unregisters every region of `session`.
  void DropSession(SessionId session);

  Usage usage() const;
  uint32_t RegionsOf(SessionId session) const;

 private:
  class Mapping;
  struct Key {
    SessionId session;
    RegionId region;
    template <typename H>
    friend H AbslHashValue(H hash, const Key& key) {
      return H::combine(std::move(hash), key.session, key.region);
    }
    bool operator==(const Key& other) const {
      return session == other.session && region == other.region;
    }
  };

  const Limits limits_;
  mutable Mutex mutex_;
  absl::flat_hash_map<Key, std::shared_ptr<Mapping>> regions_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<SessionId, uint32_t> per_session_ ABSL_GUARDED_BY(mutex_);
  uint64_t mapped_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  // Registered bytes; shared with the registrations, which may end after the table.
  std::shared_ptr<std::atomic<uint64_t>> registered_bytes_ =
      std::make_shared<std::atomic<uint64_t>>(0);
  RegionId next_region_ ABSL_GUARDED_BY(mutex_) = 1;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_SHARED_MEMORY_H_

#ifndef GPUCMDD_SERVER_COMMAND_PINNED_POOL_H_
#define GPUCMDD_SERVER_COMMAND_PINNED_POOL_H_

// Note [Pinned pool]
// ~~~~~~~~~~~~~~~~~~
// Host->device copies of small payloads are staged in pinned host memory (page-locked
// on a GPU, so the copy is truly asynchronous). Pinning is expensive, so allocations
// are cached by power-of-two size class and handed out again; the backend's allocator
// is called only on a miss. Cached (idle) bytes are capped; beyond the cap, released
// allocations go back to the backend.
//
// Handed-out memory is wrapped in Bytes by the driver (Driver::PinnedBytes); when the
// Bytes die, Release puts the allocation back. The pool counts what is outstanding and
// can report every release to an observer, which is how tests prove that staged bytes
// outlive the copies that read them.
//
// Thread-safety: all methods may be called from any thread (Bytes die on the device
// thread, stream workers or gRPC threads). The pool must outlive every Bytes it handed
// out.

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "driver/types.h"

namespace gpucmd {

class PinnedPool final : public PinnedOwner {
 public:
  using AllocateFn = absl::AnyInvocable<absl::StatusOr<HostResource>(uint64_t)>;
  using FreeFn = absl::AnyInvocable<void(const HostResource&)>;

  struct Lease {
    PinnedBinding binding;
    HostResource resource;  // at least the requested size
  };

  PinnedPool(AllocateFn allocate, FreeFn free, uint64_t max_cached_bytes);
  ~PinnedPool() override;

  // An allocation of at least `size_bytes`; RESOURCE_EXHAUSTED when the backend refuses.
  absl::StatusOr<Lease> Acquire(uint64_t size_bytes);
  void Release(uint64_t allocation) override;

  // Gives every cached (idle) allocation back to the backend.
  void Trim();

  // Called (outside the pool's lock) with each released allocation's number.
  void SetReleaseObserver(absl::AnyInvocable<void(uint64_t)> observer);

  uint64_t outstanding_count() const;
  uint64_t outstanding_bytes() const;
  uint64_t cached_bytes() const;

 private:
  struct Allocation {
    HostResource resource;
    bool in_use = false;
  };

  static int SizeClass(uint64_t size_bytes);
  void FreeLocked(uint64_t allocation) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);

  AllocateFn allocate_;
  FreeFn free_;
  const uint64_t max_cached_bytes_;
  mutable Mutex mutex_;
  uint64_t next_allocation_ ABSL_GUARDED_BY(mutex_) = 1;
  absl::flat_hash_map<uint64_t, Allocation> allocations_ ABSL_GUARDED_BY(mutex_);
  // Per size class: idle allocations ready to hand out.
  std::vector<std::vector<uint64_t>> idle_ ABSL_GUARDED_BY(mutex_);
  uint64_t outstanding_count_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t outstanding_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t cached_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  absl::AnyInvocable<void(uint64_t)> observer_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_PINNED_POOL_H_

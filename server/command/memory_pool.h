#ifndef GPUCMDD_SERVER_COMMAND_MEMORY_POOL_H_
#define GPUCMDD_SERVER_COMMAND_MEMORY_POOL_H_

// Note [Device memory pool]
// ~~~~~~~~~~~~~~~~~~~~~~~~~
// Device memory is taken from the driver in pages and carved into slices. A request is
// rounded up to a power-of-two size class (at least min_slice_bytes); each page serves
// one class, so its slices are equal and a free slice is found without searching.
// Requests above a quarter of the page size get a page of their own ("large" pages,
// rounded to 64 KiB), returned to the driver as soon as they are released.
//
// The page size grows with the pool (an eighth of what is reserved, a power of two
// between min_page_bytes and max_page_bytes). Class pages made at a smaller page size
// become *outdated*; class pages whose occupancy fell below sparse_page_fraction while
// another page of their class exists are *fragmented*. Both are what relocation
// evacuates (see Note [Relocation] in command.h): the command reserves targets while
// the page is *retired* (no new slices land on it), copies, then commits.
//
// Identity: every slot records the owner (a buffer descriptor id) it was reserved for,
// and page ids are never reused, so a stale location can never resolve to someone
// else's memory: Resolve checks both.
//
// "Never fits" (larger than the device) and "not right now" (no room: worth draining
// and retrying once) are distinct: NeverFits() says which before Reserve is tried.
//
// Thread-safety: owned by the device thread, which alone touches it; no lock.

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "driver/types.h"

namespace gpucmd {

struct SliceLocation {
  uint64_t page = 0;
  uint32_t slot = 0;
  friend bool operator==(const SliceLocation&, const SliceLocation&) = default;
};

class MemoryPool {
 public:
  struct Options {
    uint64_t capacity_bytes = uint64_t{4} << 30;
    uint64_t min_page_bytes = uint64_t{2} << 20;
    uint64_t max_page_bytes = uint64_t{64} << 20;
    uint64_t min_slice_bytes = 256;
    double sparse_page_fraction = 0.25;
    // The driver hands out pages that read as zeros (the CPU driver: freed device memory
    // is returned to the kernel). Otherwise a new page may hold old bytes.
    bool new_pages_zeroed = false;
  };
  using AllocatePageFn = absl::AnyInvocable<absl::StatusOr<DeviceResource>(uint64_t)>;
  using FreePageFn = absl::AnyInvocable<void(const DeviceResource&)>;

  MemoryPool(const Options& options, AllocatePageFn allocate_page, FreePageFn free_page);
  ~MemoryPool();
  MemoryPool(const MemoryPool&) = delete;
  MemoryPool& operator=(const MemoryPool&) = delete;

  // The bytes a request of `size_bytes` occupies (its slice or large page). Only for
  // sizes that may fit (not NeverFits).
  uint64_t FootprintBytes(uint64_t size_bytes) const;
  // True when a request can never be satisfied, however much is freed.
  bool NeverFits(uint64_t size_bytes) const;

  // Reserves a slice of at least `size_bytes` (one that may fit: not NeverFits) for
  // `owner` (non-zero). RESOURCE_EXHAUSTED when the driver has no room for a new page
  // right now.
  absl::StatusOr<SliceLocation> Reserve(uint64_t size_bytes, uint64_t owner);
  // Frees a reserved slice. Large pages go back to the driver at once; class pages stay
  // (reused, or returned by CleanUp).
  void Release(SliceLocation location);
  // True when the slice at `location` may hold bytes written before it was reserved: a
  // slot some earlier owner released, or any slot of a page the driver did not zero.
  bool MayHoldOldBytes(SliceLocation location) const;
  // The device memory of `location` if it is still `owner`'s; NOT_FOUND otherwise.
  absl::StatusOr<DeviceResource> Resolve(SliceLocation location, uint64_t owner) const;

  // Returns empty class pages to the driver; the bytes returned.
  uint64_t CleanUp();

  // Relocation support ------------------------------------------------------------
  // Class pages that are outdated or fragmented, oldest first.
  std::vector<uint64_t> PagesToEvacuate() const;
  // While retired, no slice is reserved on the page.
  void SetRetired(uint64_t page, bool retired);
  // (slot, owner) of every live slice on `page`.
  std::vector<std::pair<uint32_t, uint64_t>> LiveSlices(uint64_t page) const;
  uint64_t slice_bytes(uint64_t page) const;

  uint64_t used_bytes() const { return used_bytes_; }
  uint64_t reserved_bytes() const { return reserved_bytes_; }
  uint64_t current_page_bytes() const { return current_page_bytes_; }
  uint64_t capacity_bytes() const { return options_.capacity_bytes; }

 private:
  struct Page {
    DeviceResource memory;
    uint64_t page_bytes = 0;   // the page size it was made at
    uint64_t slice_bytes = 0;  // slot size; == memory.size_bytes for large pages
    bool large = false;
    bool retired = false;
    uint32_t live = 0;
    std::vector<uint64_t> owners;  // per slot; 0 = free
    std::vector<bool> released;    // per slot: an owner has had it
  };

  uint64_t SliceBytesFor(uint64_t size_bytes) const;
  bool IsLarge(uint64_t slice_bytes) const { return slice_bytes > current_page_bytes_ / 4; }
  void GrowPageSize();
  absl::StatusOr<uint64_t> NewPage(uint64_t slice_bytes, bool large);
  void FreePage(uint64_t page);

  const Options options_;
  AllocatePageFn allocate_page_;
  FreePageFn free_page_;
  uint64_t current_page_bytes_;
  uint64_t next_page_id_ = 1;
  absl::flat_hash_map<uint64_t, Page> pages_;
  // Class pages by slice size, in creation order.
  absl::flat_hash_map<uint64_t, std::vector<uint64_t>> class_pages_;
  uint64_t used_bytes_ = 0;
  uint64_t reserved_bytes_ = 0;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_MEMORY_POOL_H_

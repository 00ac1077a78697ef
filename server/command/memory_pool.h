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
// When a class has no page with room and no new page of the current size fits, a
// smaller one is made (down to min_page_bytes: an outdated page, evacuated once there
// is room again); when none fits at all, a free slot of the smallest larger class with
// one serves instead. So free memory held in other classes' pages, or too little for a
// whole page, still serves small requests; only a request no slot and no page can take
// is refused.
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
  //
  // `fallback` says whether a request whose class has no room may take a smaller page
  // or a larger class's slot (Note [Device memory pool]): allocations may; relocation
  // targets may not (a slice moved there would leave an outdated page or a slot of the
  // wrong size, which relocation would want to move again).
  enum class Fallback { kSmallerPageOrLargerClass, kNone };
  absl::StatusOr<SliceLocation> Reserve(
      uint64_t size_bytes, uint64_t owner,
      Fallback fallback = Fallback::kSmallerPageOrLargerClass);
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

  // How many times a slice or a page was given back so far: unchanged, nothing the pool
  // could not place before fits now.
  uint64_t releases() const { return releases_; }
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
  absl::StatusOr<uint64_t> NewPage(uint64_t slice_bytes, bool large, uint64_t page_bytes = 0);
  // A page of the class of `slice_bytes` to reserve a slot on: one with room, else a new
  // one, else (with `fallback`) a smaller new one or a page of a larger class with room
  // (see the Note); the driver's RESOURCE_EXHAUSTED when there is none.
  absl::StatusOr<uint64_t> ClassPageWithRoom(uint64_t slice_bytes, Fallback fallback);
  // The newest page of exactly the class of `slice_bytes` with a free slot, of the
  // current page size, else (when `any_page_size`) of any; 0 when none.
  uint64_t PageWithRoom(uint64_t slice_bytes, bool any_page_size) const;
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
  uint64_t releases_ = 0;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_MEMORY_POOL_H_

#include "server/command/memory_pool.h"

#include <algorithm>
#include <bit>

#include "absl/strings/str_cat.h"
#include "base/round_up.h"

namespace gpucmd {
namespace {

constexpr uint64_t kLargeGranularityBytes = 64 << 10;

uint64_t NextPowerOfTwo(uint64_t value) { return value <= 1 ? 1 : std::bit_ceil(value); }

}  // namespace

MemoryPool::MemoryPool(const Options& options, AllocatePageFn allocate_page,
                       FreePageFn free_page)
    : options_(options),
      allocate_page_(std::move(allocate_page)),
      free_page_(std::move(free_page)),
      current_page_bytes_(options.min_page_bytes) {}

MemoryPool::~MemoryPool() {
  for (auto& [id, page] : pages_) free_page_(page.memory);
}

uint64_t MemoryPool::SliceBytesFor(uint64_t size_bytes) const {
  return std::max(options_.min_slice_bytes, NextPowerOfTwo(size_bytes));
}

uint64_t MemoryPool::FootprintBytes(uint64_t size_bytes) const {
  uint64_t slice = SliceBytesFor(size_bytes);
  return IsLarge(slice) ? RoundUp(size_bytes, kLargeGranularityBytes) : slice;
}

bool MemoryPool::NeverFits(uint64_t size_bytes) const {
  return size_bytes > options_.capacity_bytes ||
         RoundUp(size_bytes, kLargeGranularityBytes) > options_.capacity_bytes;
}

void MemoryPool::GrowPageSize() {
  uint64_t max_page = std::max(options_.min_page_bytes,
                               std::min(options_.max_page_bytes,
                                        std::bit_floor(options_.capacity_bytes / 16)));
  uint64_t wanted = std::clamp(NextPowerOfTwo(reserved_bytes_ / 8), options_.min_page_bytes,
                               max_page);
  current_page_bytes_ = std::max(current_page_bytes_, wanted);
}

absl::StatusOr<uint64_t> MemoryPool::NewPage(uint64_t slice_bytes, bool large,
                                             uint64_t page_bytes) {
  uint64_t bytes = large ? slice_bytes : (page_bytes != 0 ? page_bytes : current_page_bytes_);
  absl::StatusOr<DeviceResource> memory = allocate_page_(bytes);
  if (!memory.ok()) return memory.status();
  uint64_t id = next_page_id_++;
  Page& page = pages_[id];
  page.memory = *memory;
  page.page_bytes = bytes;
  page.slice_bytes = slice_bytes;
  page.large = large;
  page.owners.assign(large ? 1 : bytes / slice_bytes, 0);
  page.released.assign(page.owners.size(), false);
  reserved_bytes_ += bytes;
  if (!large) class_pages_[slice_bytes].push_back(id);
  return id;
}

absl::StatusOr<SliceLocation> MemoryPool::Reserve(uint64_t size_bytes, uint64_t owner,
                                                  Fallback fallback) {
  if (NeverFits(size_bytes)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("requested ", size_bytes, " bytes can never fit: the device holds ",
                     options_.capacity_bytes, " bytes"));
  }
  GrowPageSize();
  uint64_t slice = SliceBytesFor(size_bytes);
  uint64_t page_id = 0;
  if (IsLarge(slice)) {
    absl::StatusOr<uint64_t> page = NewPage(RoundUp(size_bytes, kLargeGranularityBytes), true);
    if (!page.ok()) return page.status();
    page_id = *page;
  } else {
    absl::StatusOr<uint64_t> page = ClassPageWithRoom(slice, fallback);
    if (!page.ok()) return page.status();
    page_id = *page;
  }
  Page& page = pages_.at(page_id);
  auto free_slot = std::find(page.owners.begin(), page.owners.end(), 0);
  *free_slot = owner;
  ++page.live;
  used_bytes_ += page.slice_bytes;
  return SliceLocation{page_id, static_cast<uint32_t>(free_slot - page.owners.begin())};
}

uint64_t MemoryPool::PageWithRoom(uint64_t slice_bytes, bool any_page_size) const {
  auto candidates = class_pages_.find(slice_bytes);
  if (candidates == class_pages_.end()) return 0;
  // Prefer the newest page with room: old pages drain and become relocation
  // candidates instead of staying half full forever.
  uint64_t any_size = 0;
  for (auto it = candidates->second.rbegin(); it != candidates->second.rend(); ++it) {
    const Page& page = pages_.at(*it);
    if (page.retired || page.live == page.owners.size()) continue;
    if (page.page_bytes == current_page_bytes_) return *it;
    if (any_size == 0 && any_page_size) any_size = *it;
  }
  return any_size;
}

absl::StatusOr<uint64_t> MemoryPool::ClassPageWithRoom(uint64_t slice_bytes,
                                                       Fallback fallback) {
  const bool fall_back = fallback == Fallback::kSmallerPageOrLargerClass;
  if (uint64_t page = PageWithRoom(slice_bytes, fall_back); page != 0) return page;
  absl::StatusOr<uint64_t> made = NewPage(slice_bytes, false);
  if (!fall_back) return made;
  // Less room than a page of the current size: a smaller page (Note [Device memory pool]).
  for (uint64_t page_bytes = current_page_bytes_ / 2;
       !made.ok() && absl::IsResourceExhausted(made.status()) &&
       page_bytes >= options_.min_page_bytes && page_bytes >= 4 * slice_bytes;
       page_bytes /= 2) {
    made = NewPage(slice_bytes, false, page_bytes);
  }
  if (made.ok() || !absl::IsResourceExhausted(made.status())) return made;
  // No page fits at all: a free slot of a larger class.
  for (uint64_t larger = 2 * slice_bytes; !IsLarge(larger); larger *= 2) {
    if (uint64_t page = PageWithRoom(larger, /*any_page_size=*/true); page != 0) return page;
  }
  return made.status();
}

void MemoryPool::Release(SliceLocation location) {
  auto it = pages_.find(location.page);
  if (it == pages_.end() || it->second.owners[location.slot] == 0) return;
  Page& page = it->second;
  page.owners[location.slot] = 0;
  page.released[location.slot] = true;
  --page.live;
  ++releases_;
  used_bytes_ -= page.slice_bytes;
  if (page.large) FreePage(location.page);
}

bool MemoryPool::MayHoldOldBytes(SliceLocation location) const {
  auto it = pages_.find(location.page);
  if (it == pages_.end() || location.slot >= it->second.released.size()) return true;
  return !options_.new_pages_zeroed || it->second.released[location.slot];
}

absl::StatusOr<DeviceResource> MemoryPool::Resolve(SliceLocation location,
                                                   uint64_t owner) const {
  auto it = pages_.find(location.page);
  if (it == pages_.end() || location.slot >= it->second.owners.size() ||
      it->second.owners[location.slot] != owner) {
    return absl::NotFoundError(absl::StrCat("buffer ", owner, " has no memory at page ",
                                            location.page, " slot ", location.slot));
  }
  const Page& page = it->second;
  return DeviceResource{page.memory.address + uint64_t{location.slot} * page.slice_bytes,
                        page.slice_bytes};
}

void MemoryPool::FreePage(uint64_t id) {
  auto it = pages_.find(id);
  Page& page = it->second;
  reserved_bytes_ -= page.page_bytes;
  ++releases_;
  free_page_(page.memory);
  if (!page.large) {
    std::vector<uint64_t>& list = class_pages_[page.slice_bytes];
    list.erase(std::find(list.begin(), list.end(), id));
  }
  pages_.erase(it);
}

uint64_t MemoryPool::CleanUp() {
  std::vector<uint64_t> empty;
  for (const auto& [id, page] : pages_) {
    if (page.live == 0 && !page.retired) empty.push_back(id);
  }
  uint64_t freed = 0;
  for (uint64_t id : empty) {
    freed += pages_.at(id).page_bytes;
    FreePage(id);
  }
  return freed;
}

std::vector<uint64_t> MemoryPool::PagesToEvacuate() const {
  std::vector<uint64_t> result;
  for (const auto& [slice, ids] : class_pages_) {
    for (uint64_t id : ids) {
      const Page& page = pages_.at(id);
      if (page.live == 0) continue;  // CleanUp's business
      bool outdated = page.page_bytes < current_page_bytes_;
      bool fragmented = ids.size() > 1 &&
                        page.live < options_.sparse_page_fraction * page.owners.size();
      if (outdated || fragmented) result.push_back(id);
    }
  }
  std::sort(result.begin(), result.end());
  return result;
}

void MemoryPool::SetRetired(uint64_t page, bool retired) { pages_.at(page).retired = retired; }

std::vector<std::pair<uint32_t, uint64_t>> MemoryPool::LiveSlices(uint64_t page) const {
  std::vector<std::pair<uint32_t, uint64_t>> live;
  const std::vector<uint64_t>& owners = pages_.at(page).owners;
  for (uint32_t slot = 0; slot < owners.size(); ++slot) {
    if (owners[slot] != 0) live.emplace_back(slot, owners[slot]);
  }
  return live;
}

uint64_t MemoryPool::slice_bytes(uint64_t page) const { return pages_.at(page).slice_bytes; }

}  // namespace gpucmd

#include "server/core/shared_memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/round_up.h"
#include "base/scoped_fd.h"
#include "base/status_macros.h"
#include "server/core/region_fault_guard.h"
#include "server/core/shared_memory_object.h"

namespace gpucmd {

// One mapped region, unmapped when the last reference (the table's, or a Slice's) goes;
// its device registration and its guard (Note [Faults in client memory]) end first.
class SharedMemoryTable::Mapping {
 public:
  // `size` bytes of the region at `address`, in a mapping of `mapped_bytes` (more where
  // the region lives in huge pages), guarded by `guard`.
  Mapping(void* address, uint64_t size, uint64_t mapped_bytes, GuardedRange guard)
      : address_(address), size_(size), mapped_bytes_(mapped_bytes), guard_(std::move(guard)) {}
  ~Mapping() {
    registration = HostRegistration();
    guard_.reset();
    munmap(address_, mapped_bytes_);
  }
  std::byte* data() const { return static_cast<std::byte*>(address_); }
  uint64_t size() const { return size_; }
  uint64_t mapped_bytes() const { return mapped_bytes_; }
  bool lost() const { return guard_->lost(); }

  // Set once, under the table's lock.
  HostRegistration registration;
  bool registered = false;

 private:
  void* const address_;
  const uint64_t size_;
  const uint64_t mapped_bytes_;
  std::optional<GuardedRange> guard_;  // reset only by the destructor
};

namespace {

// How many bytes a mapping of a region of `size_bytes` in `fd` takes (on hugetlbfs, whole
// huge pages), or why `fd` cannot be such a region.
absl::StatusOr<uint64_t> RegionMappingBytes(int fd, uint64_t size_bytes) {
  ASSIGN_OR_RETURN(const SharedMemoryObject object, ExamineSharedMemoryObject(fd));
  if (object.file_bytes < size_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("the memfd holds ", object.file_bytes,
                                                   " bytes, fewer than the ", size_bytes,
                                                   " registered"));
  }
  return object.huge_pages ? RoundUp(size_bytes, object.page_bytes) : size_bytes;
}

}  // namespace

SharedMemoryTable::~SharedMemoryTable() = default;

absl::StatusOr<RegionId> SharedMemoryTable::Register(SessionId session, int fd,
                                                     uint64_t size_bytes) {
  const ScopedFd closer(fd);
  if (size_bytes == 0) return absl::InvalidArgumentError("size_bytes must be positive");
  ASSIGN_OR_RETURN(const uint64_t mapping_bytes, RegionMappingBytes(fd, size_bytes));
  {
    MutexLock lock(&mutex_);
    if (per_session_[session] >= limits_.max_regions_per_session) {
      return absl::ResourceExhaustedError(
          absl::StrCat("the session holds ", per_session_[session],
                       " shared-memory regions, its limit (limits.max_shared_memory_regions)"));
    }
    if (mapped_bytes_ + mapping_bytes > limits_.max_mapped_bytes) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "mapping ", mapping_bytes, " more bytes of shared memory would pass the daemon's limit "
          "of ", limits_.max_mapped_bytes, " (limits.max_shared_memory_bytes)"));
    }
  }
  void* address = mmap(nullptr, mapping_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (address == MAP_FAILED) {
    return absl::InvalidArgumentError(
        absl::StrCat("the memfd cannot be mapped for reading and writing: ", strerror(errno)));
  }
  absl::StatusOr<GuardedRange> guard = GuardedRange::Guard(address, mapping_bytes);
  if (!guard.ok()) {
    munmap(address, mapping_bytes);
    return guard.status();
  }
  auto mapping = std::make_shared<Mapping>(address, size_bytes, mapping_bytes, *std::move(guard));
  MutexLock lock(&mutex_);
  // Checked again: another registration may have come in while this one mapped.
  if (per_session_[session] >= limits_.max_regions_per_session ||
      mapped_bytes_ + mapping_bytes > limits_.max_mapped_bytes) {
    return absl::ResourceExhaustedError("shared-memory limits reached while mapping");
  }
  RegionId region = next_region_++;
  regions_[Key{session, region}] = std::move(mapping);
  ++per_session_[session];
  mapped_bytes_ += mapping_bytes;
  return region;
}

bool SharedMemoryTable::RegisterWithDevice(
    SessionId session, RegionId region,
    absl::FunctionRef<absl::StatusOr<HostRegistration>(const HostResource&)> register_host) {
  std::shared_ptr<Mapping> mapping;
  {
    MutexLock lock(&mutex_);
    auto it = regions_.find(Key{session, region});
    if (it == regions_.end()) return false;
    mapping = it->second;
  }
  const uint64_t size = mapping->size();
  // Reserved first, so that concurrent registrations never pass the limit together.
  if (registered_bytes_->fetch_add(size) + size > limits_.max_registered_bytes) {
    registered_bytes_->fetch_sub(size);
    return false;
  }
  absl::StatusOr<HostRegistration> registration =
      register_host(HostResource{mapping->data(), size});
  if (!registration.ok()) {
    registered_bytes_->fetch_sub(size);
    return false;
  }
  HostRegistration counted([inner = *std::move(registration), registered = registered_bytes_,
                            size]() mutable {
    inner = HostRegistration();
    registered->fetch_sub(size);
  });
  MutexLock lock(&mutex_);
  if (!regions_.contains(Key{session, region})) return false;  // ends with `counted`
  mapping->registration = std::move(counted);
  mapping->registered = true;
  return true;
}

absl::Status SharedMemoryTable::Unregister(SessionId session, RegionId region) {
  std::shared_ptr<Mapping> gone;  // unmapped outside the lock, once no slice holds it
  MutexLock lock(&mutex_);
  auto it = regions_.find(Key{session, region});
  if (it == regions_.end()) {
    return absl::NotFoundError(
        absl::StrCat("shared-memory region ", region, " not found in this session"));
  }
  gone = std::move(it->second);
  regions_.erase(it);
  if (--per_session_[session] == 0) per_session_.erase(session);
  mapped_bytes_ -= gone->mapped_bytes();
  return absl::OkStatus();
}

absl::StatusOr<Bytes> SharedMemoryTable::Slice(SessionId session, RegionId region,
                                               uint64_t offset_bytes,
                                               uint64_t size_bytes) const {
  std::shared_ptr<Mapping> mapping;
  bool registered = false;
  {
    MutexLock lock(&mutex_);
    auto it = regions_.find(Key{session, region});
    if (it == regions_.end()) {
      return absl::NotFoundError(
          absl::StrCat("shared-memory region ", region, " not found in this session"));
    }
    mapping = it->second;
    registered = mapping->registered;
  }
  if (mapping->lost()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shared-memory region ", region, " lost its memory: its pages went away while the "
        "daemon mapped them (e.g. a hole punched in its memfd), so the daemon no longer "
        "shares them; unregister it"));
  }
  if (offset_bytes > mapping->size() || size_bytes > mapping->size() - offset_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "slice [", offset_bytes, ", +", size_bytes, ") is outside shared-memory region ",
        region, " of ", mapping->size(), " bytes"));
  }
  std::byte* data = mapping->data() + offset_bytes;
  Bytes slice(data, size_bytes, [mapping = std::move(mapping)]() mutable { mapping.reset(); });
  return registered ? std::move(slice).MarkPinned() : std::move(slice);
}

void SharedMemoryTable::DropSession(SessionId session) {
  std::vector<std::shared_ptr<Mapping>> gone;
  MutexLock lock(&mutex_);
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (it->first.session != session) {
      ++it;
      continue;
    }
    mapped_bytes_ -= it->second->mapped_bytes();
    gone.push_back(std::move(it->second));
    regions_.erase(it++);
  }
  per_session_.erase(session);
}

uint32_t SharedMemoryTable::RegionsOf(SessionId session) const {
  MutexLock lock(&mutex_);
  auto it = per_session_.find(session);
  return it == per_session_.end() ? 0 : it->second;
}

SharedMemoryTable::Usage SharedMemoryTable::usage() const {
  MutexLock lock(&mutex_);
  return Usage{.regions = regions_.size(), .mapped_bytes = mapped_bytes_};
}

}  // namespace gpucmd

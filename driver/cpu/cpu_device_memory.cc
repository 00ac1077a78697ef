#include "driver/cpu/cpu_device_memory.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/round_up.h"

namespace gpucmd {
namespace {

constexpr uint64_t kLowRangeBegin = uint64_t{128} << 30;  // 128 GiB
constexpr uint64_t kLowRangeEnd = uint64_t{512} << 30;
constexpr uint64_t kLowRangeStep = uint64_t{16} << 30;
constexpr uint64_t kHighRangeBegin = uint64_t{1} << 44;  // 16 TiB
constexpr uint64_t kHighSlotBytes = uint64_t{1} << 40;   // 1 TiB
constexpr uint64_t kHighSlots = 64;

}  // namespace

absl::StatusOr<std::unique_ptr<CpuDeviceMemory>> CpuDeviceMemory::Create(
    uint64_t capacity_bytes, int ordinal) {
  uint64_t capacity = RoundUp(capacity_bytes, kGranularityBytes);
  if (capacity > kHighSlotBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("device memory of ", capacity_bytes, " bytes exceeds the 1 TiB limit"));
  }
  std::string name = absl::StrCat("gpucmd-device-", ordinal);
  int fd = memfd_create(name.c_str(), MFD_CLOEXEC);
  if (fd < 0) return absl::InternalError(absl::StrCat("memfd_create: ", strerror(errno)));
  if (ftruncate(fd, static_cast<off_t>(capacity)) != 0) {
    close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot size device memory to ", capacity, " bytes: ", strerror(errno)));
  }
  // A fixed address range, so the kernel executor process can map the memory at the
  // same addresses and kernels see valid device pointers. Low ranges first (where
  // sanitizers allow application mappings), then 1 TiB slots from 16 TiB.
  std::vector<uint64_t> candidates;
  for (uint64_t address = kLowRangeBegin; address + capacity <= kLowRangeEnd;
       address += kLowRangeStep) {
    candidates.push_back(address);
  }
  for (uint64_t slot = 0; slot < kHighSlots; ++slot) {
    candidates.push_back(kHighRangeBegin + slot * kHighSlotBytes);
  }
  void* base = MAP_FAILED;
  for (size_t i = 0; i < candidates.size() && base == MAP_FAILED; ++i) {
    void* wanted = reinterpret_cast<void*>(candidates[i]);
    base = mmap(wanted, capacity, PROT_READ | PROT_WRITE,
                MAP_SHARED | MAP_NORESERVE | MAP_FIXED_NOREPLACE, fd, 0);
    if (base != MAP_FAILED && base != wanted) {  // kernels older than 4.17 ignore the flag
      munmap(base, capacity);
      base = MAP_FAILED;
    }
  }
  if (base == MAP_FAILED) {
    close(fd);
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot map ", capacity, " bytes of device memory: ", strerror(errno)));
  }
  return std::unique_ptr<CpuDeviceMemory>(
      new CpuDeviceMemory(fd, static_cast<std::byte*>(base), capacity));
}

CpuDeviceMemory::CpuDeviceMemory(int fd, std::byte* base, uint64_t capacity)
    : fd_(fd), base_(base), capacity_(capacity) {
  MutexLock lock(&mutex_);
  free_[0] = capacity_;
}

CpuDeviceMemory::~CpuDeviceMemory() {
  munmap(base_, capacity_);
  close(fd_);
}

absl::StatusOr<DeviceResource> CpuDeviceMemory::Allocate(uint64_t size_bytes) {
  uint64_t size = RoundUp(std::max<uint64_t>(size_bytes, 1), kGranularityBytes);
  MutexLock lock(&mutex_);
  uint64_t largest = 0;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    largest = std::max(largest, it->second);
    if (it->second < size) continue;
    uint64_t offset = it->first;
    uint64_t remaining = it->second - size;
    free_.erase(it);
    if (remaining > 0) free_[offset + size] = remaining;
    allocated_ += size;
    return DeviceResource{reinterpret_cast<DeviceAddress>(base_ + offset), size};
  }
  return absl::ResourceExhaustedError(
      absl::StrCat("device memory: no free range of ", size, " bytes (largest free range ",
                   largest, " of ", capacity_, ")"));
}

void CpuDeviceMemory::Free(const DeviceResource& resource) {
  uint64_t offset = resource.address - reinterpret_cast<DeviceAddress>(base_);
  uint64_t size = resource.size_bytes;
  // Return the pages to the kernel; the range reads as zeros when handed out again.
  fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
            static_cast<off_t>(size));
  MutexLock lock(&mutex_);
  allocated_ -= size;
  auto next = free_.lower_bound(offset);
  if (next != free_.end() && offset + size == next->first) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto previous = std::prev(next);
    if (previous->first + previous->second == offset) {
      previous->second += size;
      return;
    }
  }
  free_[offset] = size;
}

uint64_t CpuDeviceMemory::allocated_bytes() const {
  MutexLock lock(&mutex_);
  return allocated_;
}

}  // namespace gpucmd

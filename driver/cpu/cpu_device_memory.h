#ifndef GPUCMDD_DRIVER_CPU_CPU_DEVICE_MEMORY_H_
#define GPUCMDD_DRIVER_CPU_CPU_DEVICE_MEMORY_H_

// The CPU driver's device memory: `capacity` bytes in a shared mapping of a memfd, so a
// kernel executor process can map the very same memory. Ranges are handed out first-fit
// at 4 KiB granularity; freed ranges coalesce and their pages are returned to the
// kernel (hole punching), so freeing really lowers the daemon's memory use.
//
// Device addresses are the daemon's virtual addresses inside the mapping.
//
// Thread-safety: Allocate and Free may be called from any thread.

#include <cstdint>
#include <map>
#include <memory>

#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "driver/types.h"

namespace gpucmd {

class CpuDeviceMemory {
 public:
  static constexpr uint64_t kGranularityBytes = 4096;

  // Creates the memfd and maps it. RESOURCE_EXHAUSTED / INTERNAL when the system
  // refuses.
  static absl::StatusOr<std::unique_ptr<CpuDeviceMemory>> Create(uint64_t capacity_bytes,
                                                                 int ordinal);
  ~CpuDeviceMemory();
  CpuDeviceMemory(const CpuDeviceMemory&) = delete;
  CpuDeviceMemory& operator=(const CpuDeviceMemory&) = delete;

  // RESOURCE_EXHAUSTED naming the request and the largest free range when nothing fits.
  absl::StatusOr<DeviceResource> Allocate(uint64_t size_bytes);
  // `resource` must come from Allocate and not be freed yet.
  void Free(const DeviceResource& resource);

  uint64_t capacity_bytes() const { return capacity_; }
  uint64_t allocated_bytes() const;
  int memfd() const { return fd_; }
  std::byte* base() const { return base_; }

 private:
  CpuDeviceMemory(int fd, std::byte* base, uint64_t capacity);

  const int fd_;
  std::byte* const base_;
  const uint64_t capacity_;
  mutable Mutex mutex_;
  // Free ranges: offset -> size, coalesced.
  std::map<uint64_t, uint64_t> free_ ABSL_GUARDED_BY(mutex_);
  uint64_t allocated_ ABSL_GUARDED_BY(mutex_) = 0;
};

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_CPU_DEVICE_MEMORY_H_

#ifndef GPUCMDD_DRIVER_HIP_HIP_DRIVER_H_
#define GPUCMDD_DRIVER_HIP_HIP_DRIVER_H_

// The HIP driver (AMD GPUs, Debian's libamdhip64): GpuDriver (Note [One GPU driver] in
// driver/gpu/gpu_driver.h) over HipVendor, the HIP runtime. Pages from hipMallocAsync
// (hipMalloc without memory pools); pinned staging from hipHostMalloc; shared-memory
// regions page-locked with hipHostRegister;
// hipMemcpy{HtoD,DtoH,DtoD}Async and hipMemcpy2DAsync; hiprtc-built code objects from
// the module store, launched with hipModuleLaunchKernel. Launches take buffers and
// scalars only: the device description says so, and tensor maps are refused.
//
// Thread-safety: HipVendor is a value; Enter selects its device on the calling thread
// (remembered per thread), every other call runs on the selected device.

#include <hip/hip_runtime_api.h>

#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "driver/device_description.h"
#include "driver/gpu/gpu_driver.h"

namespace gpucmd {

class HipVendor {
 public:
  using StreamHandle = hipStream_t;
  using EventHandle = hipEvent_t;
  using ModuleHandle = hipModule_t;
  using FunctionHandle = hipFunction_t;

  // UNAVAILABLE when there is no such AMD GPU.
  static absl::StatusOr<HipVendor> Open(int ordinal);

  uint64_t memory_capacity_bytes() const { return capacity_bytes_; }
  absl::Status Enter() const;

  absl::StatusOr<StreamPriorities> StreamPriorityRange() const;
  absl::StatusOr<hipStream_t> CreateStream(int priority) const;
  void DestroyStream(hipStream_t stream) const;
  absl::Status SynchronizeStream(hipStream_t stream) const;
  absl::Status StickyError(hipStream_t stream) const;
  absl::StatusOr<hipEvent_t> CreateEvent() const;
  void DestroyEvent(hipEvent_t event) const;
  absl::Status RecordEvent(hipEvent_t event, hipStream_t stream) const;
  absl::Status StreamWaitEvent(hipStream_t stream, hipEvent_t event) const;
  // hipStreamAddCallback: it calls back after a device error too.
  absl::Status AddCallback(hipStream_t stream, absl::AnyInvocable<void()>& callback) const;
  absl::Status SynchronizeEvent(hipEvent_t event) const;
  bool EventDone(hipEvent_t event) const;

  absl::StatusOr<bool> MemoryPoolsSupported() const;
  absl::Status KeepPoolMemory() const;
  absl::StatusOr<DeviceAddress> Allocate(uint64_t size_bytes) const;
  absl::StatusOr<DeviceAddress> AllocateAsync(uint64_t size_bytes, hipStream_t stream) const;
  void Free(DeviceAddress address) const;
  void FreeAsync(DeviceAddress address, hipStream_t stream) const;
  absl::StatusOr<std::byte*> AllocateHost(uint64_t size_bytes) const;
  void FreeHost(std::byte* data) const;
  absl::Status RegisterHost(std::byte* data, uint64_t size_bytes) const;
  void UnregisterHost(std::byte* data) const;

  absl::Status CopyToDevice(DeviceAddress target, std::byte* source, uint64_t size_bytes,
                            hipStream_t stream) const;
  absl::Status CopyToHost(std::byte* target, DeviceAddress source, uint64_t size_bytes,
                          hipStream_t stream) const;
  absl::Status CopyPitched(const PitchedCopy& copy, hipStream_t stream) const;
  absl::Status CopyOnDevice(DeviceAddress target, DeviceAddress source, uint64_t size_bytes,
                            hipStream_t stream) const;
  absl::Status CopyRowsOnDevice(const DeviceRowsCopy& rows, hipStream_t stream) const;
  // `layout`'s rows from `base` set to `pattern`: one memset when they are packed, else
  // a pitched one.
  absl::Status Fill(DeviceAddress base, const CopyLayout& layout, FillPattern pattern,
                    hipStream_t stream) const;

  absl::StatusOr<hipModule_t> LoadModule(const std::string& image) const;
  absl::StatusOr<hipFunction_t> GetFunction(hipModule_t module, const std::string& entry) const;
  void UnloadModule(hipModule_t module) const;
  // INVALID_ARGUMENT for tensor maps (the server refuses them first on this driver).
  absl::Status Launch(hipFunction_t function, Dim3 grid, const LaunchSpec& spec,
                      std::vector<void*>& params, hipStream_t stream) const;
  void Release(bool reset) const;

 private:
  HipVendor(int device, uint64_t capacity_bytes)
      : device_(device), capacity_bytes_(capacity_bytes) {}

  int device_;
  uint64_t capacity_bytes_;
};

using HipDriver = GpuDriver<HipVendor>;
using HipBackend = GpuBackend<HipVendor>;
using HipStream = GpuStream<HipVendor>;
using HipContext = GpuContext<HipVendor>;

static_assert(Driver<HipDriver>);
static_assert(NotifyingEvent<HipStream::Event>);

// The AMD GPUs of this machine; UNAVAILABLE "no HIP device" without one.
absl::StatusOr<std::vector<DeviceDescription>> DescribeHipDevices();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_HIP_HIP_DRIVER_H_

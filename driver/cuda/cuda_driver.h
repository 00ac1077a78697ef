#ifndef GPUCMDD_DRIVER_CUDA_CUDA_DRIVER_H_
#define GPUCMDD_DRIVER_CUDA_CUDA_DRIVER_H_

// The CUDA driver: GpuDriver (Note [One GPU driver] in driver/gpu/gpu_driver.h) over
// CudaVendor, the CUDA driver API loaded at run time (driver/cuda/cuda_api.h). One
// device's primary context; pages from cuMemAllocAsync (cuMemAlloc without memory
// pools); pinned staging from cuMemAllocHost; shared-memory regions page-locked with
// cuMemHostRegister; cuMemcpy{HtoD,DtoH,DtoD}Async and
// cuMemcpy2DAsync; NVRTC-built CUBIN modules from the module store; tensor-map arguments
// encoded with cuTensorMapEncodeTiled; dynamic shared memory beyond 48 KiB opted into.
//
// Thread-safety: CudaVendor is a value; Enter makes its context current on the calling
// thread (remembered per thread), every other call runs on the entered context.

#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "driver/cuda/cuda_api.h"
#include "driver/device_description.h"
#include "driver/gpu/gpu_driver.h"

namespace gpucmd {

class CudaVendor {
 public:
  using StreamHandle = CUstream;
  using EventHandle = CUevent;
  using ModuleHandle = CUmodule;
  using FunctionHandle = CUfunction;

  // Loads the driver API and retains `ordinal`'s primary context. UNAVAILABLE without a
  // driver or such a device.
  static absl::StatusOr<CudaVendor> Open(int ordinal);

  uint64_t memory_capacity_bytes() const { return capacity_bytes_; }
  absl::Status Enter() const;

  absl::StatusOr<StreamPriorities> StreamPriorityRange() const;
  absl::StatusOr<CUstream> CreateStream(int priority) const;
  void DestroyStream(CUstream stream) const;
  absl::Status SynchronizeStream(CUstream stream) const;
  absl::Status StickyError(CUstream stream) const;
  absl::StatusOr<CUevent> CreateEvent() const;
  void DestroyEvent(CUevent event) const;
  absl::Status RecordEvent(CUevent event, CUstream stream) const;
  absl::Status StreamWaitEvent(CUstream stream, CUevent event) const;
  // cuStreamAddCallback, not cuLaunchHostFunc: it calls back after a device error too.
  absl::Status AddCallback(CUstream stream, absl::AnyInvocable<void()>& callback) const;
  absl::Status SynchronizeEvent(CUevent event) const;
  bool EventDone(CUevent event) const;

  absl::StatusOr<bool> MemoryPoolsSupported() const;
  absl::Status KeepPoolMemory() const;
  absl::StatusOr<DeviceAddress> Allocate(uint64_t size_bytes) const;
  absl::StatusOr<DeviceAddress> AllocateAsync(uint64_t size_bytes, CUstream stream) const;
  void Free(DeviceAddress address) const;
  void FreeAsync(DeviceAddress address, CUstream stream) const;
  absl::StatusOr<std::byte*> AllocateHost(uint64_t size_bytes) const;
  void FreeHost(std::byte* data) const;
  absl::Status RegisterHost(std::byte* data, uint64_t size_bytes) const;
  void UnregisterHost(std::byte* data) const;

  absl::Status CopyToDevice(DeviceAddress target, std::byte* source, uint64_t size_bytes,
                            CUstream stream) const;
  absl::Status CopyToHost(std::byte* target, DeviceAddress source, uint64_t size_bytes,
                          CUstream stream) const;
  absl::Status CopyPitched(const PitchedCopy& copy, CUstream stream) const;
  absl::Status CopyOnDevice(DeviceAddress target, DeviceAddress source, uint64_t size_bytes,
                            CUstream stream) const;
  absl::Status CopyRowsOnDevice(const DeviceRowsCopy& rows, CUstream stream) const;
  // `layout`'s rows from `base` set to `pattern`: one memset when they are packed, else
  // a pitched one.
  absl::Status Fill(DeviceAddress base, const CopyLayout& layout, FillPattern pattern,
                    CUstream stream) const;

  absl::StatusOr<CUmodule> LoadModule(const std::string& image) const;
  absl::StatusOr<CUfunction> GetFunction(CUmodule module, const std::string& entry) const;
  void UnloadModule(CUmodule module) const;
  // Opts into large dynamic shared memory and encodes tensor maps in their arguments'
  // places before cuLaunchKernel.
  absl::Status Launch(CUfunction function, Dim3 grid, const LaunchSpec& spec,
                      std::vector<void*>& params, CUstream stream) const;
  void Release(bool reset) const;

 private:
  CudaVendor(const CudaApi* api, CUdevice device, CUcontext context, uint64_t capacity_bytes)
      : api_(api), device_(device), context_(context), capacity_bytes_(capacity_bytes) {}

  absl::Status Check(CUresult result, absl::string_view call) const {
    return CudaStatus(*api_, result, call);
  }

  const CudaApi* api_;
  CUdevice device_;
  CUcontext context_;
  uint64_t capacity_bytes_;
};

using CudaDriver = GpuDriver<CudaVendor>;
using CudaBackend = GpuBackend<CudaVendor>;
using CudaStream = GpuStream<CudaVendor>;
using CudaContext = GpuContext<CudaVendor>;

static_assert(Driver<CudaDriver>);
static_assert(NotifyingEvent<CudaStream::Event>);

// The parameters of cuMemcpy2DAsync for `copy`.
CUDA_MEMCPY2D Pitched2DCopy(const PitchedCopy& copy);

// The CUDA devices of this machine; UNAVAILABLE without a driver.
absl::StatusOr<std::vector<DeviceDescription>> DescribeCudaDevices();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CUDA_CUDA_DRIVER_H_

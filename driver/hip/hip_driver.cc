#include "driver/hip/hip_driver.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "driver/hip/hip_status.h"

namespace gpucmd {
namespace {

// Release and cleanup calls have nobody to report a failure to; their results are
// dropped with (void).

// The device selected on this thread, as far as this driver selected it.
thread_local int current_device = -1;

void* Pointer(DeviceAddress address) { return reinterpret_cast<void*>(address); }

}  // namespace

absl::StatusOr<HipVendor> HipVendor::Open(int ordinal) {
  int count = 0;
  RETURN_IF_ERROR(HipStatus(hipGetDeviceCount(&count), "hipGetDeviceCount"));
  if (ordinal >= count) return absl::UnavailableError(absl::StrCat("no HIP device ", ordinal));
  HipVendor vendor(ordinal, 0);
  RETURN_IF_ERROR(vendor.Enter());
  size_t total = 0;
  RETURN_IF_ERROR(HipStatus(hipDeviceTotalMem(&total, ordinal), "hipDeviceTotalMem"));
  vendor.capacity_bytes_ = total;
  return vendor;
}

absl::Status HipVendor::Enter() const {
  if (current_device == device_) return absl::OkStatus();
  RETURN_IF_ERROR(HipStatus(hipSetDevice(device_), "hipSetDevice"));
  current_device = device_;
  return absl::OkStatus();
}

absl::StatusOr<StreamPriorities> HipVendor::StreamPriorityRange() const {
  StreamPriorities priorities;
  RETURN_IF_ERROR(HipStatus(hipDeviceGetStreamPriorityRange(&priorities.least,
                                                            &priorities.greatest),
                            "hipDeviceGetStreamPriorityRange"));
  return priorities;
}

absl::StatusOr<hipStream_t> HipVendor::CreateStream(int priority) const {
  hipStream_t stream = nullptr;
  RETURN_IF_ERROR(HipStatus(hipStreamCreateWithPriority(&stream, hipStreamNonBlocking, priority),
                            "hipStreamCreateWithPriority"));
  return stream;
}

void HipVendor::DestroyStream(hipStream_t stream) const { (void)hipStreamDestroy(stream); }

absl::Status HipVendor::SynchronizeStream(hipStream_t stream) const {
  return HipStatus(hipStreamSynchronize(stream), "hipStreamSynchronize");
}

absl::Status HipVendor::StickyError(hipStream_t stream) const {
  hipError_t error = hipStreamQuery(stream);
  return IsStickyHipError(error) ? HipStatus(error, "hipStreamQuery") : absl::OkStatus();
}

absl::StatusOr<hipEvent_t> HipVendor::CreateEvent() const {
  hipEvent_t event = nullptr;
  RETURN_IF_ERROR(
      HipStatus(hipEventCreateWithFlags(&event, hipEventDisableTiming | hipEventBlockingSync),
                "hipEventCreateWithFlags"));
  return event;
}

void HipVendor::DestroyEvent(hipEvent_t event) const { (void)hipEventDestroy(event); }

absl::Status HipVendor::RecordEvent(hipEvent_t event, hipStream_t stream) const {
  return HipStatus(hipEventRecord(event, stream), "hipEventRecord");
}

absl::Status HipVendor::StreamWaitEvent(hipStream_t stream, hipEvent_t event) const {
  return HipStatus(hipStreamWaitEvent(stream, event, 0), "hipStreamWaitEvent");
}

absl::Status HipVendor::AddCallback(hipStream_t stream,
                                     absl::AnyInvocable<void()>& callback) const {
  void* held = HoldCallback(callback);
  absl::Status added = HipStatus(
      hipStreamAddCallback(stream, &RunHeldCallback<hipStream_t, hipError_t>, held, 0),
      "hipStreamAddCallback");
  if (!added.ok()) UnholdCallback(held, callback);
  return added;
}

absl::Status HipVendor::SynchronizeEvent(hipEvent_t event) const {
  return HipStatus(hipEventSynchronize(event), "hipEventSynchronize");
}

bool HipVendor::EventDone(hipEvent_t event) const { return hipEventQuery(event) == hipSuccess; }

absl::StatusOr<bool> HipVendor::MemoryPoolsSupported() const {
  int supported = 0;
  RETURN_IF_ERROR(HipStatus(
      hipDeviceGetAttribute(&supported, hipDeviceAttributeMemoryPoolsSupported, device_),
      "hipDeviceGetAttribute(MemoryPoolsSupported)"));
  return supported != 0;
}

absl::Status HipVendor::KeepPoolMemory() const {
  hipMemPool_t pool = nullptr;
  RETURN_IF_ERROR(HipStatus(hipDeviceGetDefaultMemPool(&pool, device_), "hipDeviceGetDefaultMemPool"));
  uint64_t keep_everything = ~uint64_t{0};
  return HipStatus(hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, &keep_everything),
                   "hipMemPoolSetAttribute(ReleaseThreshold)");
}

absl::StatusOr<DeviceAddress> HipVendor::Allocate(uint64_t size_bytes) const {
  void* pointer = nullptr;
  RETURN_IF_ERROR(HipStatus(hipMalloc(&pointer, size_bytes), "hipMalloc"));
  return reinterpret_cast<DeviceAddress>(pointer);
}

absl::StatusOr<DeviceAddress> HipVendor::AllocateAsync(uint64_t size_bytes,
                                                       hipStream_t stream) const {
  void* pointer = nullptr;
  RETURN_IF_ERROR(HipStatus(hipMallocAsync(&pointer, size_bytes, stream), "hipMallocAsync"));
  return reinterpret_cast<DeviceAddress>(pointer);
}

void HipVendor::Free(DeviceAddress address) const { (void)hipFree(Pointer(address)); }

void HipVendor::FreeAsync(DeviceAddress address, hipStream_t stream) const {
  (void)hipFreeAsync(Pointer(address), stream);
}

absl::StatusOr<std::byte*> HipVendor::AllocateHost(uint64_t size_bytes) const {
  void* pointer = nullptr;
  RETURN_IF_ERROR(HipStatus(hipHostMalloc(&pointer, size_bytes, hipHostMallocDefault),
                            "hipHostMalloc"));
  return static_cast<std::byte*>(pointer);
}

void HipVendor::FreeHost(std::byte* data) const { (void)hipHostFree(data); }

absl::Status HipVendor::RegisterHost(std::byte* data, uint64_t size_bytes) const {
  return HipStatus(hipHostRegister(data, size_bytes, hipHostRegisterPortable), "hipHostRegister");
}

void HipVendor::UnregisterHost(std::byte* data) const { (void)hipHostUnregister(data); }

absl::Status HipVendor::CopyToDevice(DeviceAddress target, std::byte* source,
                                     uint64_t size_bytes, hipStream_t stream) const {
  return HipStatus(hipMemcpyHtoDAsync(Pointer(target), source, size_bytes, stream),
                   "hipMemcpyHtoDAsync");
}

absl::Status HipVendor::CopyToHost(std::byte* target, DeviceAddress source, uint64_t size_bytes,
                                   hipStream_t stream) const {
  return HipStatus(hipMemcpyDtoHAsync(target, Pointer(source), size_bytes, stream),
                   "hipMemcpyDtoHAsync");
}

absl::Status HipVendor::CopyPitched(const PitchedCopy& copy, hipStream_t stream) const {
  if (copy.to_device) {
    return HipStatus(hipMemcpy2DAsync(Pointer(copy.device), copy.device_stride_bytes, copy.host,
                                      copy.width_bytes, copy.width_bytes, copy.height,
                                      hipMemcpyHostToDevice, stream),
                     "hipMemcpy2DAsync");
  }
  return HipStatus(hipMemcpy2DAsync(copy.host, copy.width_bytes, Pointer(copy.device),
                                    copy.device_stride_bytes, copy.width_bytes, copy.height,
                                    hipMemcpyDeviceToHost, stream),
                   "hipMemcpy2DAsync");
}

absl::Status HipVendor::CopyOnDevice(DeviceAddress target, DeviceAddress source,
                                     uint64_t size_bytes, hipStream_t stream) const {
  return HipStatus(hipMemcpyDtoDAsync(Pointer(target), Pointer(source), size_bytes, stream),
                   "hipMemcpyDtoDAsync");
}

absl::Status HipVendor::CopyRowsOnDevice(const DeviceRowsCopy& rows, hipStream_t stream) const {
  return HipStatus(hipMemcpy2DAsync(Pointer(rows.target), rows.target_stride_bytes,
                                    Pointer(rows.source), rows.source_stride_bytes,
                                    rows.width_bytes, rows.height, hipMemcpyDeviceToDevice, stream),
                   "hipMemcpy2DAsync");
}

namespace {

// `count` elements from `target` set to `pattern` (hipMemsetD8/16/32Async).
absl::Status FillElements(hipDeviceptr_t target, FillPattern pattern, size_t count,
                          hipStream_t stream) {
  switch (pattern.element_bytes) {
    case 1:
      return HipStatus(
          hipMemsetD8Async(target, static_cast<unsigned char>(pattern.value), count, stream),
          "hipMemsetD8Async");
    case 2:
      return HipStatus(
          hipMemsetD16Async(target, static_cast<unsigned short>(pattern.value), count, stream),
          "hipMemsetD16Async");
    case 4:
      return HipStatus(hipMemsetD32Async(target, static_cast<int>(pattern.value), count, stream),
                       "hipMemsetD32Async");
  }
  return absl::InvalidArgumentError(
      absl::StrCat("a fill's elements are 1, 2 or 4 bytes, not ", pattern.element_bytes));
}

}  // namespace

absl::Status HipVendor::Fill(DeviceAddress base, const CopyLayout& layout, FillPattern pattern,
                             hipStream_t stream) const {
  auto* const target = static_cast<std::byte*>(Pointer(base + layout.offset_bytes));
  const uint32_t element = std::max(pattern.element_bytes, 1u);
  if (layout.is_contiguous()) {
    return FillElements(target, pattern, layout.host_bytes() / element, stream);
  }
  if (pattern.element_bytes == 1) {
    return HipStatus(hipMemset2DAsync(target, layout.stride_bytes, static_cast<int>(pattern.value),
                                      layout.width_bytes, layout.height, stream),
                     "hipMemset2DAsync");
  }
  // HIP has no pitched memset of wider elements: a row at a time.
  for (uint64_t row = 0; row < layout.height; ++row) {
    RETURN_IF_ERROR(FillElements(target + row * layout.stride_bytes, pattern,
                                 layout.width_bytes / element, stream));
  }
  return absl::OkStatus();
}

absl::StatusOr<hipModule_t> HipVendor::LoadModule(const std::string& image) const {
  hipModule_t module = nullptr;
  RETURN_IF_ERROR(HipStatus(hipModuleLoadData(&module, image.data()), "hipModuleLoadData"));
  return module;
}

absl::StatusOr<hipFunction_t> HipVendor::GetFunction(hipModule_t module,
                                                     const std::string& entry) const {
  hipFunction_t function = nullptr;
  RETURN_IF_ERROR(HipStatus(hipModuleGetFunction(&function, module, entry.c_str()),
                            "hipModuleGetFunction"));
  return function;
}

void HipVendor::UnloadModule(hipModule_t module) const { (void)hipModuleUnload(module); }

absl::Status HipVendor::Launch(hipFunction_t function, Dim3 grid, const LaunchSpec& spec,
                               std::vector<void*>& params, hipStream_t stream) const {
  if (!spec.tensor_maps.empty()) {
    return absl::InvalidArgumentError("tensor-map arguments need the CUDA driver");
  }
  return HipStatus(hipModuleLaunchKernel(function, grid.x, grid.y, grid.z, spec.block.x,
                                         spec.block.y, spec.block.z,
                                         spec.dynamic_shared_memory_bytes, stream,
                                         params.data(), nullptr),
                   "hipModuleLaunchKernel");
}

void HipVendor::Release(bool reset) const {
  // A corrupted context goes with everything in it; the next backend gets a new one.
  if (reset) (void)hipDeviceReset();
}

absl::StatusOr<std::vector<DeviceDescription>> DescribeHipDevices() {
  int count = 0;
  hipError_t error = hipGetDeviceCount(&count);
  if (error == hipErrorNoDevice || (error == hipSuccess && count == 0)) {
    return absl::UnavailableError("no HIP device (no AMD GPU or ROCm driver on this machine)");
  }
  RETURN_IF_ERROR(HipStatus(error, "hipGetDeviceCount"));
  std::vector<DeviceDescription> devices;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    hipDeviceProp_t properties{};
    RETURN_IF_ERROR(HipStatus(hipGetDeviceProperties(&properties, ordinal),
                              "hipGetDeviceProperties"));
    std::string architecture = properties.gcnArchName;
    architecture = architecture.substr(0, architecture.find(':'));  // "gfx90a:sramecc+:..."
    devices.push_back(DeviceDescription{
        .ordinal = ordinal,
        .name = properties.name,
        .driver = DriverKind::kHip,
        .architecture = architecture,
        .memory_capacity_bytes = properties.totalGlobalMem,
        .max_threads_per_block = static_cast<uint32_t>(properties.maxThreadsPerBlock),
        .max_shared_memory_per_block_bytes =
            static_cast<uint32_t>(properties.sharedMemPerBlock),
        .max_grid_x = static_cast<uint32_t>(properties.maxGridSize[0]),
        .max_grid_y = static_cast<uint32_t>(properties.maxGridSize[1]),
        .max_grid_z = static_cast<uint32_t>(properties.maxGridSize[2])});
  }
  return devices;
}

}  // namespace gpucmd

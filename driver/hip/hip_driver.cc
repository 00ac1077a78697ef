#include "driver/hip/hip_driver.h"


#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/file.h"
#include "base/status_macros.h"
#include "driver/hip/hip_status.h"

namespace gpucmd {
namespace {

// Release and cleanup calls below have nobody to report a failure to; their results are
// dropped with (void).

thread_local int current_device = -1;

absl::Status SelectDevice(int device) {
  if (current_device == device) return absl::OkStatus();
  RETURN_IF_ERROR(HipStatus(hipSetDevice(device), "hipSetDevice"));
  current_device = device;
  return absl::OkStatus();
}

}  // namespace

// Owns one recorded hipEvent_t; the last HipEvent copy gives it back to the pool.
struct HipEvent::Handle {
  Handle(int device, hipEvent_t event, std::shared_ptr<HipEventPool> pool)
      : device(device), event(event), pool(std::move(pool)) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { pool->Give(event); }

  const int device;
  const hipEvent_t event;
  const std::shared_ptr<HipEventPool> pool;
};

absl::Status HipEvent::Wait() const {
  if (handle_ == nullptr) return error_;
  RETURN_IF_ERROR(SelectDevice(handle_->device));
  return HipStatus(hipEventSynchronize(handle_->event), "hipEventSynchronize");
}

bool HipEvent::IsComplete() const {
  if (handle_ == nullptr) return true;
  return SelectDevice(handle_->device).ok() && hipEventQuery(handle_->event) == hipSuccess;
}

HipStream::~HipStream() {
  if (Enter().ok()) {
    (void)hipStreamSynchronize(stream_);
    (void)hipStreamDestroy(stream_);
  }
}

absl::Status HipStream::Enter() const { return SelectDevice(device_); }

HipStream::Event HipStream::RecordEvent() {
  Event event;
  if (Enter().ok()) {
    if (absl::StatusOr<hipEvent_t> raw = events_->Take(); raw.ok()) {
      if (hipEventRecord(*raw, stream_) == hipSuccess) {
        event.handle_ = std::make_shared<HipEvent::Handle>(device_, *raw, events_);
        return event;
      }
      events_->Give(*raw);
    }
  }
  // No event to wait on later: wait for the stream now, so that the event returned is
  // complete for real (or carries the error), never falsely.
  event.error_ = Synchronize();
  return event;
}

absl::Status HipStream::WaitEvent(const Event& event) {
  if (event.handle_ == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(Enter());
  return HipStatus(hipStreamWaitEvent(stream_, event.handle_->event, 0), "hipStreamWaitEvent");
}

absl::Status HipStream::Synchronize() {
  RETURN_IF_ERROR(Enter());
  return HipStatus(hipStreamSynchronize(stream_), "hipStreamSynchronize");
}

absl::StatusOr<std::unique_ptr<HipBackend>> HipBackend::Create(const Options& options) {
  int count = 0;
  RETURN_IF_ERROR(HipStatus(hipGetDeviceCount(&count), "hipGetDeviceCount"));
  if (options.ordinal >= count) {
    return absl::UnavailableError(absl::StrCat("no HIP device ", options.ordinal));
  }
  std::unique_ptr<HipBackend> backend(new HipBackend());
  backend->context_.device = options.ordinal;
  backend->context_.module_store = options.modules;
  RETURN_IF_ERROR(SelectDevice(options.ordinal));
  size_t total = 0;
  RETURN_IF_ERROR(HipStatus(hipDeviceTotalMem(&total, options.ordinal), "hipDeviceTotalMem"));
  backend->capacity_bytes_ = total;
  const int device = options.ordinal;
  backend->events_ = std::make_shared<HipEventPool>(
      [device]() -> absl::StatusOr<hipEvent_t> {
        RETURN_IF_ERROR(SelectDevice(device));
        hipEvent_t event = nullptr;
        RETURN_IF_ERROR(HipStatus(hipEventCreateWithFlags(&event, hipEventDisableTiming),
                                  "hipEventCreateWithFlags"));
        return event;
      },
      [device](hipEvent_t event) {
        if (SelectDevice(device).ok()) (void)hipEventDestroy(event);
      });
  int least = 0, greatest = 0;
  RETURN_IF_ERROR(HipStatus(hipDeviceGetStreamPriorityRange(&least, &greatest),
                            "hipDeviceGetStreamPriorityRange"));
  for (int i = 0; i < options.stream_count; ++i) {
    hipStream_t stream = nullptr;
    // Stream 0 gets the highest priority: it carries relocation copies.
    RETURN_IF_ERROR(HipStatus(
        hipStreamCreateWithPriority(&stream, hipStreamNonBlocking, i == 0 ? greatest : least),
        "hipStreamCreateWithPriority"));
    backend->streams_.push_back(
        std::make_unique<HipStream>(options.ordinal, stream, backend->events_));
  }
  int memory_pools = 0;
  RETURN_IF_ERROR(HipStatus(
      hipDeviceGetAttribute(&memory_pools, hipDeviceAttributeMemoryPoolsSupported, device),
      "hipDeviceGetAttribute(MemoryPoolsSupported)"));
  if (memory_pools != 0) {
    // Freed pages stay in the pool for the next allocation: the server's own pool decides
    // how much the device holds.
    hipMemPool_t pool = nullptr;
    RETURN_IF_ERROR(
        HipStatus(hipDeviceGetDefaultMemPool(&pool, device), "hipDeviceGetDefaultMemPool"));
    uint64_t keep_everything = ~uint64_t{0};
    RETURN_IF_ERROR(HipStatus(
        hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, &keep_everything),
        "hipMemPoolSetAttribute(ReleaseThreshold)"));
    RETURN_IF_ERROR(HipStatus(hipStreamCreateWithPriority(&backend->allocation_stream_,
                                                          hipStreamNonBlocking, greatest),
                              "hipStreamCreateWithPriority"));
  }
  return backend;
}

HipBackend::~HipBackend() {
  streams_.clear();
  // Every event is back by now (the Command and its reads went first).
  if (events_ != nullptr) events_->DestroyIdle();
  if (SelectDevice(context_.device).ok()) {
    if (allocation_stream_ != nullptr) (void)hipStreamDestroy(allocation_stream_);
    for (hipModule_t module : context_.modules) (void)hipModuleUnload(module);
    // A corrupted context goes with everything in it; the next backend gets a new one.
    if (!context_.lost.ok()) (void)hipDeviceReset();
  }
}

absl::Status HipDriver::DeviceHealth(Context& context) {
  if (!context.lost.ok()) return context.lost;
  if (absl::Status selected = SelectDevice(context.device); !selected.ok()) {
    context.lost = absl::UnavailableError(selected.message());
    return context.lost;
  }
  hipError_t error = hipStreamQuery(nullptr);
  if (IsStickyHipError(error)) context.lost = HipStatus(error, "hipStreamQuery");
  return context.lost;
}

// With memory pools, pages are allocated and freed in stream order (hipFreeAsync does not
// wait for the whole device); the server frees a page only when no enqueued work touches
// it, so ordering it on its own stream is enough.
absl::StatusOr<DeviceResource> HipBackend::AllocateDevice(uint64_t size_bytes) {
  RETURN_IF_ERROR(SelectDevice(context_.device));
  void* pointer = nullptr;
  if (allocation_stream_ == nullptr) {
    RETURN_IF_ERROR(HipStatus(hipMalloc(&pointer, size_bytes), "hipMalloc"));
    return DeviceResource{reinterpret_cast<DeviceAddress>(pointer), size_bytes};
  }
  RETURN_IF_ERROR(
      HipStatus(hipMallocAsync(&pointer, size_bytes, allocation_stream_), "hipMallocAsync"));
  // Every stream may use the page once its allocation completed.
  if (absl::Status allocated = HipStatus(hipStreamSynchronize(allocation_stream_),
                                         "hipStreamSynchronize(allocation)");
      !allocated.ok()) {
    (void)hipFreeAsync(pointer, allocation_stream_);
    return allocated;
  }
  return DeviceResource{reinterpret_cast<DeviceAddress>(pointer), size_bytes};
}

void HipBackend::FreeDevice(const DeviceResource& resource) {
  if (!SelectDevice(context_.device).ok()) return;
  void* pointer = reinterpret_cast<void*>(resource.address);
  if (allocation_stream_ == nullptr) {
    (void)hipFree(pointer);
  } else {
    (void)hipFreeAsync(pointer, allocation_stream_);
  }
}

absl::StatusOr<HostResource> HipBackend::AllocatePinned(uint64_t size_bytes) {
  RETURN_IF_ERROR(SelectDevice(context_.device));
  void* pointer = nullptr;
  RETURN_IF_ERROR(HipStatus(hipHostMalloc(&pointer, size_bytes, hipHostMallocDefault),
                            "hipHostMalloc"));
  return HostResource{static_cast<std::byte*>(pointer), size_bytes};
}

void HipBackend::FreePinned(const HostResource& resource) {
  if (SelectDevice(context_.device).ok()) (void)hipHostFree(resource.data);
}

Bytes HipDriver::PinnedBytes(PinnedBinding binding, HostResource resource, uint64_t size) {
  return PinnedPoolBytes(binding, resource, size);
}

absl::Status HipDriver::CopyToHost(const DeviceResource& resource, const CopyLayout& layout,
                                   Bytes& bytes, Stream& stream) {
  RETURN_IF_ERROR(stream.Enter());
  void* device = reinterpret_cast<void*>(resource.address + layout.offset_bytes);
  if (layout.is_contiguous()) {
    return HipStatus(hipMemcpyDtoHAsync(bytes.data(), device, layout.host_bytes(), stream.get()),
                     "hipMemcpyDtoHAsync");
  }
  return HipStatus(hipMemcpy2DAsync(bytes.data(), layout.width_bytes, device,
                                    layout.stride_bytes, layout.width_bytes, layout.height,
                                    hipMemcpyDeviceToHost, stream.get()),
                   "hipMemcpy2DAsync");
}

absl::Status HipDriver::CopyToDevice(const DeviceResource& resource, const CopyLayout& layout,
                                     absl::Span<const std::byte> data, Stream& stream) {
  RETURN_IF_ERROR(stream.Enter());
  void* device = reinterpret_cast<void*>(resource.address + layout.offset_bytes);
  auto* host = const_cast<std::byte*>(data.data());
  if (layout.is_contiguous()) {
    return HipStatus(hipMemcpyHtoDAsync(device, host, layout.host_bytes(), stream.get()),
                     "hipMemcpyHtoDAsync");
  }
  return HipStatus(hipMemcpy2DAsync(device, layout.stride_bytes, host, layout.width_bytes,
                                    layout.width_bytes, layout.height, hipMemcpyHostToDevice,
                                    stream.get()),
                   "hipMemcpy2DAsync");
}

absl::Status HipDriver::CopyOnDevice(const DeviceResource& source, const DeviceResource& target,
                                     Stream::Signal signal) {
  if (source.size_bytes != target.size_bytes) {
    return absl::InvalidArgumentError("relocation copy between different sizes");
  }
  RETURN_IF_ERROR(signal->Enter());
  return HipStatus(hipMemcpyDtoDAsync(reinterpret_cast<void*>(target.address),
                                      reinterpret_cast<void*>(source.address),
                                      source.size_bytes, signal->get()),
                   "hipMemcpyDtoDAsync");
}

absl::Status HipDriver::Launch(Context& context, Stream& stream, const KernelId& kernel,
                               Dim3 grid, LaunchArgs& args) {
  if (!args.spec.tensor_maps.empty()) {
    return absl::InvalidArgumentError("tensor-map arguments need the CUDA driver");
  }
  RETURN_IF_ERROR(stream.Enter());
  auto found = context.functions.find(kernel.hex);
  if (found == context.functions.end()) {
    ASSIGN_OR_RETURN(ModuleStore::Module found_module, FindModule(context.module_store, kernel));
    std::string image = ReadFileOrEmpty(found_module.artifact_path);
    const std::string& entry = found_module.entry_point;
    hipModule_t module = nullptr;
    RETURN_IF_ERROR(HipStatus(hipModuleLoadData(&module, image.data()), "hipModuleLoadData"));
    context.modules.push_back(module);
    hipFunction_t function = nullptr;
    RETURN_IF_ERROR(HipStatus(hipModuleGetFunction(&function, module, entry.c_str()),
                              "hipModuleGetFunction"));
    found = context.functions.emplace(kernel.hex, function).first;
  }
  const LaunchSpec& spec = args.spec;
  std::vector<void*> params;
  for (const uint64_t& slot : spec.slots) params.push_back(const_cast<uint64_t*>(&slot));
  return HipStatus(hipModuleLaunchKernel(found->second, grid.x, grid.y, grid.z, spec.block.x,
                                         spec.block.y, spec.block.z,
                                         spec.dynamic_shared_memory_bytes, stream.get(),
                                         params.data(), nullptr),
                   "hipModuleLaunchKernel");
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

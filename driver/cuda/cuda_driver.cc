#include "driver/cuda/cuda_driver.h"


#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/file.h"
#include "base/status_macros.h"

namespace gpucmd {
namespace {

thread_local CUcontext current_context = nullptr;

absl::Status MakeCurrent(const CudaApi& api, CUcontext context) {
  if (current_context == context) return absl::OkStatus();
  RETURN_IF_ERROR(CudaStatus(api, api.CtxSetCurrent(context), "cuCtxSetCurrent"));
  current_context = context;
  return absl::OkStatus();
}

CUtensorMapDataType ToCuda(TensorDataType type) {
  switch (type) {
    case TensorDataType::kU8:
      return CU_TENSOR_MAP_DATA_TYPE_UINT8;
    case TensorDataType::kU16:
      return CU_TENSOR_MAP_DATA_TYPE_UINT16;
    case TensorDataType::kU32:
      return CU_TENSOR_MAP_DATA_TYPE_UINT32;
    case TensorDataType::kI32:
      return CU_TENSOR_MAP_DATA_TYPE_INT32;
    case TensorDataType::kU64:
      return CU_TENSOR_MAP_DATA_TYPE_UINT64;
    case TensorDataType::kI64:
      return CU_TENSOR_MAP_DATA_TYPE_INT64;
    case TensorDataType::kF16:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    case TensorDataType::kF32:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
    case TensorDataType::kF64:
      return CU_TENSOR_MAP_DATA_TYPE_FLOAT64;
    case TensorDataType::kBF16:
      return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  }
  return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
}

CUtensorMapSwizzle ToCuda(TensorSwizzle swizzle) {
  switch (swizzle) {
    case TensorSwizzle::kNone:
      return CU_TENSOR_MAP_SWIZZLE_NONE;
    case TensorSwizzle::k32B:
      return CU_TENSOR_MAP_SWIZZLE_32B;
    case TensorSwizzle::k64B:
      return CU_TENSOR_MAP_SWIZZLE_64B;
    case TensorSwizzle::k128B:
      return CU_TENSOR_MAP_SWIZZLE_128B;
  }
  return CU_TENSOR_MAP_SWIZZLE_NONE;
}

// Encodes a validated tensor map from its resolved buffer address.
absl::Status EncodeTensorMap(const CudaApi& api, const ResolvedTensorMap& map,
                             CUtensorMap* encoded) {
  const TensorMapSpec& spec = map.spec;
  std::vector<cuuint64_t> dims(spec.global_dims.begin(), spec.global_dims.end());
  std::vector<cuuint64_t> strides(spec.global_strides_bytes.begin(),
                                  spec.global_strides_bytes.end());
  std::vector<cuuint32_t> box(spec.box_dims.begin(), spec.box_dims.end());
  std::vector<cuuint32_t> element_strides(spec.element_strides.begin(),
                                          spec.element_strides.end());
  return CudaStatus(
      api,
      api.TensorMapEncodeTiled(encoded, ToCuda(spec.data_type),
                               static_cast<cuuint32_t>(dims.size()),
                               reinterpret_cast<void*>(map.address), dims.data(),
                               strides.empty() ? nullptr : strides.data(), box.data(),
                               element_strides.data(), CU_TENSOR_MAP_INTERLEAVE_NONE,
                               ToCuda(spec.swizzle), CU_TENSOR_MAP_L2_PROMOTION_NONE,
                               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
      absl::StrCat("cuTensorMapEncodeTiled (argument ", map.argument, ")"));
}

}  // namespace

// CudaEvent ----------------------------------------------------------------------------

// Owns one recorded CUevent; the last CudaEvent copy gives it back to the pool.
struct CudaEvent::Handle {
  Handle(const CudaApi* api, CUcontext context, CUevent event,
         std::shared_ptr<CudaEventPool> pool)
      : api(api), context(context), event(event), pool(std::move(pool)) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { pool->Give(event); }

  const CudaApi* const api;
  const CUcontext context;
  const CUevent event;
  const std::shared_ptr<CudaEventPool> pool;
};

absl::Status CudaEvent::Wait() const {
  if (handle_ == nullptr) return error_;
  RETURN_IF_ERROR(MakeCurrent(*handle_->api, handle_->context));
  return CudaStatus(*handle_->api, handle_->api->EventSynchronize(handle_->event),
                    "cuEventSynchronize");
}

bool CudaEvent::IsComplete() const {
  if (handle_ == nullptr) return true;
  if (!MakeCurrent(*handle_->api, handle_->context).ok()) return false;
  return handle_->api->EventQuery(handle_->event) == CUDA_SUCCESS;
}

// CudaStream ---------------------------------------------------------------------------

CudaStream::~CudaStream() {
  if (Enter().ok()) {
    api_->StreamSynchronize(stream_);
    api_->StreamDestroy(stream_);
  }
}

absl::Status CudaStream::Enter() const { return MakeCurrent(*api_, context_); }

CudaStream::Event CudaStream::RecordEvent() {
  Event event;
  if (Enter().ok()) {
    if (absl::StatusOr<CUevent> raw = events_->Take(); raw.ok()) {
      if (api_->EventRecord(*raw, stream_) == CUDA_SUCCESS) {
        event.handle_ = std::make_shared<CudaEvent::Handle>(api_, context_, *raw, events_);
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

absl::Status CudaStream::WaitEvent(const Event& event) {
  if (event.handle_ == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(Enter());
  return CudaStatus(*api_, api_->StreamWaitEvent(stream_, event.handle_->event, 0),
                    "cuStreamWaitEvent");
}

absl::Status CudaStream::Synchronize() {
  RETURN_IF_ERROR(Enter());
  return CudaStatus(*api_, api_->StreamSynchronize(stream_), "cuStreamSynchronize");
}

// CudaBackend --------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<CudaBackend>> CudaBackend::Create(const Options& options) {
  ASSIGN_OR_RETURN(const CudaApi* api, LoadCudaApi());
  std::unique_ptr<CudaBackend> backend(new CudaBackend());
  backend->api_ = api;
  RETURN_IF_ERROR(CudaStatus(*api, api->DeviceGet(&backend->device_, options.ordinal),
                             absl::StrCat("cuDeviceGet(", options.ordinal, ")")));
  size_t total = 0;
  RETURN_IF_ERROR(CudaStatus(*api, api->DeviceTotalMem(&total, backend->device_),
                             "cuDeviceTotalMem"));
  backend->capacity_bytes_ = total;
  CudaContext& context = backend->context_;
  context.api = api;
  context.module_store = options.modules;
  RETURN_IF_ERROR(CudaStatus(*api, api->DevicePrimaryCtxRetain(&context.context, backend->device_),
                             "cuDevicePrimaryCtxRetain"));
  RETURN_IF_ERROR(MakeCurrent(*api, context.context));
  backend->events_ = std::make_shared<CudaEventPool>(
      [api, context = context.context]() -> absl::StatusOr<CUevent> {
        RETURN_IF_ERROR(MakeCurrent(*api, context));
        CUevent event = nullptr;
        RETURN_IF_ERROR(CudaStatus(*api, api->EventCreate(&event, CU_EVENT_DISABLE_TIMING),
                                   "cuEventCreate"));
        return event;
      },
      [api, context = context.context](CUevent event) {
        if (MakeCurrent(*api, context).ok()) api->EventDestroy(event);
      });
  int least = 0, greatest = 0;
  RETURN_IF_ERROR(CudaStatus(*api, api->CtxGetStreamPriorityRange(&least, &greatest),
                             "cuCtxGetStreamPriorityRange"));
  for (int i = 0; i < options.stream_count; ++i) {
    CUstream stream = nullptr;
    // Stream 0 gets the highest priority: it carries relocation copies.
    RETURN_IF_ERROR(CudaStatus(
        *api, api->StreamCreateWithPriority(&stream, CU_STREAM_NON_BLOCKING, i == 0 ? greatest : least),
        "cuStreamCreateWithPriority"));
    backend->streams_.push_back(std::make_unique<CudaStream>(api, context.context, stream,
                                                           backend->events_));
  }
  RETURN_IF_ERROR(CudaStatus(
      *api, api->StreamCreateWithPriority(&context.collectives, CU_STREAM_NON_BLOCKING, least),
      "cuStreamCreateWithPriority"));
  int memory_pools = 0;
  RETURN_IF_ERROR(CudaStatus(
      *api,
      api->DeviceGetAttribute(&memory_pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                              backend->device_),
      "cuDeviceGetAttribute(MEMORY_POOLS_SUPPORTED)"));
  if (memory_pools != 0) {
    // Freed pages stay in the pool for the next allocation instead of going back to the
    // system: the server's own pool decides how much the device holds.
    CUmemoryPool pool = nullptr;
    RETURN_IF_ERROR(CudaStatus(*api, api->DeviceGetDefaultMemPool(&pool, backend->device_),
                               "cuDeviceGetDefaultMemPool"));
    cuuint64_t keep_everything = ~cuuint64_t{0};
    RETURN_IF_ERROR(CudaStatus(
        *api, api->MemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_everything),
        "cuMemPoolSetAttribute(RELEASE_THRESHOLD)"));
    RETURN_IF_ERROR(CudaStatus(*api,
                               api->StreamCreateWithPriority(&backend->allocation_stream_,
                                                             CU_STREAM_NON_BLOCKING, greatest),
                               "cuStreamCreateWithPriority"));
  }
  return backend;
}

CudaBackend::~CudaBackend() {
  streams_.clear();
  // Every event is back by now (the Command and its reads went first).
  if (events_ != nullptr) events_->DestroyIdle();
  if (context_.context != nullptr && MakeCurrent(*api_, context_.context).ok()) {
    if (allocation_stream_ != nullptr) api_->StreamDestroy(allocation_stream_);
    if (context_.collectives != nullptr) api_->StreamDestroy(context_.collectives);
    for (CUmodule module : context_.modules) api_->ModuleUnload(module);
    // A corrupted context is destroyed with everything in it, so that the next
    // backend on this device retains a fresh one.
    if (!context_.lost.ok()) api_->DevicePrimaryCtxReset(device_);
    api_->DevicePrimaryCtxRelease(device_);
    // The next backend on this thread makes its context current explicitly, even if the
    // driver hands out the same handle again.
    current_context = nullptr;
  }
}

// With memory pools, a page is allocated and freed in stream order: unlike cuMemFree,
// cuMemFreeAsync does not wait for the whole device. The server frees a page only when
// no enqueued work touches it any more, so ordering it on its own stream is enough.
absl::StatusOr<DeviceResource> CudaBackend::AllocateDevice(uint64_t size_bytes) {
  RETURN_IF_ERROR(MakeCurrent(*api_, context_.context));
  CUdeviceptr pointer = 0;
  if (allocation_stream_ == nullptr) {
    RETURN_IF_ERROR(CudaStatus(*api_, api_->MemAlloc(&pointer, size_bytes), "cuMemAlloc"));
    return DeviceResource{pointer, size_bytes};
  }
  RETURN_IF_ERROR(CudaStatus(*api_, api_->MemAllocAsync(&pointer, size_bytes, allocation_stream_),
                             "cuMemAllocAsync"));
  // Every stream may use the page once its allocation completed.
  if (absl::Status allocated = CudaStatus(*api_, api_->StreamSynchronize(allocation_stream_),
                                          "cuStreamSynchronize(allocation)");
      !allocated.ok()) {
    api_->MemFreeAsync(pointer, allocation_stream_);
    return allocated;
  }
  return DeviceResource{pointer, size_bytes};
}

void CudaBackend::FreeDevice(const DeviceResource& resource) {
  if (!MakeCurrent(*api_, context_.context).ok()) return;
  if (allocation_stream_ == nullptr) {
    api_->MemFree(resource.address);
  } else {
    api_->MemFreeAsync(resource.address, allocation_stream_);
  }
}

absl::StatusOr<HostResource> CudaBackend::AllocatePinned(uint64_t size_bytes) {
  RETURN_IF_ERROR(MakeCurrent(*api_, context_.context));
  void* pointer = nullptr;
  RETURN_IF_ERROR(
      CudaStatus(*api_, api_->MemAllocHost(&pointer, size_bytes), "cuMemAllocHost"));
  return HostResource{static_cast<std::byte*>(pointer), size_bytes};
}

void CudaBackend::FreePinned(const HostResource& resource) {
  if (MakeCurrent(*api_, context_.context).ok()) api_->MemFreeHost(resource.data);
}

// CudaDriver ---------------------------------------------------------------------------

CUDA_MEMCPY2D Pitched2DCopy(const DeviceResource& resource, const CopyLayout& layout,
                            const std::byte* host, bool to_device) {
  CUDA_MEMCPY2D copy{};
  CUdeviceptr device = resource.address + layout.offset_bytes;
  if (to_device) {
    copy.srcMemoryType = CU_MEMORYTYPE_HOST;
    copy.srcHost = host;
    copy.srcPitch = layout.width_bytes;
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = device;
    copy.dstPitch = layout.stride_bytes;
  } else {
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = device;
    copy.srcPitch = layout.stride_bytes;
    copy.dstMemoryType = CU_MEMORYTYPE_HOST;
    copy.dstHost = const_cast<std::byte*>(host);
    copy.dstPitch = layout.width_bytes;
  }
  copy.WidthInBytes = layout.width_bytes;
  copy.Height = layout.height;
  return copy;
}

Bytes CudaDriver::PinnedBytes(PinnedBinding binding, HostResource resource, uint64_t size) {
  return PinnedPoolBytes(binding, resource, size);
}

absl::Status CudaDriver::CopyToHost(const DeviceResource& resource, const CopyLayout& layout,
                                    Bytes& bytes, Stream& stream) {
  RETURN_IF_ERROR(stream.Enter());
  const CudaApi& api = stream.api();
  if (layout.is_contiguous()) {
    return CudaStatus(api,
                      api.MemcpyDtoHAsync(bytes.data(), resource.address + layout.offset_bytes,
                                          layout.host_bytes(), stream.get()),
                      "cuMemcpyDtoHAsync");
  }
  CUDA_MEMCPY2D copy = Pitched2DCopy(resource, layout, bytes.data(), /*to_device=*/false);
  return CudaStatus(api, api.Memcpy2DAsync(&copy, stream.get()), "cuMemcpy2DAsync");
}

absl::Status CudaDriver::CopyToDevice(const DeviceResource& resource, const CopyLayout& layout,
                                      absl::Span<const std::byte> data, Stream& stream) {
  RETURN_IF_ERROR(stream.Enter());
  const CudaApi& api = stream.api();
  if (layout.is_contiguous()) {
    return CudaStatus(api,
                      api.MemcpyHtoDAsync(resource.address + layout.offset_bytes, data.data(),
                                          layout.host_bytes(), stream.get()),
                      "cuMemcpyHtoDAsync");
  }
  CUDA_MEMCPY2D copy = Pitched2DCopy(resource, layout, data.data(), /*to_device=*/true);
  return CudaStatus(api, api.Memcpy2DAsync(&copy, stream.get()), "cuMemcpy2DAsync");
}

absl::Status CudaDriver::CopyOnDevice(const DeviceResource& source, const DeviceResource& target,
                                      Stream::Signal signal) {
  if (source.size_bytes != target.size_bytes) {
    return absl::InvalidArgumentError("relocation copy between different sizes");
  }
  RETURN_IF_ERROR(signal->Enter());
  const CudaApi& api = signal->api();
  return CudaStatus(api,
                    api.MemcpyDtoDAsync(target.address, source.address, source.size_bytes,
                                        signal->get()),
                    "cuMemcpyDtoDAsync");
}

absl::Status CudaDriver::Launch(Context& context, Stream& stream, const KernelId& kernel,
                                Dim3 grid, LaunchArgs& args) {
  RETURN_IF_ERROR(stream.Enter());
  const CudaApi& api = *context.api;
  auto found = context.functions.find(kernel.hex);
  if (found == context.functions.end()) {
    ASSIGN_OR_RETURN(ModuleStore::Module found_module, FindModule(context.module_store, kernel));
    std::string image = ReadFileOrEmpty(found_module.artifact_path);
    const std::string& entry = found_module.entry_point;
    CUmodule module = nullptr;
    RETURN_IF_ERROR(CudaStatus(api, api.ModuleLoadData(&module, image.data()), "cuModuleLoadData"));
    context.modules.push_back(module);
    CUfunction function = nullptr;
    RETURN_IF_ERROR(CudaStatus(api, api.ModuleGetFunction(&function, module, entry.c_str()),
                               "cuModuleGetFunction"));
    found = context.functions.emplace(kernel.hex, function).first;
  }
  CUfunction function = found->second;
  const LaunchSpec& spec = args.spec;
  if (spec.dynamic_shared_memory_bytes > (48u << 10)) {
    RETURN_IF_ERROR(CudaStatus(
        api,
        api.FuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                             static_cast<int>(spec.dynamic_shared_memory_bytes)),
        "cuFuncSetAttribute"));
  }
  // Each parameter points at its 8-byte slot, or at its encoded tensor map; both live
  // until cuLaunchKernel returns (it copies them).
  std::vector<void*> params;
  for (const uint64_t& slot : spec.slots) params.push_back(const_cast<uint64_t*>(&slot));
  std::vector<CUtensorMap> maps(spec.tensor_maps.size());
  for (size_t i = 0; i < spec.tensor_maps.size(); ++i) {
    RETURN_IF_ERROR(EncodeTensorMap(api, spec.tensor_maps[i], &maps[i]));
    params[spec.tensor_maps[i].argument] = &maps[i];
  }
  RETURN_IF_ERROR(CudaStatus(api,
                             api.LaunchKernel(function, grid.x, grid.y, grid.z, spec.block.x,
                                              spec.block.y, spec.block.z,
                                              spec.dynamic_shared_memory_bytes, stream.get(),
                                              params.data(), nullptr),
                             "cuLaunchKernel"));
  return absl::OkStatus();
}

absl::Status CudaDriver::WaitOutsideStreams(Context& context) {
  RETURN_IF_ERROR(MakeCurrent(*context.api, context.context));
  return CudaStatus(*context.api, context.api->StreamSynchronize(context.collectives),
                    "cuStreamSynchronize(collectives)");
}

absl::Status CudaDriver::DeviceHealth(Context& context) {
  if (!context.lost.ok()) return context.lost;
  if (absl::Status current = MakeCurrent(*context.api, context.context); !current.ok()) {
    context.lost = absl::UnavailableError(current.message());  // nothing can run on it
    return context.lost;
  }
  CUresult result = context.api->StreamQuery(context.collectives);
  if (IsStickyError(result)) context.lost = CudaStatus(*context.api, result, "cuStreamQuery");
  return context.lost;
}

absl::StatusOr<std::vector<DeviceDescription>> DescribeCudaDevices() {
  ASSIGN_OR_RETURN(const CudaApi* api, LoadCudaApi());
  int count = 0;
  RETURN_IF_ERROR(CudaStatus(*api, api->DeviceGetCount(&count), "cuDeviceGetCount"));
  if (count == 0) return absl::UnavailableError("no CUDA device");
  std::vector<DeviceDescription> devices;
  for (int ordinal = 0; ordinal < count; ++ordinal) {
    CUdevice device = 0;
    RETURN_IF_ERROR(CudaStatus(*api, api->DeviceGet(&device, ordinal), "cuDeviceGet"));
    char name[256] = {};
    api->DeviceGetName(name, sizeof(name), device);
    size_t memory = 0;
    api->DeviceTotalMem(&memory, device);
    int major = 0, minor = 0, threads = 0, shared = 0;
    api->DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    api->DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    api->DeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, device);
    api->DeviceGetAttribute(&shared, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                            device);
    int grid[3] = {};
    api->DeviceGetAttribute(&grid[0], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, device);
    api->DeviceGetAttribute(&grid[1], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, device);
    api->DeviceGetAttribute(&grid[2], CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, device);
    devices.push_back(DeviceDescription{
        .ordinal = ordinal,
        .name = name,
        .driver = DriverKind::kCuda,
        .architecture = absl::StrCat("sm_", major, minor),
        .memory_capacity_bytes = memory,
        .max_threads_per_block = static_cast<uint32_t>(threads),
        .max_shared_memory_per_block_bytes = static_cast<uint32_t>(shared),
        .max_grid_x = static_cast<uint32_t>(grid[0]),
        .max_grid_y = static_cast<uint32_t>(grid[1]),
        .max_grid_z = static_cast<uint32_t>(grid[2]),
        .takes_tensor_maps = true});
  }
  return devices;
}

}  // namespace gpucmd

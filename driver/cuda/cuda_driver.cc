#include "driver/cuda/cuda_driver.h"

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace gpucmd {
namespace {

// The context current on this thread, as far as this driver made it so.
thread_local CUcontext current_context = nullptr;

// The largest dynamic shared memory a launch gets without opting in.
constexpr uint32_t kDefaultDynamicSharedBytes = 48 << 10;

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

absl::StatusOr<CudaVendor> CudaVendor::Open(int ordinal) {
  ASSIGN_OR_RETURN(const CudaApi* api, LoadCudaApi());
  CUdevice device = 0;
  RETURN_IF_ERROR(CudaStatus(*api, api->DeviceGet(&device, ordinal),
                             absl::StrCat("cuDeviceGet(", ordinal, ")")));
  size_t total = 0;
  RETURN_IF_ERROR(CudaStatus(*api, api->DeviceTotalMem(&total, device), "cuDeviceTotalMem"));
  CUcontext context = nullptr;
  RETURN_IF_ERROR(CudaStatus(*api, api->DevicePrimaryCtxRetain(&context, device),
                             "cuDevicePrimaryCtxRetain"));
  return CudaVendor(api, device, context, total);
}

absl::Status CudaVendor::Enter() const {
  if (current_context == context_) return absl::OkStatus();
  RETURN_IF_ERROR(Check(api_->CtxSetCurrent(context_), "cuCtxSetCurrent"));
  current_context = context_;
  return absl::OkStatus();
}

absl::StatusOr<StreamPriorities> CudaVendor::StreamPriorityRange() const {
  StreamPriorities priorities;
  RETURN_IF_ERROR(Check(api_->CtxGetStreamPriorityRange(&priorities.least, &priorities.greatest),
                        "cuCtxGetStreamPriorityRange"));
  return priorities;
}

absl::StatusOr<CUstream> CudaVendor::CreateStream(int priority) const {
  CUstream stream = nullptr;
  RETURN_IF_ERROR(Check(api_->StreamCreateWithPriority(&stream, CU_STREAM_NON_BLOCKING, priority),
                        "cuStreamCreateWithPriority"));
  return stream;
}

void CudaVendor::DestroyStream(CUstream stream) const { api_->StreamDestroy(stream); }

absl::Status CudaVendor::SynchronizeStream(CUstream stream) const {
  return Check(api_->StreamSynchronize(stream), "cuStreamSynchronize");
}

absl::Status CudaVendor::StickyError(CUstream stream) const {
  CUresult result = api_->StreamQuery(stream);
  return IsStickyError(result) ? Check(result, "cuStreamQuery") : absl::OkStatus();
}

absl::StatusOr<CUevent> CudaVendor::CreateEvent() const {
  CUevent event = nullptr;
  RETURN_IF_ERROR(Check(api_->EventCreate(&event, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC),
                        "cuEventCreate"));
  return event;
}

void CudaVendor::DestroyEvent(CUevent event) const { api_->EventDestroy(event); }

absl::Status CudaVendor::RecordEvent(CUevent event, CUstream stream) const {
  return Check(api_->EventRecord(event, stream), "cuEventRecord");
}

absl::Status CudaVendor::StreamWaitEvent(CUstream stream, CUevent event) const {
  return Check(api_->StreamWaitEvent(stream, event, 0), "cuStreamWaitEvent");
}

absl::Status CudaVendor::AddCallback(CUstream stream,
                                      absl::AnyInvocable<void()>& callback) const {
  void* held = HoldCallback(callback);
  absl::Status added = Check(
      api_->StreamAddCallback(stream, &RunHeldCallback<CUstream, CUresult>, held, 0),
      "cuStreamAddCallback");
  if (!added.ok()) UnholdCallback(held, callback);
  return added;
}

absl::Status CudaVendor::SynchronizeEvent(CUevent event) const {
  return Check(api_->EventSynchronize(event), "cuEventSynchronize");
}

bool CudaVendor::EventDone(CUevent event) const {
  return api_->EventQuery(event) == CUDA_SUCCESS;
}

absl::StatusOr<bool> CudaVendor::MemoryPoolsSupported() const {
  int supported = 0;
  RETURN_IF_ERROR(
      Check(api_->DeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                                     device_),
            "cuDeviceGetAttribute(MEMORY_POOLS_SUPPORTED)"));
  return supported != 0;
}

absl::Status CudaVendor::KeepPoolMemory() const {
  CUmemoryPool pool = nullptr;
  RETURN_IF_ERROR(Check(api_->DeviceGetDefaultMemPool(&pool, device_), "cuDeviceGetDefaultMemPool"));
  cuuint64_t keep_everything = ~cuuint64_t{0};
  return Check(api_->MemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep_everything),
               "cuMemPoolSetAttribute(RELEASE_THRESHOLD)");
}

absl::StatusOr<DeviceAddress> CudaVendor::Allocate(uint64_t size_bytes) const {
  CUdeviceptr pointer = 0;
  RETURN_IF_ERROR(Check(api_->MemAlloc(&pointer, size_bytes), "cuMemAlloc"));
  return pointer;
}

absl::StatusOr<DeviceAddress> CudaVendor::AllocateAsync(uint64_t size_bytes,
                                                        CUstream stream) const {
  CUdeviceptr pointer = 0;
  RETURN_IF_ERROR(Check(api_->MemAllocAsync(&pointer, size_bytes, stream), "cuMemAllocAsync"));
  return pointer;
}

void CudaVendor::Free(DeviceAddress address) const { api_->MemFree(address); }

void CudaVendor::FreeAsync(DeviceAddress address, CUstream stream) const {
  api_->MemFreeAsync(address, stream);
}

absl::StatusOr<std::byte*> CudaVendor::AllocateHost(uint64_t size_bytes) const {
  void* pointer = nullptr;
  RETURN_IF_ERROR(Check(api_->MemAllocHost(&pointer, size_bytes), "cuMemAllocHost"));
  return static_cast<std::byte*>(pointer);
}

void CudaVendor::FreeHost(std::byte* data) const { api_->MemFreeHost(data); }

absl::Status CudaVendor::RegisterHost(std::byte* data, uint64_t size_bytes) const {
  return Check(api_->MemHostRegister(data, size_bytes, CU_MEMHOSTREGISTER_PORTABLE),
               "cuMemHostRegister");
}

void CudaVendor::UnregisterHost(std::byte* data) const { api_->MemHostUnregister(data); }

absl::Status CudaVendor::CopyToDevice(DeviceAddress target, std::byte* source,
                                      uint64_t size_bytes, CUstream stream) const {
  return Check(api_->MemcpyHtoDAsync(target, source, size_bytes, stream), "cuMemcpyHtoDAsync");
}

absl::Status CudaVendor::CopyToHost(std::byte* target, DeviceAddress source, uint64_t size_bytes,
                                    CUstream stream) const {
  return Check(api_->MemcpyDtoHAsync(target, source, size_bytes, stream), "cuMemcpyDtoHAsync");
}

absl::Status CudaVendor::CopyPitched(const PitchedCopy& copy, CUstream stream) const {
  CUDA_MEMCPY2D parameters = Pitched2DCopy(copy);
  return Check(api_->Memcpy2DAsync(&parameters, stream), "cuMemcpy2DAsync");
}

absl::Status CudaVendor::CopyOnDevice(DeviceAddress target, DeviceAddress source,
                                      uint64_t size_bytes, CUstream stream) const {
  return Check(api_->MemcpyDtoDAsync(target, source, size_bytes, stream), "cuMemcpyDtoDAsync");
}

absl::Status CudaVendor::CopyRowsOnDevice(const DeviceRowsCopy& rows, CUstream stream) const {
  CUDA_MEMCPY2D parameters{};
  parameters.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  parameters.srcDevice = rows.source;
  parameters.srcPitch = rows.source_stride_bytes;
  parameters.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  parameters.dstDevice = rows.target;
  parameters.dstPitch = rows.target_stride_bytes;
  parameters.WidthInBytes = rows.width_bytes;
  parameters.Height = rows.height;
  return Check(api_->Memcpy2DAsync(&parameters, stream), "cuMemcpy2DAsync");
}

absl::Status CudaVendor::Fill(DeviceAddress base, const CopyLayout& layout, FillPattern pattern,
                              CUstream stream) const {
  const DeviceAddress target = base + layout.offset_bytes;
  const uint32_t element = pattern.element_bytes;
  if (element != 1 && element != 2 && element != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("a fill's elements are 1, 2 or 4 bytes, not ", element));
  }
  if (layout.is_contiguous()) {
    const size_t count = layout.host_bytes() / element;
    switch (element) {
      case 1:
        return Check(
            api_->MemsetD8Async(target, static_cast<unsigned char>(pattern.value), count, stream),
            "cuMemsetD8Async");
      case 2:
        return Check(
            api_->MemsetD16Async(target, static_cast<unsigned short>(pattern.value), count, stream),
            "cuMemsetD16Async");
      default:
        return Check(api_->MemsetD32Async(target, pattern.value, count, stream),
                     "cuMemsetD32Async");
    }
  }
  const size_t row = layout.width_bytes / element;  // cuMemsetD2D* counts elements
  switch (element) {
    case 1:
      return Check(api_->MemsetD2D8Async(target, layout.stride_bytes,
                                         static_cast<unsigned char>(pattern.value), row,
                                         layout.height, stream),
                   "cuMemsetD2D8Async");
    case 2:
      return Check(api_->MemsetD2D16Async(target, layout.stride_bytes,
                                          static_cast<unsigned short>(pattern.value), row,
                                          layout.height, stream),
                   "cuMemsetD2D16Async");
    default:
      return Check(api_->MemsetD2D32Async(target, layout.stride_bytes, pattern.value, row,
                                          layout.height, stream),
                   "cuMemsetD2D32Async");
  }
}

absl::StatusOr<CUmodule> CudaVendor::LoadModule(const std::string& image) const {
  CUmodule module = nullptr;
  RETURN_IF_ERROR(Check(api_->ModuleLoadData(&module, image.data()), "cuModuleLoadData"));
  return module;
}

absl::StatusOr<CUfunction> CudaVendor::GetFunction(CUmodule module,
                                                   const std::string& entry) const {
  CUfunction function = nullptr;
  RETURN_IF_ERROR(
      Check(api_->ModuleGetFunction(&function, module, entry.c_str()), "cuModuleGetFunction"));
  return function;
}

void CudaVendor::UnloadModule(CUmodule module) const { api_->ModuleUnload(module); }

absl::Status CudaVendor::Launch(CUfunction function, Dim3 grid, const LaunchSpec& spec,
                                std::vector<void*>& params, CUstream stream) const {
  if (spec.dynamic_shared_memory_bytes > kDefaultDynamicSharedBytes) {
    RETURN_IF_ERROR(Check(api_->FuncSetAttribute(function,
                                                 CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                                 static_cast<int>(spec.dynamic_shared_memory_bytes)),
                          "cuFuncSetAttribute"));
  }
  // Encoded maps live until cuLaunchKernel returns (it copies its parameters).
  std::vector<CUtensorMap> maps(spec.tensor_maps.size());
  for (size_t i = 0; i < spec.tensor_maps.size(); ++i) {
    RETURN_IF_ERROR(EncodeTensorMap(*api_, spec.tensor_maps[i], &maps[i]));
    params[spec.tensor_maps[i].argument] = &maps[i];
  }
  return Check(api_->LaunchKernel(function, grid.x, grid.y, grid.z, spec.block.x, spec.block.y,
                                  spec.block.z, spec.dynamic_shared_memory_bytes, stream,
                                  params.data(), nullptr),
               "cuLaunchKernel");
}

void CudaVendor::Release(bool reset) const {
  // A corrupted context is destroyed with everything in it, so that the next backend on
  // this device retains a fresh one.
  if (reset) api_->DevicePrimaryCtxReset(device_);
  api_->DevicePrimaryCtxRelease(device_);
  // The next backend on this thread makes its context current explicitly, even if the
  // driver hands out the same handle again.
  current_context = nullptr;
}

CUDA_MEMCPY2D Pitched2DCopy(const PitchedCopy& copy) {
  CUDA_MEMCPY2D parameters{};
  if (copy.to_device) {
    parameters.srcMemoryType = CU_MEMORYTYPE_HOST;
    parameters.srcHost = copy.host;
    parameters.srcPitch = copy.width_bytes;
    parameters.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    parameters.dstDevice = copy.device;
    parameters.dstPitch = copy.device_stride_bytes;
  } else {
    parameters.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    parameters.srcDevice = copy.device;
    parameters.srcPitch = copy.device_stride_bytes;
    parameters.dstMemoryType = CU_MEMORYTYPE_HOST;
    parameters.dstHost = copy.host;
    parameters.dstPitch = copy.width_bytes;
  }
  parameters.WidthInBytes = copy.width_bytes;
  parameters.Height = copy.height;
  return parameters;
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

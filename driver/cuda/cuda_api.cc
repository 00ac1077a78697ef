#include "driver/cuda/cuda_api.h"

#include <dlfcn.h>

#include "absl/strings/str_cat.h"

namespace gpucmd {
namespace {

using GetProcAddress = CUresult (*)(const char*, void**, int, cuuint64_t,
                                    CUdriverProcAddressQueryResult*);

constexpr int kApiVersion = 12000;

absl::StatusOr<CudaApi> Load() {
  void* library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return absl::UnavailableError(
        absl::StrCat("no CUDA driver: cannot load libcuda.so.1 (", dlerror(), ")"));
  }
  auto get = reinterpret_cast<GetProcAddress>(dlsym(library, "cuGetProcAddress_v2"));
  if (get == nullptr) {
    return absl::UnavailableError("no CUDA driver: libcuda.so.1 is older than CUDA 12");
  }
  CudaApi api{};
  absl::Status missing;
  auto resolve = [&](const char* name, auto& slot) {
    void* function = nullptr;
    CUdriverProcAddressQueryResult found{};
    if (get(name, &function, kApiVersion, CU_GET_PROC_ADDRESS_DEFAULT, &found) != CUDA_SUCCESS ||
        function == nullptr) {
      missing.Update(absl::UnavailableError(absl::StrCat("CUDA driver lacks ", name)));
      return;
    }
    slot = reinterpret_cast<std::remove_reference_t<decltype(slot)>>(function);
  };
  resolve("cuInit", api.Init);
  resolve("cuDriverGetVersion", api.DriverGetVersion);
  resolve("cuGetErrorString", api.GetErrorString);
  resolve("cuDeviceGetCount", api.DeviceGetCount);
  resolve("cuDeviceGet", api.DeviceGet);
  resolve("cuDeviceGetName", api.DeviceGetName);
  resolve("cuDeviceGetAttribute", api.DeviceGetAttribute);
  resolve("cuDeviceTotalMem", api.DeviceTotalMem);
  resolve("cuDevicePrimaryCtxRetain", api.DevicePrimaryCtxRetain);
  resolve("cuDevicePrimaryCtxRelease", api.DevicePrimaryCtxRelease);
  resolve("cuDevicePrimaryCtxReset", api.DevicePrimaryCtxReset);
  resolve("cuCtxSetCurrent", api.CtxSetCurrent);
  resolve("cuCtxGetStreamPriorityRange", api.CtxGetStreamPriorityRange);
  resolve("cuStreamCreateWithPriority", api.StreamCreateWithPriority);
  resolve("cuStreamDestroy", api.StreamDestroy);
  resolve("cuStreamSynchronize", api.StreamSynchronize);
  resolve("cuStreamQuery", api.StreamQuery);
  resolve("cuStreamWaitEvent", api.StreamWaitEvent);
  resolve("cuStreamAddCallback", api.StreamAddCallback);
  resolve("cuEventCreate", api.EventCreate);
  resolve("cuEventRecord", api.EventRecord);
  resolve("cuEventQuery", api.EventQuery);
  resolve("cuEventSynchronize", api.EventSynchronize);
  resolve("cuEventDestroy", api.EventDestroy);
  resolve("cuMemAlloc", api.MemAlloc);
  resolve("cuMemFree", api.MemFree);
  resolve("cuMemAllocAsync", api.MemAllocAsync);
  resolve("cuMemFreeAsync", api.MemFreeAsync);
  resolve("cuDeviceGetDefaultMemPool", api.DeviceGetDefaultMemPool);
  resolve("cuMemPoolSetAttribute", api.MemPoolSetAttribute);
  resolve("cuMemAllocHost", api.MemAllocHost);
  resolve("cuMemFreeHost", api.MemFreeHost);
  resolve("cuMemHostRegister", api.MemHostRegister);
  resolve("cuMemHostUnregister", api.MemHostUnregister);
  resolve("cuMemcpyHtoDAsync", api.MemcpyHtoDAsync);
  resolve("cuMemcpyDtoHAsync", api.MemcpyDtoHAsync);
  resolve("cuMemcpyDtoDAsync", api.MemcpyDtoDAsync);
  resolve("cuMemcpy2DAsync", api.Memcpy2DAsync);
  resolve("cuMemsetD8Async", api.MemsetD8Async);
  resolve("cuMemsetD16Async", api.MemsetD16Async);
  resolve("cuMemsetD32Async", api.MemsetD32Async);
  resolve("cuMemsetD2D8Async", api.MemsetD2D8Async);
  resolve("cuMemsetD2D16Async", api.MemsetD2D16Async);
  resolve("cuMemsetD2D32Async", api.MemsetD2D32Async);
  resolve("cuModuleLoadData", api.ModuleLoadData);
  resolve("cuModuleGetFunction", api.ModuleGetFunction);
  resolve("cuModuleUnload", api.ModuleUnload);
  resolve("cuFuncSetAttribute", api.FuncSetAttribute);
  resolve("cuLaunchKernel", api.LaunchKernel);
  resolve("cuTensorMapEncodeTiled", api.TensorMapEncodeTiled);
  if (!missing.ok()) return missing;
  if (CUresult result = api.Init(0); result != CUDA_SUCCESS) {
    return absl::UnavailableError(
        absl::StrCat("no usable CUDA driver: ", CudaStatus(api, result, "cuInit").message()));
  }
  return api;
}

}  // namespace

absl::StatusOr<const CudaApi*> LoadCudaApi() {
  static const absl::StatusOr<CudaApi>* const kApi = new absl::StatusOr<CudaApi>(Load());
  if (!kApi->ok()) return kApi->status();
  return &**kApi;
}

bool IsStickyError(CUresult result) {
  switch (result) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_LAUNCH_TIMEOUT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_ASSERT:
      return true;
    default:
      return false;
  }
}

absl::Status CudaStatus(const CudaApi& api, CUresult result, absl::string_view call) {
  if (result == CUDA_SUCCESS) return absl::OkStatus();
  const char* text = nullptr;
  if (api.GetErrorString == nullptr || api.GetErrorString(result, &text) != CUDA_SUCCESS ||
      text == nullptr) {
    text = "unknown error";
  }
  std::string message = absl::StrCat(call, ": ", text, " (CUresult ", static_cast<int>(result), ")");
  if (IsStickyError(result)) return absl::UnavailableError(message);
  switch (result) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return absl::ResourceExhaustedError(message);
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
      return absl::UnavailableError(message);
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_IMAGE:
    case CUDA_ERROR_NOT_FOUND:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace gpucmd

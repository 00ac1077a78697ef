#ifndef GPUCMDD_DRIVER_CUDA_CUDA_API_H_
#define GPUCMDD_DRIVER_CUDA_CUDA_API_H_

// The CUDA driver API, loaded at run time: dlopen("libcuda.so.1") and cuGetProcAddress.
// Nothing links libcuda, so the CUDA build of gpucmdd starts on a machine without an
// NVIDIA driver and says so instead of failing to load.
//
// Thread-safety: LoadCudaApi may be called from any thread; the table is immutable.

#include <cuda.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace gpucmd {

struct CudaApi {
  decltype(&::cuInit) Init;
  decltype(&::cuDriverGetVersion) DriverGetVersion;
  decltype(&::cuGetErrorString) GetErrorString;
  decltype(&::cuDeviceGetCount) DeviceGetCount;
  decltype(&::cuDeviceGet) DeviceGet;
  decltype(&::cuDeviceGetName) DeviceGetName;
  decltype(&::cuDeviceGetAttribute) DeviceGetAttribute;
  decltype(&::cuDeviceTotalMem) DeviceTotalMem;
  decltype(&::cuDevicePrimaryCtxRetain) DevicePrimaryCtxRetain;
  decltype(&::cuDevicePrimaryCtxRelease) DevicePrimaryCtxRelease;
  decltype(&::cuDevicePrimaryCtxReset) DevicePrimaryCtxReset;
  decltype(&::cuCtxSetCurrent) CtxSetCurrent;
  decltype(&::cuCtxGetStreamPriorityRange) CtxGetStreamPriorityRange;
  decltype(&::cuStreamCreateWithPriority) StreamCreateWithPriority;
  decltype(&::cuStreamDestroy) StreamDestroy;
  decltype(&::cuStreamSynchronize) StreamSynchronize;
  decltype(&::cuStreamQuery) StreamQuery;
  decltype(&::cuStreamWaitEvent) StreamWaitEvent;
  decltype(&::cuStreamAddCallback) StreamAddCallback;
  decltype(&::cuEventCreate) EventCreate;
  decltype(&::cuEventRecord) EventRecord;
  decltype(&::cuEventQuery) EventQuery;
  decltype(&::cuEventSynchronize) EventSynchronize;
  decltype(&::cuEventDestroy) EventDestroy;
  decltype(&::cuMemAlloc) MemAlloc;
  decltype(&::cuMemFree) MemFree;
  decltype(&::cuMemAllocAsync) MemAllocAsync;
  decltype(&::cuMemFreeAsync) MemFreeAsync;
  decltype(&::cuDeviceGetDefaultMemPool) DeviceGetDefaultMemPool;
  decltype(&::cuMemPoolSetAttribute) MemPoolSetAttribute;
  decltype(&::cuMemAllocHost) MemAllocHost;
  decltype(&::cuMemFreeHost) MemFreeHost;
  decltype(&::cuMemHostRegister) MemHostRegister;
  decltype(&::cuMemHostUnregister) MemHostUnregister;
  decltype(&::cuMemcpyHtoDAsync) MemcpyHtoDAsync;
  decltype(&::cuMemcpyDtoHAsync) MemcpyDtoHAsync;
  decltype(&::cuMemcpyDtoDAsync) MemcpyDtoDAsync;
  decltype(&::cuMemcpy2DAsync) Memcpy2DAsync;
  decltype(&::cuMemsetD8Async) MemsetD8Async;
  decltype(&::cuMemsetD16Async) MemsetD16Async;
  decltype(&::cuMemsetD32Async) MemsetD32Async;
  decltype(&::cuMemsetD2D8Async) MemsetD2D8Async;
  decltype(&::cuMemsetD2D16Async) MemsetD2D16Async;
  decltype(&::cuMemsetD2D32Async) MemsetD2D32Async;
  decltype(&::cuModuleLoadData) ModuleLoadData;
  decltype(&::cuModuleGetFunction) ModuleGetFunction;
  decltype(&::cuModuleUnload) ModuleUnload;
  decltype(&::cuFuncSetAttribute) FuncSetAttribute;
  decltype(&::cuLaunchKernel) LaunchKernel;
  decltype(&::cuTensorMapEncodeTiled) TensorMapEncodeTiled;
};

// The process's driver API table, loaded once (cuInit included). UNAVAILABLE "no CUDA
// driver" when libcuda.so.1 is missing or cuInit fails.
absl::StatusOr<const CudaApi*> LoadCudaApi();

// True for the errors that leave the context unusable (an illegal address, a trap, an
// uncorrectable ECC error...): every later call on it fails the same way, and only
// resetting the context brings the device back.
bool IsStickyError(CUresult result);

// The one conversion of CUresult to absl::Status: the call's name and the driver's
// error string. Out-of-memory is RESOURCE_EXHAUSTED; a missing device and the sticky
// errors are UNAVAILABLE.
absl::Status CudaStatus(const CudaApi& api, CUresult result, absl::string_view call);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CUDA_CUDA_API_H_

// A TEST DOUBLE of the CUDA driver library (libcuda.so.1), for CI machines without a
// GPU. It implements the calls the CUDA driver makes over the fake devices of
// driver/testing/fake_devices.h (host memory, sticky errors, context resets, a trapping
// kernel): streams that run every operation at once (so ordering holds trivially), but
// whose callbacks wait for the events the stream waits for, events that complete at once
// or after a latency a test sets (fake_devices.h), and
// copies (contiguous, 2D, device to device) that honour their parameters exactly — which
// is what it is for: running the driver conformance suite and the CUDA daemon against the
// real CudaDriver code in CI. Modules are accepted and kernels not executed. Never
// install it.

#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "driver/testing/fake_devices.h"

namespace {

namespace fake = ::gpucmd::fake;

CUcontext ContextOf(int device) { return reinterpret_cast<CUcontext>(uintptr_t{0x10} + device); }
template <typename Handle>
Handle NewHandle() {
  return reinterpret_cast<Handle>(fake::NewHandle());
}
CUresult Sticky() { return static_cast<CUresult>(fake::StickyError()); }

CUresult Init(unsigned int) { return CUDA_SUCCESS; }
CUresult DriverGetVersion(int* version) {
  *version = 13000;
  return CUDA_SUCCESS;
}
CUresult GetErrorString(CUresult error, const char** text) {
  switch (error) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      *text = "out of memory (fake)";
      break;
    case CUDA_ERROR_ILLEGAL_ADDRESS:
      *text = "an illegal memory access was encountered (fake)";
      break;
    default:
      *text = "error (fake)";
  }
  return CUDA_SUCCESS;
}
CUresult DeviceGetCount(int* count) {
  *count = fake::DeviceCount();
  return CUDA_SUCCESS;
}
CUresult DeviceGet(CUdevice* device, int ordinal) {
  if (ordinal < 0 || ordinal >= fake::DeviceCount()) return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}
CUresult DeviceGetName(char* name, int length, CUdevice) {
  std::snprintf(name, length, "Fake CUDA device (test double)");
  return CUDA_SUCCESS;
}
CUresult DeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice) {
  switch (attribute) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *value = 9;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *value = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *value = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X:
      *value = 2147483647;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y:
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z:
      *value = 65535;
      break;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
      *value = fake::MemoryPools() ? 1 : 0;
      break;
    default:
      *value = 48 << 10;
  }
  return CUDA_SUCCESS;
}
CUresult DeviceTotalMem(size_t* bytes, CUdevice) {
  *bytes = fake::kFakeDeviceBytes;
  return CUDA_SUCCESS;
}
CUresult PrimaryCtxRetain(CUcontext* context, CUdevice device) {
  // As on a GPU, a corrupted primary context stays corrupted until it is reset.
  if (int error = fake::StickyErrorOf(device); error != 0) return static_cast<CUresult>(error);
  *context = ContextOf(device);
  return CUDA_SUCCESS;
}
CUresult PrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult PrimaryCtxReset(CUdevice device) {
  fake::ResetDevice(device);
  return CUDA_SUCCESS;
}
CUresult CtxSetCurrent(CUcontext context) {
  fake::SetCurrentDevice(static_cast<int>(reinterpret_cast<uintptr_t>(context) - 0x10));
  return CUDA_SUCCESS;
}
CUresult StreamPriorityRange(int* least, int* greatest) {
  *least = 0;
  *greatest = -5;
  return CUDA_SUCCESS;
}
CUresult StreamCreateWithPriority(CUstream* stream, unsigned int, int) {
  *stream = NewHandle<CUstream>();
  return CUDA_SUCCESS;
}
CUresult StreamDestroy(CUstream) { return CUDA_SUCCESS; }
CUresult StreamSynchronize(CUstream stream) {
  fake::WaitForStreamCallbacks(reinterpret_cast<uintptr_t>(stream));
  return Sticky();
}
CUresult StreamQuery(CUstream) { return Sticky(); }
CUresult StreamWaitEvent(CUstream stream, CUevent event, unsigned int) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  fake::StreamWaitEvent(reinterpret_cast<uintptr_t>(stream), reinterpret_cast<uintptr_t>(event));
  return CUDA_SUCCESS;
}
CUresult StreamAddCallback(CUstream stream, CUstreamCallback callback, void* data, unsigned int) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  fake::AddStreamCallback(reinterpret_cast<uintptr_t>(stream), [=](int error) {
    callback(stream, static_cast<CUresult>(error), data);
  });
  return CUDA_SUCCESS;
}
CUresult EventCreate(CUevent* event, unsigned int flags) {
  *event = NewHandle<CUevent>();
  fake::CreateEvent(reinterpret_cast<uintptr_t>(*event), (flags & CU_EVENT_BLOCKING_SYNC) != 0);
  return CUDA_SUCCESS;
}
CUresult EventRecord(CUevent event, CUstream) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  fake::RecordEvent(reinterpret_cast<uintptr_t>(event));
  return CUDA_SUCCESS;
}
CUresult EventQuery(CUevent event) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  return fake::EventComplete(reinterpret_cast<uintptr_t>(event)) ? CUDA_SUCCESS
                                                                  : CUDA_ERROR_NOT_READY;
}
CUresult EventSynchronize(CUevent event) {
  fake::WaitForEvent(reinterpret_cast<uintptr_t>(event));
  return Sticky();
}
CUresult EventDestroy(CUevent event) {
  fake::DestroyEvent(reinterpret_cast<uintptr_t>(event));
  return CUDA_SUCCESS;
}
CUresult MemAlloc(CUdeviceptr* pointer, size_t bytes) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  void* memory = fake::AllocateDevice(bytes);
  if (memory == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  return CUDA_SUCCESS;
}
CUresult MemFree(CUdeviceptr pointer) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  return fake::FreeDevice(reinterpret_cast<void*>(pointer)) ? CUDA_SUCCESS
                                                             : CUDA_ERROR_INVALID_VALUE;
}
CUresult MemAllocAsync(CUdeviceptr* pointer, size_t bytes, CUstream) {
  if (!fake::MemoryPools()) return CUDA_ERROR_NOT_SUPPORTED;
  CUresult result = MemAlloc(pointer, bytes);
  if (result == CUDA_SUCCESS) fake::CountAsyncAllocation();
  return result;
}
CUresult MemFreeAsync(CUdeviceptr pointer, CUstream) { return MemFree(pointer); }
CUresult DeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice) {
  *pool = NewHandle<CUmemoryPool>();
  return CUDA_SUCCESS;
}
CUresult MemPoolSetAttribute(CUmemoryPool, CUmemPool_attribute, void*) { return CUDA_SUCCESS; }
CUresult MemAllocHost(void** pointer, size_t bytes) {
  *pointer = fake::AllocatePinnedHost(bytes);
  return *pointer == nullptr ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}
CUresult MemFreeHost(void* pointer) {
  fake::FreePinnedHost(pointer);
  return CUDA_SUCCESS;
}
CUresult MemHostRegister(void* pointer, size_t bytes, unsigned int) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  return fake::RegisterHost(pointer, bytes) ? CUDA_SUCCESS
                                            : CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
}
CUresult MemHostUnregister(void* pointer) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  return fake::UnregisterHost(pointer) ? CUDA_SUCCESS : CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}
CUresult MemcpyHtoDAsync(CUdeviceptr target, const void* source, size_t bytes, CUstream) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  fake::NoteHostSide(source, bytes);
  std::memcpy(reinterpret_cast<void*>(target), source, bytes);
  return CUDA_SUCCESS;
}
CUresult MemcpyDtoHAsync(void* target, CUdeviceptr source, size_t bytes, CUstream) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  fake::NoteHostSide(target, bytes);
  std::memcpy(target, reinterpret_cast<const void*>(source), bytes);
  return CUDA_SUCCESS;
}
CUresult MemcpyDtoDAsync(CUdeviceptr target, CUdeviceptr source, size_t bytes, CUstream) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  std::memmove(reinterpret_cast<void*>(target), reinterpret_cast<const void*>(source), bytes);
  return CUDA_SUCCESS;
}
// Sets `count` elements of `Element` at `target` to `value`.
template <typename Element>
CUresult Memset(CUdeviceptr target, Element value, size_t count) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  if (target % sizeof(Element) != 0) return CUDA_ERROR_INVALID_VALUE;
  std::fill_n(reinterpret_cast<Element*>(target), count, value);
  return CUDA_SUCCESS;
}
// Sets `height` rows of `width` elements, `pitch` bytes apart, as cuMemsetD2D* does.
template <typename Element>
CUresult Memset2D(CUdeviceptr target, size_t pitch, Element value, size_t width, size_t height) {
  if (height > 1 && (pitch % sizeof(Element) != 0 || pitch < width * sizeof(Element))) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  for (size_t row = 0; row < height; ++row) {
    if (CUresult error = Memset(target + row * pitch, value, width); error != CUDA_SUCCESS) {
      return error;
    }
  }
  return CUDA_SUCCESS;
}
CUresult MemsetD8Async(CUdeviceptr target, unsigned char value, size_t count, CUstream) {
  return Memset(target, value, count);
}
CUresult MemsetD16Async(CUdeviceptr target, unsigned short value, size_t count, CUstream) {
  return Memset(target, value, count);
}
CUresult MemsetD32Async(CUdeviceptr target, unsigned int value, size_t count, CUstream) {
  return Memset(target, value, count);
}
CUresult MemsetD2D8Async(CUdeviceptr target, size_t pitch, unsigned char value, size_t width,
                         size_t height, CUstream) {
  return Memset2D(target, pitch, value, width, height);
}
CUresult MemsetD2D16Async(CUdeviceptr target, size_t pitch, unsigned short value, size_t width,
                          size_t height, CUstream) {
  return Memset2D(target, pitch, value, width, height);
}
CUresult MemsetD2D32Async(CUdeviceptr target, size_t pitch, unsigned int value, size_t width,
                          size_t height, CUstream) {
  return Memset2D(target, pitch, value, width, height);
}
// Honours exactly the fields the driver sets: memory types, pointers, pitches, width and
// height (x/y offsets must be zero).
CUresult Memcpy2DAsync(const CUDA_MEMCPY2D* copy, CUstream) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  if (copy->srcXInBytes != 0 || copy->srcY != 0 || copy->dstXInBytes != 0 || copy->dstY != 0 ||
      copy->srcPitch < copy->WidthInBytes || copy->dstPitch < copy->WidthInBytes) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const void* host = copy->srcMemoryType == CU_MEMORYTYPE_HOST ? copy->srcHost : copy->dstHost;
  const size_t host_pitch =
      copy->srcMemoryType == CU_MEMORYTYPE_HOST ? copy->srcPitch : copy->dstPitch;
  if (copy->Height > 0) {
    fake::NoteHostSide(host, (copy->Height - 1) * host_pitch + copy->WidthInBytes);
  }
  auto address = [](CUmemorytype type, const void* host, CUdeviceptr device) {
    return type == CU_MEMORYTYPE_HOST ? static_cast<const char*>(host)
                                      : reinterpret_cast<const char*>(device);
  };
  fake::CopyRows(
      const_cast<char*>(address(copy->dstMemoryType, copy->dstHost, copy->dstDevice)),
      copy->dstPitch, address(copy->srcMemoryType, copy->srcHost, copy->srcDevice),
      copy->srcPitch, copy->WidthInBytes, copy->Height);
  return CUDA_SUCCESS;
}
CUresult ModuleLoadData(CUmodule* module, const void*) {
  *module = NewHandle<CUmodule>();
  return CUDA_SUCCESS;
}
CUresult ModuleGetFunction(CUfunction* function, CUmodule, const char* name) {
  *function = reinterpret_cast<CUfunction>(fake::AddFunction(name));
  return CUDA_SUCCESS;
}
CUresult ModuleUnload(CUmodule) { return CUDA_SUCCESS; }
CUresult FuncSetAttribute(CUfunction, CUfunction_attribute, int) { return CUDA_SUCCESS; }
CUresult LaunchKernel(CUfunction function, unsigned, unsigned, unsigned, unsigned, unsigned,
                      unsigned, unsigned, CUstream, void**, void**) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  auto handle = reinterpret_cast<uintptr_t>(function);
  if (!fake::KnownFunction(handle)) return CUDA_ERROR_INVALID_HANDLE;
  // The launch itself succeeds; the fault surfaces at the next call, as on a GPU.
  if (fake::Trap trap = fake::TrapOf(handle); trap != fake::Trap::kNone) {
    fake::InjectStickyError(fake::CurrentDevice(), CUDA_ERROR_ILLEGAL_ADDRESS,
                            /*for_good=*/trap == fake::Trap::kForGood);
  }
  return CUDA_SUCCESS;
}
CUresult TensorMapEncodeTiled(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*,
                              const cuuint64_t*, const cuuint64_t*, const cuuint32_t*,
                              const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                              CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
  return CUDA_SUCCESS;
}

const std::map<std::string, void*>& Table() {
  static const auto* table = new std::map<std::string, void*>{
      {"cuInit", reinterpret_cast<void*>(&Init)},
      {"cuDriverGetVersion", reinterpret_cast<void*>(&DriverGetVersion)},
      {"cuGetErrorString", reinterpret_cast<void*>(&GetErrorString)},
      {"cuDeviceGetCount", reinterpret_cast<void*>(&DeviceGetCount)},
      {"cuDeviceGet", reinterpret_cast<void*>(&DeviceGet)},
      {"cuDeviceGetName", reinterpret_cast<void*>(&DeviceGetName)},
      {"cuDeviceGetAttribute", reinterpret_cast<void*>(&DeviceGetAttribute)},
      {"cuDeviceTotalMem", reinterpret_cast<void*>(&DeviceTotalMem)},
      {"cuDevicePrimaryCtxRetain", reinterpret_cast<void*>(&PrimaryCtxRetain)},
      {"cuDevicePrimaryCtxRelease", reinterpret_cast<void*>(&PrimaryCtxRelease)},
      {"cuDevicePrimaryCtxReset", reinterpret_cast<void*>(&PrimaryCtxReset)},
      {"cuCtxSetCurrent", reinterpret_cast<void*>(&CtxSetCurrent)},
      {"cuCtxGetStreamPriorityRange", reinterpret_cast<void*>(&StreamPriorityRange)},
      {"cuStreamCreateWithPriority", reinterpret_cast<void*>(&StreamCreateWithPriority)},
      {"cuStreamDestroy", reinterpret_cast<void*>(&StreamDestroy)},
      {"cuStreamSynchronize", reinterpret_cast<void*>(&StreamSynchronize)},
      {"cuStreamQuery", reinterpret_cast<void*>(&StreamQuery)},
      {"cuStreamWaitEvent", reinterpret_cast<void*>(&StreamWaitEvent)},
      {"cuStreamAddCallback", reinterpret_cast<void*>(&StreamAddCallback)},
      {"cuEventCreate", reinterpret_cast<void*>(&EventCreate)},
      {"cuEventRecord", reinterpret_cast<void*>(&EventRecord)},
      {"cuEventQuery", reinterpret_cast<void*>(&EventQuery)},
      {"cuEventSynchronize", reinterpret_cast<void*>(&EventSynchronize)},
      {"cuEventDestroy", reinterpret_cast<void*>(&EventDestroy)},
      {"cuMemAlloc", reinterpret_cast<void*>(&MemAlloc)},
      {"cuMemFree", reinterpret_cast<void*>(&MemFree)},
      {"cuMemAllocAsync", reinterpret_cast<void*>(&MemAllocAsync)},
      {"cuMemFreeAsync", reinterpret_cast<void*>(&MemFreeAsync)},
      {"cuDeviceGetDefaultMemPool", reinterpret_cast<void*>(&DeviceGetDefaultMemPool)},
      {"cuMemPoolSetAttribute", reinterpret_cast<void*>(&MemPoolSetAttribute)},
      {"cuMemAllocHost", reinterpret_cast<void*>(&MemAllocHost)},
      {"cuMemFreeHost", reinterpret_cast<void*>(&MemFreeHost)},
      {"cuMemHostRegister", reinterpret_cast<void*>(&MemHostRegister)},
      {"cuMemHostUnregister", reinterpret_cast<void*>(&MemHostUnregister)},
      {"cuMemcpyHtoDAsync", reinterpret_cast<void*>(&MemcpyHtoDAsync)},
      {"cuMemcpyDtoHAsync", reinterpret_cast<void*>(&MemcpyDtoHAsync)},
      {"cuMemcpyDtoDAsync", reinterpret_cast<void*>(&MemcpyDtoDAsync)},
      {"cuMemcpy2DAsync", reinterpret_cast<void*>(&Memcpy2DAsync)},
      {"cuMemsetD8Async", reinterpret_cast<void*>(&MemsetD8Async)},
      {"cuMemsetD16Async", reinterpret_cast<void*>(&MemsetD16Async)},
      {"cuMemsetD32Async", reinterpret_cast<void*>(&MemsetD32Async)},
      {"cuMemsetD2D8Async", reinterpret_cast<void*>(&MemsetD2D8Async)},
      {"cuMemsetD2D16Async", reinterpret_cast<void*>(&MemsetD2D16Async)},
      {"cuMemsetD2D32Async", reinterpret_cast<void*>(&MemsetD2D32Async)},
      {"cuModuleLoadData", reinterpret_cast<void*>(&ModuleLoadData)},
      {"cuModuleGetFunction", reinterpret_cast<void*>(&ModuleGetFunction)},
      {"cuModuleUnload", reinterpret_cast<void*>(&ModuleUnload)},
      {"cuFuncSetAttribute", reinterpret_cast<void*>(&FuncSetAttribute)},
      {"cuLaunchKernel", reinterpret_cast<void*>(&LaunchKernel)},
      {"cuTensorMapEncodeTiled", reinterpret_cast<void*>(&TensorMapEncodeTiled)},
  };
  return *table;
}

}  // namespace

extern "C" CUresult cuGetProcAddress_v2(const char* symbol, void** function, int, cuuint64_t,
                                        CUdriverProcAddressQueryResult* found) {
  auto it = Table().find(symbol);
  *function = it == Table().end() ? nullptr : it->second;
  if (found != nullptr) {
    *found = *function != nullptr ? CU_GET_PROC_ADDRESS_SUCCESS
                                  : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  }
  return *function != nullptr ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
}

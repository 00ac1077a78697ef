// A TEST DOUBLE of the CUDA driver library (libcuda.so.1), for CI machines without a
// GPU. It implements the calls the CUDA driver makes on host memory: devices of
// kFakeDeviceBytes each (one unless the test asks for more), streams that run every
// operation at once (so ordering holds trivially), events that are always complete, and
// copies (contiguous, 2D, device to device) that honour their parameters exactly — which
// is what it is for: running the driver conformance suite against the real CudaDriver
// code in CI. Modules and launches are accepted, not executed — except that launching a
// kernel whose entry point is "fake_cuda_trap" faults the context with an illegal
// address, as a kernel with a wild pointer does on a GPU.
//
// Tests steer it through the extern "C" fake_cuda_* functions at the end (see
// driver/cuda/fake_cuda_control.h): how many devices there are, whether they support
// memory pools (cuMemAllocAsync), and a sticky error to inject into a device's context,
// which every later call on that context returns until cuDevicePrimaryCtxReset, as on a
// real GPU. Never install it.

#include <cuda.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

constexpr size_t kFakeDeviceBytes = size_t{256} << 20;

constexpr int kMaxDevices = 8;

struct Allocation {
  size_t bytes;
  int device;
};

std::mutex mutex;
std::map<CUdeviceptr, Allocation> allocations;  // device "memory" is host memory
size_t allocated[kMaxDevices] = {};
CUresult sticky[kMaxDevices] = {};  // CUDA_SUCCESS: the context is healthy
int context_resets[kMaxDevices] = {};
int device_count = 1;
bool memory_pools = true;
int async_allocations = 0;
std::vector<std::string> function_names;  // a CUfunction is its index here, plus one
int fake_stream_count = 0;
int fake_event_count = 0;
thread_local int current_device = 0;

CUcontext ContextOf(int device) { return reinterpret_cast<CUcontext>(uintptr_t{0x10} + device); }

// The sticky error of the calling thread's current context, if any.
CUresult Sticky() {
  std::lock_guard<std::mutex> lock(mutex);
  return sticky[current_device];
}

CUresult Allocate(CUdeviceptr* pointer, size_t bytes) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  std::lock_guard<std::mutex> lock(mutex);
  if (allocated[current_device] + bytes > kFakeDeviceBytes) return CUDA_ERROR_OUT_OF_MEMORY;
  void* memory = std::calloc(1, bytes);
  if (memory == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  *pointer = reinterpret_cast<CUdeviceptr>(memory);
  allocations[*pointer] = Allocation{bytes, current_device};
  allocated[current_device] += bytes;
  return CUDA_SUCCESS;
}

CUresult Free(CUdeviceptr pointer) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = allocations.find(pointer);
  if (it == allocations.end()) return CUDA_ERROR_INVALID_VALUE;
  allocated[it->second.device] -= it->second.bytes;
  allocations.erase(it);
  std::free(reinterpret_cast<void*>(pointer));
  return CUDA_SUCCESS;
}

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
  std::lock_guard<std::mutex> lock(mutex);
  *count = device_count;
  return CUDA_SUCCESS;
}
CUresult DeviceGet(CUdevice* device, int ordinal) {
  std::lock_guard<std::mutex> lock(mutex);
  if (ordinal < 0 || ordinal >= device_count) return CUDA_ERROR_INVALID_DEVICE;
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
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: {
      std::lock_guard<std::mutex> lock(mutex);
      *value = memory_pools ? 1 : 0;
      break;
    }
    default:
      *value = 48 << 10;
  }
  return CUDA_SUCCESS;
}
CUresult DeviceTotalMem(size_t* bytes, CUdevice) {
  *bytes = kFakeDeviceBytes;
  return CUDA_SUCCESS;
}
CUresult PrimaryCtxRetain(CUcontext* context, CUdevice device) {
  *context = ContextOf(device);
  return CUDA_SUCCESS;
}
CUresult PrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
// Destroys the context's allocations and clears its sticky error.
CUresult PrimaryCtxReset(CUdevice device) {
  std::lock_guard<std::mutex> lock(mutex);
  for (auto it = allocations.begin(); it != allocations.end();) {
    if (it->second.device == device) {
      std::free(reinterpret_cast<void*>(it->first));
      it = allocations.erase(it);
    } else {
      ++it;
    }
  }
  allocated[device] = 0;
  sticky[device] = CUDA_SUCCESS;
  ++context_resets[device];
  return CUDA_SUCCESS;
}
CUresult CtxSetCurrent(CUcontext context) {
  current_device = static_cast<int>(reinterpret_cast<uintptr_t>(context) - 0x10);
  return CUDA_SUCCESS;
}
CUresult StreamPriorityRange(int* least, int* greatest) {
  *least = 0;
  *greatest = -5;
  return CUDA_SUCCESS;
}
CUresult StreamCreateWithPriority(CUstream* stream, unsigned int, int) {
  std::lock_guard<std::mutex> lock(mutex);
  *stream = reinterpret_cast<CUstream>(static_cast<uintptr_t>(0x1000 + ++fake_stream_count));
  return CUDA_SUCCESS;
}
CUresult StreamDestroy(CUstream) { return CUDA_SUCCESS; }
CUresult StreamSynchronize(CUstream) { return Sticky(); }
CUresult StreamQuery(CUstream) { return Sticky(); }
CUresult StreamWaitEvent(CUstream, CUevent, unsigned int) { return Sticky(); }
CUresult EventCreate(CUevent* event, unsigned int) {
  std::lock_guard<std::mutex> lock(mutex);
  *event = reinterpret_cast<CUevent>(static_cast<uintptr_t>(0x100000 + ++fake_event_count));
  return CUDA_SUCCESS;
}
CUresult EventRecord(CUevent, CUstream) { return Sticky(); }
CUresult EventQuery(CUevent) { return Sticky(); }
CUresult EventSynchronize(CUevent) { return Sticky(); }
CUresult EventDestroy(CUevent) { return CUDA_SUCCESS; }
CUresult MemAlloc(CUdeviceptr* pointer, size_t bytes) { return Allocate(pointer, bytes); }
CUresult MemFree(CUdeviceptr pointer) { return Free(pointer); }
CUresult MemAllocAsync(CUdeviceptr* pointer, size_t bytes, CUstream) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!memory_pools) return CUDA_ERROR_NOT_SUPPORTED;
    ++async_allocations;
  }
  return Allocate(pointer, bytes);
}
CUresult MemFreeAsync(CUdeviceptr pointer, CUstream) { return Free(pointer); }
CUresult DeviceGetDefaultMemPool(CUmemoryPool* pool, CUdevice device) {
  *pool = reinterpret_cast<CUmemoryPool>(uintptr_t{0x20} + device);
  return CUDA_SUCCESS;
}
CUresult MemPoolSetAttribute(CUmemoryPool, CUmemPool_attribute, void*) { return CUDA_SUCCESS; }
CUresult MemAllocHost(void** pointer, size_t bytes) {
  *pointer = std::malloc(bytes);
  return *pointer == nullptr ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
}
CUresult MemFreeHost(void* pointer) {
  std::free(pointer);
  return CUDA_SUCCESS;
}
CUresult MemcpyHtoDAsync(CUdeviceptr target, const void* source, size_t bytes, CUstream) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  std::memcpy(reinterpret_cast<void*>(target), source, bytes);
  return CUDA_SUCCESS;
}
CUresult MemcpyDtoHAsync(void* target, CUdeviceptr source, size_t bytes, CUstream) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  std::memcpy(target, reinterpret_cast<const void*>(source), bytes);
  return CUDA_SUCCESS;
}
CUresult MemcpyDtoDAsync(CUdeviceptr target, CUdeviceptr source, size_t bytes, CUstream) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  std::memmove(reinterpret_cast<void*>(target), reinterpret_cast<const void*>(source), bytes);
  return CUDA_SUCCESS;
}
// Honours exactly the fields the driver sets: memory types, pointers, pitches, width and
// height (x/y offsets must be zero).
CUresult Memcpy2DAsync(const CUDA_MEMCPY2D* copy, CUstream) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  if (copy->srcXInBytes != 0 || copy->srcY != 0 || copy->dstXInBytes != 0 || copy->dstY != 0 ||
      copy->srcPitch < copy->WidthInBytes || copy->dstPitch < copy->WidthInBytes) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto address = [](CUmemorytype type, const void* host, CUdeviceptr device) {
    return type == CU_MEMORYTYPE_HOST ? static_cast<const char*>(host)
                                      : reinterpret_cast<const char*>(device);
  };
  const char* source = address(copy->srcMemoryType, copy->srcHost, copy->srcDevice);
  char* target = const_cast<char*>(address(copy->dstMemoryType, copy->dstHost, copy->dstDevice));
  for (size_t row = 0; row < copy->Height; ++row) {
    std::memcpy(target + row * copy->dstPitch, source + row * copy->srcPitch, copy->WidthInBytes);
  }
  return CUDA_SUCCESS;
}
CUresult ModuleLoadData(CUmodule* module, const void*) {
  *module = reinterpret_cast<CUmodule>(0x2);
  return CUDA_SUCCESS;
}
CUresult ModuleGetFunction(CUfunction* function, CUmodule, const char* name) {
  std::lock_guard<std::mutex> lock(mutex);
  function_names.push_back(name);
  *function = reinterpret_cast<CUfunction>(function_names.size());
  return CUDA_SUCCESS;
}
CUresult ModuleUnload(CUmodule) { return CUDA_SUCCESS; }
CUresult FuncSetAttribute(CUfunction, CUfunction_attribute, int) { return CUDA_SUCCESS; }
CUresult LaunchKernel(CUfunction function, unsigned, unsigned, unsigned, unsigned, unsigned,
                      unsigned, unsigned, CUstream, void**, void**) {
  if (CUresult error = Sticky(); error != CUDA_SUCCESS) return error;
  std::lock_guard<std::mutex> lock(mutex);
  size_t index = reinterpret_cast<uintptr_t>(function) - 1;
  if (index >= function_names.size()) return CUDA_ERROR_INVALID_HANDLE;
  // The launch itself succeeds; the fault surfaces at the next call, as on a GPU.
  if (function_names[index] == "fake_cuda_trap") sticky[current_device] = CUDA_ERROR_ILLEGAL_ADDRESS;
  return CUDA_SUCCESS;
}
CUresult LaunchHostFunc(CUstream, CUhostFn function, void* data) {
  function(data);
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
      {"cuMemcpyHtoDAsync", reinterpret_cast<void*>(&MemcpyHtoDAsync)},
      {"cuMemcpyDtoHAsync", reinterpret_cast<void*>(&MemcpyDtoHAsync)},
      {"cuMemcpyDtoDAsync", reinterpret_cast<void*>(&MemcpyDtoDAsync)},
      {"cuMemcpy2DAsync", reinterpret_cast<void*>(&Memcpy2DAsync)},
      {"cuModuleLoadData", reinterpret_cast<void*>(&ModuleLoadData)},
      {"cuModuleGetFunction", reinterpret_cast<void*>(&ModuleGetFunction)},
      {"cuModuleUnload", reinterpret_cast<void*>(&ModuleUnload)},
      {"cuFuncSetAttribute", reinterpret_cast<void*>(&FuncSetAttribute)},
      {"cuLaunchKernel", reinterpret_cast<void*>(&LaunchKernel)},
      {"cuLaunchHostFunc", reinterpret_cast<void*>(&LaunchHostFunc)},
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

// Test controls (driver/cuda/fake_cuda_control.h). Call them before the driver creates
// backends, except fake_cuda_inject_sticky_error.
extern "C" void fake_cuda_set_device_count(int count) {
  std::lock_guard<std::mutex> lock(mutex);
  device_count = count < 1 ? 1 : (count > kMaxDevices ? kMaxDevices : count);
}
extern "C" void fake_cuda_set_memory_pools(int supported) {
  std::lock_guard<std::mutex> lock(mutex);
  memory_pools = supported != 0;
}
extern "C" int fake_cuda_async_allocations() {
  std::lock_guard<std::mutex> lock(mutex);
  return async_allocations;
}
extern "C" void fake_cuda_inject_sticky_error(int device, CUresult error) {
  std::lock_guard<std::mutex> lock(mutex);
  sticky[device] = error;
}
extern "C" int fake_cuda_events_created() {
  std::lock_guard<std::mutex> lock(mutex);
  return fake_event_count;
}
extern "C" int fake_cuda_context_resets(int device) {
  std::lock_guard<std::mutex> lock(mutex);
  return context_resets[device];
}

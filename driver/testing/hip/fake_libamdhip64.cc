// A TEST DOUBLE of the HIP runtime library (libamdhip64.so.5), for CI machines without an
// AMD GPU: the calls the HIP driver makes, over the fake devices of
// driver/testing/fake_devices.h (host memory, sticky errors, device resets, a trapping
// kernel). Streams run every operation at once (their callbacks wait for the events the
// stream waits for), events complete at once or after a latency a test sets
// (fake_devices.h), copies (contiguous, 2D, device to device) honour
// their parameters exactly. The HIP driver links the runtime, so a test runs with this
// library's directory first in LD_LIBRARY_PATH; its symbols carry the runtime's version
// nodes (fake_libamdhip64.lds). Its hiprtc "compiles" every program into a placeholder
// code object that only this double can load. Never install it.

#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "driver/testing/fake_devices.h"

namespace {

namespace fake = ::gpucmd::fake;

template <typename Handle>
Handle NewHandle() {
  return reinterpret_cast<Handle>(fake::NewHandle());
}
hipError_t Sticky() { return static_cast<hipError_t>(fake::StickyError()); }

}  // namespace

// What hiprtcProgram points to here.
struct _hiprtcProgram {
  std::string code;
};

const char* hipGetErrorString(hipError_t error) {
  switch (error) {
    case hipErrorOutOfMemory:
      return "out of memory (fake)";
    case hipErrorIllegalAddress:
      return "an illegal memory access was encountered (fake)";
    default:
      return "error (fake)";
  }
}
hipError_t hipGetDeviceCount(int* count) {
  *count = fake::DeviceCount();
  return hipSuccess;
}
hipError_t hipSetDevice(int device) {
  if (device < 0 || device >= fake::DeviceCount()) return hipErrorInvalidDevice;
  fake::SetCurrentDevice(device);
  return hipSuccess;
}
hipError_t hipDeviceReset() {
  fake::ResetDevice(fake::CurrentDevice());
  return hipSuccess;
}
hipError_t hipDeviceTotalMem(size_t* bytes, hipDevice_t device) {
  // A device faulted for good fails here, where a new backend starts.
  if (int error = fake::StickyErrorOf(device); error != 0) return static_cast<hipError_t>(error);
  *bytes = fake::kFakeDeviceBytes;
  return hipSuccess;
}
hipError_t hipGetDeviceProperties(hipDeviceProp_t* properties, int device) {
  if (device < 0 || device >= fake::DeviceCount()) return hipErrorInvalidDevice;
  *properties = hipDeviceProp_t{};
  std::snprintf(properties->name, sizeof(properties->name), "Fake HIP device (test double)");
  std::snprintf(properties->gcnArchName, sizeof(properties->gcnArchName), "gfx90a:sramecc+:xnack-");
  properties->totalGlobalMem = fake::kFakeDeviceBytes;
  properties->maxThreadsPerBlock = 1024;
  properties->sharedMemPerBlock = 64 << 10;
  properties->maxGridSize[0] = 2147483647;
  properties->maxGridSize[1] = 65536;
  properties->maxGridSize[2] = 65536;
  return hipSuccess;
}
hipError_t hipDeviceGetStreamPriorityRange(int* least, int* greatest) {
  *least = 0;
  *greatest = -1;
  return hipSuccess;
}
hipError_t hipStreamCreateWithPriority(hipStream_t* stream, unsigned int, int) {
  *stream = NewHandle<hipStream_t>();
  return hipSuccess;
}
hipError_t hipStreamDestroy(hipStream_t) { return hipSuccess; }
hipError_t hipStreamSynchronize(hipStream_t stream) {
  fake::WaitForStreamCallbacks(reinterpret_cast<uintptr_t>(stream));
  return Sticky();
}
hipError_t hipStreamQuery(hipStream_t) { return Sticky(); }
hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  fake::StreamWaitEvent(reinterpret_cast<uintptr_t>(stream), reinterpret_cast<uintptr_t>(event));
  return hipSuccess;
}
hipError_t hipStreamAddCallback(hipStream_t stream, hipStreamCallback_t callback, void* data,
                                unsigned int) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  fake::AddStreamCallback(reinterpret_cast<uintptr_t>(stream), [=](int error) {
    callback(stream, static_cast<hipError_t>(error), data);
  });
  return hipSuccess;
}
hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned flags) {
  *event = NewHandle<hipEvent_t>();
  fake::CreateEvent(reinterpret_cast<uintptr_t>(*event), (flags & hipEventBlockingSync) != 0);
  return hipSuccess;
}
hipError_t hipEventRecord(hipEvent_t event, hipStream_t) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  fake::RecordEvent(reinterpret_cast<uintptr_t>(event));
  return hipSuccess;
}
hipError_t hipEventQuery(hipEvent_t event) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  return fake::EventComplete(reinterpret_cast<uintptr_t>(event)) ? hipSuccess : hipErrorNotReady;
}
hipError_t hipEventSynchronize(hipEvent_t event) {
  fake::WaitForEvent(reinterpret_cast<uintptr_t>(event));
  return Sticky();
}
hipError_t hipEventDestroy(hipEvent_t event) {
  fake::DestroyEvent(reinterpret_cast<uintptr_t>(event));
  return hipSuccess;
}
hipError_t hipMalloc(void** pointer, size_t bytes) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  *pointer = fake::AllocateDevice(bytes);
  return *pointer == nullptr ? hipErrorOutOfMemory : hipSuccess;
}
hipError_t hipFree(void* pointer) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  return fake::FreeDevice(pointer) ? hipSuccess : hipErrorInvalidValue;
}
hipError_t hipMallocAsync(void** pointer, size_t bytes, hipStream_t) {
  if (!fake::MemoryPools()) return hipErrorNotSupported;
  hipError_t result = hipMalloc(pointer, bytes);
  if (result == hipSuccess) fake::CountAsyncAllocation();
  return result;
}
hipError_t hipFreeAsync(void* pointer, hipStream_t) { return hipFree(pointer); }
hipError_t hipDeviceGetAttribute(int* value, hipDeviceAttribute_t attribute, int) {
  *value = attribute == hipDeviceAttributeMemoryPoolsSupported && fake::MemoryPools() ? 1 : 0;
  return hipSuccess;
}
hipError_t hipDeviceGetDefaultMemPool(hipMemPool_t* pool, int) {
  *pool = NewHandle<hipMemPool_t>();
  return hipSuccess;
}
hipError_t hipMemPoolSetAttribute(hipMemPool_t, hipMemPoolAttr, void*) { return hipSuccess; }
hipError_t hipHostMalloc(void** pointer, size_t bytes, unsigned int) {
  *pointer = fake::AllocatePinnedHost(bytes);
  return *pointer == nullptr ? hipErrorOutOfMemory : hipSuccess;
}
hipError_t hipHostFree(void* pointer) {
  fake::FreePinnedHost(pointer);
  return hipSuccess;
}
hipError_t hipHostRegister(void* pointer, size_t bytes, unsigned int) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  return fake::RegisterHost(pointer, bytes) ? hipSuccess : hipErrorHostMemoryAlreadyRegistered;
}
hipError_t hipHostUnregister(void* pointer) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  return fake::UnregisterHost(pointer) ? hipSuccess : hipErrorHostMemoryNotRegistered;
}
hipError_t hipMemcpyHtoDAsync(hipDeviceptr_t target, void* source, size_t bytes, hipStream_t) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  fake::NoteHostSide(source, bytes);
  std::memcpy(target, source, bytes);
  return hipSuccess;
}
hipError_t hipMemcpyDtoHAsync(void* target, hipDeviceptr_t source, size_t bytes, hipStream_t) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  fake::NoteHostSide(target, bytes);
  std::memcpy(target, source, bytes);
  return hipSuccess;
}
hipError_t hipMemcpyDtoDAsync(hipDeviceptr_t target, hipDeviceptr_t source, size_t bytes,
                              hipStream_t) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  std::memmove(target, source, bytes);
  return hipSuccess;
}
hipError_t hipMemsetD8Async(hipDeviceptr_t target, unsigned char value, size_t count, hipStream_t) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  std::fill_n(static_cast<unsigned char*>(target), count, value);
  return hipSuccess;
}
hipError_t hipMemsetD16Async(hipDeviceptr_t target, unsigned short value, size_t count,
                             hipStream_t) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  if (reinterpret_cast<uintptr_t>(target) % 2 != 0) return hipErrorInvalidValue;
  std::fill_n(static_cast<unsigned short*>(target), count, value);
  return hipSuccess;
}
hipError_t hipMemsetD32Async(hipDeviceptr_t target, int value, size_t count, hipStream_t) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  if (reinterpret_cast<uintptr_t>(target) % 4 != 0) return hipErrorInvalidValue;
  std::fill_n(static_cast<int*>(target), count, value);
  return hipSuccess;
}
hipError_t hipMemset2DAsync(void* target, size_t pitch, int value, size_t width, size_t height,
                            hipStream_t) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  if (height > 1 && pitch < width) return hipErrorInvalidValue;
  for (size_t row = 0; row < height; ++row) {
    std::memset(static_cast<unsigned char*>(target) + row * pitch, value, width);
  }
  return hipSuccess;
}
hipError_t hipMemcpy2DAsync(void* target, size_t target_pitch, const void* source,
                            size_t source_pitch, size_t width, size_t height,
                            hipMemcpyKind kind, hipStream_t) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  if (target_pitch < width || source_pitch < width) return hipErrorInvalidValue;
  if (height > 0 && kind == hipMemcpyHostToDevice) {
    fake::NoteHostSide(source, (height - 1) * source_pitch + width);
  } else if (height > 0 && kind == hipMemcpyDeviceToHost) {
    fake::NoteHostSide(target, (height - 1) * target_pitch + width);
  }
  fake::CopyRows(static_cast<char*>(target), target_pitch, static_cast<const char*>(source),
                 source_pitch, width, height);
  return hipSuccess;
}
hipError_t hipModuleLoadData(hipModule_t* module, const void*) {
  *module = NewHandle<hipModule_t>();
  return hipSuccess;
}
hipError_t hipModuleGetFunction(hipFunction_t* function, hipModule_t, const char* name) {
  *function = reinterpret_cast<hipFunction_t>(fake::AddFunction(name));
  return hipSuccess;
}
hipError_t hipModuleUnload(hipModule_t) { return hipSuccess; }
hipError_t hipModuleLaunchKernel(hipFunction_t function, unsigned int, unsigned int,
                                 unsigned int, unsigned int, unsigned int, unsigned int,
                                 unsigned int, hipStream_t, void**, void**) {
  if (hipError_t error = Sticky(); error != hipSuccess) return error;
  auto handle = reinterpret_cast<uintptr_t>(function);
  if (!fake::KnownFunction(handle)) return hipErrorInvalidHandle;
  if (fake::Trap trap = fake::TrapOf(handle); trap != fake::Trap::kNone) {
    fake::InjectStickyError(fake::CurrentDevice(), hipErrorIllegalAddress,
                            /*for_good=*/trap == fake::Trap::kForGood);
  }
  return hipSuccess;
}

const char* hiprtcGetErrorString(hiprtcResult) { return "hiprtc error (fake)"; }
hiprtcResult hiprtcCreateProgram(hiprtcProgram* program, const char* source, const char*, int,
                                 const char**, const char**) {
  *program = new _hiprtcProgram{std::string("fake code object\n") + source};
  return HIPRTC_SUCCESS;
}
hiprtcResult hiprtcCompileProgram(hiprtcProgram, int, const char**) { return HIPRTC_SUCCESS; }
hiprtcResult hiprtcGetProgramLogSize(hiprtcProgram, size_t* size) {
  *size = 1;
  return HIPRTC_SUCCESS;
}
hiprtcResult hiprtcGetProgramLog(hiprtcProgram, char* log) {
  *log = '\0';
  return HIPRTC_SUCCESS;
}
hiprtcResult hiprtcGetCodeSize(hiprtcProgram program, size_t* size) {
  *size = program->code.size();
  return HIPRTC_SUCCESS;
}
hiprtcResult hiprtcGetCode(hiprtcProgram program, char* code) {
  std::memcpy(code, program->code.data(), program->code.size());
  return HIPRTC_SUCCESS;
}
hiprtcResult hiprtcDestroyProgram(hiprtcProgram* program) {
  delete *program;
  *program = nullptr;
  return HIPRTC_SUCCESS;
}

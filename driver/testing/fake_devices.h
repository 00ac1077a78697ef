#ifndef GPUCMDD_DRIVER_TESTING_FAKE_DEVICES_H_
#define GPUCMDD_DRIVER_TESTING_FAKE_DEVICES_H_

// For the GPU driver TEST DOUBLES only (driver/testing/cuda/fake_libcuda.cc,
// driver/testing/hip/fake_libamdhip64.cc): the devices they pretend to have. Device memory is host
// memory, `kFakeDeviceBytes` per device; each device has a context that a sticky error
// can corrupt (every later call on it fails with that error) until the context is reset,
// which also frees its allocations, as on a GPU. Kernels are not executed, except that
// launching one whose entry point is kTrapEntryPoint faults its device's context, as a
// wild pointer does, and one whose entry point is kFatalTrapEntryPoint faults it for
// the rest of the process: resetting it frees its allocations but leaves the error, and
// no new context can be made, as on CUDA (checked on an H200, driver 580: after an
// illegal address, cuDevicePrimaryCtxRetain and cuCtxCreate fail until the process
// exits).
//
// Tests steer the doubles through the extern "C" fake_gpu_* functions (see
// driver/testing/fake_gpu_control.h). Error codes are the double's own (CUresult,
// hipError_t); 0 means success in both.
//
// Thread-safety: every function may be called from any thread; one mutex guards the
// state. The current device is per thread, as a GPU runtime's is.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace gpucmd::fake {

inline constexpr size_t kFakeDeviceBytes = size_t{256} << 20;
inline constexpr int kMaxDevices = 8;
inline constexpr char kTrapEntryPoint[] = "fake_device_trap";
inline constexpr char kFatalTrapEntryPoint[] = "fake_device_fatal_trap";
inline constexpr char kEventLatencyVariable[] = "GPUCMD_FAKE_EVENT_LATENCY_US";

int DeviceCount();
void SetCurrentDevice(int device);
int CurrentDevice();

// The sticky error of the current device's context (0: healthy).
int StickyError();
// The sticky error of `device`'s context, whichever device is current.
int StickyErrorOf(int device);
// `for_good`: no reset clears it (see kFatalTrapEntryPoint).
void InjectStickyError(int device, int error, bool for_good = false);
// Frees the device's allocations, clears its sticky error unless it is there for good,
// counts the reset.
void ResetDevice(int device);

// Zeroed memory on the current device; nullptr when the device is full.
void* AllocateDevice(size_t bytes);
// False for a pointer that is not a live allocation.
bool FreeDevice(void* pointer);

// Whether the double reports memory pools (stream-ordered allocation); counts their use.
bool MemoryPools();
void CountAsyncAllocation();

// Handles for streams, events, modules: distinct non-null values.
uintptr_t NewHandle();

// Events. A recorded event completes the fake_gpu_set_event_latency_us control's time
// after its record (at first kEventLatencyVariable's, in microseconds, so that a test can
// set it for a daemon it starts; else 0: at once), as a GPU's event completes once the
// work queued before it ran; an event never recorded is complete. Waiting for one sleeps
// when it was created for blocking waits (CU_EVENT_BLOCKING_SYNC, hipEventBlockingSync)
// and busy-waits otherwise, as cuEventSynchronize does (Note [Waiting for the GPU
// without spinning] in driver/gpu/gpu_driver.h).
void CreateEvent(uintptr_t event, bool blocking_waits);
void RecordEvent(uintptr_t event);
bool EventComplete(uintptr_t event);
void WaitForEvent(uintptr_t event);
void DestroyEvent(uintptr_t event);

// Stream callbacks (cuStreamAddCallback, hipStreamAddCallback). The double's streams run
// every operation at once, except that StreamWaitEvent has `stream`'s later callbacks
// wait for `event` too. A callback added to a stream runs on the double's callback thread
// (one, as a runtime's) after the stream's earlier callbacks, once every event the
// stream was made to wait for completed, with its device's sticky error then (0: none).
// WaitForStreamCallbacks returns once every callback added to `stream` ran: a
// synchronization of the stream waits for them.
void StreamWaitEvent(uintptr_t stream, uintptr_t event);
void AddStreamCallback(uintptr_t stream, std::function<void(int error)> callback);
void WaitForStreamCallbacks(uintptr_t stream);

// A loaded kernel's handle (1-based) and, from it, whether launching it faults.
uintptr_t AddFunction(const std::string& entry_point);
// False for an unknown handle.
bool KnownFunction(uintptr_t function);
enum class Trap { kNone, kUntilReset, kForGood };
Trap TrapOf(uintptr_t function);

// Host memory the device may copy from and into without staging: pinned allocations,
// and ranges registered with the driver. Registration fails while refused (the
// fake_gpu_refuse_host_registration control) and for a range that overlaps a
// registered one, as it does on a GPU.
void* AllocatePinnedHost(size_t bytes);
void FreePinnedHost(void* pointer);
bool RegisterHost(void* pointer, size_t bytes);
// False for a pointer that starts no registered range.
bool UnregisterHost(void* pointer);
// Called by every asynchronous copy with its host side: counts the copy as pageable
// when [pointer, pointer + bytes) is not inside pinned memory (a GPU would have to stage
// it, synchronously, itself).
void NoteHostSide(const void* pointer, size_t bytes);

// Copies `height` rows of `width` bytes between pitched regions.
void CopyRows(char* target, size_t target_pitch, const char* source, size_t source_pitch,
              size_t width, size_t height);

}  // namespace gpucmd::fake

#endif  // GPUCMDD_DRIVER_TESTING_FAKE_DEVICES_H_

#ifndef GPUCMDD_DRIVER_TESTING_FAKE_GPU_CONTROL_H_
#define GPUCMDD_DRIVER_TESTING_FAKE_GPU_CONTROL_H_

// For tests only: loads a GPU driver TEST DOUBLE (driver/testing/cuda:libcuda.so.1 for the
// CUDA driver's dlopen) from the test's runfiles, and hands out the controls every double
// exports (driver/testing/fake_devices.h). A test of a driver that links its library
// instead (HIP) runs with the double's directory in LD_LIBRARY_PATH; loading it here
// then returns the same copy.
//
// Thread-safety: LoadFakeGpu may be called from any thread; the controls lock inside the
// double.

#include <string>

#include "absl/status/statusor.h"

namespace gpucmd {

struct FakeGpuControl {
  void (*set_device_count)(int count);
  // Whether devices report stream-ordered memory pools.
  void (*set_memory_pools)(int supported);
  // How many stream-ordered allocations succeeded so far.
  int (*async_allocations)();
  // How many events were created.
  int (*events_created)();
  // Events recorded from now on complete this long after their record (0: at once).
  void (*set_event_latency_us)(int microseconds);
  // How many event waits slept: waits for an event made for blocking waits that was not
  // complete yet.
  int (*sleeping_event_waits)();
  // Every later call on `device`'s context returns `error` (the double's own error code)
  // until the context is reset.
  void (*inject_sticky_error)(int device, int error);
  // Likewise, but for the rest of the process: resets leave the error, and no new
  // context can be made on `device` (as CUDA does after a kernel fault).
  void (*inject_error_for_good)(int device, int error);
  // How many times `device`'s context was reset.
  int (*context_resets)(int device);
  // While nonzero, registering host memory with the driver fails.
  void (*refuse_host_registration)(int refuse);
  // How many host ranges are registered now.
  int (*host_registrations)();
  // How many asynchronous copies so far had a host side outside pinned memory.
  int (*pageable_copies)();
};

// Loads the double at `runfile` (e.g. "driver/testing/cuda/libcuda.so.1", listed in the
// test's data) once. INTERNAL when it or one of its controls is missing.
absl::StatusOr<const FakeGpuControl*> LoadFakeGpu(const std::string& runfile);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_TESTING_FAKE_GPU_CONTROL_H_

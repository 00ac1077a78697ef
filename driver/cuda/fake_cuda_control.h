#ifndef GPUCMDD_DRIVER_CUDA_FAKE_CUDA_CONTROL_H_
#define GPUCMDD_DRIVER_CUDA_FAKE_CUDA_CONTROL_H_

// For tests only: loads the libcuda.so.1 TEST DOUBLE (driver/cuda/fake_libcuda.cc) from
// the test's runfiles, so that the CUDA driver's dlopen("libcuda.so.1") finds it, and
// hands out the controls the double exports.
//
// Thread-safety: LoadFakeCuda may be called from any thread; the controls lock inside
// the double.

#include <cuda.h>

#include "absl/status/statusor.h"

namespace gpucmd {

struct FakeCudaControl {
  void (*set_device_count)(int count);
  // Whether devices report CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED.
  void (*set_memory_pools)(int supported);
  // How many cuMemAllocAsync calls succeeded so far.
  int (*async_allocations)();
  // Every later call on `device`'s context returns `error` until the context is reset.
  void (*inject_sticky_error)(int device, CUresult error);
  // How many cuEventCreate calls there were.
  int (*events_created)();
  // How many times cuDevicePrimaryCtxReset reset `device`.
  int (*context_resets)(int device);
};

// Loads the double once (a test that needs it lists //driver/cuda/fake:libcuda.so.1 in
// its data). INTERNAL when it or one of its controls is missing.
absl::StatusOr<const FakeCudaControl*> LoadFakeCuda();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CUDA_FAKE_CUDA_CONTROL_H_

#ifndef GPUCMDD_DRIVER_HIP_HIP_STATUS_H_
#define GPUCMDD_DRIVER_HIP_HIP_STATUS_H_

// The one conversion of hipError_t and hiprtcResult values to absl::Status.

#include <hip/hip_runtime_api.h>
#include <hip/hiprtc.h>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace gpucmd {

// True for the errors that leave the device's context unusable until it is reset.
inline bool IsStickyHipError(hipError_t error) {
  switch (error) {
    case hipErrorIllegalAddress:
    case hipErrorLaunchFailure:
    case hipErrorLaunchTimeOut:
    case hipErrorECCNotCorrectable:
    case hipErrorAssert:
      return true;
    default:
      return false;
  }
}

inline absl::Status HipStatus(hipError_t error, absl::string_view call) {
  if (error == hipSuccess) return absl::OkStatus();
  std::string message = absl::StrCat(call, ": ", hipGetErrorString(error), " (hipError ",
                                     static_cast<int>(error), ")");
  if (IsStickyHipError(error)) return absl::UnavailableError(message);
  switch (error) {
    case hipErrorOutOfMemory:
      return absl::ResourceExhaustedError(message);
    case hipErrorNoDevice:
    case hipErrorInvalidDevice:
      return absl::UnavailableError(message);
    case hipErrorInvalidValue:
    case hipErrorInvalidImage:
    case hipErrorNotFound:
      return absl::InvalidArgumentError(message);
    default:
      return absl::InternalError(message);
  }
}

inline absl::Status HiprtcStatus(hiprtcResult result, absl::string_view call) {
  if (result == HIPRTC_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(call, ": ", hiprtcGetErrorString(result)));
}

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_HIP_HIP_STATUS_H_

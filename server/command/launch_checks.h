#ifndef GPUCMDD_SERVER_COMMAND_LAUNCH_CHECKS_H_
#define GPUCMDD_SERVER_COMMAND_LAUNCH_CHECKS_H_

// The driver-independent checks of a launch and of the data it reads, shared by every
// Command<D>. Pure functions: they look at values only, never at device state.

#include <vector>

#include "absl/status/status.h"
#include "driver/kernel_signature.h"
#include "driver/launch.h"
#include "server/command/command_interface.h"
#include "server/command/command_options.h"

namespace gpucmd {

// INVALID_ARGUMENT unless `args` match `params` one to one in kind and scalar type, and
// every argument kind is one the device accepts (tensor maps only where `limits` say so).
absl::Status CheckArguments(const std::vector<KernelParam>& params,
                            const std::vector<LaunchArgument>& args, const LaunchLimits& limits);

// INVALID_ARGUMENT when a non-empty launch's block is empty or larger than the device
// allows, or it asks for more dynamic shared memory than the device has.
absl::Status CheckLaunchShape(const KernelLaunch& launch, const LaunchLimits& limits);

// FAILED_PRECONDITION naming `buffer` and `taint`, the reason its bytes are not data.
absl::Status TaintedBufferError(BufferId buffer, const absl::Status& taint);

// After the read that follows it completed: OK when the launch that last wrote `buffer`
// (if any) succeeded; otherwise FAILED_PRECONDITION naming the launch's error.
absl::Status ProducerStatus(BufferId buffer, const LaunchOutcome* producer);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_COMMAND_LAUNCH_CHECKS_H_

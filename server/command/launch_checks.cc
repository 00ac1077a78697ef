#include "server/command/launch_checks.h"

#include "absl/strings/str_cat.h"

namespace gpucmd {

absl::Status CheckArguments(const std::vector<KernelParam>& params,
                            const std::vector<LaunchArgument>& args, const LaunchLimits& limits) {
  if (args.size() != params.size()) {
    return absl::InvalidArgumentError(absl::StrCat("the kernel takes ", params.size(),
                                                   " arguments, the launch passes ", args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].kind == ParamKind::kTensorMap && !limits.accepts_tensor_maps) {
      return absl::InvalidArgumentError(absl::StrCat(
          "argument ", i, " is a tensor map; this device's driver does not take tensor maps "
          "(they need the CUDA driver)"));
    }
    if (args[i].kind != params[i].kind ||
        (args[i].kind == ParamKind::kScalar && args[i].scalar != params[i].scalar)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "argument ", i, " does not match the kernel's parameter \"", params[i].declared_type,
          "\""));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckLaunchShape(const KernelLaunch& launch, const LaunchLimits& limits) {
  const Dim3& block = launch.block;
  if (launch.grid.volume() != 0 &&
      (block.volume() == 0 || block.volume() > limits.max_threads_per_block ||
       block.z > limits.max_block_z)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "block (", block.x, ",", block.y, ",", block.z, ") has ", block.volume(),
        " threads; the device allows 1..", limits.max_threads_per_block, " (and z at most ",
        limits.max_block_z, ")"));
  }
  if (launch.dynamic_shared_memory_bytes > limits.max_dynamic_shared_memory_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("dynamic shared memory of ", launch.dynamic_shared_memory_bytes,
                     " bytes exceeds the device's ", limits.max_dynamic_shared_memory_bytes));
  }
  return absl::OkStatus();
}

absl::Status TaintedBufferError(BufferId buffer, const absl::Status& taint) {
  return absl::FailedPreconditionError(
      absl::StrCat("buffer ", buffer, " holds no valid data: ", taint.message()));
}

absl::Status ProducerStatus(BufferId buffer, const LaunchOutcome* producer) {
  if (producer == nullptr) return absl::OkStatus();
  absl::Status status = producer->status();
  if (status.ok()) return status;
  return absl::FailedPreconditionError(
      absl::StrCat("buffer ", buffer, " holds no valid data: the launch that wrote it failed: ",
                   status.message()));
}

}  // namespace gpucmd

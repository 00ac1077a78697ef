// The CPU driver's setup (the default build).

#include <unistd.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "base/companion.h"
#include "base/identity.h"
#include "base/status_macros.h"
#include "driver/cpu/cpu_compiler.h"
#include "driver/cpu/cpu_device_memory.h"
#include "driver/cpu/cpu_devices.h"
#include "driver/cpu/cpu_driver.h"
#include "driver/cpu/kernel_abi.h"
#include "driver/cpu/kernel_executor.h"
#include "server/command/command_factory.h"
#include "server/driver_setup.h"
#include "spdlog/spdlog.h"

namespace gpucmd {

const char* SelectedDriverName() { return "cpu"; }

absl::StatusOr<DriverSetup> SetUpDriver(const v1::DaemonConfig& config,
                                        std::shared_ptr<PayloadPool> payloads) {
  const v1::CpuDriverConfig& cpu = config.cpu();
  DriverSetup setup;
  setup.driver_name = SelectedDriverName();
  setup.devices =
      DescribeCpuDevices(static_cast<int>(cpu.device_count()), cpu.memory_bytes_per_device());

  CpuCompilerOptions compiler{
      .compiler = cpu.host_compiler(),
      .front_end = CompileHelperPath("gpucmd-kernel-front-end", "driver/front_end"),
      .limits = CompileLimitsFor(config.compile())};
  if (absl::Status available = CheckHostCompiler(compiler); !available.ok()) {
    spdlog::error("kernels cannot be compiled: {}", std::string(available.message()));
  }
  ASSIGN_OR_RETURN(ModuleStore modules, ModuleStore::Open(config.compile().cache_dir(), ".so"));
  // The module ABI is part of the target: a daemon never loads a cached module built for
  // another version of its executor. The daemon compiles (with its prelude) after the
  // front end reads: both are its toolchain.
  setup.compiler =
      MakeCompileCache(config, "cpu", absl::StrCat("x86_64-abi", kKernelAbiVersion), modules,
                       {.compiler =
                            [compiler](const KernelSource& kernel, const std::string& artifact) {
                              return CompileCpuKernel(kernel.source, kernel.entry_point,
                                                      kernel.options, artifact, compiler);
                            },
                        .files = {compiler.front_end, SelfPath()}});

  absl::StatusOr<std::string> executor = FindCompanionProgram("gpucmd-kernel-executor", "driver/cpu", SelfPath());
  if (!executor.ok()) {
    spdlog::error("kernels cannot run: {}", std::string(executor.status().message()));
  }
  std::optional<UnixIdentity> executor_identity;
  if (geteuid() == 0) {
    absl::StatusOr<UnixIdentity> user = LookUpUser(cpu.executor_user());
    if (!user.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("cpu.executor_user: ", user.status().message()));
    }
    executor_identity = *user;
  }
  for (const DeviceDescription& device : setup.devices) {
    CpuBackend::Options backend{
        .ordinal = device.ordinal,
        .capacity_bytes = cpu.memory_bytes_per_device(),
        .stream_count = static_cast<int>(cpu.streams_per_device()),
        .executor_path = executor.value_or(""),
        .modules = modules,
        .executor_workers = static_cast<int>(cpu.executor_workers()),
        .kernel_timeout = std::chrono::seconds(cpu.kernel_timeout_seconds()),
        .executor_memory_bytes = cpu.executor_memory_bytes(),
        .executor_identity = executor_identity};
    CommandOptions options = CommandOptionsFor(config, device, payloads);
    // Whole host pages per slice: a launch's buffers can be opened to its kernel without
    // exposing another session's bytes (Note [Launch-scoped device memory] in
    // driver/cpu/kernel_executor_main.cc).
    options.memory.min_slice_bytes = CpuDeviceMemory::kGranularityBytes;
    options.memory.new_pages_zeroed = true;  // freed device memory goes back to the kernel
    setup.factories.push_back(MakeCommandFactory<CpuDriver>(
        [backend] { return CpuBackend::Create(backend); }, options));
  }
  return setup;
}

}  // namespace gpucmd

#ifndef GPUCMDD_SERVER_DRIVER_SETUP_H_
#define GPUCMDD_SERVER_DRIVER_SETUP_H_

// The one place the daemon meets the driver chosen at build time (--config=cuda selects
// driver_setup_cuda.cc, the default driver_setup_cpu.cc; no #ifdef): it describes the
// devices, builds the compile cache over the driver's compiler, and makes each device's
// Command<D> factory.

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "driver/compile_sandbox.h"
#include "driver/device_description.h"
#include "gpucmd/v1/config.pb.h"
#include "server/command/command_interface.h"
#include "server/command/command_options.h"
#include "server/core/compile_cache.h"

namespace gpucmd {

struct DriverSetup {
  std::string driver_name;  // "cpu", "cuda"
  std::vector<DeviceDescription> devices;
  std::unique_ptr<CompileCache> compiler;
  // One per device, in ordinal order.
  std::vector<CommandFactory> factories;
};

// The name of the driver this build runs.
const char* SelectedDriverName();

// UNAVAILABLE when the driver or its devices are missing (e.g. "no CUDA driver").
// Every device's Command takes its large payloads from `payloads`.
absl::StatusOr<DriverSetup> SetUpDriver(const v1::DaemonConfig& config,
                                        std::shared_ptr<PayloadPool> payloads);

// Command options shared by every driver: the config's limits, the device's own, and
// the daemon's payload pool.
CommandOptions CommandOptionsFor(const v1::DaemonConfig& config, const DeviceDescription& device,
                                 std::shared_ptr<PayloadPool> payloads);

// Where the compile helper `name` (built in Bazel package `package`) is; when it cannot
// be found, says so in the log and returns the bare name, so that compiles fail naming
// it (Note [Compile helper] in driver/compile_helper.h).
std::string CompileHelperPath(const std::string& name, const std::string& package);

// The compile sandbox's limits (driver/compile_sandbox.h) from the config.
CompileLimits CompileLimitsFor(const v1::CompileConfig& compile);

// What builds a driver's kernels: the compiler the compile cache calls, and the programs
// that read and build them, whose bytes are part of every KernelId (Note [Compile cache]
// in server/core/compile_cache.h).
struct KernelToolchain {
  CompileCache::BackendCompiler compiler;
  std::vector<std::string> files;
};

// A GPU driver's toolchain: each kernel read by the kernel front end, then built for
// `target` by the compile helper `helper` of Bazel package `package`, both with the
// config's limits (Note [Compile helper] in driver/compile_helper.h).
KernelToolchain CompileThroughHelper(const v1::DaemonConfig& config, const std::string& helper,
                                     const std::string& package, const std::string& target);

// The compile cache for `driver` on `architecture`, over `modules`, built by `toolchain`.
std::unique_ptr<CompileCache> MakeCompileCache(const v1::DaemonConfig& config,
                                               const std::string& driver,
                                               const std::string& architecture, ModuleStore modules,
                                               KernelToolchain toolchain);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_DRIVER_SETUP_H_

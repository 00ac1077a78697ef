// The HIP driver's setup (--config=hip).

#include <fstream>

#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "driver/hip/hip_driver.h"
#include "driver/hip/hiprtc_compiler.h"
#include "server/command/command_factory.h"
#include "server/driver_setup.h"

namespace gpucmd {

const char* SelectedDriverName() { return "hip"; }

absl::StatusOr<DriverSetup> SetUpDriver(const v1::DaemonConfig& config) {
  DriverSetup setup;
  setup.driver_name = SelectedDriverName();
  ASSIGN_OR_RETURN(setup.devices, DescribeHipDevices());
  // Kernels are built for the first device's architecture (e.g. "gfx90a").
  const std::string architecture = setup.devices.front().architecture;
  const size_t max_log_bytes = config.compile().max_log_bytes();
  ASSIGN_OR_RETURN(
      setup.compiler,
      CompileCache::Create(
          CompileCacheOptions(config, "hip", architecture, ".hsaco"),
          [architecture, max_log_bytes](const KernelSource& kernel, const std::string& artifact)
              -> absl::StatusOr<CompileOutput> {
            ASSIGN_OR_RETURN(CompileOutput output,
                             CompileWithHiprtc(kernel.source, kernel.entry_point, kernel.options,
                                               architecture, artifact, max_log_bytes));
            // The module's entry point, for loading it by kernel id.
            std::ofstream(std::string(absl::StripSuffix(artifact, ".hsaco")) + ".entry")
                << kernel.entry_point << "\n";
            return output;
          }));
  for (const DeviceDescription& device : setup.devices) {
    HipBackend::Options backend{.ordinal = device.ordinal,
                                .stream_count = static_cast<int>(config.cpu().streams_per_device()),
                                .module_directory = config.compile().cache_dir()};
    setup.factories.push_back(MakeCommandFactory<HipDriver>(
        [backend] { return HipBackend::Create(backend); }, CommandOptionsFor(config, device)));
  }
  return setup;
}

}  // namespace gpucmd

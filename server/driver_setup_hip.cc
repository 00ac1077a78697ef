// The HIP driver's setup (--config=hip).

#include "base/status_macros.h"
#include "driver/hip/hip_driver.h"
#include "server/command/command_factory.h"
#include "server/driver_setup.h"

namespace gpucmd {

const char* SelectedDriverName() { return "hip"; }

absl::StatusOr<DriverSetup> SetUpDriver(const v1::DaemonConfig& config,
                                        std::shared_ptr<PayloadPool> payloads) {
  DriverSetup setup;
  setup.driver_name = SelectedDriverName();
  ASSIGN_OR_RETURN(setup.devices, DescribeHipDevices());
  // Kernels are built for the first device's architecture (e.g. "gfx90a").
  const std::string architecture = setup.devices.front().architecture;
  ASSIGN_OR_RETURN(ModuleStore modules,
                   ModuleStore::Open(config.compile().cache_dir(), ".hsaco"));
  setup.compiler = MakeCompileCache(
      config, "hip", architecture, modules,
      CompileThroughHelper(config, "gpucmd-hiprtc-helper", "driver/hip", architecture));
  for (const DeviceDescription& device : setup.devices) {
    HipBackend::Options backend{.ordinal = device.ordinal,
                                .stream_count = static_cast<int>(config.cpu().streams_per_device()),
                                .modules = modules};
    setup.factories.push_back(MakeCommandFactory<HipDriver>(
        [backend] { return HipBackend::Create(backend); }, CommandOptionsFor(config, device, payloads)));
  }
  return setup;
}

}  // namespace gpucmd

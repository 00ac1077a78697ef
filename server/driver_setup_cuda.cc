// The CUDA driver's setup (--config=cuda).

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "driver/cuda/cuda_driver.h"
#include "server/command/command_factory.h"
#include "server/driver_setup.h"

namespace gpucmd {

const char* SelectedDriverName() { return "cuda"; }

absl::StatusOr<DriverSetup> SetUpDriver(const v1::DaemonConfig& config,
                                        std::shared_ptr<PayloadPool> payloads) {
  DriverSetup setup;
  setup.driver_name = SelectedDriverName();
  ASSIGN_OR_RETURN(setup.devices, DescribeCudaDevices());
  // Kernels are built for the first device's compute capability ("sm_90" -> 90).
  const std::string architecture = setup.devices.front().architecture;
  int compute_capability = 0;
  absl::string_view digits = architecture;
  absl::ConsumePrefix(&digits, "sm_");
  if (!absl::SimpleAtoi(digits, &compute_capability)) {
    return absl::InternalError("unexpected CUDA architecture " + architecture);
  }
  ASSIGN_OR_RETURN(ModuleStore modules,
                   ModuleStore::Open(config.compile().cache_dir(), ".cubin"));
  setup.compiler =
      MakeCompileCache(config, "cuda", architecture, modules,
                       CompileThroughHelper(config, "gpucmd-nvrtc-helper", "driver/cuda",
                                            absl::StrCat(compute_capability)));
  for (const DeviceDescription& device : setup.devices) {
    CudaBackend::Options backend{.ordinal = device.ordinal,
                                 .stream_count = static_cast<int>(config.cpu().streams_per_device()),
                                 .modules = modules};
    setup.factories.push_back(MakeCommandFactory<CudaDriver>(
        [backend] { return CudaBackend::Create(backend); }, CommandOptionsFor(config, device, payloads)));
  }
  return setup;
}

}  // namespace gpucmd

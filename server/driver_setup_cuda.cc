// The CUDA driver's setup (--config=cuda).

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "driver/cuda/cuda_driver.h"
#include "driver/cuda/nvrtc_compiler.h"
#include "server/command/command_factory.h"
#include "server/driver_setup.h"
#include "spdlog/spdlog.h"

namespace gpucmd {

const char* SelectedDriverName() { return "cuda"; }

absl::StatusOr<DriverSetup> SetUpDriver(const v1::DaemonConfig& config) {
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
  NvrtcOptions nvrtc{.max_log_bytes = config.compile().max_log_bytes()};
  ASSIGN_OR_RETURN(ModuleStore modules,
                   ModuleStore::Open(config.compile().cache_dir(), ".cubin"));
  setup.compiler = MakeCompileCache(
      config, "cuda", architecture, modules,
      [nvrtc, compute_capability](const KernelSource& kernel,
                                  const std::string& artifact) -> absl::StatusOr<CompileOutput> {
        bool ptx = false;
        ASSIGN_OR_RETURN(CompileOutput output,
                         CompileWithNvrtc(kernel.source, kernel.entry_point, kernel.options,
                                          compute_capability, artifact, nvrtc, &ptx));
        if (ptx) spdlog::info("{}: built PTX (architecture newer than NVRTC)", kernel.entry_point);
        return output;
      });
  for (const DeviceDescription& device : setup.devices) {
    CudaBackend::Options backend{.ordinal = device.ordinal,
                                 .stream_count = static_cast<int>(config.cpu().streams_per_device()),
                                 .modules = modules};
    setup.factories.push_back(MakeCommandFactory<CudaDriver>(
        [backend] { return CudaBackend::Create(backend); }, CommandOptionsFor(config, device)));
  }
  return setup;
}

}  // namespace gpucmd

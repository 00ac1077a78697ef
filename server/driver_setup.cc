#include "server/driver_setup.h"

#include "base/companion.h"
#include "driver/compile_helper.h"
#include "spdlog/spdlog.h"

namespace gpucmd {

CommandOptions CommandOptionsFor(const v1::DaemonConfig& config, const DeviceDescription& device,
                                 std::shared_ptr<PayloadPool> payloads) {
  CommandOptions options;
  options.payloads = std::move(payloads);
  options.session_quota_bytes = config.limits().session_memory_quota_bytes();
  options.session_queued_on_streams = config.limits().session_queued_commands();
  options.session_max_streams = config.limits().max_streams_per_session();
  options.launch.max_threads_per_block = device.max_threads_per_block;
  options.launch.max_dynamic_shared_memory_bytes = device.max_shared_memory_per_block_bytes;
  options.launch.accepts_tensor_maps = device.takes_tensor_maps;
  return options;
}

std::string CompileHelperPath(const std::string& name, const std::string& package) {
  absl::StatusOr<std::string> found = FindCompanionProgram(name, package, SelfPath());
  if (found.ok()) return *found;
  spdlog::error("kernels cannot be compiled: {}", std::string(found.status().message()));
  return name;
}

CompileLimits CompileLimitsFor(const v1::CompileConfig& compile) {
  return {.timeout = std::chrono::seconds(compile.timeout_seconds()),
          .max_memory_bytes = compile.max_memory_bytes(),
          .max_log_bytes = compile.max_log_bytes()};
}

KernelToolchain CompileThroughHelper(const v1::DaemonConfig& config, const std::string& helper,
                                     const std::string& package, const std::string& target) {
  const CompileLimits limits = CompileLimitsFor(config.compile());
  const CompileHelper front_end{
      .path = CompileHelperPath("gpucmd-kernel-front-end", "driver/front_end"), .limits = limits};
  const CompileHelper compiler{.path = CompileHelperPath(helper, package), .limits = limits};
  return {
      .compiler =
          [front_end, compiler, target](const KernelSource& kernel, const std::string& artifact) {
            return CompileWithHelper(front_end, compiler, kernel.source, kernel.entry_point,
                                     kernel.options, target, artifact);
          },
      .files = {front_end.path, compiler.path}};
}

std::unique_ptr<CompileCache> MakeCompileCache(const v1::DaemonConfig& config,
                                               const std::string& driver,
                                               const std::string& architecture, ModuleStore modules,
                                               KernelToolchain toolchain) {
  return CompileCache::Create(
      {.driver = driver,
       .architecture = architecture,
       .toolchain_files = std::move(toolchain.files),
       .workers = static_cast<int>(config.compile().workers()),
       .max_waiting_source_bytes = config.compile().max_waiting_source_bytes(),
       .max_cache_bytes = config.compile().max_cache_bytes()},
      std::move(modules), std::move(toolchain.compiler));
}

}  // namespace gpucmd

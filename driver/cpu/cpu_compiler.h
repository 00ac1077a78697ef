#ifndef GPUCMDD_DRIVER_CPU_CPU_COMPILER_H_
#define GPUCMDD_DRIVER_CPU_CPU_COMPILER_H_

// Compiles a CUDA C++ kernel for the CPU driver: the prelude plus the client's source
// (cpu_prelude.h), built by the host C++ compiler into a shared object the kernel
// executor loads. The source is hostile until proven otherwise: the compiler runs without
// a shell, in a private temporary directory, in a sandbox (Note [Sandbox] in
// base/sandbox.h) that lets it read only its own installation and write only that
// directory, so `#include "/etc/passwd"`, `.incbin` of any file and `#include
// "/dev/zero"` fail to open. Its process group is killed at the time limit, each of its
// processes has an address-space limit, and its log is cut at a size limit.

#include <chrono>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "driver/kernel_signature.h"

namespace gpucmd {

struct CpuCompilerOptions {
  std::string compiler = "g++";
  std::chrono::milliseconds timeout{60'000};
  size_t max_log_bytes = 64 << 10;
  uint64_t max_memory_bytes = uint64_t{2} << 30;
};

// Builds `entry` of `source` into `output_path` (written atomically). `options` are the
// client's (driver/compile_options.h).
// INVALID_ARGUMENT: bad entry point, unsupported feature or option, or a compile error
// (with the compiler's log); RESOURCE_EXHAUSTED past the time or memory limit, naming it;
// FAILED_PRECONDITION when the host compiler is missing; UNIMPLEMENTED when the kernel
// cannot sandbox it (no Landlock): the compile is refused rather than run unconfined.
absl::StatusOr<CompileOutput> CompileCpuKernel(const std::string& source,
                                               const std::string& entry,
                                               const std::vector<std::string>& options,
                                               const std::string& output_path,
                                               const CpuCompilerOptions& compiler);

// OK when the host compiler can be found; FAILED_PRECONDITION saying what to install.
absl::Status CheckHostCompiler(const CpuCompilerOptions& compiler);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_CPU_COMPILER_H_

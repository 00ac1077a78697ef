#ifndef GPUCMDD_DRIVER_CPU_CPU_COMPILER_H_
#define GPUCMDD_DRIVER_CPU_CPU_COMPILER_H_

// Compiles a CUDA C++ kernel for the CPU driver: the prelude plus the client's source
// (cpu_prelude.h), built by the host C++ compiler into a shared object the kernel
// executor loads. The compiler runs without a shell, in a private temporary directory,
// with a time limit; its log is cut at a size limit.

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
};

// Builds `entry` of `source` into `output_path` (written atomically). `options` are the
// client's (driver/compile_options.h).
// INVALID_ARGUMENT: bad entry point, unsupported feature or option, or a compile error
// (with the compiler's log); DEADLINE_EXCEEDED past the time limit; FAILED_PRECONDITION
// when the host compiler is missing.
absl::StatusOr<CompileOutput> CompileCpuKernel(const std::string& source,
                                               const std::string& entry,
                                               const std::vector<std::string>& options,
                                               const std::string& output_path,
                                               const CpuCompilerOptions& compiler);

// OK when the host compiler can be found; FAILED_PRECONDITION saying what to install.
absl::Status CheckHostCompiler(const CpuCompilerOptions& compiler);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_CPU_COMPILER_H_

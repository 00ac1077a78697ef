#ifndef GPUCMDD_DRIVER_CPU_CPU_COMPILER_H_
#define GPUCMDD_DRIVER_CPU_CPU_COMPILER_H_

// Compiles a CUDA C++ kernel for the CPU driver: the prelude plus the client's source
// (cpu_prelude.h), read first by the kernel front end (driver/front_end/kernel_parser.h),
// built by the host C++ compiler into a shared object the kernel executor loads. The source is hostile until proven otherwise: the compiler runs without
// a shell, sandboxed (driver/compile_sandbox.h) so that it can read only its own
// installation, and `#include "/etc/passwd"`, `.incbin` of any file and `#include
// "/dev/zero"` fail to open; what it made is checked for inline assembly and load-time
// code (driver/cpu/module_checks.h).

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "driver/compile_sandbox.h"
#include "driver/kernel_signature.h"

namespace gpucmd {

struct CpuCompilerOptions {
  std::string compiler = "g++";
  // The kernel front end (gpucmd-kernel-front-end); empty: the one beside this program.
  std::string front_end;
  CompileLimits limits;
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

// How kernel code is compiled and optimised (what a plain C++ baseline is built with, to
// compare alike); CompileCpuKernel adds what builds and checks a module.
const std::vector<std::string>& CpuKernelCodeFlags();

// OK when the host compiler can be found; FAILED_PRECONDITION saying what to install.
absl::Status CheckHostCompiler(const CpuCompilerOptions& compiler);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_CPU_COMPILER_H_

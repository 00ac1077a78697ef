#include "driver/cpu/cpu_compiler.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file.h"
#include "base/sandbox.h"
#include "base/status_macros.h"
#include "base/subprocess.h"
#include "driver/compile_options.h"
#include "driver/cpu/cpu_prelude.h"
#include "driver/cpu/module_checks.h"

namespace gpucmd {
namespace {

std::string ReadCapped(const std::string& path, size_t max_bytes) {
  std::string log = ReadFileOrEmpty(path);
  if (log.size() > max_bytes) {
    log.resize(max_bytes);
    absl::StrAppend(&log, "\n[compiler log cut at ", max_bytes, " bytes]");
  }
  return log;
}

// Removes a directory tree when it goes out of scope.
class ScopedDirectory {
 public:
  explicit ScopedDirectory(std::string path) : path_(std::move(path)) {}
  ~ScopedDirectory() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// What the host compiler may read and run: its own installation (driver, cc1plus,
// assembler, linker, system headers and libraries). Nothing else of the host.
const std::vector<std::string> kCompilerInstallation = {
    "/usr/bin", "/usr/lib", "/usr/libexec", "/usr/include", "/usr/x86_64-linux-gnu",
    "/usr/lib64", "/bin", "/lib", "/lib64"};

// RESOURCE_EXHAUSTED naming the limit when the compiler stopped at its memory or CPU
// limit (a compiler out of address space says so and fails; one out of CPU time is
// killed by SIGXCPU); OK otherwise.
absl::Status CheckResourceLimits(const ProcessResult& result, absl::string_view log,
                                 absl::string_view entry, const CpuCompilerOptions& compiler) {
  bool out_of_memory = absl::StrContains(log, "out of memory") ||
                       absl::StrContains(log, "virtual memory exhausted") ||
                       absl::StrContains(log, "Cannot allocate memory") ||
                       absl::StrContains(log, "std::bad_alloc");
  if (result.exit_code != 0 && out_of_memory) {
    return absl::ResourceExhaustedError(absl::StrCat("compile of ", entry,
                                                     " exceeded its memory limit of ",
                                                     compiler.max_memory_bytes, " bytes"));
  }
  if (result.signal == SIGXCPU || result.signal == SIGKILL) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "compile of ", entry, " used up its CPU time limit of ",
        std::chrono::ceil<std::chrono::seconds>(compiler.timeout).count(), " s"));
  }
  return absl::OkStatus();
}

// The assembly output -save-temps left in `directory` (named after the output file by
// newer compilers, after the source by older ones); nullopt when there is none.
std::optional<std::string> ReadAssembly(const std::string& directory) {
  for (const char* name : {"/kernel.so-kernel.s", "/kernel.s"}) {
    if (std::string path = directory + name; access(path.c_str(), R_OK) == 0) {
      return ReadFileOrEmpty(path);
    }
  }
  return std::nullopt;
}

}  // namespace

absl::Status CheckHostCompiler(const CpuCompilerOptions& compiler) {
  if (FindInPath(compiler.compiler).ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the CPU driver compiles kernels with the host C++ compiler, and \"", compiler.compiler,
      "\" was not found in PATH: install g++ (apt-get install g++)"));
}

absl::StatusOr<CompileOutput> CompileCpuKernel(const std::string& source,
                                               const std::string& entry,
                                               const std::vector<std::string>& options,
                                               const std::string& output_path,
                                               const CpuCompilerOptions& compiler) {
  CompileOutput output;
  ASSIGN_OR_RETURN(output.params, ParseKernelSignature(source, entry));
  ASSIGN_OR_RETURN(std::string unit, CpuKernelTranslationUnit(source, entry));
  ASSIGN_OR_RETURN(std::vector<std::string> flags, TranslateCompileOptions(options, {.fast_math = "-ffast-math"}));
  RETURN_IF_ERROR(CheckHostCompiler(compiler));

  char pattern[] = "/tmp/gpucmd-compile-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return absl::InternalError("cannot create a compile directory");
  ScopedDirectory directory(pattern);
  std::ofstream(directory.path() + "/kernel.cc") << unit;
  ASSIGN_OR_RETURN(Sandbox sandbox, Sandbox::Prepare({.read_only = {"/etc/ld.so.cache"},
                                                      .executable = kCompilerInstallation,
                                                      .read_write = {directory.path()}}));
  // Without the C runtime's start files a module has no load-time code of its own, so
  // any it has is the client's (driver/cpu/module_checks.h); the assembly is kept for
  // the same checks.
  std::vector<std::string> argv = {compiler.compiler, "-std=c++17", "-O2", "-fPIC", "-shared",
                                   "-nostartfiles", "-save-temps=obj", "-pthread", "-w"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", "kernel.so", "kernel.cc"});
  std::string log_path = directory.path() + "/log";
  absl::StatusOr<ProcessResult> result =
      RunProcess(argv, directory.path(), log_path,
                 {.timeout = compiler.timeout,
                  .address_space_bytes = compiler.max_memory_bytes,
                  .cpu_seconds = static_cast<uint64_t>(
                      std::chrono::ceil<std::chrono::seconds>(compiler.timeout).count()),
                  .sandbox = &sandbox,
                  .environment = {"PATH=/usr/bin:/bin", "LC_ALL=C",
                                  "TMPDIR=" + directory.path()}});
  if (!result.ok()) {
    if (absl::IsNotFound(result.status())) return CheckHostCompiler(compiler);
    if (absl::IsResourceExhausted(result.status())) {
      return absl::ResourceExhaustedError(absl::StrCat("compile of ", entry, " ran past its ",
                                                       compiler.timeout.count(),
                                                       " ms time limit and was stopped"));
    }
    return result.status();
  }
  output.log = ReadCapped(log_path, compiler.max_log_bytes);
  if (absl::Status limit = CheckResourceLimits(*result, output.log, entry, compiler);
      !limit.ok()) {
    return limit;
  }
  // Checked before the exit code: inline PTX compiles to assembly the assembler rejects.
  std::optional<std::string> assembly = ReadAssembly(directory.path());
  if (assembly.has_value()) RETURN_IF_ERROR(CheckKernelAssembly(*assembly));
  if (result->exit_code != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("compile of ", entry, " failed:\n", output.log));
  }
  if (!assembly.has_value()) {
    return absl::InternalError("the host compiler left no assembly output to check");
  }
  std::string module = ReadFileOrEmpty(directory.path() + "/kernel.so");
  RETURN_IF_ERROR(CheckNoLoadTimeCode(module));
  if (module.empty() || !WriteFileAtomically(output_path, module).ok()) {
    return absl::InternalError(absl::StrCat("cannot store the module at ", output_path));
  }
  return output;
}

}  // namespace gpucmd

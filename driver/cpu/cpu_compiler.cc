#include "driver/cpu/cpu_compiler.h"

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file.h"
#include "base/status_macros.h"
#include "base/subprocess.h"
#include "driver/compile_options.h"
#include "driver/cpu/cpu_prelude.h"

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
  std::string temporary = absl::StrCat(output_path, ".tmp.", getpid());
  std::vector<std::string> argv = {compiler.compiler, "-std=c++17", "-O2", "-fPIC", "-shared",
                                   "-pthread", "-w"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", temporary, "kernel.cc"});
  std::string log_path = directory.path() + "/log";
  absl::StatusOr<ProcessResult> result =
      RunProcess(argv, directory.path(), log_path, compiler.timeout);
  if (!result.ok()) {
    std::remove(temporary.c_str());
    if (absl::IsNotFound(result.status())) return CheckHostCompiler(compiler);
    return result.status();
  }
  output.log = ReadCapped(log_path, compiler.max_log_bytes);
  if (result->exit_code != 0) {
    std::remove(temporary.c_str());
    return absl::InvalidArgumentError(
        absl::StrCat("compile of ", entry, " failed:\n", output.log));
  }
  if (std::rename(temporary.c_str(), output_path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return absl::InternalError(absl::StrCat("cannot store the module at ", output_path));
  }
  return output;
}

}  // namespace gpucmd

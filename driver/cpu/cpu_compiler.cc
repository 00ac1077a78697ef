#include "driver/cpu/cpu_compiler.h"

#include <unistd.h>

#include <filesystem>
#include <optional>

#include "absl/strings/str_cat.h"
#include "base/companion.h"
#include "base/file.h"
#include "base/status_macros.h"
#include "base/subprocess.h"
#include "driver/compile_helper.h"
#include "driver/compile_options.h"
#include "driver/cpu/cpu_headers.h"
#include "driver/cpu/cpu_prelude.h"
#include "driver/cpu/module_checks.h"

namespace gpucmd {
namespace {

// What the host compiler may read and run: its own installation (driver, cc1plus,
// assembler, linker, system headers and libraries). Nothing else of the host.
const std::vector<std::string> kCompilerInstallation = {
    "/usr/bin", "/usr/lib", "/usr/libexec", "/usr/include", "/usr/x86_64-linux-gnu",
    "/usr/lib64", "/bin", "/lib", "/lib64"};

// The assembly output -save-temps left in `directory` (named after the output file by
// newer compilers, after the source by older ones); nullopt when there is none.
std::optional<std::string> ReadAssembly(const CompileDirectory& directory) {
  for (const char* name : {"kernel.so-kernel.s", "kernel.s"}) {
    if (std::string path = directory.PathOf(name); access(path.c_str(), R_OK) == 0) {
      return ReadFileOrEmpty(path);
    }
  }
  return std::nullopt;
}

CompileHelper FrontEndFor(const CpuCompilerOptions& compiler) {
  CompileHelper front_end{.path = compiler.front_end, .limits = compiler.limits};
  if (front_end.path.empty()) {
    front_end.path = FindCompanionProgram("gpucmd-kernel-front-end", "driver/front_end", SelfPath())
                         .value_or("gpucmd-kernel-front-end");
  }
  return front_end;
}

}  // namespace

absl::Status CheckHostCompiler(const CpuCompilerOptions& compiler) {
  if (FindInPath(compiler.compiler).ok()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "the CPU driver compiles kernels with the host C++ compiler, and \"", compiler.compiler,
      "\" was not found in PATH: install g++ (apt-get install g++)"));
}

const std::vector<std::string>& CpuKernelCodeFlags() {
  // -fno-semantic-interposition: the kernel may be inlined into the module's block loop
  // (nothing outside the module calls it).
  static const auto* const kFlags = new std::vector<std::string>{
      "-std=c++17", "-O2", "-fPIC", "-fno-semantic-interposition"};
  return *kFlags;
}

absl::StatusOr<CompileOutput> CompileCpuKernel(const std::string& source,
                                               const std::string& entry,
                                               const std::vector<std::string>& options,
                                               const std::string& output_path,
                                               const CpuCompilerOptions& compiler) {
  ASSIGN_OR_RETURN(std::vector<std::string> flags, TranslateCompileOptions(options, {.fast_math = "-ffast-math"}));
  RETURN_IF_ERROR(CheckHostCompiler(compiler));
  ASSIGN_OR_RETURN(ParsedKernel parsed,
                   ParseWithFrontEnd(FrontEndFor(compiler), source, entry, options));
  if (!parsed.unsupported.empty()) {
    const UnsupportedUse& use = parsed.unsupported.front();
    return absl::InvalidArgumentError(absl::StrCat("the CPU driver does not support ",
                                                   use.feature, ": kernel.cu:", use.line));
  }
  CompileOutput output{.params = parsed.params};
  const std::string unit = CpuKernelTranslationUnit(source, entry, parsed);

  ASSIGN_OR_RETURN(CompileDirectory directory, CompileDirectory::Create());
  RETURN_IF_ERROR(WriteFileAtomically(directory.PathOf("kernel.cc"), unit));
  for (const auto& [name, contents] : CpuKernelHeaders()) {
    const std::string path = directory.PathOf(absl::StrCat("include/", name));
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    RETURN_IF_ERROR(WriteFileAtomically(path, contents));
  }
  // Without the C runtime's start files a module has no load-time code of its own, so
  // any it has is the client's (driver/cpu/module_checks.h); the assembly is kept for
  // the same checks.
  std::vector<std::string> argv = {compiler.compiler};
  argv.insert(argv.end(), CpuKernelCodeFlags().begin(), CpuKernelCodeFlags().end());
  argv.insert(argv.end(),
              {"-shared", "-nostartfiles", "-save-temps=obj", "-pthread", "-w", "-Iinclude"});
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", "kernel.so", "kernel.cc"});
  absl::StatusOr<CompilerRun> run = RunSandboxedCompiler(
      argv, directory, {.read_only = {"/etc/ld.so.cache"}, .executable = kCompilerInstallation},
      {"PATH=/usr/bin:/bin", "LC_ALL=C"}, compiler.limits, entry);
  if (absl::IsNotFound(run.status())) return CheckHostCompiler(compiler);
  if (!run.ok()) return run.status();
  output.log = run->log;
  // Checked before the exit code: inline PTX compiles to assembly the assembler rejects.
  std::optional<std::string> assembly = ReadAssembly(directory);
  if (assembly.has_value()) RETURN_IF_ERROR(CheckKernelAssembly(*assembly));
  if (run->exit_code != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("compile of ", entry, " failed:\n", output.log));
  }
  if (!assembly.has_value()) {
    return absl::InternalError("the host compiler left no assembly output to check");
  }
  std::string module = ReadFileOrEmpty(directory.PathOf("kernel.so"));
  RETURN_IF_ERROR(CheckNoLoadTimeCode(module));
  if (module.empty() || !WriteFileAtomically(output_path, module).ok()) {
    return absl::InternalError(absl::StrCat("cannot store the module at ", output_path));
  }
  return output;
}

}  // namespace gpucmd

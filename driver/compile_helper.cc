#include "driver/compile_helper.h"

#include <cstdlib>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "base/file.h"
#include "base/status_macros.h"

namespace gpucmd {
namespace {

// What a helper may read: the system's software (toolkits, libraries, headers), its own
// directory and its bundle's libraries, and where the daemon's LD_LIBRARY_PATH points;
// what it may run: itself and the program loader. Not /etc (but the loader's cache),
// /home, /root, /var, /tmp or /proc.
SandboxPolicy HelperPolicy(const std::string& helper_path) {
  namespace fs = std::filesystem;
  const fs::path directory = fs::path(helper_path).parent_path();
  SandboxPolicy policy{
      .read_only = {"/etc/ld.so.cache", "/usr", "/opt",
                    (directory / ".." / "lib").lexically_normal().string()},
      .executable = {directory.string(), "/lib", "/lib64", "/usr/lib", "/usr/lib64"}};
  if (const char* libraries = std::getenv("LD_LIBRARY_PATH"); libraries != nullptr) {
    for (absl::string_view entry : absl::StrSplit(libraries, ':', absl::SkipEmpty())) {
      policy.read_only.emplace_back(entry);
    }
  }
  return policy;
}

std::vector<std::string> HelperEnvironment() {
  std::vector<std::string> environment = {"PATH=/usr/bin:/bin", "LC_ALL=C"};
  if (const char* libraries = std::getenv("LD_LIBRARY_PATH"); libraries != nullptr) {
    environment.push_back(absl::StrCat("LD_LIBRARY_PATH=", libraries));
  }
  return environment;
}

}  // namespace

absl::StatusOr<HelperOutput> RunHelper(const CompileHelper& helper, const std::string& source,
                                       const std::string& entry,
                                       const std::vector<std::string>& options,
                                       const std::string& target) {
  ASSIGN_OR_RETURN(CompileDirectory directory, CompileDirectory::Create());
  RETURN_IF_ERROR(WriteFileAtomically(directory.PathOf("kernel.cu"), source));
  // The program itself, not a link to it: the sandbox lets it run from its directory.
  std::error_code unresolved;
  const std::string program = std::filesystem::weakly_canonical(helper.path, unresolved).string();
  std::vector<std::string> argv = {program, directory.path(), entry, target,
                                   absl::StrCat(helper.limits.max_log_bytes)};
  argv.insert(argv.end(), options.begin(), options.end());
  CompileLimits limits = helper.limits;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  // A sanitizer build's helper (tests only) reserves terabytes of shadow address space.
  limits.max_memory_bytes = 0;
#endif
  absl::StatusOr<CompilerRun> run = RunSandboxedCompiler(
      argv, directory, HelperPolicy(program), HelperEnvironment(), limits, entry);
  if (absl::IsNotFound(run.status())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the helper ", helper.path, " cannot be started: ", run.status().message()));
  }
  if (!run.ok()) return run.status();
  if (run->exit_code != 0) {
    const bool status_code = run->exit_code > 0 && run->exit_code <= 16;
    return absl::Status(status_code ? static_cast<absl::StatusCode>(run->exit_code)
                                    : absl::StatusCode::kInternal,
                        status_code ? run->log
                                    : absl::StrCat("the helper ", helper.path,
                                                   " failed: ", run->log));
  }
  HelperOutput output{.log = run->log, .image = ReadFileOrEmpty(directory.PathOf("kernel.image"))};
  if (output.image.empty()) {
    return absl::InternalError(absl::StrCat("the helper ", helper.path, " left no image"));
  }
  return output;
}

absl::StatusOr<ParsedKernel> ParseWithFrontEnd(const CompileHelper& front_end,
                                               const std::string& source,
                                               const std::string& entry,
                                               const std::vector<std::string>& options) {
  ASSIGN_OR_RETURN(HelperOutput output, RunHelper(front_end, source, entry, options, "parse"));
  absl::StatusOr<ParsedKernel> parsed = DeserializeParsedKernel(output.image);
  if (!parsed.ok()) {
    return absl::InternalError(
        absl::StrCat("the kernel front end answered badly: ", parsed.status().message()));
  }
  return parsed;
}

absl::StatusOr<CompileOutput> CompileWithHelper(const CompileHelper& front_end,
                                                const CompileHelper& helper,
                                                const std::string& source,
                                                const std::string& entry,
                                                const std::vector<std::string>& options,
                                                const std::string& target,
                                                const std::string& output_path) {
  ASSIGN_OR_RETURN(ParsedKernel parsed, ParseWithFrontEnd(front_end, source, entry, options));
  ASSIGN_OR_RETURN(HelperOutput output, RunHelper(helper, source, entry, options, target));
  RETURN_IF_ERROR(WriteFileAtomically(output_path, output.image));
  return CompileOutput{.params = std::move(parsed.params), .log = std::move(output.log)};
}

}  // namespace gpucmd

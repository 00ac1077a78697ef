#include "driver/compile_sandbox.h"

#include <signal.h>
#include <stdlib.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/file.h"
#include "base/status_macros.h"
#include "base/subprocess.h"

namespace gpucmd {
namespace {

bool RanOutOfMemory(absl::string_view log) {
  return absl::StrContains(log, "out of memory") ||
         absl::StrContains(log, "virtual memory exhausted") ||
         absl::StrContains(log, "Cannot allocate memory") ||
         absl::StrContains(log, "std::bad_alloc");
}

}  // namespace

absl::StatusOr<CompileDirectory> CompileDirectory::Create() {
  char pattern[] = "/tmp/gpucmd-compile-XXXXXX";
  if (mkdtemp(pattern) == nullptr) return absl::InternalError("cannot create a compile directory");
  return CompileDirectory(pattern);
}

CompileDirectory::~CompileDirectory() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string CompileDirectory::PathOf(absl::string_view name) const {
  return absl::StrCat(path_, "/", name);
}

absl::StatusOr<CompilerRun> RunSandboxedCompiler(const std::vector<std::string>& argv,
                                                 const CompileDirectory& directory,
                                                 SandboxPolicy policy,
                                                 std::vector<std::string> environment,
                                                 const CompileLimits& limits,
                                                 absl::string_view entry) {
  policy.read_write.push_back(directory.path());
  ASSIGN_OR_RETURN(Sandbox sandbox, Sandbox::Prepare(policy));
  environment.push_back("TMPDIR=" + directory.path());
  const uint64_t cpu_seconds = static_cast<uint64_t>(
      std::chrono::ceil<std::chrono::seconds>(limits.timeout).count());
  const std::string log_path = directory.PathOf("log");
  absl::StatusOr<ProcessResult> result =
      RunProcess(argv, directory.path(), log_path,
                 {.timeout = limits.timeout,
                  .address_space_bytes = limits.max_memory_bytes,
                  .cpu_seconds = cpu_seconds,
                  .sandbox = &sandbox,
                  .environment = std::move(environment)});
  if (!result.ok()) {
    if (absl::IsResourceExhausted(result.status())) {
      return absl::ResourceExhaustedError(absl::StrCat("compile of ", entry, " ran past its ",
                                                       limits.timeout.count(),
                                                       " ms time limit and was stopped"));
    }
    return result.status();
  }
  CompilerRun run{.exit_code = result->exit_code, .log = ReadFileOrEmpty(log_path)};
  if (run.log.size() > limits.max_log_bytes) {
    run.log.resize(limits.max_log_bytes);
    absl::StrAppend(&run.log, "\n[compiler log cut at ", limits.max_log_bytes, " bytes]");
  }
  if (result->exit_code != 0 && RanOutOfMemory(run.log)) {
    return absl::ResourceExhaustedError(absl::StrCat("compile of ", entry,
                                                     " exceeded its memory limit of ",
                                                     limits.max_memory_bytes, " bytes"));
  }
  if (result->signal == SIGXCPU || result->signal == SIGKILL) {
    return absl::ResourceExhaustedError(
        absl::StrCat("compile of ", entry, " used up its CPU time limit of ", cpu_seconds, " s"));
  }
  return run;
}

}  // namespace gpucmd

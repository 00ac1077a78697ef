#ifndef GPUCMDD_DRIVER_COMPILE_SANDBOX_H_
#define GPUCMDD_DRIVER_COMPILE_SANDBOX_H_

// Running a kernel compiler on hostile source, the same way for every driver: the host
// C++ compiler (CPU driver) and the compile helpers that wrap NVRTC and hiprtc (GPU
// drivers, driver/compile_helper.h) alike run in a process of their own, never in the
// daemon, in a private temporary directory, in a sandbox (Note [Sandbox] in
// base/sandbox.h) that lets them read only what their policy names and write only that
// directory, with each process held to an address-space limit and a CPU-time limit,
// and their whole process group killed at the time limit. A run that hits a limit is
// RESOURCE_EXHAUSTED naming it (DEADLINE_EXCEEDED stays for the client's own deadline).

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "base/sandbox.h"

namespace gpucmd {

struct CompileLimits {
  std::chrono::milliseconds timeout{60'000};
  uint64_t max_memory_bytes = uint64_t{2} << 30;  // address space of each process; 0: none
  size_t max_log_bytes = 64 << 10;
};

// A private directory for one compile, removed with everything in it when this goes.
class CompileDirectory {
 public:
  static absl::StatusOr<CompileDirectory> Create();
  CompileDirectory(CompileDirectory&& other) noexcept : path_(std::move(other.path_)) {}
  CompileDirectory& operator=(CompileDirectory&&) = delete;
  ~CompileDirectory();

  const std::string& path() const { return path_; }
  std::string PathOf(absl::string_view name) const;

 private:
  explicit CompileDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

struct CompilerRun {
  int exit_code = -1;
  std::string log;  // stdout and stderr, cut at max_log_bytes
};

// Runs `argv` in `directory`, sandboxed by `policy` plus write access to the directory,
// with `environment` ("NAME=value"; TMPDIR is the directory) and `limits`. NOT_FOUND
// when the program cannot be started; RESOURCE_EXHAUSTED naming the time, memory or
// CPU limit (a run out of memory is recognised by what compilers print then);
// UNIMPLEMENTED when the kernel cannot sandbox it (it does not run unconfined).
absl::StatusOr<CompilerRun> RunSandboxedCompiler(const std::vector<std::string>& argv,
                                                 const CompileDirectory& directory,
                                                 SandboxPolicy policy,
                                                 std::vector<std::string> environment,
                                                 const CompileLimits& limits,
                                                 absl::string_view entry);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_COMPILE_SANDBOX_H_

#ifndef GPUCMDD_BASE_SANDBOX_H_
#define GPUCMDD_BASE_SANDBOX_H_

// Note [Sandbox]
// ~~~~~~~~~~~~~~
// Processes that handle client code (the CPU driver's kernel executor, the host compiler
// and everything it starts) restrict themselves with Landlock before they touch it. The
// filesystem is then reachable only below the paths their policy names, each with the
// rights it grants (read, execute, write), so a kernel cannot open /etc/shadow or write
// a file, and `#include "/etc/passwd"` or `.incbin "/proc/self/environ"` fail to open.
// Where the kernel's Landlock is recent enough they also cannot signal a process outside
// their sandbox (the daemon: `kill(getppid(), SIGKILL)` is refused), connect to an
// abstract Unix socket outside it (ABI 6), or bind and connect TCP sockets (ABI 4).
// Landlock needs no privileges, holds across fork and exec, and cannot be lifted.
//
// A sandbox is prepared in the parent (opening the allowed paths) and enforced in the
// process to restrict: by the child between fork and exec (Enforce is async-signal-safe),
// or by a process on itself before it starts threads (Landlock binds the calling thread
// and what it creates afterwards).
//
// Thread-safety: a prepared sandbox is immutable; Enforce may run in any process that
// inherited it.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace gpucmd {

struct SandboxPolicy {
  // Below these, files may be read and directories listed.
  std::vector<std::string> read_only;
  // Below these, files may also be executed.
  std::vector<std::string> executable;
  // Below these, files and directories may also be created, written and removed.
  std::vector<std::string> read_write;
};

class Sandbox {
 public:
  // A ruleset for `policy`; paths that do not exist are left out. UNIMPLEMENTED when the
  // kernel has no Landlock.
  static absl::StatusOr<Sandbox> Prepare(const SandboxPolicy& policy);

  Sandbox(Sandbox&& other) noexcept : ruleset_fd_(other.ruleset_fd_), abi_(other.abi_) {
    other.ruleset_fd_ = -1;
  }
  Sandbox& operator=(Sandbox&&) = delete;
  Sandbox(const Sandbox&) = delete;
  ~Sandbox();

  // Restricts the calling thread, and every thread and process it creates from then on,
  // for good (no new privileges either). Async-signal-safe. Returns 0 or an errno value.
  int Enforce() const noexcept;

  // The Landlock ABI the ruleset uses (1 or more).
  int abi() const { return abi_; }

 private:
  Sandbox(int ruleset_fd, int abi) : ruleset_fd_(ruleset_fd), abi_(abi) {}

  int ruleset_fd_;
  int abi_;
};

// The kernel's Landlock ABI version; 0 when it has none.
int LandlockAbi();

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_SANDBOX_H_

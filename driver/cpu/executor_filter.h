#ifndef GPUCMDD_DRIVER_CPU_EXECUTOR_FILTER_H_
#define GPUCMDD_DRIVER_CPU_EXECUTOR_FILTER_H_

// The kernel executor's system-call allowlist (seccomp-bpf through libseccomp), the
// second wall of its sandbox after Landlock (Note [Sandbox] in base/sandbox.h). Kernels
// may compute, allocate and map memory, wait, read the clock, write to the executor's
// own descriptors, and open files read-only (Landlock decides which: the module
// directory and the system's libraries). Anything else kills the executor, so the launch
// fails like a device trap and the executor restarts: no process or thread creation, no
// exec, no sockets, no signals to other processes, no ptrace or access to other
// processes' memory, no identity or privilege changes, no mounts. No threads: one a
// kernel started would outlive its launch and run during later launches, when other
// sessions' buffers are open.
//
// Thread-safety: install once the executor's own threads run (its block workers); the
// filter binds every thread of the process.

#include "absl/status/status.h"

namespace gpucmd {

// Installs the filter on every thread for good. INTERNAL when the kernel refuses.
absl::Status InstallExecutorFilter();

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_CPU_EXECUTOR_FILTER_H_

#include "driver/cpu/executor_filter.h"

#include <fcntl.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace gpucmd {
namespace {

// System calls a kernel and the executor's own code may make with any arguments.
constexpr int kAllowed[] = {
    // Memory.
    SCMP_SYS(brk), SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mremap), SCMP_SYS(mprotect),
    SCMP_SYS(madvise), SCMP_SYS(membarrier),
    // Threads and waiting.
    SCMP_SYS(futex), SCMP_SYS(set_robust_list), SCMP_SYS(get_robust_list), SCMP_SYS(rseq),
    SCMP_SYS(sched_yield), SCMP_SYS(sched_getaffinity), SCMP_SYS(set_tid_address),
    SCMP_SYS(nanosleep), SCMP_SYS(clock_nanosleep), SCMP_SYS(poll), SCMP_SYS(ppoll),
    SCMP_SYS(restart_syscall),
    // Signals of its own.
    SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn),
    SCMP_SYS(sigaltstack),
    // Time, identity and randomness (read only).
    SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres), SCMP_SYS(gettimeofday), SCMP_SYS(time),
    SCMP_SYS(getpid), SCMP_SYS(gettid), SCMP_SYS(getppid), SCMP_SYS(getuid),
    SCMP_SYS(geteuid), SCMP_SYS(getgid), SCMP_SYS(getegid), SCMP_SYS(uname),
    SCMP_SYS(getrandom),
    // Its descriptors: the daemon's socket, stdout and stderr, modules it loads.
    SCMP_SYS(read), SCMP_SYS(write), SCMP_SYS(readv), SCMP_SYS(writev), SCMP_SYS(pread64),
    SCMP_SYS(recvfrom), SCMP_SYS(recvmsg), SCMP_SYS(sendto), SCMP_SYS(sendmsg),
    SCMP_SYS(close), SCMP_SYS(fstat), SCMP_SYS(newfstatat), SCMP_SYS(statx),
    SCMP_SYS(lseek), SCMP_SYS(fcntl), SCMP_SYS(access), SCMP_SYS(faccessat),
    SCMP_SYS(faccessat2), SCMP_SYS(readlink), SCMP_SYS(readlinkat), SCMP_SYS(getcwd),
    // The end.
    SCMP_SYS(exit), SCMP_SYS(exit_group),
};

struct ContextDeleter {
  void operator()(scmp_filter_ctx context) const { seccomp_release(context); }
};

absl::Status Check(int result, absl::string_view what) {
  if (result == 0) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("seccomp ", what, ": ", std::strerror(-result)));
}

}  // namespace

absl::Status InstallExecutorFilter() {
  std::unique_ptr<void, ContextDeleter> context(seccomp_init(SCMP_ACT_KILL_PROCESS));
  if (context == nullptr) return absl::InternalError("seccomp_init failed");
  scmp_filter_ctx filter = context.get();
  // Every thread of the process, not only the calling one.
  RETURN_IF_ERROR(Check(seccomp_attr_set(filter, SCMP_FLTATR_CTL_TSYNC, 1), "thread sync"));
  for (int call : kAllowed) {
    if (absl::Status added = Check(seccomp_rule_add(filter, SCMP_ACT_ALLOW, call, 0),
                                   absl::StrCat("allow ", call));
        !added.ok()) {
      return added;
    }
  }
  const pid_t self = getpid();
  struct Rule {
    int call;
    uint32_t action;
    scmp_arg_cmp condition;
    const char* what;
  };
  const Rule rules[] = {
      // Files open read-only (Landlock picks which).
      {SCMP_SYS(openat), SCMP_ACT_ALLOW, SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE, O_RDONLY),
       "read-only openat"},
      // Signals to itself only (abort, a failed assert).
      {SCMP_SYS(tgkill), SCMP_ACT_ALLOW, SCMP_A0(SCMP_CMP_EQ, static_cast<uint64_t>(self)),
       "tgkill of itself"},
      {SCMP_SYS(kill), SCMP_ACT_ALLOW, SCMP_A0(SCMP_CMP_EQ, static_cast<uint64_t>(self)),
       "kill of itself"},
      // Reading its own limits (thread creation does).
      {SCMP_SYS(prlimit64), SCMP_ACT_ALLOW, SCMP_A2(SCMP_CMP_EQ, 0), "prlimit64 reads"},
      // Naming its threads.
      {SCMP_SYS(prctl), SCMP_ACT_ALLOW, SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME), "prctl names"},
      {SCMP_SYS(prctl), SCMP_ACT_ALLOW, SCMP_A0(SCMP_CMP_EQ, PR_GET_NAME), "prctl names"},
  };
  for (const Rule& rule : rules) {
    if (absl::Status added =
            Check(seccomp_rule_add(filter, rule.action, rule.call, 1, rule.condition), rule.what);
        !added.ok()) {
      return added;
    }
  }
  // Answered, not fatal: glibc then tries clone, which is fatal; terminal queries on
  // stdout just find no terminal.
  if (absl::Status added =
          Check(seccomp_rule_add(filter, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0), "clone3");
      !added.ok()) {
    return added;
  }
  if (absl::Status added =
          Check(seccomp_rule_add(filter, SCMP_ACT_ERRNO(ENOTTY), SCMP_SYS(ioctl), 0), "ioctl");
      !added.ok()) {
    return added;
  }
  return Check(seccomp_load(filter), "load");
}

}  // namespace gpucmd

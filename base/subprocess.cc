#include "base/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace gpucmd {

absl::StatusOr<std::string> FindInPath(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    if (access(program.c_str(), X_OK) == 0) return program;
    return absl::NotFoundError(absl::StrCat(program, " is not executable"));
  }
  const char* path = std::getenv("PATH");
  for (absl::string_view directory :
       absl::StrSplit(path == nullptr ? "/usr/bin:/bin" : path, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(directory, "/", program);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::NotFoundError(absl::StrCat(program, " not found in PATH"));
}

namespace {

// Exit codes the child uses to report a failed set-up before exec.
constexpr int kSetupFailed = 126;
constexpr int kExecFailed = 127;

void SetLimit(int resource, uint64_t value) {
  if (value == 0) return;
  struct rlimit limit = {value, value};
  setrlimit(resource, &limit);
}

// In the child, between fork and exec: only async-signal-safe calls.
[[noreturn]] void StartChild(const char* program, char* const* argv, char* const* environment,
                             const char* directory, const char* output, int setup_pipe,
                             const ProcessLimits& limits) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  int in = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int out = open(output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (in < 0 || out < 0 || dup2(in, STDIN_FILENO) < 0 || dup2(out, STDOUT_FILENO) < 0 ||
      dup2(out, STDERR_FILENO) < 0 || chdir(directory) != 0) {
    _exit(kSetupFailed);
  }
  SetLimit(RLIMIT_AS, limits.address_space_bytes);
  SetLimit(RLIMIT_CPU, limits.cpu_seconds);
  if (limits.sandbox != nullptr) {
    int error = limits.sandbox->Enforce();
    if (error != 0) {
      (void)!write(setup_pipe, &error, sizeof(error));
      _exit(kSetupFailed);
    }
  }
  execve(program, argv, environment);
  int error = errno;
  (void)!write(setup_pipe, &error, sizeof(error));
  _exit(kExecFailed);
}

}  // namespace

absl::StatusOr<ProcessResult> RunProcess(const std::vector<std::string>& argv,
                                         const std::string& working_directory,
                                         const std::string& output_path,
                                         const ProcessLimits& limits) {
  absl::StatusOr<std::string> program = FindInPath(argv.at(0));
  if (!program.ok()) return program.status();
  std::vector<char*> raw;
  for (const std::string& arg : argv) raw.push_back(const_cast<char*>(arg.c_str()));
  raw.push_back(nullptr);
  std::vector<char*> environment;
  for (const std::string& entry : limits.environment) {
    environment.push_back(const_cast<char*>(entry.c_str()));
  }
  environment.push_back(nullptr);
  // The child reports why it could not start (an errno) through this pipe; exec closes
  // it otherwise.
  int setup[2];
  if (pipe2(setup, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", strerror(errno)));
  }
  pid_t pid = fork();
  if (pid < 0) {
    close(setup[0]);
    close(setup[1]);
    return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  }
  if (pid == 0) {
    StartChild(program->c_str(), raw.data(),
               limits.environment.empty() ? environ : environment.data(),
               working_directory.c_str(), output_path.c_str(), setup[1], limits);
  }
  setpgid(pid, pid);  // also here, so that the group exists before any kill below
  close(setup[1]);
  int child_error = 0;
  ssize_t reported = read(setup[0], &child_error, sizeof(child_error));
  close(setup[0]);
  auto deadline = std::chrono::steady_clock::now() + limits.timeout;
  int status = 0;
  auto pause = std::chrono::microseconds(200);
  bool timed_out = false;
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (std::chrono::steady_clock::now() >= deadline) {
      timed_out = true;
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      break;
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::microseconds(20000));
  }
  kill(-pid, SIGKILL);  // whatever it started and left behind goes with it
  if (reported == static_cast<ssize_t>(sizeof(child_error))) {
    if (WIFEXITED(status) && WEXITSTATUS(status) == kExecFailed) {
      return absl::NotFoundError(
          absl::StrCat("cannot start ", *program, ": ", strerror(child_error)));
    }
    return absl::InternalError(
        absl::StrCat("cannot confine ", *program, " to its sandbox: ", strerror(child_error)));
  }
  if (timed_out) {
    return absl::ResourceExhaustedError(absl::StrCat(
        argv[0], " ran past its ", limits.timeout.count(), " ms time limit and was killed"));
  }
  ProcessResult result;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  return result;
}

}  // namespace gpucmd

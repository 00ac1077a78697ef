#include "driver/cpu/kernel_executor.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "driver/cpu/executor_protocol.h"

extern char** environ;

namespace gpucmd {
namespace {

constexpr int kChildMemfd = 3;
constexpr int kChildSocket = 4;

// Lets each end of the executor's socket send the protocol's largest datagram
// (kExecutorSocketBufferBytes): the system's default buffer may be smaller.
absl::Status SizeSocketBuffers(const int sockets[2]) {
  for (int i = 0; i < 2; ++i) {
    int bytes = static_cast<int>(kExecutorSocketBufferBytes);
    setsockopt(sockets[i], SOL_SOCKET, SO_SNDBUF, &bytes, sizeof(bytes));
    int granted = 0;
    socklen_t length = sizeof(granted);
    if (getsockopt(sockets[i], SOL_SOCKET, SO_SNDBUF, &granted, &length) != 0 ||
        static_cast<size_t>(granted) < kExecutorSocketBufferBytes) {
      return absl::UnavailableError(absl::StrCat(
          "the kernel executor's socket needs send buffers of ", kExecutorSocketBufferBytes,
          " bytes; the system grants ", granted, " (raise net.core.wmem_max)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

KernelExecutor::~KernelExecutor() {
  MutexLock lock(&mutex_);
  StopLocked(/*kill_now=*/false);
}

int KernelExecutor::starts() const {
  MutexLock lock(&mutex_);
  return starts_;
}

absl::Status KernelExecutor::StartLocked() {
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sockets) != 0) {
    return absl::UnavailableError(absl::StrCat("socketpair: ", strerror(errno)));
  }
  if (absl::Status sized = SizeSocketBuffers(sockets); !sized.ok()) {
    close(sockets[0]);
    close(sockets[1]);
    return sized;
  }
  std::vector<std::string> argv = {options_.executor_path, std::to_string(kChildMemfd),
                                   std::to_string(kChildSocket),
                                   absl::StrCat(options_.base), absl::StrCat(options_.size_bytes),
                                   std::to_string(options_.workers), options_.module_directory,
                                   absl::StrCat(options_.memory_bytes),
                                   options_.identity ? absl::StrCat(options_.identity->uid) : "-",
                                   options_.identity ? absl::StrCat(options_.identity->gid) : "-"};
  std::vector<char*> raw;
  for (std::string& arg : argv) raw.push_back(arg.data());
  raw.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, options_.memfd, kChildMemfd);
  posix_spawn_file_actions_adddup2(&actions, sockets[1], kChildSocket);
  // A process group of its own: whatever a kernel starts is killed with the executor.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = -1;
  int error = posix_spawn(&pid, options_.executor_path.c_str(), &actions, &attributes,
                          raw.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  close(sockets[1]);
  if (error != 0) {
    close(sockets[0]);
    return absl::UnavailableError(absl::StrCat("cannot start the kernel executor ",
                                               options_.executor_path, ": ", strerror(error)));
  }
  pid_ = pid;
  live_pid_.store(pid);
  socket_ = sockets[0];
  ++starts_;
  return absl::OkStatus();
}

void KernelExecutor::Kill() {
  // The process group: what its kernels started goes with it. A launch waiting on it
  // sees it die and fails UNAVAILABLE; it is reaped by whoever holds the lock.
  if (const pid_t pid = live_pid_.load(); pid > 0) kill(-pid, SIGKILL);
}

std::string KernelExecutor::StopLocked(bool kill_now) {
  if (pid_ < 0) return "not running";
  close(socket_);
  socket_ = -1;
  if (kill_now) kill(-pid_, SIGKILL);
  int status = 0;
  pid_t reaped = 0;
  for (int i = 0; i < 50 && (reaped = waitpid(pid_, &status, WNOHANG)) == 0; ++i) usleep(1000);
  if (reaped == 0) {
    kill(-pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  }
  kill(-pid_, SIGKILL);  // what its kernels started goes with it
  live_pid_.store(-1);
  pid_ = -1;
  if (WIFSIGNALED(status)) {
    return absl::StrCat("signal ", WTERMSIG(status), " (", strsignal(WTERMSIG(status)), ")");
  }
  return absl::StrCat("exit status ", WEXITSTATUS(status));
}

namespace {

// Appends `request` to `datagram`, or says why it cannot be sent.
absl::Status AppendRequest(const KernelExecutor::Request& request, uint32_t reply_within_ms,
                           std::string& datagram) {
  if (request.args.size() > kMaxKernelArgs) {
    return absl::InvalidArgumentError(absl::StrCat("a kernel takes at most ", kMaxKernelArgs,
                                                   " arguments"));
  }
  if (request.buffers.size() > kMaxKernelArgs) {
    return absl::InvalidArgumentError("a launch passes at most one buffer per argument");
  }
  if (request.module_path->size() >= kMaxModulePathBytes) {
    return absl::InvalidArgumentError("kernel module path too long");
  }
  DeviceRange ranges[kMaxKernelArgs];
  for (size_t i = 0; i < request.buffers.size(); ++i) {
    ranges[i] = DeviceRange{request.buffers[i].address, request.buffers[i].size_bytes};
  }
  LaunchHeader header{};
  header.magic = kExecutorMagic;
  header.grid = request.grid;
  header.block = request.block;
  header.dynamic_shared_memory_bytes = request.dynamic_shared_memory_bytes;
  header.reply_within_ms = reply_within_ms;
  AppendLaunch(header, *request.module_path, request.args, {ranges, request.buffers.size()},
               datagram);
  return absl::OkStatus();
}

}  // namespace

absl::Status KernelExecutor::Launch(const std::string& module_path, KernelDim3 grid,
                                    KernelDim3 block, uint32_t dynamic_shared_memory_bytes,
                                    absl::Span<const uint64_t> args,
                                    absl::Span<const DeviceResource> buffers) {
  Request request{std::make_shared<const std::string>(module_path),
                  grid,
                  block,
                  dynamic_shared_memory_bytes,
                  {args.begin(), args.end()},
                  {buffers.begin(), buffers.end()}};
  return LaunchAll({&request, 1}).front().status;
}

std::vector<KernelExecutor::Result> KernelExecutor::LaunchAll(
    absl::Span<const Request> requests) {
  if (requests.size() <= kMaxPipelined) return LaunchPart(requests);
  std::vector<Result> results(requests.size());
  for (size_t first = 0; first < requests.size(); first += kMaxPipelined) {
    absl::Span<const Request> part = requests.subspan(first, kMaxPipelined);
    std::vector<Result> answered = LaunchPart(part);
    std::move(answered.begin(), answered.end(), results.begin() + first);
  }
  return results;
}

std::vector<KernelExecutor::Result> KernelExecutor::LaunchPart(
    absl::Span<const Request> requests) {
  std::vector<Result> results(requests.size());
  // The executor answers for earlier launches at least this often (see LaunchAll).
  const auto reply_within_ms = static_cast<uint32_t>(options_.reply_within.value_or(
      std::max(std::chrono::milliseconds(1), options_.kernel_timeout / 8)).count());
  std::string datagram;
  std::vector<size_t> sent;  // the request of each launch in the datagram
  sent.reserve(requests.size());
  for (size_t i = 0; i < requests.size(); ++i) {
    results[i].status = AppendRequest(requests[i], reply_within_ms, datagram);
    if (results[i].status.ok()) sent.push_back(i);
  }
  if (sent.empty()) return results;
  MutexLock lock(&mutex_);
  std::vector<Result> replies;
  replies.reserve(sent.size());
  // Once the executor is gone, the rest is not run.
  absl::Status lost = DeliverLocked(datagram.data(), datagram.size());
  while (lost.ok() && replies.size() < sent.size()) {
    lost = AwaitRepliesLocked(sent.size() - replies.size(), replies);
  }
  for (size_t k = 0; k < sent.size(); ++k) {
    results[sent[k]] = k < replies.size() ? std::move(replies[k]) : Result{lost, ""};
  }
  return results;
}

bool KernelExecutor::HungUpLocked() const {
  // Between launches the executor sends nothing: anything to read is the end of the
  // connection (or a broken executor).
  pollfd connection{socket_, POLLIN, 0};
  return poll(&connection, 1, 0) != 0;
}

absl::Status KernelExecutor::DeliverLocked(const void* message, size_t bytes) {
  absl::Status lost;
  // A send that fails delivered nothing, so an executor found dead at the send is
  // replaced once, as one found dead before it is.
  for (int attempt = 0; attempt < 2; ++attempt) {
    if (pid_ >= 0 && HungUpLocked()) StopLocked(/*kill_now=*/true);
    if (pid_ < 0) RETURN_IF_ERROR(StartLocked());
    if (send(socket_, message, bytes, MSG_NOSIGNAL) == static_cast<ssize_t>(bytes)) {
      return absl::OkStatus();
    }
    lost = absl::UnavailableError(
        absl::StrCat("the kernel executor died: ", StopLocked(/*kill_now=*/false)));
  }
  return lost;
}

absl::Status KernelExecutor::AwaitRepliesLocked(size_t expected, std::vector<Result>& results) {
  pollfd ready{socket_, POLLIN, 0};
  int polled = poll(&ready, 1, static_cast<int>(options_.kernel_timeout.count()));
  if (polled == 0) {
    StopLocked(/*kill_now=*/true);
    return absl::UnavailableError(absl::StrCat(
        "kernel ran past the ", options_.kernel_timeout.count(),
        " ms time limit; its executor was killed and restarts for the next launch"));
  }
  reply_buffer_.resize(kMaxReplyDatagramBytes);  // allocated once, kept
  const ssize_t received =
      polled < 0 ? -1 : recv(socket_, reply_buffer_.data(), reply_buffer_.size(), 0);
  parsed_replies_.clear();
  if (received <= 0 ||
      !ParseReplies({reinterpret_cast<const std::byte*>(reply_buffer_.data()),
                     static_cast<size_t>(received)},
                    expected, parsed_replies_)) {
    return absl::UnavailableError(absl::StrCat(
        "the kernel executor died during the launch: ", StopLocked(/*kill_now=*/false),
        "; it restarts for the next launch"));
  }
  for (const PackedReply& reply : parsed_replies_) {
    results.push_back(Result{absl::Status(static_cast<absl::StatusCode>(reply.code), reply.message),
                             std::string(reply.output)});
  }
  return absl::OkStatus();
}

}  // namespace gpucmd

#include "server/descriptor_socket.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/thread_name.h"
#include "server/core/shared_memory_object.h"
#include "server/rpc/peer_identity.h"

namespace gpucmd {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int kMaxDescriptorsPerMessage = 4;

void Reply(int connection, char kind, const std::string& text) {
  std::string message = std::string(1, kind) + text;
  send(connection, message.data(), message.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// Answers `refusal`: its kind (Note [Descriptor socket answers] in the header) and words.
void Refuse(int connection, const absl::Status& refusal) {
  char kind = kRefusedOther;
  if (refusal.code() == absl::StatusCode::kInvalidArgument) kind = kRefusedInvalid;
  if (refusal.code() == absl::StatusCode::kResourceExhausted) kind = kRefusedAtLimit;
  Reply(connection, kind, std::string(refusal.message()));
}

void Wake(int eventfd_descriptor) {
  const uint64_t one = 1;
  (void)!write(eventfd_descriptor, &one, sizeof(one));
}

// Milliseconds from `now` until `deadline`, rounded up; 0 once it passed.
int MillisecondsUntil(Clock::time_point deadline, Clock::time_point now) {
  if (deadline <= now) return 0;
  return static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(deadline - now).count());
}

}  // namespace

std::string DescriptorSocketPathFor(const std::string& grpc_socket_path) {
  return grpc_socket_path + ".fds";
}

absl::StatusOr<std::unique_ptr<DescriptorSocketServer>> DescriptorSocketServer::Start(
    DescriptorHandoffs* handoffs, Limits limits) {
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    return absl::UnavailableError(absl::StrCat("eventfd: ", std::strerror(errno)));
  }
  return std::unique_ptr<DescriptorSocketServer>(
      new DescriptorSocketServer(handoffs, limits, wake));
}

DescriptorSocketServer::DescriptorSocketServer(DescriptorHandoffs* handoffs, Limits limits,
                                               int wake)
    : handoffs_(handoffs), limits_(limits), wake_(wake), thread_([this] {
        NameThisThread("gpucmd-regions");
        Run();
      }) {}

DescriptorSocketServer::~DescriptorSocketServer() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
  }
  Wake(wake_);
  thread_.join();
  MutexLock lock(&mutex_);
  for (const Waiting& waiting : waiting_) close(waiting.connection);
  close(wake_);
}

void DescriptorSocketServer::Serve(int connection) {
  std::string user = IdentifyUnixPeer(connection).Key();
  if (TryAnswer(connection, user)) {
    close(connection);
    return;
  }
  absl::Status refusal;
  {
    MutexLock lock(&mutex_);
    const auto users_waiting = std::count_if(
        waiting_.begin(), waiting_.end(),
        [&user](const Waiting& waiting) { return waiting.user == user; });
    if (static_cast<size_t>(users_waiting) >= limits_.max_waiting_per_user) {
      refusal = absl::ResourceExhaustedError(absl::StrCat(
          "this user's ", users_waiting, " connections to the descriptor socket wait for ",
          "their message already (at most ", limits_.max_waiting_per_user,
          "): send it right after connecting"));
    } else if (waiting_.size() >= limits_.max_waiting) {
      refusal = absl::ResourceExhaustedError(absl::StrCat(
          waiting_.size(), " connections to the descriptor socket wait for their message ",
          "already (at most ", limits_.max_waiting, " from all users): try again"));
    } else if (stopping_) {
      refusal = absl::UnavailableError("the descriptor socket is stopping");
    } else {
      waiting_.push_back(Waiting{connection, std::move(user), Clock::now() + limits_.silence});
      Wake(wake_);
      return;
    }
  }
  Refuse(connection, refusal);
  close(connection);
}

bool DescriptorSocketServer::TryAnswer(int connection, const std::string& user) {
  char payload[64];
  iovec data{.iov_base = payload, .iov_len = sizeof(payload)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxDescriptorsPerMessage)];
  msghdr message{};
  message.msg_iov = &data;
  message.msg_iovlen = 1;
  message.msg_control = control;
  message.msg_controllen = sizeof(control);
  if (recvmsg(connection, &message, MSG_CMSG_CLOEXEC | MSG_DONTWAIT) < 0) {
    return errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
  }
  std::vector<int> received;
  for (cmsghdr* header = CMSG_FIRSTHDR(&message); header != nullptr;
       header = CMSG_NXTHDR(&message, header)) {
    if (header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (header->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(header) + i * sizeof(int), sizeof(int));
      received.push_back(fd);
    }
  }
  if (received.size() != 1 || (message.msg_flags & MSG_CTRUNC) != 0) {
    for (int fd : received) close(fd);
    Refuse(connection,
           absl::InvalidArgumentError("send exactly one descriptor (SCM_RIGHTS) per connection"));
    return true;
  }
  // Only what a region can be waits for its registration: anything else (a file on
  // disk, a pipe, a socket) is closed now rather than held under a token.
  if (absl::Status object = ExamineSharedMemoryObject(received.front()).status(); !object.ok()) {
    close(received.front());
    Refuse(connection, object);
    return true;
  }
  absl::StatusOr<std::string> token = handoffs_->Put(received.front(), user);
  if (!token.ok()) {
    Refuse(connection, token.status());
    return true;
  }
  Reply(connection, kToken, *token);
  Wake(wake_);  // Run's next wait ends when this handoff's lifetime does
  return true;
}

void DescriptorSocketServer::Run() {
  std::vector<pollfd> polled;
  while (true) {
    polled.assign(1, pollfd{.fd = wake_, .events = POLLIN, .revents = 0});
    const Clock::time_point next_expiry = handoffs_->CloseExpired();
    int timeout_ms =
        next_expiry == Clock::time_point::max() ? -1 : MillisecondsUntil(next_expiry, Clock::now());
    {
      MutexLock lock(&mutex_);
      if (stopping_) return;
      const Clock::time_point now = Clock::now();
      for (const Waiting& waiting : waiting_) {
        polled.push_back(pollfd{.fd = waiting.connection, .events = POLLIN, .revents = 0});
        const int left = MillisecondsUntil(waiting.deadline, now);
        timeout_ms = timeout_ms < 0 ? left : std::min(timeout_ms, left);
      }
    }
    if (poll(polled.data(), polled.size(), timeout_ms) < 0) {
      if (errno != EINTR) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      continue;
    }
    if (polled[0].revents != 0) {
      uint64_t wakes;
      (void)!read(wake_, &wakes, sizeof(wakes));
    }
    MutexLock lock(&mutex_);
    const Clock::time_point now = Clock::now();
    // Serve only appends: the first polled.size() - 1 connections are the ones polled.
    size_t kept = 0;
    for (size_t i = 0; i < waiting_.size(); ++i) {
      const bool readable = i + 1 < polled.size() && polled[i + 1].revents != 0;
      const bool done = (readable && TryAnswer(waiting_[i].connection, waiting_[i].user)) ||
                        waiting_[i].deadline <= now;
      if (done) {
        close(waiting_[i].connection);
        continue;
      }
      if (kept != i) waiting_[kept] = std::move(waiting_[i]);
      ++kept;
    }
    waiting_.resize(kept);
  }
}

}  // namespace gpucmd

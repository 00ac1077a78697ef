// The daemon under a service manager (Note [Service manager] in
// server/service_notifier.h): the test plays systemd's part, a datagram socket named by
// NOTIFY_SOCKET, and checks READY=1, STATUS=, the watchdog pings (withheld while a
// device thread is stuck) and STOPPING=1.

#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/mutex.h"
#include "client/client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/daemon_process.h"

namespace gpucmd {
namespace {

using ::gpucmd::testing::DaemonProcess;
using ::gpucmd::testing::ShortTempDir;
using ::testing::HasSubstr;
using Clock = std::chrono::steady_clock;

// A NOTIFY_SOCKET: collects every datagram the daemon sends, with when it came.
class NotifySocket {
 public:
  struct Message {
    Clock::time_point at;
    std::string text;
  };

  NotifySocket() : path_(ShortTempDir() + "/notify") {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::copy(path_.begin(), path_.end(), address.sun_path);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    const timeval poll_interval{.tv_sec = 0, .tv_usec = 100'000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &poll_interval, sizeof(poll_interval));
    receiver_ = std::thread([this] {
      char buffer[4096];
      while (!stopping_) {
        const ssize_t size = recv(fd_, buffer, sizeof(buffer), 0);
        if (size <= 0) continue;
        MutexLock lock(&mutex_);
        messages_.push_back({Clock::now(), std::string(buffer, static_cast<size_t>(size))});
      }
    });
  }
  ~NotifySocket() {
    stopping_ = true;
    receiver_.join();
    close(fd_);
  }

  const std::string& path() const { return path_; }

  std::vector<Message> messages() const {
    MutexLock lock(&mutex_);
    return messages_;
  }

  // Waits up to `limit` for a message containing `text`.
  bool AwaitMessage(const std::string& text, std::chrono::seconds limit) const {
    const auto end = Clock::now() + limit;
    while (Clock::now() < end) {
      for (const Message& message : messages()) {
        if (absl::StrContains(message.text, text)) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  const std::string path_;
  int fd_ = -1;
  std::atomic<bool> stopping_{false};
  mutable Mutex mutex_;
  std::vector<Message> messages_ ABSL_GUARDED_BY(mutex_);
  std::thread receiver_;
};

// The longest time between two watchdog pings among `messages`.
std::chrono::milliseconds LongestPingGap(const std::vector<NotifySocket::Message>& messages) {
  std::chrono::milliseconds longest{0};
  std::optional<Clock::time_point> last;
  for (const NotifySocket::Message& message : messages) {
    if (!absl::StrContains(message.text, "WATCHDOG=1")) continue;
    if (last) {
      longest = std::max(longest,
                         std::chrono::duration_cast<std::chrono::milliseconds>(message.at - *last));
    }
    last = message.at;
  }
  return longest;
}

// The id of the thread of process `pid` named `name`; -1 when there is none.
pid_t ThreadNamed(pid_t pid, const std::string& name) {
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"))) {
    std::string comm;
    std::getline(std::ifstream(task.path() / "comm"), comm);
    if (comm == name) return static_cast<pid_t>(std::stol(task.path().filename().string()));
  }
  return -1;
}

TEST(SystemdTest, ReadyStatusWatchdogWithheldWhileADeviceIsStuckAndStopping) {
  NotifySocket notify;
  // The daemon inherits the environment at its start; the watchdog interval is 1 s.
  setenv("NOTIFY_SOCKET", notify.path().c_str(), 1);
  setenv("WATCHDOG_USEC", "1000000", 1);
  unsetenv("WATCHDOG_PID");
  absl::StatusOr<DaemonProcess> daemon = DaemonProcess::StartWithConfig(
      "cpu { memory_bytes_per_device: 268435456 }\n"
      "compile { cache_dir: \"{dir}/cache\" }\n");
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  ASSERT_TRUE(notify.AwaitMessage("READY=1", std::chrono::seconds(10)));
  EXPECT_THAT(notify.messages().front().text, HasSubstr("STATUS=1/1 devices ready, 0 sessions"));

  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon->grpc_target());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Session> session = (*client)->OpenSession(0, "stall");
  ASSERT_TRUE(session.ok()) << session.status();
  ASSERT_TRUE(notify.AwaitMessage("STATUS=1/1 devices ready, 1 sessions", std::chrono::seconds(10)));
  ASSERT_TRUE(notify.AwaitMessage("WATCHDOG=1", std::chrono::seconds(10)));

  // The device thread gets stuck, as in a driver call that hangs: stopped alone, by
  // ptrace (the daemon gives clients no way to block it), with an Allocate queued for it.
  const pid_t device_thread = ThreadNamed(daemon->pid(), "gpucmd-device0");
  ASSERT_GT(device_thread, 0) << "no device thread";
  ASSERT_EQ(ptrace(PTRACE_SEIZE, device_thread, nullptr, nullptr), 0) << std::strerror(errno);
  ASSERT_EQ(ptrace(PTRACE_INTERRUPT, device_thread, nullptr, nullptr), 0) << std::strerror(errno);
  int stop_status = 0;
  ASSERT_EQ(waitpid(device_thread, &stop_status, __WALL), device_thread) << std::strerror(errno);
  absl::Status allocated = absl::UnknownError("not answered");
  std::thread allocates([&] { allocated = session->Allocate(4096).status(); });
  std::this_thread::sleep_for(std::chrono::seconds(3));
  ASSERT_EQ(ptrace(PTRACE_DETACH, device_thread, nullptr, nullptr), 0) << std::strerror(errno);
  allocates.join();
  EXPECT_TRUE(allocated.ok()) << allocated;
  const auto unstuck = Clock::now();
  // Pings come again once the device moves.
  while (Clock::now() - unstuck < std::chrono::seconds(10)) {
    std::vector<NotifySocket::Message> messages = notify.messages();
    if (absl::StrContains(messages.back().text, "WATCHDOG=1") && messages.back().at > unstuck) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_GT(notify.messages().back().at, unstuck) << "the pings did not come back";
  EXPECT_GE(LongestPingGap(notify.messages()), std::chrono::milliseconds(1500))
      << "pings went on while the device thread was stuck";
  EXPECT_THAT(daemon->StderrText(), HasSubstr("withholding pings: device 0"));

  EXPECT_EQ(daemon->Stop(SIGTERM), 0);
  EXPECT_TRUE(notify.AwaitMessage("STOPPING=1", std::chrono::seconds(1)));
}

// Without a service manager nothing is sent, and the daemon serves as before.
TEST(SystemdTest, WithoutNotifySocketNothingIsSent) {
  unsetenv("NOTIFY_SOCKET");
  absl::StatusOr<DaemonProcess> daemon = DaemonProcess::StartWithConfig("");
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_THAT(daemon->StderrText(), ::testing::Not(HasSubstr("watchdog")));
  EXPECT_EQ(daemon->Stop(SIGTERM), 0);
}

// Socket activation (gpucmdd.socket): the service manager (here systemd-socket-activate)
// binds the socket and passes it (LISTEN_FDS). A client that connects before the
// daemon is up waits in the backlog and is served; the daemon serves the passed socket
// (the same inode), binds the descriptor socket beside it itself, and leaves the passed
// socket in place when it exits.
TEST(SystemdTest, SocketActivationServesThePassedSocket) {
  const std::string directory = ShortTempDir();
  const std::string path = directory + "/activated.sock";
  std::atomic<ino_t> early_inode{0};
  absl::Status early_call = absl::UnknownError("no call");
  std::thread early_client([&] {
    struct stat info;
    for (int i = 0; i < 4000 && stat(path.c_str(), &info) != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    early_inode = info.st_ino;
    absl::StatusOr<std::unique_ptr<Client>> client =
        Client::Connect("unix:" + path, {.connect_timeout = std::chrono::seconds(30)});
    early_call = client.ok() ? (*client)->ListDevices().status() : client.status();
  });
  absl::StatusOr<DaemonProcess> daemon = DaemonProcess::StartThrough(
      {"/usr/bin/systemd-socket-activate", "-l", path},
      {"--listen=unix:" + path, "--http_listen=127.0.0.1:0"});
  early_client.join();
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  EXPECT_TRUE(early_call.ok()) << early_call;
  struct stat info;
  ASSERT_EQ(stat(path.c_str(), &info), 0);
  EXPECT_EQ(info.st_ino, early_inode.load()) << "the daemon bound a socket of its own";
  EXPECT_EQ(stat((path + ".fds").c_str(), &info), 0) << "the descriptor socket is beside it";
  EXPECT_THAT(daemon->StderrText(), ::testing::Not(HasSubstr("no listen address names")));

  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(daemon->grpc_target());
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<v1::ListSessionsResponse> sessions = (*client)->ListSessions();
  ASSERT_TRUE(sessions.ok()) << sessions.status();
  EXPECT_EQ(sessions->caller(), absl::StrCat("uid:", geteuid())) << "peers are known";

  EXPECT_EQ(daemon->Stop(SIGTERM), 0);
  EXPECT_EQ(stat(path.c_str(), &info), 0) << "the manager's socket stays";
  EXPECT_NE(stat((path + ".fds").c_str(), &info), 0) << "the daemon's own is removed";
}

}  // namespace
}  // namespace gpucmd

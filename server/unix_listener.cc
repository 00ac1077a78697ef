#include "server/unix_listener.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/thread_name.h"

namespace gpucmd {

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::Bind(const std::string& path,
                                                                 int type, Handler handler) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("socket path too long: ", path));
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  const int listener = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
  if (listener < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  const mode_t umask_before = umask(0177);
  const int bound = bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  umask(umask_before);
  if (bound != 0 || listen(listener, SOMAXCONN) != 0) {
    const int error = errno;
    close(listener);
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", path, ": ", std::strerror(error)));
  }
  return Serve(listener, path, /*owns_path=*/true, std::move(handler));
}

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::Adopt(int listener,
                                                                  const std::string& path,
                                                                  Handler handler) {
  fcntl(listener, F_SETFD, FD_CLOEXEC);
  return Serve(listener, path, /*owns_path=*/false, std::move(handler));
}

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::Serve(int listener,
                                                                  const std::string& path,
                                                                  bool owns_path,
                                                                  Handler handler) {
  int stop[2];
  if (pipe2(stop, O_CLOEXEC) != 0) {
    const int error = errno;
    close(listener);
    if (owns_path) unlink(path.c_str());
    return absl::UnavailableError(absl::StrCat("pipe2: ", std::strerror(error)));
  }
  return std::unique_ptr<UnixListener>(
      new UnixListener(listener, path, owns_path, stop[0], stop[1], std::move(handler)));
}

UnixListener::UnixListener(int listener, std::string path, bool owns_path, int stop_read,
                           int stop_write, Handler handler)
    : listener_(listener),
      path_(std::move(path)),
      owns_path_(owns_path),
      stop_read_(stop_read),
      stop_write_(stop_write),
      handler_(std::move(handler)),
      thread_([this] {
        NameThisThread("gpucmd-accept");
        Accept();
      }) {}

void UnixListener::Stop() {
  if (!thread_.joinable()) return;
  close(stop_write_);  // the accepting thread sees the pipe's end
  thread_.join();
}

UnixListener::~UnixListener() {
  Stop();
  close(stop_read_);
  close(listener_);
  if (owns_path_) unlink(path_.c_str());
}

void UnixListener::Accept() {
  while (true) {
    pollfd ready[2] = {{.fd = listener_, .events = POLLIN, .revents = 0},
                       {.fd = stop_read_, .events = POLLIN, .revents = 0}};
    if (poll(ready, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (ready[1].revents != 0) return;
    const int connection = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    if (connection < 0) {
      // Out of descriptors: back off rather than spin on a listener that stays readable.
      if (errno == EMFILE || errno == ENFILE) poll(ready + 1, 1, 100);
      continue;
    }
    handler_(connection);
  }
}

}  // namespace gpucmd

#ifndef GPUCMDD_BASE_SCOPED_FD_H_
#define GPUCMDD_BASE_SCOPED_FD_H_

// A file descriptor closed when the ScopedFd goes (negative: none).
//
// Thread-safety: owned by one thread at a time.

#include <unistd.h>

#include <utility>

namespace gpucmd {

class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ScopedFd(ScopedFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  ScopedFd& operator=(ScopedFd&&) = delete;
  ~ScopedFd() {
    if (fd_ >= 0) close(fd_);
  }

  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_SCOPED_FD_H_

#include "base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "base/scoped_fd.h"

namespace gpucmd {

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

absl::StatusOr<std::string> ReadRegularFile(const std::string& path, uint64_t max_bytes) {
  const ScopedFd file(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (file.get() < 0) {
    const std::string message = absl::StrCat(path, ": cannot read: ", strerror(errno));
    return errno == EACCES ? absl::PermissionDeniedError(message)
                           : absl::NotFoundError(message);
  }
  struct stat status;
  if (fstat(file.get(), &status) != 0 || !S_ISREG(status.st_mode)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": not a regular file (a directory, a device or a pipe?)"));
  }
  const auto too_big = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": holds more than ", max_bytes, " bytes"));
  };
  if (static_cast<uint64_t>(status.st_size) > max_bytes) return too_big();
  std::string contents;
  char chunk[65536];
  while (true) {
    const ssize_t got = read(file.get(), chunk, sizeof(chunk));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      return absl::InternalError(absl::StrCat(path, ": cannot read: ", strerror(errno)));
    }
    if (got == 0) return contents;
    if (contents.size() + static_cast<uint64_t>(got) > max_bytes) return too_big();
    contents.append(chunk, static_cast<size_t>(got));
  }
}

absl::Status WriteFileAtomically(const std::string& path, absl::string_view contents) {
  std::string temporary = absl::StrCat(path, ".tmp.", getpid());
  {
    std::ofstream file(temporary, std::ios::binary);
    file.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    if (!file) {
      std::remove(temporary.c_str());
      return absl::InternalError(absl::StrCat("cannot write ", temporary));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return absl::InternalError(absl::StrCat("cannot store ", path));
  }
  return absl::OkStatus();
}

}  // namespace gpucmd

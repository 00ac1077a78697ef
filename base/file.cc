#include "base/file.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace gpucmd {

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
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

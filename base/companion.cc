#include "base/companion.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpucmd {

std::string SelfPath() {
  char path[4096];
  ssize_t length = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return std::string(path, std::max<ssize_t>(length, 0));
}

absl::StatusOr<std::string> FindCompanionProgram(const std::string& name,
                                                 const std::string& package,
                                                 const std::string& daemon_path) {
  namespace fs = std::filesystem;
  fs::path daemon(daemon_path);
  std::vector<fs::path> candidates = {
      daemon.parent_path() / name,
      daemon.parent_path() / ".." / package / name,
      fs::path(daemon_path + ".runfiles") / "gpucmdd" / package / name,
  };
  std::vector<std::string> tried;
  for (const fs::path& candidate : candidates) {
    if (access(candidate.c_str(), X_OK) == 0) return fs::weakly_canonical(candidate).string();
    tried.push_back(candidate.string());
  }
  return absl::NotFoundError(
      absl::StrCat(name, " not found (tried ", absl::StrJoin(tried, ", "), ")"));
}

}  // namespace gpucmd

#include "tests/testing/process_census.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "base/file.h"

namespace gpucmd::testing {
namespace {

bool AnyProcessMatches(const std::string& marker) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (!std::all_of(name.begin(), name.end(), absl::ascii_isdigit)) continue;
    // A process that ends meanwhile reads as empty.
    std::string command_line = ReadFileOrEmpty(entry.path().string() + "/cmdline");
    std::replace(command_line.begin(), command_line.end(), '\0', ' ');
    if (absl::StrContains(command_line, marker)) return true;
  }
  return false;
}

}  // namespace

bool NoProcessMatches(const std::string& marker) {
  for (int i = 0; i < 100; ++i) {
    if (!AnyProcessMatches(marker)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace gpucmd::testing

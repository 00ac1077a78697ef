#include "tests/testing/process_census.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "base/file.h"

namespace gpucmd::testing {
namespace {

// Calls `visit(process_directory, command_line)` for each running process, its command
// line's arguments joined by spaces, until `visit` returns true; returns whether one did.
template <typename Visit>
bool AnyProcess(Visit visit) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", error)) {
    const std::string name = entry.path().filename().string();
    if (!std::all_of(name.begin(), name.end(), absl::ascii_isdigit)) continue;
    // A process that ends meanwhile reads as empty.
    std::string command_line = ReadFileOrEmpty(entry.path().string() + "/cmdline");
    std::replace(command_line.begin(), command_line.end(), '\0', ' ');
    if (visit(entry.path(), command_line)) return true;
  }
  return false;
}

bool AnyProcessMatches(const std::string& marker) {
  return AnyProcess([&marker](const std::filesystem::path&, const std::string& command_line) {
    return absl::StrContains(command_line, marker);
  });
}

// The parent in /proc/PID/stat ("pid (name) state ppid ..."; the name may hold spaces
// and parentheses, so it is read from the last ')'); -1 when it cannot be read.
pid_t ParentOf(const std::filesystem::path& process) {
  const std::string stat = ReadFileOrEmpty((process / "stat").string());
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return -1;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(name_end + 1), ' ', absl::SkipEmpty());
  int parent = -1;
  if (fields.size() < 2 || !absl::SimpleAtoi(fields[1], &parent)) return -1;
  return parent;
}

}  // namespace

bool NoProcessMatches(const std::string& marker) {
  for (int i = 0; i < 100; ++i) {
    if (!AnyProcessMatches(marker)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::vector<pid_t> ThreadsOfChildrenMatching(pid_t parent, const std::string& marker) {
  std::vector<pid_t> threads;
  AnyProcess([&](const std::filesystem::path& process, const std::string& command_line) {
    if (!absl::StrContains(command_line, marker) || ParentOf(process) != parent) return false;
    std::error_code error;
    for (const auto& task : std::filesystem::directory_iterator(process / "task", error)) {
      int thread = 0;
      if (absl::SimpleAtoi(task.path().filename().string(), &thread)) threads.push_back(thread);
    }
    return false;
  });
  return threads;
}

ProcessUsage UsageOf(pid_t pid) {
  const std::string stat = ReadFileOrEmpty("/proc/" + std::to_string(pid) + "/stat");
  // After the command name, which ends with the last ')', come the state (field 3), minflt
  // (10), utime (14) and stime (15), the times in clock ticks.
  const size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return {};
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(name_end + 2), ' ');
  uint64_t minor_faults = 0, user_ticks = 0, system_ticks = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[10 - 3], &minor_faults) ||
      !absl::SimpleAtoi(fields[14 - 3], &user_ticks) ||
      !absl::SimpleAtoi(fields[15 - 3], &system_ticks)) {
    return {};
  }
  const double ticks_per_second = static_cast<double>(sysconf(_SC_CLK_TCK));
  return {.minor_faults = minor_faults,
          .cpu_seconds = static_cast<double>(user_ticks + system_ticks) / ticks_per_second};
}

std::map<pid_t, std::string> ThreadNamesOf(pid_t process) {
  std::map<pid_t, std::string> names;
  std::error_code error;
  for (const std::filesystem::directory_entry& task : std::filesystem::directory_iterator(
           "/proc/" + std::to_string(process) + "/task", error)) {
    int thread = 0;
    if (!absl::SimpleAtoi(task.path().filename().string(), &thread)) continue;
    std::string name = ReadFileOrEmpty((task.path() / "comm").string());
    if (absl::EndsWith(name, "\n")) name.pop_back();
    names[thread] = std::move(name);
  }
  return names;
}

int ThreadsNamed(pid_t process, const std::string& name) {
  int threads = 0;
  for (const auto& [unused, thread_name] : ThreadNamesOf(process)) {
    threads += thread_name == name ? 1 : 0;
  }
  return threads;
}

int MostThreadsNamedDuring(pid_t process, const std::string& name,
                           std::vector<absl::AnyInvocable<void()>> calls) {
  int most = ThreadsNamed(process, name);
  std::atomic<size_t> returned = 0;
  std::vector<std::thread> callers;
  for (absl::AnyInvocable<void()>& call : calls) {
    callers.emplace_back([&call, &returned] {
      call();
      ++returned;
    });
  }
  while (returned.load() < calls.size()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    most = std::max(most, ThreadsNamed(process, name));
  }
  for (std::thread& caller : callers) caller.join();
  return most;
}

}  // namespace gpucmd::testing

#ifndef GPUCMDD_TESTS_TESTING_PROCESS_CENSUS_H_
#define GPUCMDD_TESTS_TESTING_PROCESS_CENSUS_H_

// Processes a test started (or had started), found by their command lines in /proc:
// whether they are gone, which threads they run and what they are named, and what they
// have used.
//
// Thread-safety: none needed; it reads /proc only.

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/functional/any_invocable.h"

namespace gpucmd::testing {

// True once no process whose command line (its arguments joined by spaces) contains
// `marker` runs, waiting up to 5 s: a process killed a moment ago may still be on its
// way out. A zombie has no command line, so it does not count.
bool NoProcessMatches(const std::string& marker);

// The thread ids of the running children of `parent` whose command line contains
// `marker`.
std::vector<pid_t> ThreadsOfChildrenMatching(pid_t parent, const std::string& marker);

// What a process has used so far: minor page faults, and CPU seconds (user and system,
// all its threads, not its children).
struct ProcessUsage {
  uint64_t minor_faults = 0;
  double cpu_seconds = 0;
};
// From /proc/PID/stat; zeros when it cannot be read.
ProcessUsage UsageOf(pid_t pid);

// The names of `process`'s threads, by thread id (/proc/PID/task/TID/comm); none when it
// cannot be read.
std::map<pid_t, std::string> ThreadNamesOf(pid_t process);
// How many of `process`'s threads are named `name`.
int ThreadsNamed(pid_t process, const std::string& name);
// Runs each of `calls` on a thread of its own and returns once all returned: the most
// threads of `process` named `name` at once meanwhile, counted every 20 ms.
int MostThreadsNamedDuring(pid_t process, const std::string& name,
                           std::vector<absl::AnyInvocable<void()>> calls);

}  // namespace gpucmd::testing

#endif  // GPUCMDD_TESTS_TESTING_PROCESS_CENSUS_H_

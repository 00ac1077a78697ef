#ifndef GPUCMDD_TESTS_TESTING_PROCESS_CENSUS_H_
#define GPUCMDD_TESTS_TESTING_PROCESS_CENSUS_H_

// Processes a test started (or had started), found by their command lines in /proc:
// whether they are gone, and which threads they run.
//
// Thread-safety: none needed; it reads /proc only.

#include <sys/types.h>

#include <string>
#include <vector>

namespace gpucmd::testing {

// True once no process whose command line (its arguments joined by spaces) contains
// `marker` runs, waiting up to 5 s: a process killed a moment ago may still be on its
// way out. A zombie has no command line, so it does not count.
bool NoProcessMatches(const std::string& marker);

// The thread ids of the running children of `parent` whose command line contains
// `marker`.
std::vector<pid_t> ThreadsOfChildrenMatching(pid_t parent, const std::string& marker);

}  // namespace gpucmd::testing

#endif  // GPUCMDD_TESTS_TESTING_PROCESS_CENSUS_H_

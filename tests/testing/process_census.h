#ifndef GPUCMDD_TESTS_TESTING_PROCESS_CENSUS_H_
#define GPUCMDD_TESTS_TESTING_PROCESS_CENSUS_H_

// Whether processes a test started (or had started) are gone, found by their command
// lines in /proc.
//
// Thread-safety: none needed; it reads /proc only.

#include <string>

namespace gpucmd::testing {

// True once no process whose command line (its arguments joined by spaces) contains
// `marker` runs, waiting up to 5 s: a process killed a moment ago may still be on its
// way out. A zombie has no command line, so it does not count.
bool NoProcessMatches(const std::string& marker);

}  // namespace gpucmd::testing

#endif  // GPUCMDD_TESTS_TESTING_PROCESS_CENSUS_H_

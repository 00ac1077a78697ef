#ifndef GPUCMDD_BASE_THREAD_NAME_H_
#define GPUCMDD_BASE_THREAD_NAME_H_

// Names the daemon's threads for operators and profilers: `top -H`, `ps -L`,
// perf and gdb show a thread's name (its `comm`), so "gpucmd-stream-2" tells
// which of the daemon's threads spends the time where an unnamed one reads
// "gpucmdd".
//
// Thread-safety: names the calling thread only.

#include <string>
#include <string_view>

namespace gpucmd {

// The longest name Linux keeps, in bytes (without its terminating NUL).
inline constexpr size_t kMaxThreadNameBytes = 15;

// Names the calling thread `name`, cut to kMaxThreadNameBytes. A name the
// system refuses leaves the thread as it was: a name is a diagnostic, never a
// reason to fail.
void NameThisThread(std::string_view name);

// The calling thread's name ("" where the system does not say).
std::string NameOfThisThread();

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_THREAD_NAME_H_

#include "server/restart_request.h"

#include <unistd.h>

namespace gpucmd {
namespace {

// The value RequestRestart's signal carries.
constexpr int kRestartMark = 0x67707572;  // "gpur"

}  // namespace

void RequestRestart() {
  sigval value{};
  value.sival_int = kRestartMark;
  sigqueue(getpid(), SIGTERM, value);
}

bool IsRestartRequest(const siginfo_t& info) {
  return info.si_signo == SIGTERM && info.si_code == SI_QUEUE && info.si_pid == getpid() &&
         info.si_value.sival_int == kRestartMark;
}

}  // namespace gpucmd

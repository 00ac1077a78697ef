#include "base/lock_order_checks.h"

#include "absl/synchronization/mutex.h"

namespace gpucmd {

void StopAbseilLockOrderChecks() {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
}

}  // namespace gpucmd

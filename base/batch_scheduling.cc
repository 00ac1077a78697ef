#include "base/batch_scheduling.h"

#include <sched.h>

namespace gpucmd {

bool ScheduleThisThreadAsBatchWork() {
  const sched_param no_priority{};  // SCHED_BATCH takes priority 0
  return sched_setscheduler(0, SCHED_BATCH, &no_priority) == 0;
}

}  // namespace gpucmd

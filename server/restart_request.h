#ifndef GPUCMDD_SERVER_RESTART_REQUEST_H_
#define GPUCMDD_SERVER_RESTART_REQUEST_H_

// Note [Restart after a device loss]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A device lost for good (Note [Device loss] in server/core/device_worker.h) comes back
// only in a new process. Unless keep_lost_devices_down is set, the daemon then restarts:
// its device worker calls RequestRestart, main drains the daemon as on SIGTERM (every
// session hears UNAVAILABLE naming the loss meanwhile) and exits with kRestartExitCode,
// and the service manager starts it again: the systemd unit's Restart=on-failure, a
// Kubernetes pod's restart policy. Sessions end with the process, as at any restart;
// clients reconnect and open new ones. The request reaches main's sigwaitinfo as a
// SIGTERM the daemon queues to itself with a value, which tells it from an operator's.
//
// Thread-safety: RequestRestart may be called from any thread, also more than once.

#include <csignal>

namespace gpucmd {

// EX_TEMPFAIL: a failure that a restart mends.
inline constexpr int kRestartExitCode = 75;

// Asks main to drain the daemon and exit with kRestartExitCode.
void RequestRestart();

// Whether `info` (from sigwaitinfo) is RequestRestart's signal.
bool IsRestartRequest(const siginfo_t& info);

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_RESTART_REQUEST_H_

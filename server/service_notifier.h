#ifndef GPUCMDD_SERVER_SERVICE_NOTIFIER_H_
#define GPUCMDD_SERVER_SERVICE_NOTIFIER_H_

// Note [Service manager]
// ~~~~~~~~~~~~~~~~~~~~~~
// Under systemd (Type=notify: NOTIFY_SOCKET is set) the daemon says how it is doing
// through sd_notify: READY=1 once every device is initialised and the listeners are
// bound (with a first STATUS=); STATUS= every few seconds (devices ready, sessions,
// queued commands); STOPPING=1 when the drain starts. With WatchdogSec= (WATCHDOG_USEC),
// WATCHDOG=1 goes out every half interval, but only while the daemon makes progress:
// every device thread (none has held its device for the whole interval:
// DeviceWorker::MakesProgress) and the gRPC server (a health check through its
// in-process channel answers within half the interval). A wedged device thread or
// server thus stops the pings, and systemd restarts the daemon. Outside systemd
// nothing is sent and no thread runs.
//
// Thread-safety: Ready and Stopping are called by the thread that owns the notifier;
// the probes run on its own thread.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "base/mutex.h"

namespace gpucmd {

class ServiceNotifier {
 public:
  struct Probes {
    // The STATUS= text, e.g. "1/1 devices ready, 3 sessions, 0 queued commands".
    std::function<std::string()> status;
    // Empty when the daemon makes progress within `within`; else what does not.
    std::function<std::string(std::chrono::steady_clock::duration within)> stalled;
  };

  // How often STATUS= is refreshed.
  static constexpr std::chrono::seconds kStatusInterval{2};

  // A notifier for the service manager of this process, or nullptr when there is none
  // (NOTIFY_SOCKET unset).
  static std::unique_ptr<ServiceNotifier> FromEnvironment(Probes probes);
  ~ServiceNotifier();
  ServiceNotifier(const ServiceNotifier&) = delete;
  ServiceNotifier& operator=(const ServiceNotifier&) = delete;

  // READY=1 with the first status; starts the status and watchdog thread.
  void Ready();
  // STOPPING=1; stops the thread (no more status or watchdog pings).
  void Stopping();

 private:
  ServiceNotifier(Probes probes, std::chrono::microseconds watchdog);
  void Run();

  const Probes probes_;
  const std::chrono::microseconds watchdog_;  // 0: no watchdog
  Mutex mutex_;
  CondVar stop_requested_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::thread thread_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_SERVICE_NOTIFIER_H_

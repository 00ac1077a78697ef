#include "server/service_notifier.h"

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "base/thread_name.h"
#include "spdlog/spdlog.h"

namespace gpucmd {

std::unique_ptr<ServiceNotifier> ServiceNotifier::FromEnvironment(Probes probes) {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  if (socket == nullptr || *socket == '\0') return nullptr;
  uint64_t watchdog_usec = 0;
  if (sd_watchdog_enabled(/*unset_environment=*/0, &watchdog_usec) <= 0) watchdog_usec = 0;
  return std::unique_ptr<ServiceNotifier>(
      new ServiceNotifier(std::move(probes), std::chrono::microseconds(watchdog_usec)));
}

ServiceNotifier::ServiceNotifier(Probes probes, std::chrono::microseconds watchdog)
    : probes_(std::move(probes)), watchdog_(watchdog) {}

ServiceNotifier::~ServiceNotifier() { Stopping(); }

void ServiceNotifier::Ready() {
  sd_notify(0, absl::StrCat("READY=1\nSTATUS=", probes_.status()).c_str());
  if (watchdog_.count() > 0) {
    spdlog::info("systemd watchdog: a ping every {} ms while every device makes progress",
                 watchdog_.count() / 2000);
  }
  thread_ = std::thread([this] {
    NameThisThread("gpucmd-notify");
    Run();
  });
}

void ServiceNotifier::Stopping() {
  {
    MutexLock lock(&mutex_);
    if (stopping_) return;
    stopping_ = true;
    stop_requested_.NotifyAll();
  }
  sd_notify(0, "STOPPING=1\nSTATUS=draining");
  if (thread_.joinable()) thread_.join();
}

void ServiceNotifier::Run() {
  using Clock = std::chrono::steady_clock;
  const Clock::duration tick =
      watchdog_.count() > 0
          ? std::min<Clock::duration>(kStatusInterval, watchdog_ / 2)
          : Clock::duration(kStatusInterval);
  Clock::time_point next_status = Clock::now() + kStatusInterval;
  bool withholding = false;
  while (true) {
    {
      MutexLock lock(&mutex_);
      if (stop_requested_.AwaitUntil(&mutex_, Clock::now() + tick,
                                     [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
                                       return stopping_;
                                     })) {
        return;
      }
    }
    if (watchdog_.count() > 0) {
      const std::string stalled = probes_.stalled(watchdog_);
      if (stalled.empty()) {
        sd_notify(0, "WATCHDOG=1");
        if (withholding) spdlog::info("systemd watchdog: progress again, pinging");
        withholding = false;
      } else if (!withholding) {
        spdlog::error("systemd watchdog: withholding pings: {} made no progress for {} ms",
                      stalled, watchdog_.count() / 1000);
        withholding = true;
      }
    }
    if (Clock::now() >= next_status) {
      sd_notify(0, absl::StrCat("STATUS=", probes_.status()).c_str());
      next_status = Clock::now() + kStatusInterval;
    }
  }
}

}  // namespace gpucmd

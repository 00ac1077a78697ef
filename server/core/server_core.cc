#include "server/core/server_core.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "base/thread_name.h"
#include "spdlog/spdlog.h"

namespace gpucmd {

ServerCore::ServerCore(std::vector<std::unique_ptr<DeviceWorker>> workers,
                       const Options& options)
    : workers_(std::move(workers)),
      options_(options),
      sessions_(options.idle_timeout, options.lease_grace, options.session_limits),
      inline_budget_(options.inline_bytes_per_session, options.inline_bytes),
      submit_budget_(options.submit_bytes, "limits.max_submit_bytes", "Submit streams"),
      shared_memory_(options.shared_memory),
      payloads_(options.payloads != nullptr ? options.payloads
                                            : std::make_shared<PayloadPool>(uint64_t{64} << 20)),
      freed_memory_(options.keep_freed_bytes.has_value()
                        ? std::make_optional<FreedMemoryReleaser>(*options.keep_freed_bytes)
                        : std::nullopt),
      reaper_([this] {
        NameThisThread("gpucmd-reaper");
        RunReaper();
      }) {}

ServerCore::~ServerCore() {
  if (stopping_late_.valid()) stopping_late_.wait();
  Stop();
}

bool ServerCore::StopBy(std::chrono::steady_clock::time_point deadline) {
  std::future<void> stopped = std::async(std::launch::async, [this] { Stop(); });
  if (stopped.wait_until(deadline) == std::future_status::ready) return true;
  stopping_late_ = std::move(stopped);
  return false;
}

void ServerCore::Stop() {
  {
    MutexLock lock(&mutex_);
    if (stopping_) return;
    stopping_ = true;
    wake_.NotifyAll();
  }
  reaper_.join();
  for (auto& worker : workers_) worker->Stop();
}

std::vector<ServerCore::SessionWithUsage> ServerCore::SessionsWithUsage() const {
  std::vector<DeviceUsage> usages;
  for (const auto& worker : workers_) usages.push_back(worker->usage());
  std::vector<SessionWithUsage> sessions;
  for (SessionInfo& session : sessions_.Snapshot()) {
    const auto& of_device = usages[session.device].sessions;
    const auto found = of_device.find(session.id);
    sessions.push_back({std::move(session),
                        found == of_device.end() ? SessionUsage() : found->second});
  }
  return sessions;
}

void ServerCore::FailQueuedWork(const absl::Status& status) {
  for (auto& worker : workers_) worker->FailQueuedWork(status);
}

std::string ServerCore::WedgedDevices(std::chrono::steady_clock::duration within) const {
  std::string wedged;
  for (const auto& worker : workers_) {
    if (!worker->MakesProgress(within)) {
      absl::StrAppend(&wedged, wedged.empty() ? "device " : ", ", worker->ordinal());
    }
  }
  return wedged;
}

bool ServerCore::Quiet() const {
  return std::all_of(workers_.begin(), workers_.end(),
                     [](const auto& worker) { return worker->Quiet(); });
}

absl::Status ServerCore::SubmitReclaim(const SessionInfo& session) {
  shared_memory_.DropSession(session.id);
  return workers_[session.device]->Submit(session.id, [session](CommandInterface& command) {
    uint64_t bytes = command.CloseSession(session.id);
    spdlog::info("session {} (\"{}\") reclaimed: {} bytes", session.id, session.client_name,
                 bytes);
  });
}

void ServerCore::Reclaim(const SessionInfo& session) {
  if (SubmitReclaim(session).ok()) return;
  MutexLock lock(&mutex_);
  unreclaimed_.push_back(session);
}

std::string ServerCore::NotReadyReason() const {
  for (const auto& worker : workers_) {
    if (!worker->ready()) {
      absl::Status status = worker->init_status();
      return status.ok() ? absl::StrCat("device ", worker->ordinal(), " is initialising")
                         : absl::StrCat("device ", worker->ordinal(), " failed: ",
                                        status.message());
    }
  }
  return "";
}

void ServerCore::RunReaper() {
  MutexLock lock(&mutex_);
  while (!stopping_) {
    wake_.AwaitUntil(&mutex_, std::chrono::steady_clock::now() + options_.reap_interval,
                     [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return stopping_; });
    if (stopping_) break;
    std::vector<SessionInfo> retry = std::move(unreclaimed_);
    unreclaimed_.clear();
    for (const SessionInfo& session : sessions_.TakeExpired(SessionRegistry::Clock::now())) {
      spdlog::info("session {} (\"{}\") expired: its client went away or stayed idle",
                   session.id, session.client_name);
      retry.push_back(session);
    }
    for (const SessionInfo& session : retry) {
      if (!SubmitReclaim(session).ok()) unreclaimed_.push_back(session);
    }
    LookAtFreedMemory(std::chrono::steady_clock::now());
  }
}

void ServerCore::LookAtFreedMemory(std::chrono::steady_clock::time_point now) {
  if (!freed_memory_.has_value() || now < next_freed_memory_look_) return;
  next_freed_memory_look_ = now + options_.freed_memory_look_interval;
  if (freed_memory_->Look(Quiet())) spdlog::debug("freed memory given back to the system");
}

}  // namespace gpucmd

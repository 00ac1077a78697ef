#include "server/core/session_registry.h"

#include "base/random_token.h"

namespace gpucmd {

std::string SessionRegistry::Open(uint32_t device, std::string client_name,
                                  Clock::time_point now) {
  MutexLock lock(&mutex_);
  std::string token = RandomToken();
  while (sessions_.contains(token)) token = RandomToken();
  Entry& entry = sessions_[token];
  entry.info = SessionInfo{next_id_++, device, std::move(client_name)};
  entry.last_active = now;
  return token;
}

absl::StatusOr<SessionInfo> SessionRegistry::Touch(const std::string& token,
                                                   Clock::time_point now) {
  MutexLock lock(&mutex_);
  auto it = sessions_.find(token);
  if (it == sessions_.end()) {
    return absl::NotFoundError("unknown session (closed, expired, or never opened)");
  }
  it->second.last_active = now;
  return it->second.info;
}

std::optional<SessionInfo> SessionRegistry::Close(const std::string& token) {
  MutexLock lock(&mutex_);
  auto it = sessions_.find(token);
  if (it == sessions_.end()) return std::nullopt;
  SessionInfo info = it->second.info;
  sessions_.erase(it);
  return info;
}

bool SessionRegistry::LeaseOpened(const std::string& token, Clock::time_point now) {
  MutexLock lock(&mutex_);
  auto it = sessions_.find(token);
  if (it == sessions_.end()) return false;
  ++it->second.open_leases;
  it->second.lease_lost.reset();
  it->second.last_active = now;
  return true;
}

void SessionRegistry::LeaseClosed(const std::string& token, Clock::time_point now) {
  MutexLock lock(&mutex_);
  auto it = sessions_.find(token);
  if (it == sessions_.end()) return;
  it->second.last_active = now;
  if (--it->second.open_leases == 0) it->second.lease_lost = now;
}

std::vector<SessionInfo> SessionRegistry::TakeExpired(Clock::time_point now) {
  MutexLock lock(&mutex_);
  std::vector<SessionInfo> expired;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    const Entry& entry = it->second;
    bool lease_gone = entry.lease_lost.has_value() && now - *entry.lease_lost >= lease_grace_;
    bool idle = entry.open_leases == 0 && now - entry.last_active >= idle_timeout_;
    if (lease_gone || idle) {
      expired.push_back(entry.info);
      sessions_.erase(it++);
    } else {
      ++it;
    }
  }
  return expired;
}

size_t SessionRegistry::size() const {
  MutexLock lock(&mutex_);
  return sessions_.size();
}

}  // namespace gpucmd

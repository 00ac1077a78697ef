#include "server/core/session_registry.h"

#include "absl/strings/str_cat.h"
#include "base/random_token.h"

namespace gpucmd {
namespace {

// What limits.max_sessions_per_client counts a session against.
std::string ClientKey(const SessionInfo& session) {
  return session.owner.empty() ? absl::StrCat("name:", session.client_name) : session.owner;
}

}  // namespace

absl::StatusOr<std::string> SessionRegistry::Open(uint32_t device, std::string client_name,
                                                  std::string owner, Clock::time_point now) {
  if (client_name.size() > limits_.max_client_name_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "client_name is ", client_name.size(), " bytes, longer than its limit of ",
        limits_.max_client_name_bytes, " (limits.max_client_name_bytes)"));
  }
  MutexLock lock(&mutex_);
  if (!refusal_.ok()) return refusal_;
  if (sessions_.size() >= limits_.max_sessions) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the daemon has ", sessions_.size(), " sessions open, its limit "
        "(limits.max_sessions)"));
  }
  SessionInfo info{.id = next_id_,
                   .device = device,
                   .client_name = std::move(client_name),
                   .owner = std::move(owner),
                   .opened = now};
  uint32_t& client_sessions = sessions_per_client_[ClientKey(info)];
  if (client_sessions >= limits_.max_sessions_per_client) {
    return absl::ResourceExhaustedError(absl::StrCat(
        info.owner.empty() ? "this client name" : info.owner, " has ", client_sessions,
        " sessions open, its limit (limits.max_sessions_per_client)"));
  }
  ++client_sessions;
  ++next_id_;
  std::string token = RandomToken();
  while (sessions_.contains(token)) token = RandomToken();
  Entry& entry = sessions_[token];
  entry.closed = std::make_shared<std::atomic<bool>>(false);
  info.closed = entry.closed;
  entry.info = std::move(info);
  entry.last_active = now;
  return token;
}

absl::StatusOr<SessionInfo> SessionRegistry::Touch(const std::string& token,
                                                   Clock::time_point now) {
  MutexLock lock(&mutex_);
  if (!refusal_.ok()) return refusal_;
  auto it = sessions_.find(token);
  if (it == sessions_.end()) {
    return absl::NotFoundError("unknown session (closed, expired, or never opened)");
  }
  it->second.last_active = now;
  return it->second.info;
}

std::vector<SessionInfo> SessionRegistry::Snapshot() const {
  MutexLock lock(&mutex_);
  std::vector<SessionInfo> sessions;
  sessions.reserve(sessions_.size());
  for (const auto& [token, entry] : sessions_) sessions.push_back(entry.info);
  return sessions;
}

void SessionRegistry::RefuseNewWork(absl::Status status) {
  MutexLock lock(&mutex_);
  refusal_ = std::move(status);
}

std::optional<SessionInfo> SessionRegistry::Close(const std::string& token) {
  MutexLock lock(&mutex_);
  auto it = sessions_.find(token);
  if (it == sessions_.end()) return std::nullopt;
  SessionInfo info = it->second.info;
  EraseLocked(it);
  return info;
}

void SessionRegistry::EraseLocked(absl::flat_hash_map<std::string, Entry>::iterator it) {
  auto client = sessions_per_client_.find(ClientKey(it->second.info));
  if (client != sessions_per_client_.end() && --client->second == 0) {
    sessions_per_client_.erase(client);
  }
  it->second.closed->store(true, std::memory_order_release);
  sessions_.erase(it);
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
      EraseLocked(it++);
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

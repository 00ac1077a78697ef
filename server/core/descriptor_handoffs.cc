#include "server/core/descriptor_handoffs.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/random_token.h"

namespace gpucmd {

DescriptorHandoffs::~DescriptorHandoffs() {
  MutexLock lock(&mutex_);
  for (const auto& [token, waiting] : waiting_) close(waiting.fd);
}

absl::StatusOr<std::string> DescriptorHandoffs::Put(int fd, std::string owner,
                                                    Clock::time_point now) {
  if (owner.empty()) {
    close(fd);
    return absl::InvalidArgumentError("a descriptor is taken only from an identified peer");
  }
  MutexLock lock(&mutex_);
  CloseExpiredLocked(now);
  if (waiting_.size() >= capacity_) {
    close(fd);
    return absl::ResourceExhaustedError(absl::StrCat(
        capacity_, " handed-over descriptors wait to be registered already; register or "
        "let them expire first"));
  }
  const auto owners_waiting =
      std::count_if(waiting_.begin(), waiting_.end(),
                    [&owner](const auto& entry) { return entry.second.owner == owner; });
  if (static_cast<size_t>(owners_waiting) >= capacity_per_owner_) {
    close(fd);
    return absl::ResourceExhaustedError(absl::StrCat(
        "this user's ", owners_waiting, " handed-over descriptors wait to be registered "
        "already (at most ", capacity_per_owner_, " per user); register or let them expire "
        "first"));
  }
  std::string token = RandomToken();
  while (waiting_.contains(token)) token = RandomToken();
  waiting_[token] = Waiting{fd, std::move(owner), now + lifetime_};
  return token;
}

absl::StatusOr<int> DescriptorHandoffs::Take(const std::string& token, const std::string& caller,
                                             Clock::time_point now) {
  MutexLock lock(&mutex_);
  CloseExpiredLocked(now);
  auto it = waiting_.find(token);
  if (it == waiting_.end() || it->second.owner != caller) {
    return absl::InvalidArgumentError(
        "handoff names no descriptor this caller handed over (unknown, already registered, "
        "expired, or handed over by another user)");
  }
  int fd = it->second.fd;
  waiting_.erase(it);
  return fd;
}

DescriptorHandoffs::Clock::time_point DescriptorHandoffs::CloseExpired(Clock::time_point now) {
  MutexLock lock(&mutex_);
  CloseExpiredLocked(now);
  Clock::time_point next = Clock::time_point::max();
  for (const auto& [token, waiting] : waiting_) next = std::min(next, waiting.expires);
  return next;
}

void DescriptorHandoffs::CloseExpiredLocked(Clock::time_point now) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (it->second.expires > now) {
      ++it;
      continue;
    }
    close(it->second.fd);
    waiting_.erase(it++);
  }
}

}  // namespace gpucmd

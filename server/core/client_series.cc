#include "server/core/client_series.h"

namespace gpucmd {

std::string ClientSeries::LabelFor(const std::string& client,
                                   std::vector<std::string>* evicted) {
  MutexLock lock(&mutex_);
  const uint64_t now = ++clock_;
  if (auto it = labelled_.find(client); it != labelled_.end()) {
    it->second = now;
    return client;
  }
  if (client == kOther) return kOther;  // the label of the rest is not a client's
  if (labelled_.size() >= max_clients_) {
    auto victim = labelled_.end();
    for (auto it = labelled_.begin(); it != labelled_.end(); ++it) {
      // Active since the last snapshot of open sessions: it has one open, or had.
      if (open_.contains(it->first) || it->second > snapshot_clock_) continue;
      if (victim == labelled_.end() || it->second < victim->second) victim = it;
    }
    if (victim == labelled_.end()) return kOther;
    evicted->push_back(victim->first);
    labelled_.erase(victim);
  }
  labelled_[client] = now;
  return client;
}

void ClientSeries::SetOpenClients(const absl::flat_hash_set<std::string>& open) {
  MutexLock lock(&mutex_);
  open_ = open;
  snapshot_clock_ = clock_;
}

}  // namespace gpucmd

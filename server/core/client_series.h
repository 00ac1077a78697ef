#ifndef GPUCMDD_SERVER_CORE_CLIENT_SERIES_H_
#define GPUCMDD_SERVER_CORE_CLIENT_SERIES_H_

// Note [Per-client metrics]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~
// Metrics by client name (OpenSessionRequest.client_name) with a bounded number of
// series: at most `max_clients` names get a `client` label of their own; what any other
// name does counts under client="other". A name gets its own label the first time it is
// active (a launch, bytes moved, a session seen) while fewer than `max_clients` names
// have one, or by taking the label of the least recently active name that has no
// session open any more (as of the last snapshot of sessions, and not active since),
// whose series then leave /metrics. So the labelled names are
// the clients active lately, and every counter series only grows while it exists.
//
// Thread-safety: every method may be called from any thread.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "base/mutex.h"

namespace gpucmd {

class ClientSeries {
 public:
  static constexpr char kOther[] = "other";

  explicit ClientSeries(size_t max_clients) : max_clients_(max_clients) {}

  // The label `client`'s activity counts under: its own name, or kOther when every label
  // is held by a name with sessions open (and for a client named "other"). A name whose
  // label went to `client` is appended to `evicted`: its series must go.
  std::string LabelFor(const std::string& client, std::vector<std::string>* evicted);

  // The names with sessions open now (from a snapshot); the others may lose their label.
  void SetOpenClients(const absl::flat_hash_set<std::string>& open);

 private:
  const size_t max_clients_;
  Mutex mutex_;
  uint64_t clock_ ABSL_GUARDED_BY(mutex_) = 0;
  // clock_ when SetOpenClients last ran: names active since may hold a session it missed.
  uint64_t snapshot_clock_ ABSL_GUARDED_BY(mutex_) = 0;
  // Labelled names and when each was last active (clock_ ticks).
  absl::flat_hash_map<std::string, uint64_t> labelled_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_set<std::string> open_ ABSL_GUARDED_BY(mutex_);
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_CLIENT_SERIES_H_

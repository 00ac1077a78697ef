#include "base/deferred_wakeups.h"

#include <algorithm>
#include <vector>

namespace gpucmd {
namespace {

struct ThisThread {
  int open_scopes = 0;
  std::vector<CondVar*> deferred;  // each once
};

thread_local ThisThread this_thread;

}  // namespace

DeferredWakeups::DeferredWakeups() { ++this_thread.open_scopes; }

DeferredWakeups::~DeferredWakeups() {
  if (--this_thread.open_scopes == 0) WakeDeferredNow();
}

bool DeferWakeup(CondVar* worker_ready) {
  if (this_thread.open_scopes == 0) return false;
  std::vector<CondVar*>& deferred = this_thread.deferred;
  if (std::find(deferred.begin(), deferred.end(), worker_ready) == deferred.end()) {
    deferred.push_back(worker_ready);
  }
  return true;
}

void WakeDeferredNow() {
  for (CondVar* worker_ready : this_thread.deferred) worker_ready->NotifyOne();
  this_thread.deferred.clear();
}

}  // namespace gpucmd

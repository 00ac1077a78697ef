#include "driver/gpu/notice_thread.h"

#include <deque>
#include <map>
#include <thread>
#include <utility>

#include "base/mutex.h"
#include "base/thread_name.h"

namespace gpucmd {

struct NoticeThread::Shared {
  // Queues the callback of report `id` for the thread, unless it ran already.
  void Report(uint64_t id) {
    MutexLock lock(&mutex);
    auto it = unreported.find(id);
    if (it == unreported.end()) return;  // run at the destructor's, the device gone
    queued.push_back(std::move(it->second));
    unreported.erase(it);
    ready.NotifyOne();
  }

  void Run() {
    while (true) {
      std::deque<absl::AnyInvocable<void()>> due;
      {
        MutexLock lock(&mutex);
        ready.Await(&mutex, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
          return !queued.empty() || stopping;
        });
        if (queued.empty()) return;  // stopping, and everything ran
        due.swap(queued);
      }
      for (absl::AnyInvocable<void()>& callback : due) callback();
    }
  }

  Mutex mutex;
  CondVar ready;
  uint64_t next_id ABSL_GUARDED_BY(mutex) = 0;
  // Relayed and not reported yet, by relay order.
  std::map<uint64_t, absl::AnyInvocable<void()>> unreported ABSL_GUARDED_BY(mutex);
  std::deque<absl::AnyInvocable<void()>> queued ABSL_GUARDED_BY(mutex);
  bool stopping ABSL_GUARDED_BY(mutex) = false;
  std::thread thread;
};

NoticeThread::NoticeThread(const std::string& name) : shared_(std::make_shared<Shared>()) {
  shared_->thread = std::thread([shared = shared_.get(), name] {
    NameThisThread(name);
    shared->Run();
  });
}

NoticeThread::~NoticeThread() {
  {
    MutexLock lock(&shared_->mutex);
    for (auto& [unused, callback] : shared_->unreported) {
      shared_->queued.push_back(std::move(callback));
    }
    shared_->unreported.clear();
    shared_->stopping = true;
    shared_->ready.NotifyOne();
  }
  shared_->thread.join();
}

absl::AnyInvocable<void()> NoticeThread::Relay(absl::AnyInvocable<void()> callback) {
  MutexLock lock(&shared_->mutex);
  const uint64_t id = shared_->next_id++;
  if (shared_->stopping) {
    // Relayed by a callback the destructor's drain runs: queued for that drain.
    shared_->queued.push_back(std::move(callback));
  } else {
    shared_->unreported.emplace(id, std::move(callback));
  }
  return [shared = shared_, id] { shared->Report(id); };
}

}  // namespace gpucmd

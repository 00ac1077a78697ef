#include "driver/cpu/copy_engine.h"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "base/thread_name.h"

namespace gpucmd {

CopyEngine::CopyEngine(int helpers) {
  if (sched_getaffinity(0, sizeof(cpus_), &cpus_) != 0) CPU_ZERO(&cpus_);
  for (int i = 0; i < helpers; ++i) helpers_.emplace_back([this] {
      NameThisThread("gpucmd-copy");
      RegisterHelper();
      Help();
    });
}

CopyEngine::~CopyEngine() {
  {
    MutexLock lock(&mutex_);
    stopping_ = true;
    work_ready_.NotifyAll();
  }
  for (std::thread& helper : helpers_) helper.join();
}

int CopyEngine::HelpersForThisThread() {
  cpu_set_t allowed;
  const int cores = sched_getaffinity(0, sizeof(allowed), &allowed) == 0
                        ? CPU_COUNT(&allowed)
                        : static_cast<int>(std::thread::hardware_concurrency());
  return std::clamp(cores - 1, 0, 3);
}

void CopyEngine::Job::Work() {
  size_t copied = 0;
  for (size_t part = next_part.fetch_add(1, std::memory_order_relaxed); part < parts;
       part = next_part.fetch_add(1, std::memory_order_relaxed)) {
    copy_part(part);
    ++copied;
  }
  if (copied == 0) return;
  MutexLock lock(&mutex);
  parts_done += copied;
  if (parts_done == parts) all_done.NotifyAll();
}

void CopyEngine::Job::AwaitDone() {
  MutexLock lock(&mutex);
  all_done.Await(&mutex, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return parts_done == parts; });
}

void CopyEngine::Run(size_t parts, absl::FunctionRef<void(size_t)> copy_part) {
  if (parts < 2 || helpers_.empty()) {
    for (size_t part = 0; part < parts; ++part) copy_part(part);
    return;
  }
  auto job = std::make_shared<Job>(parts, copy_part);
  {
    MutexLock lock(&mutex_);
    KeepHelpersOffLocked(sched_getcpu());
    const size_t offers = std::min(helpers_.size(), parts - 1);
    for (size_t i = 0; i < offers; ++i) jobs_.push_back(job);
    work_ready_.NotifyAll();
  }
  job->Work();
  {
    // Every part is taken: offers no helper came for are withdrawn.
    MutexLock lock(&mutex_);
    std::erase(jobs_, job);
  }
  job->AwaitDone();
}

void CopyEngine::Split(uint64_t size,
                       absl::FunctionRef<void(uint64_t offset, uint64_t bytes)> part) {
  if (size < kMinSplitBytes) {
    if (size > 0) part(0, size);
    return;
  }
  Run((size + kPartBytes - 1) / kPartBytes, [part, size](size_t index) {
    const uint64_t offset = index * kPartBytes;
    part(offset, std::min(kPartBytes, size - offset));
  });
}

void CopyEngine::Copy(std::byte* to, const std::byte* from, uint64_t size) {
  Split(size, [to, from](uint64_t offset, uint64_t bytes) {
    std::memcpy(to + offset, from + offset, bytes);
  });
}

std::optional<cpu_set_t> CopyEngine::CpusOtherThan(int cpu) const {
  cpu_set_t others = cpus_;
  if (cpu >= 0) CPU_CLR(cpu, &others);
  if (cpu < 0 || CPU_COUNT(&others) == 0) return std::nullopt;
  return others;
}

void CopyEngine::KeepHelpersOffLocked(int cpu) {
  if (cpu == helpers_kept_off_) return;
  const std::optional<cpu_set_t> others = CpusOtherThan(cpu);
  if (!others) return;
  // A hint: a helper whose affinity could not be set still helps, wherever it runs.
  for (pid_t helper : helper_ids_) sched_setaffinity(helper, sizeof(*others), &*others);
  helpers_kept_off_ = cpu;
}

void CopyEngine::RegisterHelper() {
  MutexLock lock(&mutex_);
  helper_ids_.push_back(gettid());
  if (const std::optional<cpu_set_t> others = CpusOtherThan(helpers_kept_off_)) {
    sched_setaffinity(0, sizeof(*others), &*others);
  }
}

void CopyEngine::Help() {
  while (true) {
    std::shared_ptr<Job> job;
    {
      MutexLock lock(&mutex_);
      work_ready_.Await(&mutex_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !jobs_.empty() || stopping_;
      });
      if (stopping_) return;
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job->Work();
  }
}

}  // namespace gpucmd

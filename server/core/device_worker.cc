#include "server/core/device_worker.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "base/deferred_wakeups.h"
#include "base/thread_name.h"
#include "server/command/unavailable_command.h"
#include "spdlog/spdlog.h"

namespace gpucmd {
namespace {

// True on a thread while it runs a device's tasks: a task that submits more never tries
// to run them itself (it holds the device already).
thread_local bool running_device_tasks = false;

// True on a thread while it runs a brief answer where its work ended (Note [Brief answers
// where the work ended]): work the answer submits is queued for the device thread, never
// run on this one (a stream's worker, which the device's tasks may be waiting on).
thread_local bool answering_where_work_ended = false;

// How often an idle device looks again at memory held for work still running.
constexpr std::chrono::milliseconds kIdleUpkeepInterval{5};

int64_t SteadyNanoseconds() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Marks the device held (for MakesProgress) from construction to destruction; made
// right after taking device_mutex_ and gone before releasing it.
class HeldMark {
 public:
  explicit HeldMark(std::atomic<int64_t>* held_since_ns) : held_since_ns_(held_since_ns) {
    held_since_ns_->store(std::max<int64_t>(SteadyNanoseconds(), 1));
  }
  ~HeldMark() { held_since_ns_->store(0); }
  HeldMark(const HeldMark&) = delete;
  HeldMark& operator=(const HeldMark&) = delete;

 private:
  std::atomic<int64_t>* const held_since_ns_;
};

}  // namespace

DeviceWorker::DeviceWorker(const Options& options, Factory factory, Metrics* metrics)
    : options_(options),
      metrics_(metrics),
      queue_(options.queue_capacity, options.per_session_limit),
      factory_(std::move(factory)) {
  // The threads below log. spdlog creates its registry on first use; create it here,
  // before them, so that no two threads race to (Debian's spdlog is not instrumented for
  // ThreadSanitizer, which then cannot see that first use is synchronised).
  spdlog::default_logger_raw();
  {
    MutexLock lock(&completion_mutex_);
    for (int i = 0; i < std::max(1, options.completion_threads); ++i) {
      completion_threads_.emplace_back([this] { RunCompletions(); });
    }
  }
  device_thread_ = std::thread([this] {
    NameThisThread(absl::StrCat("gpucmd-device", options_.ordinal));
    RunDevice();
  });
}

DeviceWorker::~DeviceWorker() { Stop(); }

absl::Status DeviceWorker::Submit(SessionId session, Task task, Placement placement) {
  {
    MutexLock lock(&mutex_);
    if (!init_status_.ok()) {
      return absl::UnavailableError(absl::StrCat("device ", options_.ordinal,
                                                 " is unavailable: ", init_status_.message()));
    }
  }
  if (placement == Placement::kHereWhenIdle && RunHereWhenIdle(task)) {
    metrics_->QueueWait(options_.ordinal).Observe(0);
    return absl::OkStatus();
  }
  const auto queued_at = std::chrono::steady_clock::now();
  absl::Status pushed = queue_.Push(
      session, [this, queued_at, task = std::move(task)](CommandInterface& command) mutable {
        metrics_->QueueWait(options_.ordinal)
            .Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - queued_at)
                         .count());
        task(command);
      });
  metrics_->QueueDepth(options_.ordinal).Set(static_cast<double>(queue_.depth()));
  return pushed;
}

bool DeviceWorker::RunHereWhenIdle(Task& task) {
  // Nothing queued and nobody holding the device: no task of any session comes before
  // this one. A task queued after the check runs after it, as it would have.
  if (running_device_tasks || answering_where_work_ended || queue_.depth() != 0 ||
      !device_mutex_.TryLock()) {
    return false;
  }
  bool runs = false;
  {
    HeldMark held(&held_since_ns_);
    runs = queue_.depth() == 0 && !queue_.closed() && command_ != nullptr &&
           command_->DeviceHealth().ok();
    if (runs) {
      running_device_tasks = true;
      RunTask(std::move(task));
      running_device_tasks = false;
      // Relocation is the device thread's upkeep: wake it when there is some to do.
      if (command_->WantsRelocation()) queue_.Wake();
    }
  }
  device_mutex_.Unlock();
  return runs;
}

// Only tasks call it, and they run holding the device.
void DeviceWorker::Defer(absl::AnyInvocable<void()> action) ABSL_NO_THREAD_SAFETY_ANALYSIS {
  deferred_.push_back(std::move(action));
}

void DeviceWorker::Complete(SessionId session, absl::AnyInvocable<absl::Status()> wait,
                            absl::AnyInvocable<void(absl::Status)> done, WorkEndNotice ended,
                            Answering answering) {
  metrics_->CommandsInFlight(options_.ordinal).Increment();
  bool becomes_ready = false;
  uint64_t id = 0;
  {
    MutexLock lock(&completion_mutex_);
    id = ++last_completion_id_;
    std::deque<Completion>& queue = completions_[session];
    queue.push_back(Completion{.id = id,
                               .ended = ended == nullptr,
                               .called_back = ended != nullptr,
                               .answering = answering,
                               .wait = std::move(wait),
                               .done = std::move(done)});
    ++completions_left_;
    // A session with nothing else queued is not running one either: its turn starts now,
    // on one completion thread (waking them all would only have the others wait again).
    if (queue.size() == 1) becomes_ready = ReadyWhenDue(session, queue);
  }
  // After unlocking: a thread woken under the lock would only block on it again.
  if (becomes_ready) completion_ready_.NotifyOne();
  if (ended != nullptr) {
    std::move(ended)([this, session, id] { CompletionWorkEnded(session, id); });
  }
}

void DeviceWorker::CompletionWorkEnded(SessionId session, uint64_t id) {
  Completion here;
  {
    MutexLock lock(&completion_mutex_);
    // Still queued: it cannot run before this call.
    std::deque<Completion>& queue = completions_.at(session);
    auto completion = std::find_if(queue.begin(), queue.end(), [id](const Completion& queued) {
      return queued.id == id;
    });
    completion->ended = true;
    // Only the first may put the session in turn (once: a later one's end changes
    // nothing), or run here. Notified under the lock: once it is released, the completion
    // may run and the worker be destroyed.
    if (completion != queue.begin()) return;
    const Answering answering = completion->answering;
    if (answering == Answering::kOnCompletionThread ||
        (running_device_tasks && answering != Answering::kWhereWorkEndedOrAfterTheTask)) {
      if (ReadyWhenDue(session, queue)) completion_ready_.NotifyOne();
      return;
    }
    // Note [Brief answers where the work ended]. Counted in completions_left_ until it
    // ran, so the worker outlives it.
    completion->running = true;
    here.called_back = completion->called_back;
    here.wait = std::move(completion->wait);
    here.done = std::move(completion->done);
  }
  if (running_device_tasks) {
    // Inside a task, which holds the device: once it finished.
    Defer([this, session, here = std::move(here)]() mutable {
      AnswerWhereWorkEnded(session, std::move(here));
    });
    return;
  }
  AnswerWhereWorkEnded(session, std::move(here));
}

void DeviceWorker::AnswerWhereWorkEnded(SessionId session, Completion completion) {
  answering_where_work_ended = true;
  RunFirstCompletion(session, std::move(completion), /*this_thread_looks_next=*/false);
  answering_where_work_ended = false;
}

bool DeviceWorker::ReadyWhenDue(SessionId session, const std::deque<Completion>& queue) {
  const Completion& first = queue.front();
  if (!first.ended || first.running) return false;
  ready_sessions_.push_back(session);
  AddCompletionThreadIfAllHeld();
  return true;
}

void DeviceWorker::AddCompletionThreadIfAllHeld() {
  if (completions_closed_ || ready_sessions_.empty() ||
      completion_threads_.size() > blocking_completions_) {
    return;
  }
  const size_t limit = static_cast<size_t>(
      std::max(options_.max_completion_threads, std::max(1, options_.completion_threads)));
  if (completion_threads_.size() >= limit) return;
  completion_threads_.emplace_back([this] { RunCompletions(); });
}

bool DeviceWorker::ready() const {
  MutexLock lock(&mutex_);
  return initialised_ && init_status_.ok();
}

void DeviceWorker::AwaitInitialised() const {
  MutexLock lock(&mutex_);
  initialised_changed_.Await(&mutex_,
                             [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS { return initialised_; });
}

absl::Status DeviceWorker::init_status() const {
  MutexLock lock(&mutex_);
  return init_status_;
}

DeviceUsage DeviceWorker::usage() const {
  MutexLock lock(&mutex_);
  DeviceUsage usage = usage_;
  usage.sessions = session_usage_;
  return usage;
}

DeviceUsage DeviceWorker::device_usage() const {
  MutexLock lock(&mutex_);
  return usage_;
}

size_t DeviceWorker::sessions_held() const {
  MutexLock lock(&mutex_);
  return session_usage_.size();
}

SessionUsage DeviceWorker::usage_of(SessionId session) const {
  MutexLock lock(&mutex_);
  const auto found = session_usage_.find(session);
  return found == session_usage_.end() ? SessionUsage() : found->second;
}

bool DeviceWorker::MakesProgress(std::chrono::steady_clock::duration within) const {
  if (const auto waiting = queue_.waiting_since();
      waiting.has_value() && std::chrono::steady_clock::now() - *waiting >= within) {
    return false;
  }
  const int64_t since = held_since_ns_.load();
  return since == 0 ||
         SteadyNanoseconds() - since <
             std::chrono::duration_cast<std::chrono::nanoseconds>(within).count();
}

bool DeviceWorker::Quiet() const {
  if (queue_.depth() != 0) return false;
  MutexLock lock(&completion_mutex_);
  return completions_left_ == 0;
}

void DeviceWorker::FailQueuedWork(const absl::Status& status) {
  std::shared_ptr<CommandInterface> serving;
  {
    MutexLock lock(&mutex_);
    failing_ = std::make_shared<UnavailableCommand>(status);
    serving = serving_;
  }
  if (serving != nullptr) serving->AbortKernels();
}

void DeviceWorker::SetCommand(std::shared_ptr<CommandInterface> command) {
  command_ = std::move(command);  // the one assignment of command_
  usage_reported_by_ = nullptr;   // its first report is complete, whatever its address
  MutexLock lock(&mutex_);
  serving_ = command_;
}

void DeviceWorker::Stop() {
  queue_.Close();
  if (device_thread_.joinable()) device_thread_.join();
  {
    MutexLock lock(&completion_mutex_);
    completions_closed_ = true;
    completion_ready_.NotifyAll();
  }
  for (std::thread& thread : completion_threads_) {
    if (thread.joinable()) thread.join();
  }
}

void DeviceWorker::RunDevice() {
  running_device_tasks = true;
  absl::Status created_status;
  {
    MutexLock device(&device_mutex_);
    absl::StatusOr<std::shared_ptr<CommandInterface>> created = factory_();
    created_status = created.status();
    if (created.ok()) {
      SetCommand(*std::move(created));
      PublishUsage(*command_);
      metrics_->DeviceReady(options_.ordinal).Set(1);
      spdlog::info("device {} ready", options_.ordinal);
    } else {
      spdlog::error("device {} failed to initialise: {}", options_.ordinal,
                    created.status().ToString());
      // Work queued before this point still gets an answer.
      SetCommand(std::make_shared<UnavailableCommand>(absl::UnavailableError(absl::StrCat(
          "device ", options_.ordinal, " is unavailable: ", created.status().message()))));
    }
  }
  {
    MutexLock lock(&mutex_);
    initialised_ = true;
    init_status_ = created_status;
    initialised_changed_.NotifyAll();
  }
  while (true) {
    bool holding = false;
    {
      MutexLock device(&device_mutex_);
      HeldMark held(&held_since_ns_);
      if (std::optional<Task> task = queue_.TryPop()) {
        KeepHealthy();
        RunTask(*std::move(task));
        continue;
      }
      // Idle: upkeep before waiting for more work, and again until nothing is held for
      // work that has not finished.
      KeepHealthy();
      holding = command_->ReclaimWhenIdle();
      if (command_->WantsRelocation()) {
        absl::StatusOr<RelocationReport> report = command_->Relocate();
        if (report.ok() && report->deferred) {
          holding = true;  // again once the streams' work ended
        } else if (report.ok() && report->allocations_moved > 0) {
          spdlog::info("device {}: relocated {} allocation(s) off {} page(s)", options_.ordinal,
                       report->allocations_moved, report->pages_relocated);
        } else if (!report.ok()) {
          spdlog::warn("device {}: relocation failed: {}", options_.ordinal,
                       report.status().ToString());
        }
      }
      PublishUsage(*command_);
    }
    const bool more = holding ? queue_.AwaitWorkUntil(std::chrono::steady_clock::now() +
                                                      kIdleUpkeepInterval)
                              : queue_.AwaitWork();
    if (!more) break;  // closed and drained
  }
  MutexLock device(&device_mutex_);
  metrics_->DeviceReady(options_.ordinal).Set(0);
  // Pending reads hold the command's staging memory: finish them before it goes.
  AwaitCompletions();
  SetCommand(nullptr);
}

void DeviceWorker::KeepHealthy() {
  absl::Status health = command_->DeviceHealth();
  if (health.ok()) return;
  const int device = options_.ordinal;
  absl::Status cause = absl::UnavailableError(
      absl::StrCat("device ", device, " was reset after a device error: ", health.message()));
  spdlog::error("{}; recreating its context", std::string(cause.message()));
  metrics_->DeviceReady(device).Set(0);
  metrics_->DeviceResets(device).Increment();
  // In-flight reads fail against the dead context; they must end before their staging
  // memory goes with the Command.
  AwaitCompletions();
  DeviceLoss loss = command_->Abandon(cause);
  const size_t lost_buffers = loss.buffers.size();
  SetCommand(nullptr);  // the old backend, and with it the failed context, goes first
  absl::StatusOr<std::shared_ptr<CommandInterface>> created = factory_();
  if (!created.ok()) {
    absl::Status down = absl::UnavailableError(absl::StrCat(
        "device ", device, " is down: ", health.message(),
        "; recreating its context failed: ", created.status().message(),
        options_.on_lost_for_good ? "; the daemon restarts to get it back" : ""));
    spdlog::error("{}", std::string(down.message()));
    {
      MutexLock lock(&mutex_);
      init_status_ = down;
    }
    SetCommand(std::make_shared<UnavailableCommand>(down));  // takes mutex_ itself
    if (options_.on_lost_for_good) options_.on_lost_for_good(down);
    return;
  }
  (*created)->Inherit(std::move(loss));
  metrics_->DeviceReady(device).Set(1);
  spdlog::warn("device {} serves again on a new context; {} buffer handle(s) are lost",
               device, lost_buffers);
  SetCommand(*std::move(created));
}

void DeviceWorker::AwaitCompletions() {
  MutexLock lock(&completion_mutex_);
  completions_drained_.Await(&completion_mutex_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    return completions_left_ == 0;
  });
}

void DeviceWorker::RunTask(Task task) {
  std::shared_ptr<CommandInterface> failing;
  {
    MutexLock lock(&mutex_);
    failing = failing_;
  }
  CommandInterface& command = failing != nullptr ? *failing : *command_;
  metrics_->QueueDepth(options_.ordinal).Set(static_cast<double>(queue_.depth()));
  metrics_->CommandsInFlight(options_.ordinal).Increment();
  command.ReclaimFinished();
  {
    // The task's device work starts once it is all queued (Note [Deferred wake-ups] in
    // base/deferred_wakeups.h): a batch's launches reach a CPU executor in one message.
    DeferredWakeups whole_task;
    task(command);
  }
  metrics_->CommandsInFlight(options_.ordinal).Decrement();
  PublishUsage(command);
  // By index: an action may defer another (a brief answer whose notice it called back).
  for (size_t i = 0; i < deferred_.size(); ++i) {
    absl::AnyInvocable<void()> action = std::move(deferred_[i]);
    action();
  }
  deferred_.clear();
}

void DeviceWorker::PublishUsage(CommandInterface& command) {
  // Note [Usage reported as it changes] in server/command/command.h: a Command's first
  // report holds every session; a device reset or failed work brings another Command.
  UsageUpdate update = command.TakeUsageUpdate(/*complete=*/&command != usage_reported_by_);
  usage_reported_by_ = &command;
  DeviceUsage& usage = update.usage;
  int device = options_.ordinal;
  metrics_->MemoryUsed(device).Set(static_cast<double>(usage.memory_used_bytes));
  metrics_->MemoryReserved(device).Set(static_cast<double>(usage.memory_reserved_bytes));
  metrics_->MemoryCapacity(device).Set(static_cast<double>(usage.memory_capacity_bytes));
  metrics_->DropQueueBytes(device).Set(static_cast<double>(usage.drop_queue_bytes));
  metrics_->StreamQueuedCommands(device).Set(static_cast<double>(usage.queued_on_streams));
  metrics_->SetRelocatedPages(device, usage.relocations);
  MutexLock lock(&mutex_);
  if (update.complete) {
    session_usage_ = std::move(usage.sessions);
  } else {
    for (const auto& [id, figures] : usage.sessions) session_usage_[id] = figures;
    for (SessionId id : update.gone) session_usage_.erase(id);
  }
  usage.sessions.clear();
  usage_ = std::move(usage);
}

void DeviceWorker::RunCompletions() {
  NameThisThread(absl::StrCat("gpucmd-wait", options_.ordinal));
  while (true) {
    SessionId session;
    Completion completion;
    {
      MutexLock lock(&completion_mutex_);
      completion_ready_.Await(&completion_mutex_, [this]() ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return !ready_sessions_.empty() || (completions_closed_ && completions_left_ == 0);
      });
      if (ready_sessions_.empty()) return;  // closed, and every completion ran
      session = ready_sessions_.front();
      ready_sessions_.pop_front();
      // Stays at the front of the session's queue while it runs: the session is not
      // ready again until it finished.
      Completion& first = completions_[session].front();
      first.running = true;
      completion.called_back = first.called_back;
      if (!completion.called_back) {
        ++blocking_completions_;
        AddCompletionThreadIfAllHeld();  // for the sessions still in turn
      }
      completion.wait = std::move(first.wait);
      completion.done = std::move(first.done);
    }
    RunFirstCompletion(session, std::move(completion), /*this_thread_looks_next=*/true);
  }
}

void DeviceWorker::RunFirstCompletion(SessionId session, Completion completion,
                                      bool this_thread_looks_next) {
  const bool blocking = !completion.called_back;
  absl::Status status = completion.wait();
  completion.done(std::move(status));
  completion = Completion();  // what it held goes before the command may
  metrics_->CommandsInFlight(options_.ordinal).Decrement();
  MutexLock lock(&completion_mutex_);
  if (blocking) --blocking_completions_;
  std::deque<Completion>& queue = completions_[session];
  queue.pop_front();
  // A session whose next completion may run is ready again: a completion thread about to
  // look for work takes it or another ready session; else one is woken for it.
  if (queue.empty()) {
    completions_.erase(session);
  } else if (queue.front().ended) {
    ready_sessions_.push_back(session);
    AddCompletionThreadIfAllHeld();
    if (!this_thread_looks_next) completion_ready_.NotifyOne();
  }
  if (--completions_left_ == 0) {
    completions_drained_.NotifyAll();
    if (completions_closed_) completion_ready_.NotifyAll();  // the others may leave now
  }
}

}  // namespace gpucmd

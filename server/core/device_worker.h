#ifndef GPUCMDD_SERVER_CORE_DEVICE_WORKER_H_
#define GPUCMDD_SERVER_CORE_DEVICE_WORKER_H_

// One device's thread. It creates the device's Command (through a factory, on the
// thread itself), then serves the device queue (Note [Device queue]) one task at a
// time; when the queue runs dry it does upkeep: frees memory whose users finished and
// relocates off outdated or fragmented pages. Whoever runs a task holds the device: a
// task that only enqueues device work (a launch, a synchronize) and finds the device
// idle runs on the submitting thread instead, which spares a round trip through the
// device thread on the path of the latency-bound calls; tasks still run one at a time,
// in the order the queue would have run them. Reads and synchronizations finish off the
// device thread: completion threads wait for their fences, or are handed them once the
// fences called back (Note [Completions called back]), and then call back. A
// session's completions run one at a time in the order they were made; different
// sessions' run side by side, taken round-robin, so a reply never waits behind another
// session's long kernel. The completion threads are a few to start with, and one more
// starts whenever a session's turn comes with every thread held by a wait that may
// block (one without a notice: up to max_completion_threads, which then stay for the
// next burst): however many sessions wait on long kernels, one whose work ended still
// gets its answer. Threads busy with called-back completions, which do not block, take
// the next turn soon: a burst of them (many sessions' waits ending with one kernel)
// starts no thread.
//
// Note [Completions called back]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A completion made with a WorkEndNotice (where the driver's events can call back, as the
// CPU driver's and the GPU drivers' do) goes to a completion thread only once the notice
// called back, from the thread that heard the work ended (the CPU stream's worker, a GPU
// backend's notice thread: Note [Completions called back on a GPU] in
// driver/gpu/gpu_driver.h): no thread blocks in its wait, and none is
// woken before there is something to answer. The notice covers the streams the
// completion's reads and synchronizations are on, so a Synchronize of one logical stream
// is not held by the session's others. Before, a completion thread was woken as the
// completion was made, only to block in the wait: on a small machine it took the CPU
// the stream's worker needed to run the copy or kernel (a 4 KiB read: the worker started
// a median 22 us after it was woken, behind the completion thread; 4 us with the
// notice). Waits for room (Batch::Run's) have notices of their own (RoomWait in
// server/command/command_interface.h). Completions without a notice (where the
// driver's events cannot call back) block a completion thread as before.
//
// Note [Brief answers where the work ended]
// ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
// A small answer (a unary Synchronize's, a read of a few KiB, a small Submit batch's) is
// a few microseconds of work: filling the response and handing it to gRPC. Waking a
// completion thread for it cost more than the answer (a 4 KiB read on the 2-core VM: a
// wake-up and a context switch per call). So a completion made Answering::kWhereWorkEnded
// runs on the thread whose call back said its work ended (the stream's worker), when it
// is its session's first and nothing else runs it; otherwise, and on a thread that holds
// the device (a notice that called back at once, inside the task), it goes to a
// completion thread as any other. Made kWhereWorkEndedOrAfterTheTask (a streamed read's
// answer), a completion whose notice called back inside the task (a small copy run
// where it was queued: CpuStream::RunOrEnqueue) runs on the task's thread once the task
// finished, its usage published (DeviceWorker::Defer): the read then crosses no thread at
// all. Not so for unary answers: the client is woken onto the CPU of the thread that
// answers it, which then still has the task's end to run (an idle Synchronize answered
// there: p50 95-116 us against 70-101 us through a completion thread, eight alternating
// rounds). Its `done` must be brief and must not wait or take the device: it delays the
// stream's (or the device's) next work by its own length. A task it submits is queued for
// the device thread, whatever its Placement.
//
// Note [Device loss]
// ~~~~~~~~~~~~~~~~~~
// A GPU context that hit a sticky error (an illegal address, say) is dead: every call
// on it fails, and all its memory is gone. Before each command (and when idle) the
// device thread asks the Command for the device's health. On a loss it waits for the
// pending completions (their fences fail at once, so in-flight reads end UNAVAILABLE
// with the driver's cause), asks the Command to abandon its state, drops the Command
// and its backend (the driver resets the context), and builds both anew through the
// factory. The new Command inherits the lost handles, which answer UNAVAILABLE naming
// the cause, and each affected session's next Synchronize reports it once; buffer ids
// continue, so a lost handle never names a new buffer. New work, from any session,
// runs on the fresh context. Other devices have their own thread and are untouched.
// If the device cannot be brought back it serves on with an UnavailableCommand, so
// queued work still gets an answer, and refuses new work as at a failed start; and it
// calls Options::on_lost_for_good. That is the usual outcome on a GPU: CUDA poisons the
// whole process after an illegal address (checked on an H200, driver 580: the context
// reset succeeds, but no primary or new context can be made again until the process
// exits), and HIP's runtime aborts the process on a memory fault. The daemon then restarts
// (Note [Restart after a device loss] in server/restart_request.h).
//
// Thread-safety: Submit, Complete, usage, ready and Stop may be called from any thread.
// Tasks run holding the device (on the device thread, or a submitting thread) and may
// call Defer and Complete. Callbacks run on a completion thread, or brief ones where
// their work ended (Note [Brief answers where the work ended]).

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "server/command/command_interface.h"
#include "server/core/device_queue.h"
#include "server/core/metrics.h"

namespace gpucmd {

class DeviceWorker {
 public:
  using Task = absl::AnyInvocable<void(CommandInterface&)>;
  using Factory = CommandFactory;

  // Where a task may run.
  enum class Placement {
    kDeviceThread,
    // On the submitting thread, before Submit returns, when no task is queued or running,
    // the device is healthy and the thread is not answering where work ended (Note [Brief
    // answers where the work ended]); else queued. Only for tasks that never wait (they only
    // enqueue device work, staging a few bytes at most): the submitting thread may be
    // one that serves every client.
    kHereWhenIdle,
  };

  struct Options {
    int ordinal = 0;
    size_t queue_capacity = 4096;
    size_t per_session_limit = 1024;
    int completion_threads = 4;      // started with the worker
    int max_completion_threads = 256;  // started as waits hold the others
    // Called once, on the device thread, with the status every later call gets, when
    // the device was lost and no new context could be made: only a new process gets it
    // back (Note [Device loss]). Empty: the device stays down.
    std::function<void(const absl::Status& down)> on_lost_for_good;
  };

  // Starts the thread; it runs `factory` first, and again after a device loss. `metrics`
  // must outlive the worker.
  DeviceWorker(const Options& options, Factory factory, Metrics* metrics);
  ~DeviceWorker();
  DeviceWorker(const DeviceWorker&) = delete;
  DeviceWorker& operator=(const DeviceWorker&) = delete;

  // Queues `task` for the device thread (or runs it, as `placement` allows).
  // RESOURCE_EXHAUSTED when the device's queue or the session's share is full;
  // UNAVAILABLE when the device failed to start or stops.
  absl::Status Submit(SessionId session, Task task,
                      Placement placement = Placement::kDeviceThread);

  // Called by tasks: runs `action` once the task has finished and the usage figures
  // include its effects, so a reply sent there is never ahead of GetStats.
  void Defer(absl::AnyInvocable<void()> action);

  // Where a completion with a WorkEndNotice runs once the notice called back.
  enum class Answering {
    kOnCompletionThread,
    // Where the work ended, when it may (Note [Brief answers where the work ended]).
    kWhereWorkEnded,
    // The same, and when the work ended inside the task, on the task's thread after it.
    kWhereWorkEndedOrAfterTheTask,
  };

  // Called by tasks: runs `wait` off the device thread, then `done` with its result,
  // after `session`'s earlier completions; when `ended` is set, not before it called
  // back (Note [Completions called back]), and then as `answering` says.
  void Complete(SessionId session, absl::AnyInvocable<absl::Status()> wait,
                absl::AnyInvocable<void(absl::Status)> done, WorkEndNotice ended = nullptr,
                Answering answering = Answering::kOnCompletionThread);

  // True once the device initialised; init_status says why not when it failed.
  bool ready() const;
  // Blocks until the device thread finished initialising (successfully or not).
  void AwaitInitialised() const;
  absl::Status init_status() const;
  // Figures as of the last task the device thread finished.
  DeviceUsage usage() const;
  // The same without the sessions' (`sessions` empty): a device-wide figure costs no copy
  // of every session's.
  DeviceUsage device_usage() const;
  // How many sessions the device holds anything of, and `session`'s figures (zeros when
  // none), as usage() gives them.
  size_t sessions_held() const;
  SessionUsage usage_of(SessionId session) const;
  size_t queue_depth() const { return queue_.depth(); }
  // Commands `session` has queued on this device.
  size_t queued_for(SessionId session) const { return queue_.QueuedFor(session); }
  int ordinal() const { return options_.ordinal; }
  Metrics& metrics() const { return *metrics_; }

  // From now on, queued and new tasks are answered `status` (they run against an
  // UnavailableCommand) without touching the device, and the kernels running now end
  // where the driver can stop them: a daemon past its drain time. Does not wait for
  // the device thread.
  void FailQueuedWork(const absl::Status& status);

  // True when no task is queued and no completion is pending (a snapshot; a task the
  // device thread took may still be running).
  bool Quiet() const;

  // False when whoever holds the device (running a task, or the device thread's upkeep)
  // has held it for `within` or longer, or when queued tasks have waited that long
  // without the device thread taking one: the device is wedged. An idle device makes
  // progress. For the service manager's watchdog (Note [Service manager] in
  // server/service_notifier.h).
  bool MakesProgress(std::chrono::steady_clock::duration within) const;

  // Refuses new tasks, finishes queued ones and pending completions, joins.
  void Stop();

 private:
  struct Completion {
    uint64_t id = 0;
    bool ended = true;     // false until its WorkEndNotice called back
    bool called_back = false;  // made with a WorkEndNotice: its wait does not block
    bool running = false;  // a thread took it
    Answering answering = Answering::kOnCompletionThread;
    absl::AnyInvocable<absl::Status()> wait;
    absl::AnyInvocable<void(absl::Status)> done;
  };

  void RunDevice();
  // Runs `task` on this thread if the device is idle and healthy (see Placement).
  bool RunHereWhenIdle(Task& task);
  // Makes `command` the device's Command (command_ and serving_).
  void SetCommand(std::shared_ptr<CommandInterface> command)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(device_mutex_) ABSL_LOCKS_EXCLUDED(mutex_);
  // Replaces command_ when the device it drives was lost.
  void KeepHealthy() ABSL_EXCLUSIVE_LOCKS_REQUIRED(device_mutex_);
  // Blocks until no completion is queued or running.
  void AwaitCompletions();
  void RunCompletions();
  // Runs `completion`, `session`'s first, which this thread took (marked running); then
  // retires it and puts the session's next in turn when that one may run.
  // `this_thread_looks_next`: a completion thread about to look for a ready session.
  void RunFirstCompletion(SessionId session, Completion completion, bool this_thread_looks_next)
      ABSL_LOCKS_EXCLUDED(completion_mutex_);
  // A WorkEndNotice of completion `id` of `session` called back.
  void CompletionWorkEnded(SessionId session, uint64_t id) ABSL_LOCKS_EXCLUDED(completion_mutex_);
  // Runs `session`'s first completion, brief, which this thread took, as Note [Brief
  // answers where the work ended] says.
  void AnswerWhereWorkEnded(SessionId session, Completion completion)
      ABSL_LOCKS_EXCLUDED(completion_mutex_);
  // After `session`'s first completion became first or ended: puts the session in turn
  // when that completion may run now; true when it did.
  bool ReadyWhenDue(SessionId session, const std::deque<Completion>& queue)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(completion_mutex_);
  // Starts one more completion thread, within the limit, when a session is in turn and
  // every thread is held by a wait that may block. A thread that is not (idle, starting,
  // or busy with a called-back completion) looks for a ready session soon. Called
  // whenever a session becomes ready and whenever a thread takes a wait that may block,
  // so that a ready session always has a thread coming.
  void AddCompletionThreadIfAllHeld() ABSL_EXCLUSIVE_LOCKS_REQUIRED(completion_mutex_);
  void RunTask(Task task) ABSL_EXCLUSIVE_LOCKS_REQUIRED(device_mutex_);
  void PublishUsage(CommandInterface& command) ABSL_EXCLUSIVE_LOCKS_REQUIRED(device_mutex_);

  const Options options_;
  Metrics* const metrics_;
  DeviceQueue<Task> queue_;

  // Held by whoever runs the device's tasks or upkeep.
  Mutex device_mutex_;
  // When the holder of device_mutex_ took it (steady clock, nanoseconds); 0 while free.
  std::atomic<int64_t> held_since_ns_{0};
  Factory factory_ ABSL_GUARDED_BY(device_mutex_);
  std::shared_ptr<CommandInterface> command_ ABSL_GUARDED_BY(device_mutex_);
  // Set by FailQueuedWork: what tasks run against instead of command_.
  std::shared_ptr<CommandInterface> failing_ ABSL_GUARDED_BY(mutex_);
  // command_, for threads that must reach it without the device lock (AbortKernels).
  std::shared_ptr<CommandInterface> serving_ ABSL_GUARDED_BY(mutex_);
  // Actions of the running task, run after it.
  std::vector<absl::AnyInvocable<void()>> deferred_ ABSL_GUARDED_BY(device_mutex_);

  mutable Mutex mutex_;
  mutable CondVar initialised_changed_;
  bool initialised_ ABSL_GUARDED_BY(mutex_) = false;
  absl::Status init_status_ ABSL_GUARDED_BY(mutex_);
  DeviceUsage usage_ ABSL_GUARDED_BY(mutex_);  // its `sessions` in session_usage_
  absl::flat_hash_map<SessionId, SessionUsage> session_usage_ ABSL_GUARDED_BY(mutex_);
  // The Command whose reports usage_ holds: another's first report replaces it whole.
  const CommandInterface* usage_reported_by_ ABSL_GUARDED_BY(device_mutex_) = nullptr;

  mutable Mutex completion_mutex_;
  // A session became ready (or the completions closed): for the completion threads.
  CondVar completion_ready_;
  // completions_left_ reached 0: for AwaitCompletions.
  CondVar completions_drained_;
  // Per session with completions to run: them, in order.
  absl::flat_hash_map<SessionId, std::deque<Completion>> completions_
      ABSL_GUARDED_BY(completion_mutex_);
  // Sessions whose first completion may run and is not running, in turn.
  std::deque<SessionId> ready_sessions_ ABSL_GUARDED_BY(completion_mutex_);
  uint64_t last_completion_id_ ABSL_GUARDED_BY(completion_mutex_) = 0;
  size_t completions_left_ ABSL_GUARDED_BY(completion_mutex_) = 0;  // queued or running
  bool completions_closed_ ABSL_GUARDED_BY(completion_mutex_) = false;
  // Completion threads in a completion made without a notice, whose wait may block.
  size_t blocking_completions_ ABSL_GUARDED_BY(completion_mutex_) = 0;
  // Appended to under completion_mutex_ until the completions close; joined after.
  std::vector<std::thread> completion_threads_;
  std::thread device_thread_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_DEVICE_WORKER_H_

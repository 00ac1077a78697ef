#ifndef GPUCMDD_SERVER_CORE_COMPILE_CACHE_H_
#define GPUCMDD_SERVER_CORE_COMPILE_CACHE_H_

// Note [Compile cache]
// ~~~~~~~~~~~~~~~~~~~~
// Kernels are compiled before anything touches a device: a launch names a KernelId, the
// SHA-256 of (driver, target architecture, toolchain, entry point, options, source), where
// the toolchain is the SHA-256 of the programs that read and build kernels (the kernel
// front end, the compile helper; the daemon itself where it compiles): a daemon whose
// toolchain changed, an upgraded one say, never takes a module its predecessor built or
// a verdict its predecessor's front end gave. Compiles run
// on a bounded pool of threads, never on a device thread. Results are kept in memory and
// on disk (<directory>/<id>.so or the driver's artifact, plus <id>.sig with the
// parameter list), so a restarted daemon does not compile again. A failed compile is
// remembered too: launching it is skipped and taints its outputs with the log.
//
// The pool is shared fairly: each client (a session) has its own queue, served
// round-robin, holds at most `max_pending_per_client` compiles queued, and runs at most
// half the workers (at least one) at a time, so one session's slow compiles never hold
// up every other session's.
//
// A request that waits (queued, compiling, or joined to the same kernel's compile) holds
// its kernel source, up to a whole gRPC message, until it is answered. The sources of all
// waiting requests together are bounded (`max_waiting_source_bytes`): past it a request
// is RESOURCE_EXHAUSTED at once, so that a flood of large sources (the same one sent
// again and again joins without limit otherwise) cannot take the daemon's memory.
//
// What memory remembers of compiled and failed kernels (parameters, logs of up to
// compile.max_log_bytes each) is bounded too (`max_remembered_bytes`): past it the
// kernels remembered longest are forgotten first. A compiled kernel forgotten is loaded
// from disk again when asked for (its warnings are not kept there); a failed one is then
// unknown (NOT_FOUND), and compiling its source again reports the failure again. Without
// the bound, a client compiling ever new failing sources grew the daemon by a log each.
//
// The module store on disk is bounded as well (`max_cache_bytes`): when compiles take it
// past the bound (and when the daemon starts), the modules used longest ago are removed
// until it is back at nine tenths of it (Note [Module store]), and forgotten in memory,
// so that asking for one compiles it again. The compile that took the store past its
// bound is answered once the sweep is done.
//
// Thread-safety: all methods may be called from any thread. `done` callbacks run on a
// compile thread, or inline for cache hits and refusals.

#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "base/mutex.h"
#include "driver/kernel_signature.h"
#include "driver/module_store.h"
#include "driver/types.h"

namespace gpucmd {

struct KernelSource {
  std::string source;
  std::string entry_point;
  std::vector<std::string> options;
};

struct CompiledKernel {
  KernelId id;
  SharedKernelParams params;  // never null
  std::string log;
};

class CompileCache {
 public:
  // Builds `kernel` into the file `artifact_path`.
  using BackendCompiler =
      std::function<absl::StatusOr<CompileOutput>(const KernelSource& kernel,
                                                  const std::string& artifact_path)>;

  struct Options {
    std::string driver;        // e.g. "cpu"
    std::string architecture;  // e.g. "x86_64", "sm_90"
    // The programs that read and build kernels, whose bytes are part of every KernelId; a
    // file that cannot be read counts as empty.
    std::vector<std::string> toolchain_files;
    int workers = 2;
    size_t max_pending = 256;
    size_t max_pending_per_client = 16;
    uint64_t max_waiting_source_bytes = uint64_t{256} << 20;
    uint64_t max_remembered_bytes = uint64_t{64} << 20;
    uint64_t max_cache_bytes = uint64_t{4} << 30;
  };

  struct Result {
    CompiledKernel kernel;
    bool cache_hit = false;
  };

  // Compiled modules go to `modules` (Note [Module store] in driver/module_store.h),
  // which the devices load them from.
  static std::unique_ptr<CompileCache> Create(const Options& options, ModuleStore modules,
                                              BackendCompiler compiler);
  ~CompileCache();
  CompileCache(const CompileCache&) = delete;
  CompileCache& operator=(const CompileCache&) = delete;

  KernelId IdFor(const KernelSource& kernel) const;

  // Compiles `kernel` or finds it compiled. A request for a kernel already being
  // compiled joins that compile and gets its result (cache_hit). A compile error is
  // INVALID_ARGUMENT with the compiler's log; a full pool, or waiting sources past
  // `max_waiting_source_bytes`, is RESOURCE_EXHAUSTED naming the limit.
  // `client` names who asks (a session; any number), for the pool's fair share.
  void Compile(uint64_t client, KernelSource kernel,
               absl::AnyInvocable<void(absl::StatusOr<Result>)> done);

  // A compiled kernel (memory, then disk); FAILED_PRECONDITION with the log when its
  // compile failed; NOT_FOUND when it was never compiled.
  absl::StatusOr<CompiledKernel> Lookup(const KernelId& id);
  // Lookup's params alone: what a launch needs, without copying the compile's log.
  absl::StatusOr<SharedKernelParams> ParamsOf(const KernelId& id);

  struct CompileLog {
    bool failed = false;
    std::string log;  // errors of a failed compile, warnings of a successful one
  };
  // What the compile of `id` reported. NOT_FOUND for an id never compiled.
  absl::StatusOr<CompileLog> LogOf(const KernelId& id);

  uint64_t memory_hits() const;
  uint64_t disk_hits() const;
  uint64_t misses() const;

 private:
  using Done = absl::AnyInvocable<void(absl::StatusOr<Result>)>;

  // A request waiting for the compile of its kernel, and the source bytes it holds.
  struct Waiter {
    Done done;
    uint64_t source_bytes = 0;
  };

  struct Job {
    KernelSource kernel;
    KernelId id;
    Waiter waiter;
  };

  // One client's share of the pool.
  struct ClientJobs {
    std::deque<Job> pending;
    int running = 0;
  };

  CompileCache(const Options& options, ModuleStore modules, BackendCompiler compiler);
  void Work();
  // The client whose job a free worker takes next (round-robin among those under their
  // share; anyone's while stopping); nullopt when there is none.
  std::optional<uint64_t> NextClient() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Compiles and stores one job, then answers it and the requests that joined it (no
  // lock held).
  void Run(Job job);
  // Answers `waiter` with `result`, then lets its source bytes go (no lock held).
  void Answer(Waiter& waiter, absl::StatusOr<Result> result);
  // Queues `job` for `client`, which AdmitQueued admitted.
  void Enqueue(uint64_t client, Job job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Why `client`'s request holding `source_bytes` may not be queued (the queue, the
  // client's share of it, or the waiting sources full); OK when it may.
  absl::Status AdmitQueued(uint64_t client, uint64_t source_bytes) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Why a request holding `source_bytes` more may not wait; OK when it may.
  absl::Status AdmitWaiting(uint64_t source_bytes) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Compiles and stores `job`'s kernel.
  absl::StatusOr<Result> Build(const Job& job);
  // Remembers `kernel`, or the failure to compile `id`, unless already known; then
  // forgets the longest remembered past max_remembered_bytes.
  void Remember(const KernelId& id, absl::StatusOr<CompiledKernel> kernel)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mutex_);
  // Counts the module of `id` just committed; sweeps the store when it passed
  // max_cache_bytes (no lock held).
  void CountCommitted(const KernelId& id);
  // Sweeps the module store back under max_cache_bytes and forgets what it removed.
  void SweepStore() ABSL_LOCKS_EXCLUDED(mutex_);
  // The kernel from disk, remembered in memory; NOT_FOUND when absent.
  absl::StatusOr<CompiledKernel> LoadFromDisk(const KernelId& id);

  const Options options_;
  const std::string toolchain_;  // the SHA-256 of options_.toolchain_files
  const ModuleStore modules_;
  const BackendCompiler compiler_;
  mutable Mutex mutex_;
  CondVar work_ready_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  absl::flat_hash_map<uint64_t, ClientJobs> clients_ ABSL_GUARDED_BY(mutex_);
  // Clients with queued jobs, in the order they are served.
  std::deque<uint64_t> ready_ ABSL_GUARDED_BY(mutex_);
  size_t pending_ ABSL_GUARDED_BY(mutex_) = 0;
  const int client_share_;  // compiles one client may run at once
  absl::flat_hash_map<std::string, CompiledKernel> compiled_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<std::string, absl::Status> failed_ ABSL_GUARDED_BY(mutex_);
  // The ids in compiled_ and failed_, longest remembered first, with what each takes.
  std::deque<std::pair<std::string, uint64_t>> remembered_ ABSL_GUARDED_BY(mutex_);
  uint64_t remembered_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  // The module store's bytes: what the latest sweep left, plus what was committed since.
  uint64_t store_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  bool sweeping_ ABSL_GUARDED_BY(mutex_) = false;
  // By kernel id, the jobs queued or running, each with the requests for the same
  // kernel that came meanwhile: they wait for its result instead of compiling again.
  absl::flat_hash_map<std::string, std::vector<Waiter>> joined_ ABSL_GUARDED_BY(mutex_);
  // The source bytes of every request queued, compiling or joined.
  uint64_t waiting_source_bytes_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t memory_hits_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t disk_hits_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t misses_ ABSL_GUARDED_BY(mutex_) = 0;
  std::vector<std::thread> workers_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_COMPILE_CACHE_H_

#ifndef GPUCMDD_SERVER_CORE_COMPILE_CACHE_H_
#define GPUCMDD_SERVER_CORE_COMPILE_CACHE_H_

// Note [Compile cache]
// ~~~~~~~~~~~~~~~~~~~~
// Kernels are compiled before anything touches a device: a launch names a KernelId, the
// SHA-256 of (driver, target architecture, entry point, options, source). Compiles run
// on a bounded pool of threads, never on a device thread. Results are kept in memory and
// on disk (<directory>/<id>.so or the driver's artifact, plus <id>.sig with the
// parameter list), so a restarted daemon does not compile again. A failed compile is
// remembered too: launching it is skipped and taints its outputs with the log.
//
// Thread-safety: all methods may be called from any thread. `done` callbacks run on a
// compile thread, or inline for cache hits and refusals.

#include <deque>
#include <functional>
#include <string>
#include <thread>
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
  std::vector<KernelParam> params;
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
    int workers = 2;
    size_t max_pending = 256;
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

  // Compiles `kernel` or finds it compiled. A compile error is INVALID_ARGUMENT with
  // the compiler's log; a full pool is RESOURCE_EXHAUSTED.
  void Compile(KernelSource kernel, absl::AnyInvocable<void(absl::StatusOr<Result>)> done);

  // A compiled kernel (memory, then disk); FAILED_PRECONDITION with the log when its
  // compile failed; NOT_FOUND when it was never compiled.
  absl::StatusOr<CompiledKernel> Lookup(const KernelId& id);

  uint64_t memory_hits() const;
  uint64_t disk_hits() const;
  uint64_t misses() const;

 private:
  struct Job {
    KernelSource kernel;
    KernelId id;
    absl::AnyInvocable<void(absl::StatusOr<Result>)> done;
  };

  CompileCache(const Options& options, ModuleStore modules, BackendCompiler compiler);
  void Work();
  // The kernel from disk, remembered in memory; NOT_FOUND when absent.
  absl::StatusOr<CompiledKernel> LoadFromDisk(const KernelId& id);

  const Options options_;
  const ModuleStore modules_;
  const BackendCompiler compiler_;
  mutable Mutex mutex_;
  CondVar work_ready_;
  bool stopping_ ABSL_GUARDED_BY(mutex_) = false;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<std::string, CompiledKernel> compiled_ ABSL_GUARDED_BY(mutex_);
  absl::flat_hash_map<std::string, absl::Status> failed_ ABSL_GUARDED_BY(mutex_);
  uint64_t memory_hits_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t disk_hits_ ABSL_GUARDED_BY(mutex_) = 0;
  uint64_t misses_ ABSL_GUARDED_BY(mutex_) = 0;
  std::vector<std::thread> workers_;
};

}  // namespace gpucmd

#endif  // GPUCMDD_SERVER_CORE_COMPILE_CACHE_H_

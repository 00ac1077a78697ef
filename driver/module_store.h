#ifndef GPUCMDD_DRIVER_MODULE_STORE_H_
#define GPUCMDD_DRIVER_MODULE_STORE_H_

// Note [Module store]
// ~~~~~~~~~~~~~~~~~~~
// One directory holds every compiled kernel, named by its KernelId: the artifact the
// driver's compiler wrote (<id>.so on the CPU driver, <id>.cubin on CUDA, <id>.hsaco on
// HIP), its entry point (<id>.entry) and its signature (<id>.sig). The compile cache
// commits a module once its compiler succeeded (entry and signature written
// atomically, so a reader never sees half a module); drivers find a module by id to load
// it. The store is the one owner of that layout and of the directory's name: the daemon
// configures it once and hands the same store to the compile cache and to every device.
//
// The directory is a cache, bounded by whoever owns it (the compile cache's
// compile.max_cache_bytes): Sweep removes the modules used longest ago (a module's use
// is its commit or its latest Find) until the rest fit. Only committed modules go: an
// artifact a compiler is still writing has no signature yet.
//
// Thread-safety: a plain value; its methods touch only files, each written atomically,
// so any thread may call them.

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "driver/kernel_signature.h"
#include "driver/types.h"

namespace gpucmd {

class ModuleStore {
 public:
  struct Module {
    std::string artifact_path;
    std::string entry_point;
    std::vector<KernelParam> params;
  };

  // A store over `directory` (created if missing) whose artifacts end in
  // `artifact_extension` (".so", ".cubin", ".hsaco"). FAILED_PRECONDITION when the
  // directory cannot be created or written.
  static absl::StatusOr<ModuleStore> Open(std::string directory, std::string artifact_extension);

  const std::string& directory() const { return directory_; }

  // Where a compiler writes the artifact of `id`.
  std::string ArtifactPath(const KernelId& id) const;

  // Records the module of `id` whose artifact is in place: its entry point and
  // signature. FAILED_PRECONDITION when the artifact is missing; the write's error
  // otherwise.
  absl::Status Commit(const KernelId& id, absl::string_view entry_point,
                      const std::vector<KernelParam>& params) const;

  // The committed module of `id`; NOT_FOUND when there is none (or only part of one).
  // Marks the module used now.
  absl::StatusOr<Module> Find(const KernelId& id) const;

  // The bytes the committed module of `id` takes on disk (0 when there is none).
  uint64_t BytesOf(const KernelId& id) const;

  struct Swept {
    std::vector<KernelId> removed;
    uint64_t bytes_left = 0;  // of the modules left, committed or not
  };
  // When the directory's modules take more than `max_bytes`, removes committed modules,
  // used longest ago first, until they take at most `keep_bytes`.
  Swept Sweep(uint64_t max_bytes, uint64_t keep_bytes) const;

 private:
  ModuleStore(std::string directory, std::string artifact_extension)
      : directory_(std::move(directory)), artifact_extension_(std::move(artifact_extension)) {}

  std::string PathOf(const KernelId& id, absl::string_view suffix) const;

  std::string directory_;
  std::string artifact_extension_;
};

// For drivers: the module of `kernel` in `modules`; FAILED_PRECONDITION when the device
// has no store or the store no such module.
absl::StatusOr<ModuleStore::Module> FindModule(const std::optional<ModuleStore>& modules,
                                               const KernelId& kernel);

}  // namespace gpucmd

#endif  // GPUCMDD_DRIVER_MODULE_STORE_H_

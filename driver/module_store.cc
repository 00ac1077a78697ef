#include "driver/module_store.h"

#include <unistd.h>

#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "base/file.h"

namespace gpucmd {

absl::StatusOr<ModuleStore> ModuleStore::Open(std::string directory,
                                              std::string artifact_extension) {
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error || access(directory.c_str(), W_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat("module directory ", directory,
                                                      " is not writable",
                                                      error ? ": " + error.message() : ""));
  }
  return ModuleStore(std::move(directory), std::move(artifact_extension));
}

std::string ModuleStore::PathOf(const KernelId& id, absl::string_view suffix) const {
  return absl::StrCat(directory_, "/", id.hex, suffix);
}

std::string ModuleStore::ArtifactPath(const KernelId& id) const {
  return PathOf(id, artifact_extension_);
}

absl::Status ModuleStore::Commit(const KernelId& id, absl::string_view entry_point,
                                 const std::vector<KernelParam>& params) const {
  if (access(ArtifactPath(id).c_str(), R_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("kernel ", id.hex, ": the compiler left no artifact at ", ArtifactPath(id)));
  }
  if (absl::Status entry = WriteFileAtomically(PathOf(id, ".entry"), entry_point);
      !entry.ok()) {
    return entry;
  }
  // The signature last: its presence marks the module complete.
  return WriteFileAtomically(PathOf(id, ".sig"), SerializeSignature(params));
}

absl::StatusOr<ModuleStore::Module> ModuleStore::Find(const KernelId& id) const {
  Module module{.artifact_path = ArtifactPath(id)};
  std::string signature = PathOf(id, ".sig");
  if (access(module.artifact_path.c_str(), R_OK) != 0 || access(signature.c_str(), R_OK) != 0) {
    return absl::NotFoundError(absl::StrCat("kernel ", id.hex, " has no module in ", directory_));
  }
  module.entry_point = std::string(absl::StripAsciiWhitespace(ReadFileOrEmpty(PathOf(id, ".entry"))));
  if (module.entry_point.empty()) {
    return absl::NotFoundError(
        absl::StrCat("kernel ", id.hex, " has no entry point in ", directory_));
  }
  absl::StatusOr<std::vector<KernelParam>> params =
      DeserializeSignature(ReadFileOrEmpty(signature));
  if (!params.ok()) return params.status();
  module.params = *std::move(params);
  return module;
}

absl::StatusOr<ModuleStore::Module> FindModule(const std::optional<ModuleStore>& modules,
                                               const KernelId& kernel) {
  if (!modules.has_value()) {
    return absl::FailedPreconditionError("this device has no module store: it runs no kernels");
  }
  absl::StatusOr<ModuleStore::Module> module = modules->Find(kernel);
  if (!module.ok()) return absl::FailedPreconditionError(module.status().message());
  return module;
}

}  // namespace gpucmd
